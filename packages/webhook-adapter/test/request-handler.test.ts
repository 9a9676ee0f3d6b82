import { describe, expect, it } from "@effect/vitest"
import { signWebhookPayload, type WebhookVerificationFailureReason } from "@clinical-api/domain"
import { Effect } from "effect"
import {
  type IdempotencyStoreService,
  IdempotencyStoreUnavailable,
  makeIdempotencyStoreMemory,
  makeWebhookRequestHandler,
  type UnsupportedEventTypePolicy,
  type WebhookReceiptOutcome
} from "../src/index.js"
import { receiverHandlerSuite } from "./receiver-suite.js"
import { newEvent, newSecret, post, signedRequest, startServer, withoutHeader } from "./support.js"

receiverHandlerSuite("in-memory", async () => makeIdempotencyStoreMemory())

const withReceiver = async <A>(
  options: {
    readonly secrets?: ReadonlyArray<string>
    readonly store?: IdempotencyStoreService
    readonly unsupportedEventType?: UnsupportedEventTypePolicy
    readonly maxBodyBytes?: number
  },
  body: (receiver: {
    readonly url: string
    readonly secret: string
    readonly calls: () => number
    readonly outcomes: ReadonlyArray<WebhookReceiptOutcome>
  }) => Promise<A>
): Promise<A> => {
  const secret = newSecret()
  let calls = 0
  const outcomes: Array<WebhookReceiptOutcome> = []
  const server = await startServer(
    makeWebhookRequestHandler({
      secrets: options.secrets ?? [secret],
      store: options.store ?? makeIdempotencyStoreMemory(),
      handle: () => Effect.sync(() => calls++),
      onOutcome: (outcome) => outcomes.push(outcome),
      ...(options.unsupportedEventType === undefined ? {} : { unsupportedEventType: options.unsupportedEventType }),
      ...(options.maxBodyBytes === undefined ? {} : { maxBodyBytes: options.maxBodyBytes })
    })
  )
  try {
    return await body({ url: server.url, secret, calls: () => calls, outcomes })
  } finally {
    await server.close()
  }
}

