import { readFileSync } from "node:fs"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import {
  signWebhookPayload,
  verifyWebhook,
  type VerifyWebhookOptions,
  WebhookVerificationError,
  type WebhookVerificationFailureReason
} from "../src/index.js"

// The same vectors as the domain's verification (docs/webhooks.md), read as data: no domain code.
const webhookVectors = (JSON.parse(
  readFileSync(new URL("../../domain/test/vectors/webhook-vectors.json", import.meta.url), "utf8")
) as {
  readonly vectors: ReadonlyArray<{
    readonly name: string
    readonly secret: string
    readonly timestamp: string
    readonly raw_body: string
    readonly signature: string
  }>
}).vectors

const SECRET = "whsec_c2FtcGxlLXNpZ25pbmctc2VjcmV0LWZvci10ZXN0cyE"
const OLD_SECRET = "whsec_b2xkLXNpZ25pbmctc2VjcmV0LWZvci10ZXN0cy0xMjM"
const TIMESTAMP = 1_777_636_800
const NOW = new Date(TIMESTAMP * 1000)

const eventBody = (overrides: Record<string, unknown> = {}) =>
  JSON.stringify({
    id: "evt_01",
    type: "recording.transcript_ready",
    api_version: "2026-05-01",
    occurred_at: "2026-05-01T12:00:00.000Z",
    organization_id: "org_a",
    resources: { encounter_id: "enc_1", document_id: "doc_1" },
    ...overrides
  })

const deliveryHeaders = (eventId: string, timestamp: string, signature: string) => ({
  "Content-Type": "application/json",
  "Service-Event-Id": eventId,
  "Service-Delivery-Id": "dlv_01",
  "Service-Timestamp": timestamp,
  "Service-Signature": signature,
  "Service-Webhook-Version": "2026-05-01"
})

/** A delivery as the sender makes it, with optional header overrides (undefined removes one). */
const delivery = (options: {
  readonly body?: string | Uint8Array
  readonly secret?: string
  readonly timestamp?: string
  readonly headers?: Record<string, string | undefined>
} = {}) => {
  const rawBody = options.body ?? eventBody()
  const timestamp = options.timestamp ?? String(TIMESTAMP)
  const signature = signWebhookPayload(options.secret ?? SECRET, timestamp, rawBody)
  const headers: Record<string, string | undefined> = { ...deliveryHeaders("evt_01", timestamp, signature), ...options.headers }
  return { rawBody, headers }
}

const reasonOf = (options: VerifyWebhookOptions): WebhookVerificationFailureReason | "ok" => {
  try {
    verifyWebhook(options)
    return "ok"
  } catch (error) {
    if (error instanceof WebhookVerificationError) return error.reason
    throw error
  }
}

const flipByte = (bytes: Uint8Array, index: number, mask: number): Uint8Array => {
  const copy = new Uint8Array(bytes)
  copy[index] = (copy[index] ?? 0) ^ mask
  return copy
}

describe("verifyWebhook: webhook-vectors.json", () => {
  it("has vectors to check", () => {
    expect(webhookVectors.length).toBeGreaterThanOrEqual(2)
  })

  it("signs every vector to its signature", () => {
    for (const vector of webhookVectors) {
      expect(signWebhookPayload(vector.secret, vector.timestamp, vector.raw_body), vector.name).toBe(vector.signature)
    }
  })

  it("accepts every vector at its own timestamp, from text and from bytes, with secret or secrets", () => {
    for (const vector of webhookVectors) {
      const headers = deliveryHeaders(JSON.parse(vector.raw_body).id, vector.timestamp, vector.signature)
      const now = new Date(Number(vector.timestamp) * 1000)
      for (const rawBody of [vector.raw_body, new Uint8Array(Buffer.from(vector.raw_body, "utf8"))]) {
        expect(reasonOf({ rawBody, headers, secret: vector.secret, now }), vector.name).toBe("ok")
        expect(reasonOf({ rawBody, headers, secrets: [OLD_SECRET, vector.secret], now }), vector.name).toBe("ok")
      }
    }
  })

  it("returns the event, occurred_at as sent", () => {
    const vector = webhookVectors[1]
    if (vector === undefined) throw new Error("vector missing")
    const event = verifyWebhook({
      rawBody: vector.raw_body,
      headers: deliveryHeaders("evt_02", vector.timestamp, vector.signature),
      secret: vector.secret,
      now: new Date(Number(vector.timestamp) * 1000)
    })
    expect(event).toEqual({
      id: "evt_02",
      type: "recording.transcript_ready",
      api_version: "2026-05-01",
      occurred_at: "2026-05-01T12:00:00Z",
      organization_id: "org_é",
      resources: { encounter_id: "e", document_id: "d" }
    })
  })

  it("refuses a vector whose body lost its trailing newline (the exact bytes are signed)", () => {
    const vector = webhookVectors[1]
    if (vector === undefined) throw new Error("vector missing")
    const headers = deliveryHeaders("evt_02", vector.timestamp, vector.signature)
    const now = new Date(Number(vector.timestamp) * 1000)
    expect(reasonOf({ rawBody: vector.raw_body.trimEnd(), headers, secret: vector.secret, now })).toBe("invalid_signature")
  })
})

