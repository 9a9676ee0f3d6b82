import { Schema } from "effect"

/** docs/webhooks.md: one attempt times out after 15 s. */
export const WEBHOOK_ATTEMPT_TIMEOUT_MS = 15_000
/** A `sending` delivery is leased for 60 s; after that it is stale and may be taken again. */
export const WEBHOOK_LEASE_SECONDS = 60
/** Attempt 1 is immediate, then 7 retries. */
export const WEBHOOK_MAX_ATTEMPTS = 8
/** A retry delay is the scheduled delay plus up to 20% of it. */
export const WEBHOOK_RETRY_JITTER = 0.2
/** `Retry-After` on 429 or 503 is honoured up to 1 hour. */
export const WEBHOOK_RETRY_AFTER_CAP_MS = 60 * 60 * 1000

const SECOND = 1000
const MINUTE = 60 * SECOND
const HOUR = 60 * MINUTE

/** The delay after failed attempt n (1-based) is `WEBHOOK_RETRY_DELAYS_MS[n - 1]`, before jitter. */
export const WEBHOOK_RETRY_DELAYS_MS: ReadonlyArray<number> = [
  5 * SECOND,
  5 * MINUTE,
  30 * MINUTE,
  2 * HOUR,
  5 * HOUR,
  10 * HOUR,
  10 * HOUR
]

export type NetworkErrorClass = "connection" | "dns" | "tls" | "timeout" | "other"

/** What one delivery attempt came to. Redirects are not followed, so a 3xx is a `Response`. */
export type DeliveryOutcome =
  | { readonly _tag: "Response"; readonly status: number; readonly retryAfter?: string | undefined }
  | { readonly _tag: "NetworkError"; readonly errorClass: NetworkErrorClass }

export type DeliveryOutcomeClass = "succeeded" | "retryable" | "terminal"

const RETRYABLE_STATUSES: ReadonlySet<number> = new Set([408, 409, 425, 429])

/**
 * Contract 6.3. 2xx is success. Connection, DNS, TLS and time-out errors and 408, 409, 425, 429
 * and 5xx are retryable. 1xx, 3xx, 400, 401, 403, 404 and every other 4xx are terminal, and
 * so is a status outside 100..599. A network error of no known class is retryable too: it is
 * a transport failure, not an answer from the receiver.
 */
export const classifyDeliveryOutcome = (outcome: DeliveryOutcome): DeliveryOutcomeClass => {
  if (outcome._tag === "NetworkError") return "retryable"
  const { status } = outcome
  if (status >= 200 && status <= 299) return "succeeded"
  if (RETRYABLE_STATUSES.has(status) || (status >= 500 && status <= 599)) return "retryable"
  return "terminal"
}

const IMF_FIXDATE =
  /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d{2}) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

const parseImfFixdate = (text: string): number | undefined => {
  const match = IMF_FIXDATE.exec(text)
  if (match === null) return undefined
  const [, day, monthName, year, hour, minute, second] = match
  const month = MONTHS.indexOf(monthName ?? "")
  const instant = Date.UTC(Number(year), month, Number(day), Number(hour), Number(minute), Number(second))
  const check = new Date(instant)
  // Date.UTC rolls 31 Feb over into March: such a date is not a date.
  if (check.getUTCDate() !== Number(day) || check.getUTCMonth() !== month || Number(hour) > 23 || Number(minute) > 59 || Number(second) > 59) {
    return undefined
  }
  return instant
}

/**
 * The wait a `Retry-After` value asks for, in milliseconds from `now` (never negative, not yet
 * capped), or `undefined` when it is neither delta-seconds nor an HTTP-date (IMF-fixdate, e.g.
 * `Wed, 21 Oct 2026 07:28:00 GMT`). The obsolete RFC 850 and asctime forms are ignored.
 */
export const parseRetryAfter = (value: string, now: Date): number | undefined => {
  const text = value.trim()
  if (/^[0-9]+$/.test(text)) return Number(text) * SECOND
  const instant = parseImfFixdate(text)
  return instant === undefined ? undefined : Math.max(0, instant - now.getTime())
}

export type DeliveryStep =
  | { readonly _tag: "Succeeded" }
  | { readonly _tag: "Retry"; readonly at: Date; readonly delayMs: number }
  | { readonly _tag: "Failed"; readonly reason: "terminal_status" | "attempts_exhausted" }