describe("makeWebhookRequestHandler: refused deliveries (no handler call, no follow-up)", () => {
  const cases: ReadonlyArray<{
    readonly reason: WebhookVerificationFailureReason
    readonly status: number
    readonly build: (secret: string) => ReturnType<typeof signedRequest>
  }> = [
    {
      reason: "missing_header",
      status: 400,
      build: (secret) => withoutHeader(signedRequest({ secret }), "Service-Signature")
    },
    {
      reason: "invalid_signature",
      status: 401,
      build: () => signedRequest({ secret: newSecret() })
    },
    {
      reason: "stale_timestamp",
      status: 401,
      build: (secret) => signedRequest({ secret, now: new Date(Date.now() - 301_000) })
    },
    {
      reason: "header_body_mismatch",
      status: 400,
      build: (secret) => signedRequest({ secret, eventId: "evt_not_the_body_id" })
    },
    {
      reason: "malformed_body",
      status: 400,
      build: (secret) => {
        const event = newEvent()
        const { resources: _resources, ...withoutResources } = event
        return signedRequest({ secret, event, body: JSON.stringify(withoutResources) })
      }
    }
  ]

  for (const { build, reason, status } of cases) {
    it(`${reason}: ${status} with the reason, the handler does not run`, async () => {
      await withReceiver({}, async ({ calls, outcomes, secret, url }) => {
        const response = await post(url, build(secret))
        expect(response.status).toBe(status)
        expect(JSON.parse(response.body)).toEqual({ error: reason })
        expect(calls()).toBe(0)
        expect(outcomes).toEqual([{ _tag: "Rejected", reason, status }])
      })
    })
  }

  it("malformed_body: signed bytes that are not JSON get 400", async () => {
    await withReceiver({}, async ({ calls, secret, url }) => {
      const event = newEvent()
      const response = await post(url, signedRequest({ secret, event, body: "not json" }))
      expect(response.status).toBe(400)
      expect(JSON.parse(response.body)).toEqual({ error: "malformed_body" })
      expect(calls()).toBe(0)
    })
  })

  it("a body changed after signing (one byte): invalid_signature, 401", async () => {
    await withReceiver({}, async ({ calls, secret, url }) => {
      const request = signedRequest({ secret })
      const tampered = Buffer.from(request.body)
      tampered[tampered.length - 3] = "X".charCodeAt(0)
      const response = await post(url, { body: tampered, headers: request.headers })
      expect(response.status).toBe(401)
      expect(calls()).toBe(0)
    })
  })

  const unsupportedBody = (secret: string) => {
    const event = newEvent()
    return signedRequest({ secret, event, body: JSON.stringify({ ...event, type: "recording.deleted" }) })
  }

  it("unsupported_event_type, default policy ignore: 200 and the handler does not run", async () => {
    await withReceiver({}, async ({ calls, outcomes, secret, url }) => {
      const response = await post(url, unsupportedBody(secret))
      expect(response.status).toBe(200)
      expect(JSON.parse(response.body)).toEqual({ status: "ignored" })
      expect(calls()).toBe(0)
      expect(outcomes).toEqual([{ _tag: "IgnoredEventType", status: 200 }])
    })
  })

  it("unsupported_event_type, policy reject: 400", async () => {
    await withReceiver({ unsupportedEventType: "reject" }, async ({ calls, secret, url }) => {
      const response = await post(url, unsupportedBody(secret))
      expect(response.status).toBe(400)
      expect(JSON.parse(response.body)).toEqual({ error: "unsupported_event_type" })
      expect(calls()).toBe(0)
    })
  })

  it("unsupported_event_type is only reached after the signature: an unsigned unknown type is 401", async () => {
    await withReceiver({}, async ({ url }) => {
      const response = await post(url, unsupportedBody(newSecret()))
      expect(response.status).toBe(401)
    })
  })

  it("not POST: 405 with Allow: POST", async () => {
    await withReceiver({}, async ({ calls, url }) => {
      const response = await fetch(url, { method: "GET" })
      expect(response.status).toBe(405)
      expect(response.headers.get("allow")).toBe("POST")
      expect(calls()).toBe(0)
    })
  })

  it("a body over the limit: 413 before verification", async () => {
    await withReceiver({ maxBodyBytes: 1024 }, async ({ calls, secret, url }) => {
      const response = await post(url, signedRequest({ secret, body: `{"pad":"${"x".repeat(2048)}"}` }))
      expect(response.status).toBe(413)
      expect(calls()).toBe(0)
    })
  })
})