const headerSafeId = fc.stringMatching(/^[!-~]{1,24}$/)
const idText = fc.string({ unit: "binary", minLength: 1, maxLength: 20 })
const layout = fc.constantFrom<(value: unknown) => string>(
  (value) => JSON.stringify(value),
  (value) => `${JSON.stringify(value)}\n`,
  (value) => JSON.stringify(value, null, 2),
  (value) => `\r\n ${JSON.stringify(value, null, "\t")} \n\n`
)
const signedCase = fc.record({
  id: headerSafeId,
  organization: idText,
  encounter: idText,
  document: idText,
  layout,
  secret: fc.string({ unit: "binary", minLength: 1, maxLength: 60 }),
  timestamp: fc.integer({ min: 0, max: 99_999_999_999 }),
  skewMs: fc.integer({ min: -300_000, max: 300_000 })
})
type SignedCase = typeof signedCase extends fc.Arbitrary<infer T> ? T : never

const makeSigned = (c: SignedCase) => {
  const body = c.layout({
    id: c.id,
    type: "recording.transcript_ready",
    api_version: "2026-05-01",
    occurred_at: "2026-05-01T12:00:00+02:00",
    organization_id: c.organization,
    resources: { encounter_id: c.encounter, document_id: c.document }
  })
  const rawBody = new Uint8Array(Buffer.from(body, "utf8"))
  const timestamp = String(c.timestamp)
  const signature = signWebhookPayload(c.secret, timestamp, rawBody)
  const headers = deliveryHeaders(c.id, timestamp, signature)
  return { rawBody, timestamp, signature, headers, now: new Date(c.timestamp * 1000 + c.skewMs) }
}

describe("verifyWebhook: properties", () => {
  it("verify(sign(x)) holds for any body layout, non-ASCII ids, timestamp and secret", () => {
    fc.assert(fc.property(signedCase, (c) => {
      const signed = makeSigned(c)
      const event = verifyWebhook({ rawBody: signed.rawBody, headers: signed.headers, secret: c.secret, now: signed.now })
      expect(event.id).toBe(c.id)
      expect(event.resources.encounter_id).toBe(c.encounter)
    }))
  })

  it("invalid_signature: changing any one byte of the body fails", () => {
    fc.assert(fc.property(signedCase, fc.nat(), fc.integer({ min: 1, max: 255 }), (c, position, mask) => {
      const signed = makeSigned(c)
      const rawBody = flipByte(signed.rawBody, position % signed.rawBody.length, mask)
      expect(reasonOf({ rawBody, headers: signed.headers, secret: c.secret, now: signed.now })).toBe("invalid_signature")
    }))
  })

  it("invalid_signature: a different timestamp still within the tolerance fails (the timestamp is signed)", () => {
    fc.assert(fc.property(signedCase, fc.constantFrom(-1, 1), (c, delta) => {
      const signed = makeSigned({ ...c, timestamp: Math.max(1, c.timestamp), skewMs: 0 })
      const headers = { ...signed.headers, "Service-Timestamp": String(Number(signed.timestamp) + delta) }
      expect(reasonOf({ rawBody: signed.rawBody, headers, secret: c.secret, now: signed.now })).toBe("invalid_signature")
    }))
  })

  it("invalid_signature: changing any one hex digit of the signature fails", () => {
    fc.assert(fc.property(signedCase, fc.nat(), fc.integer({ min: 1, max: 15 }), (c, position, add) => {
      const signed = makeSigned(c)
      const hex = signed.signature.slice(3)
      const index = position % hex.length
      const digit = ((parseInt(hex[index] ?? "0", 16) + add) % 16).toString(16)
      const headers = { ...signed.headers, "Service-Signature": `v1=${hex.slice(0, index)}${digit}${hex.slice(index + 1)}` }
      expect(reasonOf({ rawBody: signed.rawBody, headers, secret: c.secret, now: signed.now })).toBe("invalid_signature")
    }))
  })

  it("invalid_signature: another secret fails", () => {
    fc.assert(fc.property(signedCase, fc.string({ minLength: 1 }), (c, other) => {
      fc.pre(other !== c.secret)
      const signed = makeSigned(c)
      expect(reasonOf({ rawBody: signed.rawBody, headers: signed.headers, secret: other, now: signed.now })).toBe(
        "invalid_signature"
      )
    }))
  })

  it("odd Service-Signature values never throw anything but a refusal, and never verify", () => {
    fc.assert(fc.property(fc.string({ unit: "binary" }), (value) => {
      const signed = delivery()
      const headers = { ...signed.headers, "Service-Signature": value.trim() === "" ? "x" : value }
      expect(reasonOf({ ...signed, headers, secret: SECRET, now: NOW })).toBe("invalid_signature")
    }))
  })

  it("arbitrary headers and bodies end in a refusal, never another exception", () => {
    fc.assert(fc.property(fc.dictionary(fc.string(), fc.string()), fc.uint8Array(), (headers, rawBody) => {
      expect(() => reasonOf({ rawBody, headers, secret: SECRET, now: NOW })).not.toThrow()
    }))
  })
})

