import { randomBytes } from "node:crypto"
import { hostname } from "node:os"
import {
  type DeliveryAttemptErrorClass,
  type DeliveryAttemptResult,
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
import { Clock, Data, Duration, Effect, Latch, Queue, type Scope } from "effect"
import { type DeliveryAgents, deliverWebhook, makeDeliveryAgents, signStoredDelivery } from "../sender/deliver-webhook.js"
import { DEFAULT_WORKER_CONCURRENCY } from "./config.js"
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
  /** Deliveries in flight at once, and so the most one claim takes (default 32). */
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
        concurrency: Math.max(1, options.concurrency ?? DEFAULT_WORKER_CONCURRENCY),
        leaseMs: options.leaseMs ?? WEBHOOK_LEASE_SECONDS * 1000,
        retryDelaysMs: options.retryDelaysMs,
        attemptTimeoutMs: options.attemptTimeoutMs ?? WEBHOOK_ATTEMPT_TIMEOUT_MS,
        pollIntervalMs: options.pollIntervalMs ?? 1000,
        random: options.random ?? Math.random,
        // An observer must not stop the worker.
        onAttempt: (report) =>
          options.onAttempt === undefined ? Effect.void : Effect.catchCause(Effect.suspend(() => options.onAttempt?.(report) ?? Effect.void), () => Effect.void)
      })

/** One attempt's end, before it is recorded. */
interface FinishedAttempt {
  readonly delivery: LeasedDelivery
  readonly result: DeliveryAttemptResult
  readonly step: DeliveryStep
}

/**
 * One attempt of a leased delivery: sign the stored bytes with a fresh timestamp (same body,
 * same `Service-Delivery-Id` every attempt), POST through the address guard, and plan the next
 * step. Never fails: every network error is an outcome.
 */
const sendLeased = (delivery: LeasedDelivery, options: ResolvedOptions, agents: DeliveryAgents | undefined) =>
  Effect.gen(function* () {
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
        }),
        ...(agents === undefined ? {} : { agents })
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
    const finished: FinishedAttempt = {
      delivery,
      result: { outcome, ...(errorClass === null ? {} : { errorClass }), finishedAt, durationMs },
      step
    }
    return finished
  }).pipe(Effect.withSpan("DeliveryWorker.attempt", { attributes: { deliveryId: delivery.deliveryId } }))

const attemptReport = (workerId: string, finished: FinishedAttempt, recorded: RecordAttemptResult): AttemptReport => {
  const { delivery, result, step } = finished
  return {
    workerId,
    deliveryId: delivery.deliveryId,
    eventId: delivery.eventId,
    attemptNumber: delivery.attemptNumber,
    reclaimedStale: delivery.reclaimedStale,
    status: result.outcome._tag === "Response" ? result.outcome.status : null,
    errorClass: result.errorClass ?? (result.outcome._tag === "NetworkError" ? result.outcome.errorClass : null),
    durationMs: Math.round(result.durationMs),
    step,
    recorded
  }
}

const emptyReport: PassReport = { attempts: 0, succeeded: 0, retried: 0, failed: 0, leaseLost: 0 }

const tally = (report: PassReport, attempt: AttemptReport): PassReport => ({
  attempts: report.attempts + 1,
  succeeded: report.succeeded + (attempt.recorded._tag === "Written" && attempt.step._tag === "Succeeded" ? 1 : 0),
  retried: report.retried + (attempt.recorded._tag === "Written" && attempt.step._tag === "Retry" ? 1 : 0),
  failed: report.failed + (attempt.recorded._tag === "Written" && attempt.step._tag === "Failed" ? 1 : 0),
  leaseLost: report.leaseLost + (attempt.recorded._tag === "LeaseLost" ? 1 : 0)
})

const keepAliveAgents = (maxSockets: number) =>
  Effect.acquireRelease(
    Effect.sync(() => makeDeliveryAgents(maxSockets)),
    (agents) => Effect.sync(() => agents.destroy())
  )

const logStoreFailure = (failure: StoreUnavailable, workerId: string) =>
  Effect.logWarning("webhook delivery worker: the store failed; retrying after the poll interval").pipe(
    Effect.annotateLogs({ operation: failure.operation, workerId })
  )

/** How long a small record batch waits for other attempts in flight to finish. */
const RECORD_GATHER = Duration.millis(2)

/**
 * The batched pipeline of one worker. It claims as many due deliveries as it has free slots
 * (`concurrency` in flight at most) in one statement, once a quarter of the slots are free or
 * nothing is in flight (attempts that finish one at a time would otherwise cost a claim each,
 * which is what held several workers on one machine back), sends each as soon as it is claimed over
 * keep-alive connections, and records finished attempts in one statement per batch: what
 * finished while the previous batch was being written. A slot is freed once its attempt is
 * recorded, so nothing leased waits unsent and nothing sent waits unbounded for its record.
 * `untilIdle` (a pass) returns once nothing is due and nothing is in flight, and fails on a
 * store failure; otherwise the pipeline polls for ever and waits out store failures. An
 * attempt that is never recorded (interruption, crash) leaves its delivery leased until the
 * lease expires, and it is taken again then.
 */
