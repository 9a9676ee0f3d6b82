import { randomBytes } from "node:crypto"
import type { LookupAddress } from "node:dns"
import {
  type DeliveryAttemptResult,
  type DeliveryStep,
  generateSigningSecret,
  type LeasedDelivery,
  WebhookDeliveryId,
  WebhookDeliveryQueue,
  webhookEventBody,
  WebhookSubscriptionId
} from "@clinical-api/domain"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Redacted, Result } from "effect"
import {
  ADDRESS_REFUSED_CODE,
  checkEndpointBeforeLookup,
  guardedLookup,
  makeIdempotencyStoreMemory,
  makeWebhookRequestHandler,
  planNextStep,
  runDeliveryPass,
  WebhookRuntimeDisabled,
  webhookWorkerConfig
} from "../src/index.js"
import { newEvent, startServer } from "./support.js"

const now = new Date("2026-05-01T12:00:00Z")
const retryable = { _tag: "Response", status: 503 } as const

/** A queue in memory holding the given deliveries; records what the worker reports. */
const memoryQueue = (deliveries: Array<LeasedDelivery>) => {
  const calls = { lease: 0, recorded: new Array<{ result: DeliveryAttemptResult; step: DeliveryStep }>() }
  const layer = Layer.succeed(
    WebhookDeliveryQueue,
    WebhookDeliveryQueue.of({
      lease: () =>
        Effect.sync(() => {
          calls.lease++
          const next = deliveries.shift()
          return next === undefined ? [] : [next]
        }),
      recordAttempts: (attempts) =>
        Effect.sync(() =>
          attempts.map(({ result, step }) => {
            calls.recorded.push({ result, step })
            return { _tag: "Written", state: step._tag === "Succeeded" ? "succeeded" : step._tag === "Retry" ? "pending" : "failed" } as const
          })
        )
    })
  )
  return { calls, layer }
}

/** `count` first attempts to `endpointUrl`, leased and due. */
const dueDeliveries = (count: number, endpointUrl: string, secret: string) =>
  Array.from({ length: count }, (_, index): LeasedDelivery => {
    const event = newEvent()
    return {
      deliveryId: WebhookDeliveryId.make(`dlv_batch_${index}`),
      eventId: event.id,
      subscriptionId: WebhookSubscriptionId.make("whs_batch"),
      endpointUrl,
      rawBody: webhookEventBody(event),
      signingSecret: Redacted.make(secret),
      attemptNumber: 1,
      scheduleAttemptNumber: 1,
      maxAttempts: 8,
      leaseOwner: "w",
      leaseExpiresAt: new Date(Date.now() + 60_000),
      reclaimedStale: false
    }
  })

/** A queue in memory handing out `due` as asked; records each lease's limit and each recorded batch. */
const batchQueue = (due: Array<LeasedDelivery>) => {
  const leaseLimits: Array<number> = []
  const recordedBatches: Array<ReadonlyArray<string>> = []
  const layer = Layer.succeed(
    WebhookDeliveryQueue,
    WebhookDeliveryQueue.of({
      lease: (request) =>
        Effect.sync(() => {
          leaseLimits.push(request.limit)
          return due.splice(0, request.limit)
        }),
      recordAttempts: (attempts) =>
        Effect.sync(() => {
          recordedBatches.push(attempts.map((attempt) => attempt.delivery.deliveryId))
          return attempts.map(() => ({ _tag: "Written", state: "succeeded" }) as const)
        })
    })
  )
  return { layer, leaseLimits, recordedBatches }
}

/** A receiver answering 204 to the k-th request after 10 + gapMs * (k mod 16) ms. */
const staggeredServer = (gapMs: number) => {
  let received = 0
  return Effect.promise(() =>
    startServer((req, res) => {
      const delay = 10 + gapMs * (received++ % 16)
      req.resume()
      req.on("end", () => setTimeout(() => res.writeHead(204).end(), delay))
    })
  )
}

const lookupOnce = (lookup: ReturnType<typeof guardedLookup>, host: string) =>
  new Promise<{ error: NodeJS.ErrnoException | null; addresses: string | ReadonlyArray<LookupAddress> }>((resolve) =>
    lookup(host, { all: true }, (error, addresses) => resolve({ error, addresses }))
  )

