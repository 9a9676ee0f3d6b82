import { describe, expect, it } from "@effect/vitest"
import { Result } from "effect"
import fc from "fast-check"
import {
  buildDeliveryHeaders,
  signingTimestamp,
  signWebhookPayload,
  verifyWebhook,
  verifyWebhookOrEndpointTest,
  type VerifyWebhookInput,
  type WebhookVerificationFailureReason
} from "../../src/webhooks/index.js"
import { webhookVectors } from "./vectors.js"
import { prop } from "../support/prop.js"

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

/** A delivery as the sender makes it, with optional header overrides (undefined removes one). */
const delivery = (options: {
  readonly body?: string | Uint8Array
  readonly secret?: string
  readonly timestamp?: string
  readonly headers?: Record<string, string | undefined>
} = {}): Pick<VerifyWebhookInput, "rawBody" | "headers"> => {
  const rawBody = options.body ?? eventBody()
  const timestamp = options.timestamp ?? String(TIMESTAMP)
  const signature = signWebhookPayload({ secret: options.secret ?? SECRET, timestamp, rawBody })
  const headers: Record<string, string | undefined> = {
    ...buildDeliveryHeaders({ eventId: "evt_01", deliveryId: "dlv_01", timestamp, signature }),
    ...options.headers
  }
  return { rawBody, headers }
}

const reasonOf = (input: VerifyWebhookInput): WebhookVerificationFailureReason | "ok" =>
  Result.match(verifyWebhook(input), { onFailure: (failure) => failure.reason, onSuccess: () => "ok" as const })

const flipByte = (bytes: Uint8Array, index: number, mask: number): Uint8Array => {
  const copy = new Uint8Array(bytes)
  copy[index] = (copy[index] ?? 0) ^ mask
  return copy
}

describe("verifyWebhook: webhook-vectors.json", () => {
  it("accepts every vector at its own timestamp, from text and from bytes", () => {
    for (const vector of webhookVectors) {
      const headers = {
        "Service-Event-Id": JSON.parse(vector.raw_body).id,
        "Service-Delivery-Id": "dlv_x",
        "Service-Timestamp": vector.timestamp,
        "Service-Signature": vector.signature,
        "Service-Webhook-Version": "2026-05-01"
      }
      const now = new Date(Number(vector.timestamp) * 1000)
      for (const rawBody of [vector.raw_body, new Uint8Array(Buffer.from(vector.raw_body, "utf8"))]) {
        const result = verifyWebhook({ rawBody, headers, secrets: [vector.secret], now })
        expect(Result.isSuccess(result), vector.name).toBe(true)
      }
    }
  })

  it("returns the decoded event, occurred_at as sent", () => {
    const vector = webhookVectors[1]
    if (vector === undefined) throw new Error("vector missing")
    const result = verifyWebhook({
      rawBody: vector.raw_body,
      headers: {
        "Service-Event-Id": "evt_02",
        "Service-Delivery-Id": "dlv_x",
        "Service-Timestamp": vector.timestamp,
        "Service-Signature": vector.signature,
        "Service-Webhook-Version": "2026-05-01"
      },
      secrets: [vector.secret],
      now: new Date(Number(vector.timestamp) * 1000)
    })
    expect(Result.getOrThrow(result)).toEqual({
      id: "evt_02",
      type: "recording.transcript_ready",
      api_version: "2026-05-01",
      occurred_at: "2026-05-01T12:00:00Z",
      organization_id: "org_é",
      resources: { encounter_id: "e", document_id: "d" }
    })
  })
})

// The event id travels in a header too, so it is header-safe text; the other ids are any Unicode.
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

const makeSigned = (c: typeof signedCase extends fc.Arbitrary<infer T> ? T : never) => {
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
  const signature = signWebhookPayload({ secret: c.secret, timestamp, rawBody })
  const headers = buildDeliveryHeaders({ eventId: c.id, deliveryId: "dlv_1", timestamp, signature })
  return { rawBody, timestamp, signature, headers, now: new Date(c.timestamp * 1000 + c.skewMs) }
}

