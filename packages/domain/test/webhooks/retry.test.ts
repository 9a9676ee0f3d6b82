import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import {
  classifyDeliveryOutcome,
  type DeliveryOutcome,
  isDeliveryDue,
  isTerminalDeliveryState,
  leaseExpiry,
  nextDeliveryState,
  nextDeliveryStep,
  parseRetryAfter,
  WEBHOOK_ATTEMPT_TIMEOUT_MS,
  WEBHOOK_DELIVERY_TRANSITIONS,
  WEBHOOK_LEASE_SECONDS,
  WEBHOOK_MAX_ATTEMPTS,
  WEBHOOK_RETRY_DELAYS_MS,
  WebhookDeliveryState,
  type WebhookDeliveryTransition
} from "../../src/webhooks/index.js"
import { prop } from "../support/prop.js"

const response = (status: number, retryAfter?: string): DeliveryOutcome =>
  retryAfter === undefined ? { _tag: "Response", status } : { _tag: "Response", status, retryAfter }
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)
const NOW = new Date("2026-05-01T12:00:00.000Z")
const SECOND = 1000
const MINUTE = 60 * SECOND
const HOUR = 60 * MINUTE

describe("classifyDeliveryOutcome (contract 6.3)", () => {
  it("every 2xx is success", () => {
    for (const status of range(200, 299)) expect(classifyDeliveryOutcome(response(status)), String(status)).toBe("succeeded")
  })

  it("408, 409, 425, 429 and every 5xx are retryable", () => {
    for (const status of [408, 409, 425, 429, ...range(500, 599)]) {
      expect(classifyDeliveryOutcome(response(status)), String(status)).toBe("retryable")
    }
  })

  it("1xx, 3xx, 400, 401, 403, 404 and the other 4xx are terminal (redirects are not followed)", () => {
    const retryable4xx = new Set([408, 409, 425, 429])
    for (const status of [...range(100, 199), ...range(300, 399), ...range(400, 499).filter((s) => !retryable4xx.has(s))]) {
      expect(classifyDeliveryOutcome(response(status)), String(status)).toBe("terminal")
    }
  })

  it("a status outside 100..599 is terminal", () => {
    for (const status of [0, 99, 600, 999, -1]) expect(classifyDeliveryOutcome(response(status))).toBe("terminal")
  })

  it("connection, DNS, TLS, time-out and other network errors are retryable", () => {
    for (const errorClass of ["connection", "dns", "tls", "timeout", "other"] as const) {
      expect(classifyDeliveryOutcome({ _tag: "NetworkError", errorClass })).toBe("retryable")
    }
  })
})

