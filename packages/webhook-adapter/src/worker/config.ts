import {
  DEFAULT_WEBHOOK_RUNTIME,
  WEBHOOK_ATTEMPT_TIMEOUT_MS,
  WEBHOOK_LEASE_SECONDS,
  WEBHOOK_RUNTIME_STATUSES,
  type WebhookEnvironment,
  type WebhookRuntimeStatus
} from "@clinical-api/domain"
import { Config, Option, Result } from "effect"
import { refine } from "../internal/config.js"

/**
 * Deliveries one worker keeps in flight. Claims and records are batched up to this size, so it
 * sets how much one worker delivers (docs/performance.md, webhook deliveries).
 */
export const DEFAULT_WORKER_CONCURRENCY = 32

/**
 * The delivery worker's configuration, from the environment:
 *
 * - `WEBHOOK_RUNTIME`: `planned_not_generally_available` (default: nothing is ever sent) or
 *   `enabled` (sandbox and testing).
 * - `PUBLIC_API_ENVIRONMENT`: `sandbox` (default) or `production`; the endpoint address rules.
 * - `WEBHOOK_WORKER_CONCURRENCY` (default 32: deliveries in flight at once, and so the most one
 *   claim takes) and `WEBHOOK_POLL_INTERVAL_MS` (default 1000).
 * - Test knobs, refused in production (whose schedule is docs/webhooks.md's, fixed):
 *   `WEBHOOK_LEASE_MS` (default 60000), `WEBHOOK_RETRY_DELAYS_MS` (comma-separated delays
 *   replacing 5 s, 5 min, ...), `WEBHOOK_ATTEMPT_TIMEOUT_MS` (default 15000).
 */
export interface WebhookWorkerSettings {
  readonly runtime: WebhookRuntimeStatus
  readonly environment: WebhookEnvironment
  readonly concurrency: number
  readonly pollIntervalMs: number
  readonly leaseMs: number
  readonly retryDelaysMs: ReadonlyArray<number> | undefined
  readonly attemptTimeoutMs: number
}

const positiveInteger = (name: string, max: number) =>
  Config.String(name).pipe(
    refine((text) => {
      const value = /^[1-9][0-9]*$/.test(text.trim()) ? Number(text.trim()) : Number.NaN
      return Number.isSafeInteger(value) && value <= max
        ? Result.succeed(value)
        : Result.fail(`${name} must be an integer from 1 to ${max}, got ${JSON.stringify(text)}`)
    })
  )

const delayList = (name: string) =>
  Config.String(name).pipe(
    refine((text) => {
      const parts = text.split(",").map((part) => part.trim())
      const values = parts.map((part) => (/^(0|[1-9][0-9]*)$/.test(part) ? Number(part) : Number.NaN))
      return parts.length > 0 && values.every((value) => Number.isSafeInteger(value))
        ? Result.succeed(values)
        : Result.fail(`${name} must be comma-separated delays in milliseconds, got ${JSON.stringify(text)}`)
    })
  )

export const webhookWorkerConfig: Config.Config<WebhookWorkerSettings> = Config.all({
  runtime: Config.Literals(WEBHOOK_RUNTIME_STATUSES, "WEBHOOK_RUNTIME").pipe(Config.withDefault(DEFAULT_WEBHOOK_RUNTIME)),
  environment: Config.Literals(["sandbox", "production"], "PUBLIC_API_ENVIRONMENT").pipe(Config.withDefault("sandbox")),
  concurrency: positiveInteger("WEBHOOK_WORKER_CONCURRENCY", 256).pipe(Config.withDefault(DEFAULT_WORKER_CONCURRENCY)),
  pollIntervalMs: positiveInteger("WEBHOOK_POLL_INTERVAL_MS", 60_000).pipe(Config.withDefault(1000)),
  leaseMs: Config.option(positiveInteger("WEBHOOK_LEASE_MS", 3_600_000)),
  retryDelaysMs: Config.option(delayList("WEBHOOK_RETRY_DELAYS_MS")),
  attemptTimeoutMs: Config.option(positiveInteger("WEBHOOK_ATTEMPT_TIMEOUT_MS", 600_000))
}).pipe(
  refine((config): Result.Result<WebhookWorkerSettings, string> => {
    const overrides = [
      Option.isSome(config.leaseMs) ? "WEBHOOK_LEASE_MS" : undefined,
      Option.isSome(config.retryDelaysMs) ? "WEBHOOK_RETRY_DELAYS_MS" : undefined,
      Option.isSome(config.attemptTimeoutMs) ? "WEBHOOK_ATTEMPT_TIMEOUT_MS" : undefined
    ].filter((name) => name !== undefined)
    if (config.environment === "production" && overrides.length > 0) {
      return Result.fail(`${overrides.join(", ")} are test settings and are refused in production (the schedule of docs/webhooks.md applies)`)
    }
    return Result.succeed({
      runtime: config.runtime,
      environment: config.environment,
      concurrency: config.concurrency,
      pollIntervalMs: config.pollIntervalMs,
      leaseMs: Option.getOrElse(config.leaseMs, () => WEBHOOK_LEASE_SECONDS * 1000),
      retryDelaysMs: Option.getOrUndefined(config.retryDelaysMs),
      attemptTimeoutMs: Option.getOrElse(config.attemptTimeoutMs, () => WEBHOOK_ATTEMPT_TIMEOUT_MS)
    })
  })
)