describe("verifyWebhook: properties", () => {
  prop("verify(sign(x)) holds for any body layout, non-ASCII ids, timestamp and secret", [signedCase], ([c]) => {
    const signed = makeSigned(c)
    const result = verifyWebhook({ rawBody: signed.rawBody, headers: signed.headers, secrets: [c.secret], now: signed.now })
    expect(Result.isSuccess(result)).toBe(true)
    expect(Result.getOrThrow(result).id).toBe(c.id)
  })

  prop(
    "invalid_signature: changing any one byte of the body fails",
    [signedCase, fc.nat(), fc.integer({ min: 1, max: 255 })],
    ([c, position, mask]) => {
      const signed = makeSigned(c)
      const rawBody = flipByte(signed.rawBody, position % signed.rawBody.length, mask)
      expect(reasonOf({ rawBody, headers: signed.headers, secrets: [c.secret], now: signed.now })).toBe("invalid_signature")
    }
  )

  prop(
    "invalid_signature: a different timestamp still within the tolerance fails (the timestamp is signed)",
    [signedCase, fc.constantFrom(-1, 1)],
    ([c, delta]) => {
      const signed = makeSigned({ ...c, timestamp: Math.max(1, c.timestamp), skewMs: 0 })
      const other = String(Number(signed.timestamp) + delta)
      const headers = { ...signed.headers, "Service-Timestamp": other }
      expect(reasonOf({ rawBody: signed.rawBody, headers, secrets: [c.secret], now: signed.now })).toBe("invalid_signature")
    }
  )

  prop(
    "changing any one character of the timestamp fails (stale or invalid signature)",
    [signedCase, fc.nat(), fc.integer({ min: 1, max: 9 })],
    ([c, position, add]) => {
      const signed = makeSigned(c)
      const index = position % signed.timestamp.length
      const digit = (Number(signed.timestamp[index]) + add) % 10
      const other = `${signed.timestamp.slice(0, index)}${digit}${signed.timestamp.slice(index + 1)}`
      const headers = { ...signed.headers, "Service-Timestamp": other }
      const reason = reasonOf({ rawBody: signed.rawBody, headers, secrets: [c.secret], now: signed.now })
      expect(["invalid_signature", "stale_timestamp"]).toContain(reason)
    }
  )

  prop(
    "invalid_signature: changing any one hex digit of the signature fails",
    [signedCase, fc.nat(), fc.integer({ min: 1, max: 15 })],
    ([c, position, add]) => {
      const signed = makeSigned(c)
      const hex = signed.signature.slice(3)
      const index = position % hex.length
      const digit = ((parseInt(hex[index] ?? "0", 16) + add) % 16).toString(16)
      const headers = { ...signed.headers, "Service-Signature": `v1=${hex.slice(0, index)}${digit}${hex.slice(index + 1)}` }
      expect(reasonOf({ rawBody: signed.rawBody, headers, secrets: [c.secret], now: signed.now })).toBe("invalid_signature")
    }
  )

  prop("invalid_signature: another secret fails", [signedCase, fc.string({ minLength: 1 })], ([c, other]) => {
    fc.pre(other !== c.secret)
    const signed = makeSigned(c)
    expect(reasonOf({ rawBody: signed.rawBody, headers: signed.headers, secrets: [other], now: signed.now })).toBe(
      "invalid_signature"
    )
  })

  prop("odd Service-Signature values never throw and never verify", [fc.string({ unit: "binary" })], ([value]) => {
    const signed = delivery()
    const headers = { ...signed.headers, "Service-Signature": value.trim() === "" ? "x" : value }
    expect(() => verifyWebhook({ ...signed, headers, secrets: [SECRET], now: NOW })).not.toThrow()
    expect(reasonOf({ ...signed, headers, secrets: [SECRET], now: NOW })).toBe("invalid_signature")
  })

  prop("arbitrary headers and bodies never throw", [fc.dictionary(fc.string(), fc.string()), fc.uint8Array()], ([headers, rawBody]) => {
    expect(() => verifyWebhook({ rawBody, headers, secrets: [SECRET], now: NOW })).not.toThrow()
  })
})