describe("verifyWebhook: stale_timestamp (300 s tolerance, both ways)", () => {
  const at = (offsetMs: number) => reasonOf({ ...delivery(), secret: SECRET, now: new Date(NOW.getTime() + offsetMs) })

  it("accepts 300 s either way and refuses just over", () => {
    expect([at(300_000), at(-300_000), at(0)]).toEqual(["ok", "ok", "ok"])
    for (const offset of [301_000, -301_000, 300_001, -300_001]) expect(at(offset), String(offset)).toBe("stale_timestamp")
  })

  it("honours another tolerance", () => {
    const signed = delivery()
    const within = (ms: number) => reasonOf({ ...signed, secret: SECRET, now: new Date(NOW.getTime() + ms), toleranceSeconds: 60 })
    expect(within(61_000)).toBe("stale_timestamp")
    expect(within(60_000)).toBe("ok")
  })

  it("a timestamp that is not decimal epoch seconds is stale", () => {
    for (const timestamp of ["abc", "-1777636800", "1777636800.0", "1.7e9", " 1777636800x", "0x69F4A700", "１７７７"]) {
      expect(reasonOf({ ...delivery({ timestamp }), secret: SECRET, now: NOW }), timestamp).toBe("stale_timestamp")
    }
  })

  it("defaults to the current clock", () => {
    const timestamp = String(Math.floor(Date.now() / 1000))
    expect(reasonOf({ ...delivery({ timestamp }), secret: SECRET })).toBe("ok")
    expect(reasonOf({ ...delivery(), secret: SECRET })).toBe("stale_timestamp")
  })
})

describe("verifyWebhook: signatures and secrets", () => {
  const good = delivery()
  const goodSignature = String(good.headers["Service-Signature"])
  const withSignature = (value: string | ReadonlyArray<string>) =>
    reasonOf({ rawBody: good.rawBody, headers: { ...good.headers, "Service-Signature": value }, secret: SECRET, now: NOW })
  const zeros = `v1=${"0".repeat(64)}`

  it("rotation: accepts a delivery signed with any of several secrets", () => {
    for (const secret of [SECRET, OLD_SECRET]) {
      expect(reasonOf({ ...delivery({ secret }), secrets: [OLD_SECRET, SECRET], now: NOW })).toBe("ok")
      expect(reasonOf({ ...delivery({ secret }), secret: SECRET, secrets: [OLD_SECRET], now: NOW })).toBe("ok")
    }
    expect(reasonOf({ ...delivery({ secret: OLD_SECRET }), secret: SECRET, now: NOW })).toBe("invalid_signature")
  })

  it("invalid_signature with no secret, and an empty secret is never used", () => {
    expect(reasonOf({ ...good, secrets: [], now: NOW })).toBe("invalid_signature")
    expect(reasonOf({ ...good, now: NOW })).toBe("invalid_signature")
    expect(reasonOf({ ...delivery({ secret: "" }), secret: "", now: NOW })).toBe("invalid_signature")
  })

  it("accepts when any v1 entry matches, separated by commas or spaces; other schemes are ignored", () => {
    expect(withSignature(`${zeros},${goodSignature}`)).toBe("ok")
    expect(withSignature(`${goodSignature}, ${zeros}`)).toBe("ok")
    expect(withSignature(`${zeros} ${goodSignature}`)).toBe("ok")
    expect(withSignature(`v0=abc,${goodSignature}`)).toBe("ok")
    expect(withSignature([zeros, goodSignature])).toBe("ok")
    expect(withSignature(goodSignature.replace("v1=", "v2="))).toBe("invalid_signature")
  })

  it("refuses odd forms", () => {
    for (
      const value of [
        "v1=",
        "v1",
        "=",
        ",,,",
        zeros,
        goodSignature.slice(0, -1),
        `${goodSignature}0`,
        goodSignature.toUpperCase(),
        goodSignature.replace("v1=", "V1="),
        `v1=${"z".repeat(64)}`,
        `v1=${goodSignature.slice(3, 35)}`,
        `v1==${goodSignature.slice(3)}`,
        `t=1,${goodSignature.replace("v1=", "v1 = ")}`,
        "v1=\u0000\u0001",
        "v1=🙂"
      ]
    ) {
      expect(withSignature(value), value).toBe("invalid_signature")
    }
  })

  it("checks the signature before reading the body: unsigned garbage is invalid_signature", () => {
    const headers = { ...good.headers, "Service-Signature": zeros }
    expect(reasonOf({ rawBody: "not json", headers, secret: SECRET, now: NOW })).toBe("invalid_signature")
  })
})