describe("retry schedule (docs/webhooks.md)", () => {
  it("constants: 15 s attempt time-out, 60 s lease, 8 attempts, delays 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h", () => {
    expect(WEBHOOK_ATTEMPT_TIMEOUT_MS).toBe(15_000)
    expect(WEBHOOK_LEASE_SECONDS).toBe(60)
    expect(WEBHOOK_MAX_ATTEMPTS).toBe(8)
    expect(WEBHOOK_RETRY_DELAYS_MS).toEqual([5 * SECOND, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR])
  })

  it("a delivery failing retryably every time makes 8 attempts, then attempts_exhausted", () => {
    const attempts: Array<number> = []
    let attemptNumber = 1
    let now = NOW
    for (;;) {
      attempts.push(attemptNumber)
      const step = nextDeliveryStep({ attemptNumber, outcome: response(500), now, random: () => 0 })
      if (step._tag !== "Retry") {
        expect(step).toEqual({ _tag: "Failed", reason: "attempts_exhausted" })
        break
      }
      expect(step.delayMs).toBe(WEBHOOK_RETRY_DELAYS_MS[attemptNumber - 1])
      now = step.at
      attemptNumber += 1
    }
    expect(attempts).toEqual([1, 2, 3, 4, 5, 6, 7, 8])
  })

  prop(
    "each delay lies within [d, 1.2 d] and at = now + delay",
    [fc.integer({ min: 1, max: 7 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true })],
    ([attemptNumber, random]) => {
      const step = nextDeliveryStep({ attemptNumber, outcome: { _tag: "NetworkError", errorClass: "timeout" }, now: NOW, random: () => random })
      const d = WEBHOOK_RETRY_DELAYS_MS[attemptNumber - 1] ?? 0
      if (step._tag !== "Retry") throw new Error("expected a retry")
      expect(step.delayMs).toBeGreaterThanOrEqual(d)
      expect(step.delayMs).toBeLessThanOrEqual(1.2 * d)
      expect(step.at.getTime()).toBe(NOW.getTime() + step.delayMs)
    }
  )

  it("jitter is added, up to 20%", () => {
    const step = (random: number) => nextDeliveryStep({ attemptNumber: 2, outcome: response(503), now: NOW, random: () => random })
    expect(step(0)).toMatchObject({ _tag: "Retry", delayMs: 5 * MINUTE })
    expect(step(0.5)).toMatchObject({ _tag: "Retry", delayMs: 5.5 * MINUTE })
    expect(step(0.999999)).toMatchObject({ _tag: "Retry", delayMs: Math.floor(5 * MINUTE * (1 + 0.2 * 0.999999)) })
    // An out-of-range random source is clamped, never outside [d, 1.2 d].
    expect(step(7)).toMatchObject({ _tag: "Retry", delayMs: 6 * MINUTE })
    expect(step(-3)).toMatchObject({ _tag: "Retry", delayMs: 5 * MINUTE })
    expect(step(Number.NaN)).toMatchObject({ _tag: "Retry", delayMs: 5 * MINUTE })
  })

  it("success on any attempt is Succeeded; a terminal status fails at once", () => {
    for (const attemptNumber of range(1, 8)) {
      expect(nextDeliveryStep({ attemptNumber, outcome: response(204), now: NOW, random: Math.random })).toEqual({ _tag: "Succeeded" })
      expect(nextDeliveryStep({ attemptNumber, outcome: response(404), now: NOW, random: Math.random })).toEqual({
        _tag: "Failed",
        reason: "terminal_status"
      })
      expect(nextDeliveryStep({ attemptNumber, outcome: response(301), now: NOW, random: Math.random })).toEqual({
        _tag: "Failed",
        reason: "terminal_status"
      })
    }
  })

  it("refuses an attempt number below 1 or not an integer", () => {
    for (const attemptNumber of [0, -1, 1.5, Number.NaN]) {
      expect(() => nextDeliveryStep({ attemptNumber, outcome: response(500), now: NOW, random: () => 0 })).toThrow(RangeError)
    }
  })
})

describe("Retry-After (honoured on 429 and 503, up to 1 hour)", () => {
  it("parses delta-seconds and IMF-fixdate relative to now", () => {
    expect(parseRetryAfter("120", NOW)).toBe(120 * SECOND)
    expect(parseRetryAfter(" 0 ", NOW)).toBe(0)
    expect(parseRetryAfter("Fri, 01 May 2026 12:10:00 GMT", NOW)).toBe(10 * MINUTE)
    expect(parseRetryAfter("Fri, 01 May 2026 11:00:00 GMT", NOW)).toBe(0)
  })

  it("ignores other text", () => {
    for (const value of ["", "-5", "1.5", "soon", "120s", "Fri, 31 Feb 2026 12:00:00 GMT", "2026-05-01T12:10:00Z", "Friday, 01-May-26 12:10:00 GMT", "Fri May  1 12:10:00 2026", "Fri, 01 May 2026 25:00:00 GMT"]) {
      expect(parseRetryAfter(value, NOW), value).toBeUndefined()
    }
  })

  const retryAfterStep = (status: number, retryAfter: string, attemptNumber = 1) =>
    nextDeliveryStep({ attemptNumber, outcome: response(status, retryAfter), now: NOW, random: () => 0 })

  it("postpones the retry on 429 and 503, in both forms", () => {
    expect(retryAfterStep(429, "600")).toMatchObject({ _tag: "Retry", delayMs: 10 * MINUTE })
    expect(retryAfterStep(503, "600")).toMatchObject({ _tag: "Retry", delayMs: 10 * MINUTE })
    expect(retryAfterStep(429, "Fri, 01 May 2026 12:20:00 GMT")).toEqual({
      _tag: "Retry",
      delayMs: 20 * MINUTE,
      at: new Date("2026-05-01T12:20:00.000Z")
    })
  })

  it("caps Retry-After at 1 hour", () => {
    expect(retryAfterStep(429, "86400")).toMatchObject({ _tag: "Retry", delayMs: HOUR })
    expect(retryAfterStep(503, "Sat, 02 May 2026 12:00:00 GMT")).toMatchObject({ _tag: "Retry", delayMs: HOUR })
    expect(retryAfterStep(503, "99999999999999999999")).toMatchObject({ _tag: "Retry", delayMs: HOUR })
  })

  it("never advances a retry: the larger of schedule and Retry-After wins", () => {
    expect(retryAfterStep(429, "1", 1)).toMatchObject({ _tag: "Retry", delayMs: 5 * SECOND })
    expect(retryAfterStep(503, "60", 3)).toMatchObject({ _tag: "Retry", delayMs: 30 * MINUTE })
    expect(retryAfterStep(503, "3600", 5)).toMatchObject({ _tag: "Retry", delayMs: 5 * HOUR })
  })

  it("is ignored on other statuses and when unparsable", () => {
    expect(retryAfterStep(500, "600")).toMatchObject({ _tag: "Retry", delayMs: 5 * SECOND })
    expect(retryAfterStep(408, "600")).toMatchObject({ _tag: "Retry", delayMs: 5 * SECOND })
    expect(retryAfterStep(429, "later")).toMatchObject({ _tag: "Retry", delayMs: 5 * SECOND })
  })

  it("does not extend past the last attempt", () => {
    expect(retryAfterStep(429, "60", 8)).toEqual({ _tag: "Failed", reason: "attempts_exhausted" })
  })
})