describe("delivery worker: schedule, gate, address guard, configuration", () => {
  it("planNextStep: a test schedule replaces docs/webhooks.md's delays, with up to 20% jitter", () => {
    const step = planNextStep({
      delivery: { scheduleAttemptNumber: 2, maxAttempts: 8 },
      outcome: retryable,
      now,
      random: () => 0.5,
      retryDelaysMs: [100, 200]
    })
    expect(step).toEqual({ _tag: "Retry", at: new Date(now.getTime() + 220), delayMs: 220 })
    const beyond = planNextStep({ delivery: { scheduleAttemptNumber: 5, maxAttempts: 8 }, outcome: retryable, now, random: () => 0, retryDelaysMs: [100, 200] })
    expect(beyond._tag === "Retry" && beyond.delayMs).toBe(200)
  })

  it("planNextStep: without a test schedule the first retry is 5 s plus jitter (docs/webhooks.md)", () => {
    const step = planNextStep({ delivery: { scheduleAttemptNumber: 1, maxAttempts: 8 }, outcome: retryable, now, random: () => 0.999 })
    expect(step._tag).toBe("Retry")
    if (step._tag === "Retry") expect(step.delayMs).toBeGreaterThanOrEqual(5000)
    if (step._tag === "Retry") expect(step.delayMs).toBeLessThanOrEqual(6000)
  })

  it("planNextStep: Retry-After on 429 postpones a short test schedule, capped at 1 hour", () => {
    const at = (retryAfter: string) =>
      planNextStep({
        delivery: { scheduleAttemptNumber: 1, maxAttempts: 8 },
        outcome: { _tag: "Response", status: 429, retryAfter },
        now,
        random: () => 0,
        retryDelaysMs: [10]
      })
    expect(at("2")).toMatchObject({ _tag: "Retry", delayMs: 2000 })
    expect(at("999999")).toMatchObject({ _tag: "Retry", delayMs: 3_600_000 })
  })

  it("planNextStep: terminal statuses fail at once; a retryable failure of the last allowed attempt is attempts_exhausted", () => {
    for (const status of [301, 400, 401, 403, 404, 410]) {
      expect(planNextStep({ delivery: { scheduleAttemptNumber: 1, maxAttempts: 8 }, outcome: { _tag: "Response", status }, now, random: Math.random })).toEqual({
        _tag: "Failed",
        reason: "terminal_status"
      })
    }
    // An endpoint test is tried once.
    expect(planNextStep({ delivery: { scheduleAttemptNumber: 1, maxAttempts: 1 }, outcome: retryable, now, random: Math.random, retryDelaysMs: [1] })).toEqual({
      _tag: "Failed",
      reason: "attempts_exhausted"
    })
    expect(planNextStep({ delivery: { scheduleAttemptNumber: 8, maxAttempts: 8 }, outcome: { _tag: "NetworkError", errorClass: "timeout" }, now, random: Math.random })).toEqual({
      _tag: "Failed",
      reason: "attempts_exhausted"
    })
  })

  it.effect("runtime gate: planned_not_generally_available refuses before leasing anything", () =>
    Effect.gen(function* () {
      const { calls, layer } = memoryQueue([])
      const refused = yield* Effect.flip(
        runDeliveryPass({ runtime: "planned_not_generally_available", environment: "sandbox" }).pipe(Effect.provide(layer))
      )
      expect(refused).toBeInstanceOf(WebhookRuntimeDisabled)
      expect(refused.message).toContain("WEBHOOK_RUNTIME=enabled")
      expect(calls.lease).toBe(0)
    }))

  it.live("a leased delivery is POSTed signed with its secret and verified by the receiver kit; the result is recorded", () =>
    Effect.gen(function* () {
      const secret = generateSigningSecret(randomBytes)
      const handled: Array<string> = []
      const server = yield* Effect.promise(() =>
        startServer(
          makeWebhookRequestHandler({
            secrets: [secret],
            store: makeIdempotencyStoreMemory(),
            handle: (event) => Effect.sync(() => handled.push(event.id))
          })
        )
      )
      const delivery = dueDeliveries(1, `${server.url}/hook`, secret)[0]!
      const { calls, layer } = memoryQueue([delivery])
      const report = yield* runDeliveryPass({ runtime: "enabled", environment: "sandbox", concurrency: 1 }).pipe(Effect.provide(layer))
      expect(report).toMatchObject({ attempts: 1, succeeded: 1 })
      expect(handled).toEqual([delivery.eventId])
      expect(calls.recorded[0]?.step).toEqual({ _tag: "Succeeded" })
      expect(calls.recorded[0]?.result.outcome).toEqual({ _tag: "Response", status: 200 })
      yield* Effect.promise(() => server.close())
    }))

  it.live("batches: one lease claims as many deliveries as there are free slots, at most `concurrency` are in flight, results are recorded in batches", () =>
    Effect.gen(function* () {
      const secret = generateSigningSecret(randomBytes)
      const flight = { now: 0, peak: 0 }
      const server = yield* Effect.promise(() =>
        startServer((req, res) => {
          flight.now++
          flight.peak = Math.max(flight.peak, flight.now)
          req.resume()
          req.on("end", () =>
            setTimeout(() => {
              flight.now--
              res.writeHead(204).end()
            }, 20)
          )
        })
      )
      const { layer, leaseLimits, recordedBatches } = batchQueue(dueDeliveries(20, `${server.url}/hook`, secret))
      const report = yield* runDeliveryPass({ runtime: "enabled", environment: "sandbox", concurrency: 8 }).pipe(Effect.provide(layer))
      yield* Effect.promise(() => server.close())
      expect(report).toEqual({ attempts: 20, succeeded: 20, retried: 0, failed: 0, leaseLost: 0 })
      // The first claim fills every slot at once; later ones take what has been freed.
      expect(leaseLimits[0]).toBe(8)
      expect(leaseLimits.every((limit) => limit >= 1 && limit <= 8)).toBe(true)
      expect(flight.peak).toBeLessThanOrEqual(8)
      const recorded = recordedBatches.flat()
      expect(recorded.toSorted()).toEqual(Array.from({ length: 20 }, (_, index) => `dlv_batch_${index}`).toSorted())
    }))

  it.live("batches: while deliveries are in flight, a claim waits for a quarter of the slots, so attempts that finish one at a time do not make one claim each", () =>
    Effect.gen(function* () {
      const secret = generateSigningSecret(randomBytes)
      // Answers spread 6 ms apart: the attempts finish, and are recorded, one by one.
      const server = yield* staggeredServer(6)
      const { layer, leaseLimits, recordedBatches } = batchQueue(dueDeliveries(64, `${server.url}/hook`, secret))
      const report = yield* runDeliveryPass({ runtime: "enabled", environment: "sandbox", concurrency: 16 }).pipe(Effect.provide(layer))
      yield* Effect.promise(() => server.close())
      expect(report).toEqual({ attempts: 64, succeeded: 64, retried: 0, failed: 0, leaseLost: 0 })
      expect(recordedBatches.some((batch) => batch.length === 1)).toBe(true)
      expect(leaseLimits.filter((limit) => limit < 4)).toEqual([])
      expect(leaseLimits[0]).toBe(16)
    }))

  it.live("batches: attempts that finish a millisecond apart while others are in flight are recorded together, not one statement each", () =>
    Effect.gen(function* () {
      const secret = generateSigningSecret(randomBytes)
      // Answers 1 ms apart within each claim of 16: without gathering, each is recorded alone.
      const server = yield* staggeredServer(1)
      const { layer, recordedBatches } = batchQueue(dueDeliveries(64, `${server.url}/hook`, secret))
      const report = yield* runDeliveryPass({ runtime: "enabled", environment: "sandbox", concurrency: 16 }).pipe(Effect.provide(layer))
      yield* Effect.promise(() => server.close())
      expect(report).toEqual({ attempts: 64, succeeded: 64, retried: 0, failed: 0, leaseLost: 0 })
      expect(recordedBatches.flat()).toHaveLength(64)
      expect(recordedBatches.length).toBeLessThanOrEqual(32)
    }))

  it("the address guard refuses a host resolving to loopback in production (after DNS) and allows it in the sandbox", async () => {
    const refusals: Array<ReadonlyArray<string>> = []
    const production = await lookupOnce(guardedLookup("https://localhost/hook", "production", (problems) => refusals.push(problems)), "localhost")
    expect(production.error?.code).toBe(ADDRESS_REFUSED_CODE)
    expect(refusals[0]).toContain("loopback_address")
    const sandbox = await lookupOnce(guardedLookup("http://localhost/hook", "sandbox"), "localhost")
    expect(sandbox.error).toBeNull()
    expect(Array.isArray(sandbox.addresses) && sandbox.addresses.length).toBeGreaterThan(0)
  })

  it("checks without DNS: https only in production, IP literals judged at once, host names left to the guarded lookup", () => {
    expect(checkEndpointBeforeLookup("http://receiver.example/h", "production")).toEqual(["scheme_not_allowed"])
    expect(checkEndpointBeforeLookup("https://10.1.2.3/h", "production")).toEqual(["private_address"])
    expect(checkEndpointBeforeLookup("https://[::ffff:169.254.169.254]/h", "production")).toEqual(["metadata_address"])
    expect(checkEndpointBeforeLookup("https://receiver.example/h", "production")).toEqual([])
    expect(checkEndpointBeforeLookup("http://127.0.0.1:8080/h", "sandbox")).toEqual([])
  })

  it.effect("configuration: the runtime defaults to planned_not_generally_available; test knobs are refused in production", () =>
    Effect.gen(function* () {
      const load = (entries: Record<string, string>) =>
        Effect.result(webhookWorkerConfig.parse(ConfigProvider.fromEnv({ env: entries })))
      const defaults = yield* load({})
      expect(Result.isSuccess(defaults) && defaults.success).toMatchObject({
        runtime: "planned_not_generally_available",
        environment: "sandbox",
        leaseMs: 60_000,
        attemptTimeoutMs: 15_000,
        retryDelaysMs: undefined
      })
      const tuned = yield* load({ WEBHOOK_RUNTIME: "enabled", WEBHOOK_RETRY_DELAYS_MS: "10, 20", WEBHOOK_LEASE_MS: "500" })
      expect(Result.isSuccess(tuned) && tuned.success).toMatchObject({ runtime: "enabled", retryDelaysMs: [10, 20], leaseMs: 500 })
      const production = yield* load({ PUBLIC_API_ENVIRONMENT: "production", WEBHOOK_RETRY_DELAYS_MS: "10" })
      expect(Result.isFailure(production) && String(production.failure)).toContain("refused in production")
      expect(Result.isFailure(yield* load({ WEBHOOK_RUNTIME: "on" }))).toBe(true)
      expect(Result.isFailure(yield* load({ WEBHOOK_LEASE_MS: "-1" }))).toBe(true)
    }))
})