describe("verifyWebhook: stale_timestamp (300 s tolerance, both ways)", () => {
  const at = (offsetMs: number) => reasonOf({ ...delivery(), secrets: [SECRET], now: new Date(NOW.getTime() + offsetMs) })

  it("accepts 300 s either way", () => {
    expect(at(300_000)).toBe("ok")
    expect(at(-300_000)).toBe("ok")
    expect(at(0)).toBe("ok")
  })

  it("refuses 301 s either way, and just over 300 s", () => {
    expect(at(301_000)).toBe("stale_timestamp")
    expect(at(-301_000)).toBe("stale_timestamp")
    expect(at(300_001)).toBe("stale_timestamp")
    expect(at(-300_001)).toBe("stale_timestamp")
  })

  it("honours another tolerance", () => {
    const signed = delivery()
    expect(reasonOf({ ...signed, secrets: [SECRET], now: new Date(NOW.getTime() + 61_000), toleranceSeconds: 60 })).toBe(
      "stale_timestamp"
    )
    expect(reasonOf({ ...signed, secrets: [SECRET], now: new Date(NOW.getTime() + 60_000), toleranceSeconds: 60 })).toBe("ok")
  })

  it("a timestamp that is not decimal epoch seconds is stale (it can never be within the tolerance)", () => {
    for (const timestamp of ["abc", "-1777636800", "1777636800.0", "1.7e9", " 1777636800x", "0x69F4A700", "１７７７"]) {
      expect(reasonOf({ ...delivery({ timestamp }), secrets: [SECRET], now: NOW }), timestamp).toBe("stale_timestamp")
    }
  })

  it("defaults to the current clock", () => {
    const timestamp = signingTimestamp(new Date())
    expect(Result.isSuccess(verifyWebhook({ ...delivery({ timestamp }), secrets: [SECRET] }))).toBe(true)
    expect(reasonOf({ ...delivery(), secrets: [SECRET] })).toBe("stale_timestamp")
  })
})

describe("verifyWebhook: signatures and secrets", () => {
  const good = delivery()
  const goodSignature = String(good.headers["Service-Signature" as keyof typeof good.headers])
  const withSignature = (value: string | ReadonlyArray<string>) =>
    reasonOf({ rawBody: good.rawBody, headers: { ...good.headers, "Service-Signature": value }, secrets: [SECRET], now: NOW })
  const zeros = `v1=${"0".repeat(64)}`

  it("rotation: accepts a delivery signed with any of several secrets", () => {
    for (const secret of [SECRET, OLD_SECRET]) {
      expect(reasonOf({ ...delivery({ secret }), secrets: [OLD_SECRET, SECRET], now: NOW })).toBe("ok")
      expect(reasonOf({ ...delivery({ secret }), secrets: [SECRET, OLD_SECRET], now: NOW })).toBe("ok")
    }
    expect(reasonOf({ ...delivery({ secret: OLD_SECRET }), secrets: [SECRET], now: NOW })).toBe("invalid_signature")
  })

  it("invalid_signature with no secret configured, and an empty secret is never used", () => {
    expect(reasonOf({ ...good, secrets: [], now: NOW })).toBe("invalid_signature")
    expect(reasonOf({ ...delivery({ secret: "" }), secrets: [""], now: NOW })).toBe("invalid_signature")
  })

  it("accepts when any v1 entry matches, separated by commas or spaces; other schemes are ignored", () => {
    expect(withSignature(`${zeros},${goodSignature}`)).toBe("ok")
    expect(withSignature(`${goodSignature}, ${zeros}`)).toBe("ok")
    expect(withSignature(`${zeros} ${goodSignature}`)).toBe("ok")
    expect(withSignature(`v0=abc,${goodSignature}`)).toBe("ok")
    expect(withSignature([zeros, goodSignature])).toBe("ok")
    expect(withSignature(goodSignature.replace("v1=", "v2="))).toBe("invalid_signature")
  })

  it("refuses odd forms without throwing", () => {
    for (const value of [
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
    ]) {
      expect(withSignature(value), value).toBe("invalid_signature")
    }
  })

  it("checks the signature before reading the body: unsigned garbage is invalid_signature, not malformed_body", () => {
    const headers = { ...good.headers, "Service-Signature": zeros }
    expect(reasonOf({ rawBody: "not json", headers, secrets: [SECRET], now: NOW })).toBe("invalid_signature")
  })
})