describe("delivery states (docs/webhooks.md: pending -> sending -> succeeded | failed | cancelled)", () => {
  const transitions: ReadonlyArray<WebhookDeliveryTransition> = ["lease", "reclaim_stale", "succeed", "retry", "fail", "cancel"]

  it("allows exactly the documented transitions", () => {
    const allowed: Array<string> = []
    for (const state of WebhookDeliveryState.literals) {
      for (const transition of transitions) {
        const next = nextDeliveryState(state, transition)
        if (next !== undefined) allowed.push(`${state} -${transition}-> ${next}`)
      }
    }
    expect(allowed.sort()).toEqual(
      [
        "pending -lease-> sending",
        "pending -cancel-> cancelled",
        "sending -reclaim_stale-> sending",
        "sending -succeed-> succeeded",
        "sending -retry-> pending",
        "sending -fail-> failed",
        "sending -cancel-> cancelled"
      ].sort()
    )
  })

  it("succeeded, failed and cancelled are terminal: nothing leaves them", () => {
    for (const state of WebhookDeliveryState.literals) {
      const terminal = ["succeeded", "failed", "cancelled"].includes(state)
      expect(isTerminalDeliveryState(state)).toBe(terminal)
      expect(Object.keys(WEBHOOK_DELIVERY_TRANSITIONS[state]).length === 0).toBe(terminal)
    }
  })

  it("a lease lasts 60 s; a sending delivery is due again once its lease expired (stale)", () => {
    const leasedUntil = leaseExpiry(NOW)
    expect(leasedUntil.getTime() - NOW.getTime()).toBe(60_000)
    const sending = { state: "sending" as const, nextAttemptAt: NOW, leaseExpiresAt: leasedUntil }
    expect(isDeliveryDue({ ...sending, now: new Date(NOW.getTime() + 59_999) })).toBe(false)
    expect(isDeliveryDue({ ...sending, now: leasedUntil })).toBe(true)
  })

  it("a pending delivery is due at its next attempt time; terminal ones never", () => {
    const later = new Date(NOW.getTime() + 5000)
    expect(isDeliveryDue({ state: "pending", nextAttemptAt: later, leaseExpiresAt: null, now: NOW })).toBe(false)
    expect(isDeliveryDue({ state: "pending", nextAttemptAt: later, leaseExpiresAt: null, now: later })).toBe(true)
    for (const state of ["succeeded", "failed", "cancelled"] as const) {
      expect(isDeliveryDue({ state, nextAttemptAt: NOW, leaseExpiresAt: null, now: later })).toBe(false)
    }
  })
})