describe("verifyWebhook: missing_header", () => {
  const names = ["Service-Event-Id", "Service-Delivery-Id", "Service-Timestamp", "Service-Signature", "Service-Webhook-Version"]

  it.each(names)("missing_header when %s is absent, empty or blank", (name) => {
    for (const value of [undefined, "", "  "]) {
      expect(reasonOf({ ...delivery({ headers: { [name]: value } }), secret: SECRET, now: NOW })).toBe("missing_header")
    }
  })

  it("comes first, and the message names the header", () => {
    const signed = delivery({ headers: { "Service-Delivery-Id": undefined, "Service-Signature": "v1=00" } })
    expect(reasonOf({ ...signed, secret: SECRET, now: new Date(0) })).toBe("missing_header")
    expect(() => verifyWebhook({ ...delivery({ headers: { "Service-Webhook-Version": undefined } }), secret: SECRET, now: NOW }))
      .toThrow(/Service-Webhook-Version/)
  })
})

describe("verifyWebhook: headers", () => {
  it("Node's lower-case record, an upper-case one, and a Fetch Headers", () => {
    const signed = delivery()
    const recase = (f: (key: string) => string) =>
      Object.fromEntries(Object.entries(signed.headers).map(([key, value]) => [f(key), value]))
    expect(reasonOf({ rawBody: signed.rawBody, headers: recase((key) => key.toLowerCase()), secret: SECRET, now: NOW })).toBe("ok")
    expect(reasonOf({ rawBody: signed.rawBody, headers: recase((key) => key.toUpperCase()), secret: SECRET, now: NOW })).toBe("ok")
    const headers = new Headers()
    for (const [key, value] of Object.entries(signed.headers)) if (value !== undefined) headers.set(key, value)
    expect(reasonOf({ rawBody: signed.rawBody, headers, secret: SECRET, now: NOW })).toBe("ok")
    headers.delete("service-event-id")
    expect(reasonOf({ rawBody: signed.rawBody, headers, secret: SECRET, now: NOW })).toBe("missing_header")
  })

  it("joins repeated values as Fetch does, so a repeated event id no longer equals the body id", () => {
    const signed = delivery()
    const headers = { ...signed.headers, "Service-Event-Id": ["evt_01", "evt_01"] }
    expect(reasonOf({ rawBody: signed.rawBody, headers, secret: SECRET, now: NOW })).toBe("header_body_mismatch")
  })
})