const runPipeline = (options: ResolvedOptions, untilIdle: boolean, onRecorded: (report: AttemptReport) => void) =>
  Effect.scoped(
    Effect.gen(function* () {
      const queue = yield* WebhookDeliveryQueue
      const agents = yield* keepAliveAgents(options.concurrency)
      const finishedAttempts = yield* Queue.unbounded<FinishedAttempt>()
      const slotFreed = yield* Latch.make()
      const idle = Effect.sleep(Duration.millis(options.pollIntervalMs))
      let inFlight = 0
      const claimAtLeast = Math.max(1, Math.floor(options.concurrency / 4))

      const writeBatch = (batch: ReadonlyArray<FinishedAttempt>): Effect.Effect<ReadonlyArray<RecordAttemptResult>, StoreUnavailable> =>
        untilIdle
          ? queue.recordAttempts(batch)
          : Effect.catch(queue.recordAttempts(batch), (failure) =>
              Effect.andThen(Effect.andThen(logStoreFailure(failure, options.workerId), idle), writeBatch(batch))
            )
      const recordBatch = (batch: ReadonlyArray<FinishedAttempt>) =>
        Effect.gen(function* () {
          const recorded = yield* writeBatch(batch)
          for (const [index, finished] of batch.entries()) {
            const report = attemptReport(options.workerId, finished, recorded[index] ?? { _tag: "LeaseLost" })
            onRecorded(report)
            yield* options.onAttempt(report)
          }
          inFlight -= batch.length
          slotFreed.openUnsafe()
        })
      // A batch smaller than a claim while more attempts are in flight waits a moment for them:
      // attempts that finish one at a time would otherwise cost a record statement each.
      const takeBatch = Effect.flatMap(Queue.takeAll(finishedAttempts), (first) =>
        first.length >= claimAtLeast || first.length >= inFlight
          ? Effect.succeed(first)
          : Effect.andThen(Effect.sleep(RECORD_GATHER), Effect.map(Queue.clear(finishedAttempts), (more) => [...first, ...more])))
      const recorder = Effect.forever(Effect.flatMap(takeBatch, recordBatch))

      const claim = (limit: number) =>
        Effect.flatMap(currentDate, (now) => queue.lease({ workerId: options.workerId, now, limit, leaseMs: options.leaseMs }))
      const waitForSlot = Latch.await(slotFreed).pipe(Effect.timeoutOption(Duration.millis(options.pollIntervalMs)))
      const claimer: Effect.Effect<void, StoreUnavailable, Scope.Scope> = Effect.gen(function* () {
        while (true) {
          yield* Latch.close(slotFreed)
          const free = options.concurrency - inFlight
          if (free === 0 || (inFlight > 0 && free < claimAtLeast)) {
            yield* waitForSlot
            continue
          }
          const claimed = yield* claim(free).pipe(
            Effect.catchIf(
              () => !untilIdle,
              (failure) => Effect.as(Effect.andThen(logStoreFailure(failure, options.workerId), idle), [])
            )
          )
          inFlight += claimed.length
          for (const delivery of claimed) {
            yield* Effect.forkScoped(
              Effect.flatMap(sendLeased(delivery, options, agents), (finished) => Queue.offer(finishedAttempts, finished))
            )
          }
          if (claimed.length > 0) continue
          if (inFlight > 0) yield* waitForSlot
          else if (untilIdle) return
          else yield* idle
        }
      })
      yield* Effect.raceFirst(claimer, recorder)
    })
  )

/**
 * Attempts what is due now and returns when nothing is left due (`worker --once`): deliveries
 * rescheduled for later are left for a later pass. At most `concurrency` deliveries are in
 * flight at once; claims and records are batched (see the worker).
 */
export const runDeliveryPass = (
  options: DeliveryWorkerOptions
): Effect.Effect<PassReport, WebhookRuntimeDisabled | StoreUnavailable, WebhookDeliveryQueue> =>
  Effect.gen(function* () {
    const resolved = yield* resolve(options)
    let report = emptyReport
    yield* runPipeline(resolved, true, (attempt) => {
      report = tally(report, attempt)
    })
    return report
  })

/**
 * Attempts one given delivery now, whatever else is due (operator `send-test`); `undefined`
 * when it is not due (already leased, cancelled or finished).
 */
export const attemptDeliveryNow = (
  deliveryId: WebhookDeliveryId,
  options: DeliveryWorkerOptions
): Effect.Effect<AttemptReport | undefined, WebhookRuntimeDisabled | StoreUnavailable, WebhookDeliveryQueue> =>
  Effect.gen(function* () {
    const resolved = yield* resolve(options)
    const queue = yield* WebhookDeliveryQueue
    const now = yield* currentDate
    const [delivery] = yield* queue.lease({ workerId: resolved.workerId, now, limit: 1, leaseMs: resolved.leaseMs, deliveryId })
    if (delivery === undefined) return undefined
    const finished = yield* sendLeased(delivery, resolved, undefined)
    const [recorded] = yield* queue.recordAttempts([finished])
    const report = attemptReport(resolved.workerId, finished, recorded ?? { _tag: "LeaseLost" })
    yield* resolved.onAttempt(report)
    return report
  })

/**
 * The delivery worker: claims due deliveries (pending and due, or stale) in batches, keeps up
 * to `concurrency` in flight over keep-alive connections, records their results in batches,
 * and polls every `pollIntervalMs` when nothing is due. A store failure is logged and waited
 * out, never fatal. Runs until interrupted (SIGINT/SIGTERM in the CLI); an attempt in flight
 * or not yet recorded when interrupted is taken again after its lease.
 */
export const runDeliveryWorker = (
  options: DeliveryWorkerOptions
): Effect.Effect<never, WebhookRuntimeDisabled, WebhookDeliveryQueue> =>
  Effect.gen(function* () {
    const resolved = yield* resolve(options)
    yield* Effect.orDie(runPipeline(resolved, false, () => undefined))
    return yield* Effect.never
  })
