import { randomBytes } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { Redacted } from "effect"
import fc from "fast-check"
import {
  buildDeliveryHeaders,
  generateSigningSecret,
  isWellFormedSigningSecret,
  signDelivery,
  signingTimestamp,
  signWebhookPayload
} from "../../src/webhooks/index.js"
import { webhookVectors } from "./vectors.js"
import { prop } from "../support/prop.js"

describe("webhook signing (contract 6.1, docs/webhooks.md)", () => {
  it("reproduces every signature of webhook-vectors.json from the text body", () => {
    expect(webhookVectors.length).toBeGreaterThanOrEqual(2)
    for (const vector of webhookVectors) {
      expect(signWebhookPayload({ secret: vector.secret, timestamp: vector.timestamp, rawBody: vector.raw_body }), vector.name).toBe(
        vector.signature
      )
    }
  })

  it("reproduces every vector from the raw body bytes and from a Redacted secret", () => {
    for (const vector of webhookVectors) {
      const rawBody = new Uint8Array(Buffer.from(vector.raw_body, "utf8"))
      expect(signWebhookPayload({ secret: Redacted.make(vector.secret), timestamp: vector.timestamp, rawBody })).toBe(
        vector.signature
      )
    }
  })

  it("signs the exact bytes: a trailing newline or a re-encoded body changes the signature", () => {
    const vector = webhookVectors[1]
    if (vector === undefined) throw new Error("vector missing")
    const trimmed = vector.raw_body.replace(/\n$/, "")
    expect(signWebhookPayload({ secret: vector.secret, timestamp: vector.timestamp, rawBody: trimmed })).not.toBe(vector.signature)
    const latin1 = new Uint8Array(Buffer.from(vector.raw_body, "latin1"))
    expect(signWebhookPayload({ secret: vector.secret, timestamp: vector.timestamp, rawBody: latin1 })).not.toBe(vector.signature)
  })

  it("signs raw bytes that are not valid UTF-8 without altering them", () => {
    const a = new Uint8Array([0xff, 0xfe, 0x00])
    const b = new Uint8Array([0xff, 0xfd, 0x00])
    const sign = (rawBody: Uint8Array) => signWebhookPayload({ secret: "whsec_x", timestamp: "1", rawBody })
    expect(sign(a)).not.toBe(sign(b))
    expect(sign(a)).toMatch(/^v1=[0-9a-f]{64}$/)
  })

  it("keys the HMAC with the whole secret string, prefix included", () => {
    const vector = webhookVectors[0]
    if (vector === undefined) throw new Error("vector missing")
    const withoutPrefix = vector.secret.slice("whsec_".length)
    expect(signWebhookPayload({ secret: withoutPrefix, timestamp: vector.timestamp, rawBody: vector.raw_body })).not.toBe(
      vector.signature
    )
  })

  prop(
    "the signature is v1= and 64 lowercase hex characters",
    [fc.string({ minLength: 1 }), fc.string(), fc.string()],
    ([secret, timestamp, rawBody]) => {
      expect(signWebhookPayload({ secret, timestamp, rawBody })).toMatch(/^v1=[0-9a-f]{64}$/)
    }
  )

  it("generateSigningSecret: whsec_ + 43 base64url characters of 32 random bytes", () => {
    const requested: Array<number> = []
    const secret = generateSigningSecret((size) => {
      requested.push(size)
      return new Uint8Array(size).fill(0xfb)
    })
    expect(requested).toEqual([32])
    expect(secret).toBe(`whsec_${Buffer.alloc(32, 0xfb).toString("base64url")}`)
    expect(secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/)
    expect(secret.includes("=")).toBe(false)
    expect(isWellFormedSigningSecret(secret)).toBe(true)
    expect(isWellFormedSigningSecret(generateSigningSecret(randomBytes))).toBe(true)
    expect(() => generateSigningSecret(() => new Uint8Array(16))).toThrow(RangeError)
  })

  prop("every generated secret is well formed", [fc.uint8Array({ minLength: 32, maxLength: 32 })], ([bytes]) => {
    const secret = generateSigningSecret(() => bytes)
    expect(secret.length).toBe(49)
    expect(isWellFormedSigningSecret(secret)).toBe(true)
    expect(Buffer.from(secret.slice(6), "base64url").equals(Buffer.from(bytes))).toBe(true)
  })

  it("isWellFormedSigningSecret refuses other forms", () => {
    const good = generateSigningSecret(() => new Uint8Array(32))
    expect(isWellFormedSigningSecret(good)).toBe(true)
    expect(isWellFormedSigningSecret(good.slice(6))).toBe(false)
    expect(isWellFormedSigningSecret(`whsk_${good.slice(6)}`)).toBe(false)
    expect(isWellFormedSigningSecret(good.slice(0, -1))).toBe(false)
    expect(isWellFormedSigningSecret(`${good}A`)).toBe(false)
    expect(isWellFormedSigningSecret(`${good.slice(0, -1)}=`)).toBe(false)
    expect(isWellFormedSigningSecret(`${good.slice(0, -2)}+/`)).toBe(false)
    // The last character of 32 bytes carries two unused bits: "B" (000001) is not canonical.
    expect(isWellFormedSigningSecret(`${good.slice(0, -1)}B`)).toBe(false)
    expect(isWellFormedSigningSecret("")).toBe(false)
  })

  it("buildDeliveryHeaders writes the five Service- headers, version 2026-05-01, and JSON content type", () => {
    expect(buildDeliveryHeaders({ eventId: "evt_1", deliveryId: "dlv_1", timestamp: "1777636800", signature: "v1=ab" })).toEqual({
      "Content-Type": "application/json",
      "Service-Event-Id": "evt_1",
      "Service-Delivery-Id": "dlv_1",
      "Service-Timestamp": "1777636800",
      "Service-Signature": "v1=ab",
      "Service-Webhook-Version": "2026-05-01"
    })
  })

  it("signingTimestamp is decimal Unix epoch seconds, rounded down", () => {
    expect(signingTimestamp(new Date(1_777_636_800_999))).toBe("1777636800")
    expect(signingTimestamp(new Date(0))).toBe("0")
  })

  it("signDelivery signs the body at the given time", () => {
    const vector = webhookVectors[0]
    if (vector === undefined) throw new Error("vector missing")
    const headers = signDelivery({
      secret: vector.secret,
      eventId: "evt_01",
      deliveryId: "dlv_1",
      rawBody: vector.raw_body,
      now: new Date(Number(vector.timestamp) * 1000 + 400)
    })
    expect(headers["Service-Timestamp"]).toBe(vector.timestamp)
    expect(headers["Service-Signature"]).toBe(vector.signature)
  })
})