describe("verifyWebhook: the body, after authentication", () => {
  const signedBody = (body: string | Uint8Array, headers: Record<string, string | undefined> = {}) =>
    reasonOf({ ...delivery({ body, headers }), secret: SECRET, now: NOW })

  it("malformed_body: not JSON, not UTF-8, not an object, or no string type", () => {
    for (const body of ["not json", "", new Uint8Array([0x7b, 0xff, 0x7d]), "[1,2]", "null", '"recording.transcript_ready"']) {
      expect(signedBody(body), String(body)).toBe("malformed_body")
    }
    expect(signedBody(eventBody({ type: undefined }))).toBe("malformed_body")
    expect(signedBody(eventBody({ type: 7 }))).toBe("malformed_body")
  })

  it("malformed_body: a signed event that is not exactly the contract's", () => {
    expect(signedBody(eventBody({ transcript: "turns" }))).toBe("malformed_body")
    expect(signedBody(eventBody({ resources: { encounter_id: "enc_1" } }))).toBe("malformed_body")
    expect(signedBody(eventBody({ resources: { encounter_id: "enc_1", document_id: "doc_1", audio_url: "x" } }))).toBe(
      "malformed_body"
    )
    expect(signedBody(eventBody({ resources: { encounter_id: "", document_id: "doc_1" } }))).toBe("malformed_body")
    expect(signedBody(eventBody({ resources: null }))).toBe("malformed_body")
    expect(signedBody(eventBody({ organization_id: "" }))).toBe("malformed_body")
    expect(signedBody(eventBody({ organization_id: 7 }))).toBe("malformed_body")
    for (const occurredAt of ["soon", "2026-05-01", "2026-05-01T12:00:00", "2026-02-30T12:00:00Z", "2026-05-01T12:00:60Z", "0000-05-01T12:00:00Z"]) {
      expect(signedBody(eventBody({ occurred_at: occurredAt })), occurredAt).toBe("malformed_body")
    }
    expect(signedBody(eventBody({ occurred_at: "2026-05-01t12:00:00.123456+05:30" }))).toBe("ok")
    expect(signedBody(eventBody({ api_version: "2027-01-01" }), { "Service-Webhook-Version": "2027-01-01" })).toBe(
      "malformed_body"
    )
  })

  it("unsupported_event_type: another type, and webhook.endpoint_test unless accepted", () => {
    expect(signedBody(eventBody({ type: "recording.deleted" }))).toBe("unsupported_event_type")
    const test = delivery({ body: eventBody({ type: "webhook.endpoint_test", resources: undefined }) })
    expect(reasonOf({ ...test, secret: SECRET, now: NOW })).toBe("unsupported_event_type")
    expect(verifyWebhook({ ...test, secret: SECRET, now: NOW, acceptEndpointTest: true }).type).toBe("webhook.endpoint_test")
    expect(verifyWebhook({ ...delivery(), secret: SECRET, now: NOW, acceptEndpointTest: true }).type).toBe(
      "recording.transcript_ready"
    )
    const withResources = delivery({ body: eventBody({ type: "webhook.endpoint_test" }) })
    expect(() => verifyWebhook({ ...withResources, secret: SECRET, now: NOW, acceptEndpointTest: true })).toThrow(
      WebhookVerificationError
    )
  })

  it("header_body_mismatch: Service-Event-Id or Service-Webhook-Version differs from the body", () => {
    expect(signedBody(eventBody(), { "Service-Event-Id": "evt_02" })).toBe("header_body_mismatch")
    expect(signedBody(eventBody({ id: "evt_other" }))).toBe("header_body_mismatch")
    expect(signedBody(eventBody(), { "Service-Webhook-Version": "2026-06-01" })).toBe("header_body_mismatch")
    expect(signedBody(eventBody({ api_version: "2025-01-01" }))).toBe("header_body_mismatch")
  })
})

describe("verifyWebhook: failures", () => {
  it("names every reason, and no message holds a secret or the signature", () => {
    const signed = delivery()
    const signature = String(signed.headers["Service-Signature"])
    const cases: ReadonlyArray<readonly [WebhookVerificationFailureReason, VerifyWebhookOptions]> = [
      ["missing_header", { ...delivery({ headers: { "Service-Timestamp": undefined } }), secret: SECRET, now: NOW }],
      ["stale_timestamp", { ...signed, secret: SECRET, now: new Date(NOW.getTime() + 301_000) }],
      ["invalid_signature", { ...signed, secret: OLD_SECRET, now: NOW }],
      ["malformed_body", { ...delivery({ body: "{" }), secret: SECRET, now: NOW }],
      ["unsupported_event_type", { ...delivery({ body: eventBody({ type: "x" }) }), secret: SECRET, now: NOW }],
      ["header_body_mismatch", { ...delivery({ headers: { "Service-Event-Id": "evt_9" } }), secret: SECRET, now: NOW }]
    ]
    expect(new Set(cases.map(([reason]) => reason)).size).toBe(6)
    for (const [reason, options] of cases) {
      let caught: unknown
      try {
        verifyWebhook(options)
      } catch (error) {
        caught = error
      }
      expect(caught).toBeInstanceOf(WebhookVerificationError)
      const failure = caught as WebhookVerificationError
      expect(failure.reason).toBe(reason)
      expect(failure.name).toBe("WebhookVerificationError")
      expect(failure.message.length).toBeGreaterThan(0)
      for (const secret of [SECRET, OLD_SECRET, signature, signature.slice(3)]) {
        expect(failure.message.includes(secret)).toBe(false)
        expect(String(failure).includes(secret)).toBe(false)
      }
    }
  })
})