describe("verifyWebhook: missing_header", () => {
  const names = ["Service-Event-Id", "Service-Delivery-Id", "Service-Timestamp", "Service-Signature", "Service-Webhook-Version"]

  it.each(names)("missing_header when %s is absent or empty", (name) => {
    expect(reasonOf({ ...delivery({ headers: { [name]: undefined } }), secrets: [SECRET], now: NOW })).toBe("missing_header")
    expect(reasonOf({ ...delivery({ headers: { [name]: "" } }), secrets: [SECRET], now: NOW })).toBe("missing_header")
    expect(reasonOf({ ...delivery({ headers: { [name]: "  " } }), secrets: [SECRET], now: NOW })).toBe("missing_header")
  })

  it("comes first: a delivery with a header missing and a stale, unsigned body is missing_header", () => {
    const signed = delivery({ headers: { "Service-Delivery-Id": undefined, "Service-Signature": "v1=00" } })
    expect(reasonOf({ ...signed, secrets: [SECRET], now: new Date(0) })).toBe("missing_header")
  })

  it("the message names the header", () => {
    const result = verifyWebhook({ ...delivery({ headers: { "Service-Webhook-Version": undefined } }), secrets: [SECRET], now: NOW })
    expect(Result.isFailure(result) && result.failure.message).toContain("Service-Webhook-Version")
  })
})

describe("verifyWebhook: header lookup is case-insensitive", () => {
  it("accepts Node's lower-case header record", () => {
    const signed = delivery()
    const lower = Object.fromEntries(Object.entries(signed.headers).map(([key, value]) => [key.toLowerCase(), value]))
    expect(reasonOf({ rawBody: signed.rawBody, headers: lower, secrets: [SECRET], now: NOW })).toBe("ok")
    const upper = Object.fromEntries(Object.entries(signed.headers).map(([key, value]) => [key.toUpperCase(), value]))
    expect(reasonOf({ rawBody: signed.rawBody, headers: upper, secrets: [SECRET], now: NOW })).toBe("ok")
  })

  it("accepts a Fetch Headers object", () => {
    const signed = delivery()
    const headers = new Headers()
    for (const [key, value] of Object.entries(signed.headers)) if (value !== undefined) headers.set(key, value)
    expect(reasonOf({ rawBody: signed.rawBody, headers, secrets: [SECRET], now: NOW })).toBe("ok")
    headers.delete("service-event-id")
    expect(reasonOf({ rawBody: signed.rawBody, headers, secrets: [SECRET], now: NOW })).toBe("missing_header")
  })

  it("joins repeated values like Fetch does, so a repeated event id no longer equals the body id", () => {
    const signed = delivery()
    const headers = { ...signed.headers, "Service-Event-Id": ["evt_01", "evt_01"] }
    expect(reasonOf({ rawBody: signed.rawBody, headers, secrets: [SECRET], now: NOW })).toBe("header_body_mismatch")
  })
})