/**
 * What follows attempt `attemptNumber` (1-based) of a delivery.
 *
 * - Success: `Succeeded`. A terminal outcome: `Failed` with `terminal_status`, at once.
 * - A retryable outcome of attempt 8: `Failed` with `attempts_exhausted`.
 * - Otherwise `Retry` after the scheduled delay d plus jitter: `floor(d * (1 + 0.2 * random()))`,
 *   so within [d, 1.2 d].
 * - On 429 or 503, a valid `Retry-After` can postpone the retry, never advance it: the delay is
 *   the larger of the jittered schedule delay and Retry-After, the latter capped at 1 hour.
 *
 * `random` returns a number in [0, 1) (values outside are clamped).
 */
export const nextDeliveryStep = (input: {
  readonly attemptNumber: number
  readonly outcome: DeliveryOutcome
  readonly now: Date
  readonly random: () => number
}): DeliveryStep => {
  const { attemptNumber, outcome, now } = input
  if (!Number.isInteger(attemptNumber) || attemptNumber < 1) {
    throw new RangeError(`attemptNumber must be an integer from 1, got ${attemptNumber}`)
  }
  const outcomeClass = classifyDeliveryOutcome(outcome)
  if (outcomeClass === "succeeded") return { _tag: "Succeeded" }
  if (outcomeClass === "terminal") return { _tag: "Failed", reason: "terminal_status" }
  const scheduled = WEBHOOK_RETRY_DELAYS_MS[attemptNumber - 1]
  if (attemptNumber >= WEBHOOK_MAX_ATTEMPTS || scheduled === undefined) {
    return { _tag: "Failed", reason: "attempts_exhausted" }
  }
  const random = Math.min(1, Math.max(0, input.random()))
  const jittered = Math.floor(scheduled * (1 + WEBHOOK_RETRY_JITTER * (Number.isNaN(random) ? 0 : random)))
  let delayMs = jittered
  if (outcome._tag === "Response" && (outcome.status === 429 || outcome.status === 503) && outcome.retryAfter !== undefined) {
    const requested = parseRetryAfter(outcome.retryAfter, now)
    if (requested !== undefined) delayMs = Math.max(jittered, Math.min(requested, WEBHOOK_RETRY_AFTER_CAP_MS))
  }
  return { _tag: "Retry", at: new Date(now.getTime() + delayMs), delayMs }
}

/** docs/webhooks.md: `pending` -> `sending` (leased) -> `succeeded` | `failed` | `cancelled`. */
export const WebhookDeliveryState = Schema.Literals(["pending", "sending", "succeeded", "failed", "cancelled"])
export type WebhookDeliveryState = typeof WebhookDeliveryState.Type

/**
 * - `lease`: a worker takes a due `pending` delivery.
 * - `reclaim_stale`: a worker takes a `sending` delivery whose lease has expired (at least once).
 * - `succeed`, `retry` (back to `pending` with its next attempt time), `fail`: the attempt's end.
 * - `cancel`: revocation of readiness cancels pending and sending (including stale) deliveries.
 */
export type WebhookDeliveryTransition = "lease" | "reclaim_stale" | "succeed" | "retry" | "fail" | "cancel"

export const WEBHOOK_DELIVERY_TRANSITIONS: {
  readonly [S in WebhookDeliveryState]: Partial<Readonly<Record<WebhookDeliveryTransition, WebhookDeliveryState>>>
} = {
  pending: { lease: "sending", cancel: "cancelled" },
  sending: { reclaim_stale: "sending", succeed: "succeeded", retry: "pending", fail: "failed", cancel: "cancelled" },
  succeeded: {},
  failed: {},
  cancelled: {}
}

/** The state `transition` leads to from `state`, or `undefined` when the table forbids it. */
export const nextDeliveryState = (
  state: WebhookDeliveryState,
  transition: WebhookDeliveryTransition
): WebhookDeliveryState | undefined => WEBHOOK_DELIVERY_TRANSITIONS[state][transition]

export const isTerminalDeliveryState = (state: WebhookDeliveryState): boolean =>
  state === "succeeded" || state === "failed" || state === "cancelled"

/** When a lease taken at `now` expires. */
export const leaseExpiry = (now: Date): Date => new Date(now.getTime() + WEBHOOK_LEASE_SECONDS * 1000)

/**
 * May a worker take this delivery at `now`? A `pending` one once its next attempt is due; a
 * `sending` one once its lease has expired (it is stale). Never a terminal one.
 */
export const isDeliveryDue = (delivery: {
  readonly state: WebhookDeliveryState
  readonly nextAttemptAt: Date
  readonly leaseExpiresAt: Date | null
  readonly now: Date
}): boolean => {
  const now = delivery.now.getTime()
  if (delivery.state === "pending") return delivery.nextAttemptAt.getTime() <= now
  if (delivery.state === "sending") return delivery.leaseExpiresAt === null || delivery.leaseExpiresAt.getTime() <= now
  return false
}
