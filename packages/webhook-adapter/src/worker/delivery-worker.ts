import { randomBytes } from "node:crypto"
import { hostname } from "node:os"
import {
  type DeliveryAttemptErrorClass,
  type DeliveryOutcome,
  type DeliveryStep,
  type LeasedDelivery,
  nextDeliveryStep,
  parseRetryAfter,
  type RecordAttemptResult,
  type StoreUnavailable,
  WEBHOOK_ATTEMPT_TIMEOUT_MS,
  WEBHOOK_LEASE_SECONDS,
  WEBHOOK_RETRY_AFTER_CAP_MS,
  WEBHOOK_RETRY_JITTER,
  type WebhookDeliveryId,
  WebhookDeliveryQueue,
  type WebhookEnvironment,
  type WebhookRuntimeStatus
} from "@clinical-api/domain"
import { Clock, Data, Duration, Effect, Ref, Result } from "effect"
import { deliverWebhook, signStoredDelivery } from "../sender/deliver-webhook.js"
import { checkEndpointBeforeLookup, guardedLookup } from "./endpoint-guard.js"

/** The runtime gate is closed: `WEBHOOK_RUNTIME` is not `enabled`, so nothing may be sent. */
export class WebhookRuntimeDisabled extends Data.TaggedError("WebhookRuntimeDisabled")<{
  readonly runtime: WebhookRuntimeStatus
}> {
  override get message() {
    return (
      `webhook runtime status is ${this.runtime}: outbound delivery is not generally available and nothing is sent. ` +
      "Set WEBHOOK_RUNTIME=enabled (sandbox and testing) to run the delivery worker."
    )
  }
}

export interface DeliveryWorkerOptions {
  /** The gate: anything but `enabled` refuses to start and sends nothing. */
  readonly runtime: WebhookRuntimeStatus
  /** The endpoint address rules applied at send time, after DNS resolution. */
  readonly environment: WebhookEnvironment
  /** Unique per worker; a random one (host, pid, random) when omitted. */
  readonly workerId?: string
  /** Deliveries in flight at once (default 4). */
  readonly concurrency?: number
  /** 60 s by default (docs/webhooks.md); shorter in tests. */
  readonly leaseMs?: number
  /**
   * Replaces the retry delays of docs/webhooks.md (5 s, 5 min, ...) for tests: the delay after
   * scheduled attempt n is entry n - 1 (the last entry repeats), with the same 20% jitter and
   * `Retry-After` rule. The number of attempts stays that of the delivery.
   */
  readonly retryDelaysMs?: ReadonlyArray<number> | undefined
  /** 15 s by default. */
  readonly attemptTimeoutMs?: number
  /** How long an idle worker waits before looking for due deliveries again (default 1000 ms). */
  readonly pollIntervalMs?: number
  /** Jitter source, in [0, 1). */
  readonly random?: () => number
  /** Runs after each attempt is recorded (logs, the CLI's output, tests); its failures are ignored. */
  readonly onAttempt?: (report: AttemptReport) => Effect.Effect<void>
}

/** What one attempt came to; holds no secret, signature or body. */
export interface AttemptReport {
  readonly workerId: string
  readonly deliveryId: WebhookDeliveryId
  readonly eventId: string
  readonly attemptNumber: number
  readonly reclaimedStale: boolean
  readonly status: number | null
  readonly errorClass: DeliveryAttemptErrorClass | null
  readonly durationMs: number
  readonly step: DeliveryStep
  readonly recorded: RecordAttemptResult
}

export interface PassReport {
  readonly attempts: number
  readonly succeeded: number
  readonly retried: number
  readonly failed: number
  /** Results not written because the delivery was cancelled or taken over meanwhile. */
  readonly leaseLost: number
}

export const newWorkerId = (): string => `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`

/**
 * What follows an attempt: the domain's `nextDeliveryStep` (classification, schedule with
 * jitter, `Retry-After` up to 1 h), with the test schedule when one is given, and `failed`
 * once the delivery's own attempt limit is used (1 for an endpoint test).
 */