describe("verifyWebhook: body checks after authentication", () => {
  const signedBody = (body: string | Uint8Array, headers: Record<string, string | undefined> = {}) =>
    reasonOf({ ...delivery({ body, headers }), secrets: [SECRET], now: NOW })

  it("malformed_body: not JSON, not UTF-8, not an object, or no string type", () => {
    expect(signedBody("not json")).toBe("malformed_body")
    expect(signedBody("")).toBe("malformed_body")
    expect(signedBody(new Uint8Array([0x7b, 0xff, 0x7d]))).toBe("malformed_body")
    expect(signedBody("[1,2]")).toBe("malformed_body")
    expect(signedBody("null")).toBe("malformed_body")
    expect(signedBody('"recording.transcript_ready"')).toBe("malformed_body")
    expect(signedBody(eventBody({ type: undefined }))).toBe("malformed_body")
    expect(signedBody(eventBody({ type: 7 }))).toBe("malformed_body")
  })

  it("malformed_body: a signed event that is not exactly the contract shape", () => {
    expect(signedBody(eventBody({ transcript: "turns" }))).toBe("malformed_body")
    expect(signedBody(eventBody({ resources: { encounter_id: "enc_1" } }))).toBe("malformed_body")
    expect(signedBody(eventBody({ resources: { encounter_id: "enc_1", document_id: "doc_1", audio_url: "x" } }))).toBe(
      "malformed_body"
    )
    expect(signedBody(eventBody({ organization_id: "" }))).toBe("malformed_body")
    expect(signedBody(eventBody({ occurred_at: "soon" }))).toBe("malformed_body")
    expect(signedBody(eventBody({ api_version: "2027-01-01" }), { "Service-Webhook-Version": "2027-01-01" })).toBe(
      "malformed_body"
    )
  })

  it("unsupported_event_type: another type, and webhook.endpoint_test for verifyWebhook", () => {
    expect(signedBody(eventBody({ type: "recording.deleted" }))).toBe("unsupported_event_type")
    expect(signedBody(eventBody({ type: "webhook.endpoint_test", resources: undefined }))).toBe("unsupported_event_type")
  })

  it("verifyWebhookOrEndpointTest accepts webhook.endpoint_test and still the transcript event", () => {
    const test = delivery({ body: eventBody({ type: "webhook.endpoint_test", resources: undefined }) })
    const result = verifyWebhookOrEndpointTest({ ...test, secrets: [SECRET], now: NOW })
    expect(Result.getOrThrow(result).type).toBe("webhook.endpoint_test")
    expect(Result.getOrThrow(verifyWebhookOrEndpointTest({ ...delivery(), secrets: [SECRET], now: NOW })).type).toBe(
      "recording.transcript_ready"
    )
    const other = delivery({ body: eventBody({ type: "recording.deleted" }) })
    const refused = verifyWebhookOrEndpointTest({ ...other, secrets: [SECRET], now: NOW })
    expect(Result.isFailure(refused) && refused.failure.reason).toBe("unsupported_event_type")
  })

  it("header_body_mismatch: Service-Event-Id differs from body id", () => {
    expect(signedBody(eventBody(), { "Service-Event-Id": "evt_02" })).toBe("header_body_mismatch")
    expect(signedBody(eventBody({ id: "evt_other" }))).toBe("header_body_mismatch")
  })

  it("header_body_mismatch: Service-Webhook-Version differs from body api_version", () => {
    expect(signedBody(eventBody(), { "Service-Webhook-Version": "2026-06-01" })).toBe("header_body_mismatch")
    expect(signedBody(eventBody({ api_version: "2025-01-01" }))).toBe("header_body_mismatch")
  })
})

describe("verifyWebhook: failures", () => {
  it("names every reason, and no message contains a secret or the signature", () => {
    const signed = delivery()
    const signature = String(signed.headers["Service-Signature" as keyof typeof signed.headers])
    const cases: ReadonlyArray<readonly [WebhookVerificationFailureReason, VerifyWebhookInput]> = [
      ["missing_header", { ...delivery({ headers: { "Service-Timestamp": undefined } }), secrets: [SECRET], now: NOW }],
      ["stale_timestamp", { ...signed, secrets: [SECRET], now: new Date(NOW.getTime() + 301_000) }],
      ["invalid_signature", { ...signed, secrets: [OLD_SECRET], now: NOW }],
      ["malformed_body", { ...delivery({ body: "{" }), secrets: [SECRET], now: NOW }],
      ["unsupported_event_type", { ...delivery({ body: eventBody({ type: "x" }) }), secrets: [SECRET], now: NOW }],
      ["header_body_mismatch", { ...delivery({ headers: { "Service-Event-Id": "evt_9" } }), secrets: [SECRET], now: NOW }]
    ]
    expect(new Set(cases.map(([reason]) => reason)).size).toBe(6)
    for (const [reason, input] of cases) {
      const result = verifyWebhook(input)
      if (Result.isSuccess(result)) throw new Error(`expected ${reason}`)
      expect(result.failure._tag).toBe("WebhookVerificationFailure")
      expect(result.failure.reason).toBe(reason)
      expect(result.failure.message.length).toBeGreaterThan(0)
      for (const secret of [SECRET, OLD_SECRET, signature, signature.slice(3)]) {
        expect(result.failure.message.includes(secret)).toBe(false)
        expect(String(result.failure).includes(secret)).toBe(false)
      }
    }
  })
})