describe("makeWebhookRequestHandler: secrets, endpoint test, store failures", () => {
  it("rotation: the previous and the newest secret both verify, any other secret is refused", async () => {
    const previous = newSecret()
    const newest = newSecret()
    await withReceiver({ secrets: [newest, previous] }, async ({ calls, url }) => {
      expect((await post(url, signedRequest({ secret: previous }))).status).toBe(200)
      expect((await post(url, signedRequest({ secret: newest }))).status).toBe(200)
      expect((await post(url, signedRequest({ secret: newSecret() }))).status).toBe(401)
      expect(calls()).toBe(2)
    })
  })

  it("rotation: a Service-Signature carrying several v1 values verifies if one matches", async () => {
    const newest = newSecret()
    await withReceiver({ secrets: [newest] }, async ({ url }) => {
      const request = signedRequest({ secret: newest })
      const other = signWebhookPayload({
        secret: newSecret(),
        timestamp: request.headers["Service-Timestamp"] ?? "",
        rawBody: request.body
      })
      const headers = { ...request.headers, "Service-Signature": `${other}, ${request.headers["Service-Signature"]}` }
      expect((await post(url, { body: request.body, headers })).status).toBe(200)
    })
  })

  it("webhook.endpoint_test: verified and answered 200 without a claim or a handler call", async () => {
    await withReceiver({}, async ({ calls, outcomes, secret, url }) => {
      const event = { ...newEvent(), type: "webhook.endpoint_test" as const }
      const { resources: _resources, ...endpointTest } = event
      const response = await post(url, signedRequest({ secret, event: newEvent({ id: event.id }), body: JSON.stringify(endpointTest) }))
      expect(response.status).toBe(200)
      expect(JSON.parse(response.body)).toEqual({ status: "endpoint_test" })
      expect(calls()).toBe(0)
      expect(outcomes.map((outcome) => outcome._tag)).toEqual(["EndpointTest"])
    })
  })

  it("the idempotency store unavailable: 503 (retryable), the handler does not run", async () => {
    const unavailable: IdempotencyStoreService = {
      claim: () => Effect.fail(new IdempotencyStoreUnavailable({ operation: "claim" })),
      complete: () => Effect.void,
      release: () => Effect.void
    }
    await withReceiver({ store: unavailable }, async ({ calls, secret, url }) => {
      const response = await post(url, signedRequest({ secret }))
      expect(response.status).toBe(503)
      expect(calls()).toBe(0)
    })
  })

  it("a handler that throws (a defect): 500, and the redelivery runs it again", async () => {
    const secret = newSecret()
    let calls = 0
    const server = await startServer(
      makeWebhookRequestHandler({
        secrets: [secret],
        store: makeIdempotencyStoreMemory(),
        handle: () => {
          calls++
          if (calls === 1) throw new Error("bug")
          return Effect.void
        }
      })
    )
    try {
      const event = newEvent()
      expect((await post(server.url, signedRequest({ secret, event }))).status).toBe(500)
      expect((await post(server.url, signedRequest({ secret, event }))).status).toBe(200)
      expect(calls).toBe(2)
    } finally {
      await server.close()
    }
  })

  it("outcomes carry the event and reasons, never a secret or a signature", async () => {
    await withReceiver({}, async ({ outcomes, secret, url }) => {
      const event = newEvent()
      const good = signedRequest({ secret, event })
      await post(url, good)
      await post(url, signedRequest({ secret: newSecret(), event }))
      const text = JSON.stringify(outcomes)
      expect(text).not.toContain(secret)
      expect(text).not.toContain(good.headers["Service-Signature"]?.slice(3))
      expect(outcomes.map((outcome) => outcome._tag)).toEqual(["Processed", "Rejected"])
    })
  })

  it("refuses to start without a secret", () => {
    expect(() =>
      makeWebhookRequestHandler({ secrets: [""], store: makeIdempotencyStoreMemory(), handle: () => Effect.void })
    ).toThrow(RangeError)
  })
})

describe("IdempotencyStoreMemory", () => {
  it.effect("claim is new, then in_progress; after the lease it can be taken over; complete makes it completed", () =>
    Effect.gen(function* () {
      let now = 1_000_000
      const store = makeIdempotencyStoreMemory({ leaseMs: 60_000, now: () => now })
      const first = yield* store.claim("evt_1")
      expect(first.status).toBe("new")
      expect((yield* store.claim("evt_1")).status).toBe("in_progress")
      now += 59_999
      expect((yield* store.claim("evt_1")).status).toBe("in_progress")
      now += 1
      const takeover = yield* store.claim("evt_1")
      expect(takeover.status).toBe("new")
      // The crashed holder's late release does not free the new holder's claim.
      if (first.status === "new") yield* store.release("evt_1", first.claimToken)
      expect((yield* store.claim("evt_1")).status).toBe("in_progress")
      yield* store.complete("evt_1")
      expect((yield* store.claim("evt_1")).status).toBe("completed")
      now += 10 * 60_000
      expect((yield* store.claim("evt_1")).status).toBe("completed")
    }))

  it.effect("release by the holder frees the event for the next claim", () =>
    Effect.gen(function* () {
      const store = makeIdempotencyStoreMemory()
      const claim = yield* store.claim("evt_2")
      if (claim.status !== "new") throw new Error("expected a new claim")
      yield* store.release("evt_2", claim.claimToken)
      expect((yield* store.claim("evt_2")).status).toBe("new")
    }))
})