export const planNextStep = (input: {
  readonly delivery: Pick<LeasedDelivery, "scheduleAttemptNumber" | "maxAttempts">
  readonly outcome: DeliveryOutcome
  readonly now: Date
  readonly random: () => number
  readonly retryDelaysMs?: ReadonlyArray<number> | undefined
}): DeliveryStep => {
  const { delivery, now, outcome } = input
  const step = nextDeliveryStep({ attemptNumber: delivery.scheduleAttemptNumber, outcome, now, random: input.random })
  if (step._tag !== "Retry") return step
  if (delivery.scheduleAttemptNumber >= delivery.maxAttempts) return { _tag: "Failed", reason: "attempts_exhausted" }
  const schedule = input.retryDelaysMs
  if (schedule === undefined || schedule.length === 0) return step
  const scheduled = schedule[Math.min(delivery.scheduleAttemptNumber, schedule.length) - 1] ?? 0
  const random = Math.min(1, Math.max(0, input.random()))
  let delayMs = Math.floor(scheduled * (1 + WEBHOOK_RETRY_JITTER * random))
  if (outcome._tag === "Response" && (outcome.status === 429 || outcome.status === 503) && outcome.retryAfter !== undefined) {
    const requested = parseRetryAfter(outcome.retryAfter, now)
    if (requested !== undefined) delayMs = Math.max(delayMs, Math.min(requested, WEBHOOK_RETRY_AFTER_CAP_MS))
  }
  return { _tag: "Retry", at: new Date(now.getTime() + delayMs), delayMs }
}

const currentDate = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

interface ResolvedOptions {
  readonly workerId: string
  readonly environment: WebhookEnvironment
  readonly concurrency: number
  readonly leaseMs: number
  readonly retryDelaysMs: ReadonlyArray<number> | undefined
  readonly attemptTimeoutMs: number
  readonly pollIntervalMs: number
  readonly random: () => number
  readonly onAttempt: (report: AttemptReport) => Effect.Effect<void>
}

const resolve = (options: DeliveryWorkerOptions): Effect.Effect<ResolvedOptions, WebhookRuntimeDisabled> =>
  options.runtime !== "enabled"
    ? Effect.fail(new WebhookRuntimeDisabled({ runtime: options.runtime }))
    : Effect.succeed({
        workerId: options.workerId ?? newWorkerId(),
        environment: options.environment,
        concurrency: Math.max(1, options.concurrency ?? 4),
        leaseMs: options.leaseMs ?? WEBHOOK_LEASE_SECONDS * 1000,
        retryDelaysMs: options.retryDelaysMs,
        attemptTimeoutMs: options.attemptTimeoutMs ?? WEBHOOK_ATTEMPT_TIMEOUT_MS,
        pollIntervalMs: options.pollIntervalMs ?? 1000,
        random: options.random ?? Math.random,
        // An observer must not stop the worker.
        onAttempt: (report) =>
          options.onAttempt === undefined ? Effect.void : Effect.catchCause(Effect.suspend(() => options.onAttempt?.(report) ?? Effect.void), () => Effect.void)
      })

/**
 * One attempt of a leased delivery: sign the stored bytes with a fresh timestamp (same body,
 * same `Service-Delivery-Id` every attempt), POST through the address guard, then record the
 * attempt and the next step. The queue writes the step only if the lease is still ours.
 */
const attemptDelivery = (delivery: LeasedDelivery, options: ResolvedOptions) =>
  Effect.gen(function* () {
    const queue = yield* WebhookDeliveryQueue
    const startedAt = yield* currentDate
    const started = performance.now()
    let addressRefused = checkEndpointBeforeLookup(delivery.endpointUrl, options.environment).length > 0
    let outcome: DeliveryOutcome
    if (addressRefused) {
      outcome = { _tag: "NetworkError", errorClass: "other" }
    } else {
      const signed = signStoredDelivery({
        rawBody: delivery.rawBody,
        eventId: delivery.eventId,
        deliveryId: delivery.deliveryId,
        secret: delivery.signingSecret,
        now: startedAt
      })
      outcome = yield* deliverWebhook({
        url: delivery.endpointUrl,
        rawBody: signed.rawBody,
        headers: signed.headers,
        timeoutMs: options.attemptTimeoutMs,
        lookup: guardedLookup(delivery.endpointUrl, options.environment, () => {
          addressRefused = true
        })
      })
    }
    const durationMs = performance.now() - started
    const finishedAt = yield* currentDate
    const errorClass: DeliveryAttemptErrorClass | null = addressRefused
      ? "address_refused"
      : outcome._tag === "NetworkError"
        ? outcome.errorClass
        : null
    const step = planNextStep({
      delivery,
      outcome,
      now: finishedAt,
      random: options.random,
      retryDelaysMs: options.retryDelaysMs
    })
    const recorded = yield* queue.recordAttempt(
      delivery,
      { outcome, ...(errorClass === null ? {} : { errorClass }), finishedAt, durationMs },
      step
    )
    const report: AttemptReport = {
      workerId: options.workerId,
      deliveryId: delivery.deliveryId,
      eventId: delivery.eventId,
      attemptNumber: delivery.attemptNumber,
      reclaimedStale: delivery.reclaimedStale,
      status: outcome._tag === "Response" ? outcome.status : null,
      errorClass,
      durationMs: Math.round(durationMs),
      step,
      recorded
    }
    yield* options.onAttempt(report)
    return report
  }).pipe(Effect.withSpan("DeliveryWorker.attempt", { attributes: { deliveryId: delivery.deliveryId } }))

const emptyReport: PassReport = { attempts: 0, succeeded: 0, retried: 0, failed: 0, leaseLost: 0 }

const tally = (report: PassReport, attempt: AttemptReport): PassReport => ({
  attempts: report.attempts + 1,
  succeeded: report.succeeded + (attempt.recorded._tag === "Written" && attempt.step._tag === "Succeeded" ? 1 : 0),
  retried: report.retried + (attempt.recorded._tag === "Written" && attempt.step._tag === "Retry" ? 1 : 0),
  failed: report.failed + (attempt.recorded._tag === "Written" && attempt.step._tag === "Failed" ? 1 : 0),
  leaseLost: report.leaseLost + (attempt.recorded._tag === "LeaseLost" ? 1 : 0)
})

/** Leases one due delivery and attempts it; `undefined` when nothing is due. */
const leaseAndAttempt = (options: ResolvedOptions, deliveryId?: WebhookDeliveryId) =>
  Effect.gen(function* () {
    const queue = yield* WebhookDeliveryQueue
    const now = yield* currentDate
    const leased = yield* queue.lease({
      workerId: options.workerId,
      now,
      limit: 1,
      leaseMs: options.leaseMs,
      ...(deliveryId === undefined ? {} : { deliveryId })
    })
    const delivery = leased[0]
    return delivery === undefined ? undefined : yield* attemptDelivery(delivery, options)
  })

/**
 * Attempts what is due now and returns when nothing is left due (`worker --once`): deliveries
 * rescheduled for later are left for a later pass. `concurrency` deliveries are in flight at once.
 */
export const runDeliveryPass = (
  options: DeliveryWorkerOptions
): Effect.Effect<PassReport, WebhookRuntimeDisabled | StoreUnavailable, WebhookDeliveryQueue> =>
  Effect.gen(function* () {
    const resolved = yield* resolve(options)
    const report = yield* Ref.make(emptyReport)
    const drain: Effect.Effect<void, StoreUnavailable, WebhookDeliveryQueue> = Effect.flatMap(
      leaseAndAttempt(resolved),
      (attempt) => (attempt === undefined ? Effect.void : Effect.andThen(Ref.update(report, (r) => tally(r, attempt)), drain))
    )
    yield* Effect.all(Array.from({ length: resolved.concurrency }, () => drain), { concurrency: "unbounded", discard: true })
    return yield* Ref.get(report)
  })

/**
 * Attempts one given delivery now, whatever else is due (operator `send-test`); `undefined`
 * when it is not due (already leased, cancelled or finished).
 */
export const attemptDeliveryNow = (
  deliveryId: WebhookDeliveryId,
  options: DeliveryWorkerOptions
): Effect.Effect<AttemptReport | undefined, WebhookRuntimeDisabled | StoreUnavailable, WebhookDeliveryQueue> =>
  Effect.flatMap(resolve(options), (resolved) => leaseAndAttempt(resolved, deliveryId))

/**
 * The delivery worker: `concurrency` loops that each lease one due delivery at a time (pending
 * and due, or stale), attempt it and record the result, and wait `pollIntervalMs` when nothing
 * is due. A store failure is logged and waited out, never fatal. Runs until interrupted
 * (SIGINT/SIGTERM in the CLI); an attempt in flight when interrupted is taken again after its lease.
 */
export const runDeliveryWorker = (
  options: DeliveryWorkerOptions
): Effect.Effect<never, WebhookRuntimeDisabled, WebhookDeliveryQueue> =>
  Effect.gen(function* () {
    const resolved = yield* resolve(options)
    const idle = Effect.sleep(Duration.millis(resolved.pollIntervalMs))
    const loop = Effect.forever(
      Effect.flatMap(Effect.result(leaseAndAttempt(resolved)), (result) => {
        if (Result.isSuccess(result)) return result.success === undefined ? idle : Effect.void
        return Effect.andThen(
          Effect.logWarning("webhook delivery worker: the store failed; retrying after the poll interval").pipe(
            Effect.annotateLogs({ operation: result.failure.operation, workerId: resolved.workerId })
          ),
          idle
        )
      })
    )
    return yield* Effect.all(Array.from({ length: resolved.concurrency }, () => loop), { concurrency: "unbounded" }).pipe(
      Effect.andThen(Effect.never)
    )
  })
