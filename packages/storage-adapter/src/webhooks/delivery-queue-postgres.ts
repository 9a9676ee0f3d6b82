import {
  type DeliveryAttemptResult,
  type DeliveryStep,
  ENDPOINT_TEST,
  type LeasedDelivery,
  type LeaseRequest,
  type RecordAttemptResult,
  WebhookDeliveryId,
  WebhookDeliveryQueue,
  WebhookEventId,
  WebhookSubscriptionId
} from "@clinical-api/domain"
import { Effect, Layer, Redacted, Schema } from "effect"
import { decodeRows } from "../sql/decode.js"
import { PgClient, textArray } from "../sql/pg-client.js"
import { DateColumn } from "../sql/row-guard.js"

const LeasedRow = Schema.Struct({
  delivery_id: WebhookDeliveryId,
  event_id: WebhookEventId,
  subscription_id: WebhookSubscriptionId,
  endpoint_url: Schema.String,
  body: Schema.Uint8Array,
  secret: Schema.String,
  attempt_count: Schema.Number,
  schedule_offset: Schema.Number,
  max_attempts: Schema.Number,
  lease_expires_at: DateColumn,
  previous_state: Schema.String
})

/**
 * `WebhookDeliveryQueue` on PostgreSQL. The lease is one `UPDATE` over a `SELECT ... FOR UPDATE
 * OF d SKIP LOCKED`: workers in any number of processes lease disjoint deliveries, and one that
 * is being leased, cancelled or finished by someone else is skipped, never waited for. The
 * attempt count, raised at lease time, fences the lease: a result is written only where
 * `state = 'sending'`, the owner and the attempt count are still those of this lease.
 */
export const makeWebhookDeliveryQueuePostgres = Effect.gen(function* () {
  const client = yield* PgClient

  const lease = Effect.fn("WebhookDeliveryQueuePostgres.lease")(function* (request: LeaseRequest) {
    const { now, workerId } = request
    const leaseExpiresAt = new Date(now.getTime() + request.leaseMs)
    const onlyDelivery = request.deliveryId
    return yield* client.transactionally(
      Effect.gen(function* () {
        // A stale delivery whose last allowed attempt was cut off is failed, not tried again:
        // a delivery that kills its worker every time must not be retried forever.
        const exhausted = yield* client.run(
          "webhooks.lease.exhaustStale",
          (sql) => sql<Array<{ delivery_id: string }>>`
            WITH stale AS (
              SELECT delivery_id FROM webhook_deliveries
              WHERE state = 'sending' AND lease_expires_at <= ${now} AND attempt_count >= max_attempts
              ${onlyDelivery === undefined ? sql`` : sql`AND delivery_id = ${onlyDelivery}`}
              FOR UPDATE SKIP LOCKED
            )
            UPDATE webhook_deliveries d
            SET state = 'failed', failure_reason = 'attempts_exhausted', last_error_class = 'lease_expired',
                lease_owner = NULL, lease_expires_at = NULL, updated_at = ${now}
            FROM stale WHERE d.delivery_id = stale.delivery_id
            RETURNING d.delivery_id`
        )
        if (exhausted.length > 0) {
          yield* client.run(
            "webhooks.lease.closeExhaustedAttempts",
            (sql) => sql`
              UPDATE webhook_delivery_attempts
              SET error_class = 'lease_expired', finished_at = ${now},
                  duration_ms = GREATEST(0, (EXTRACT(EPOCH FROM (${now}::timestamptz - started_at)) * 1000)::integer)
              WHERE delivery_id = ANY(${textArray(sql, exhausted.map((row) => row.delivery_id))}::text[]) AND finished_at IS NULL`
          )
        }
        const rows = yield* client
          .run(
            "webhooks.lease",
            (sql) => sql`
              WITH due AS (
                SELECT d.delivery_id, d.state AS previous_state
                FROM webhook_deliveries d
                JOIN webhook_subscriptions s ON s.subscription_id = d.subscription_id
                JOIN webhook_events e ON e.event_id = d.event_id
                WHERE ((d.state = 'pending' AND d.next_attempt_at <= ${now})
                       OR (d.state = 'sending' AND d.lease_expires_at <= ${now}))
                  AND (s.state = 'active' OR e.event_type = ${ENDPOINT_TEST})
                  ${onlyDelivery === undefined ? sql`` : sql`AND d.delivery_id = ${onlyDelivery}`}
                ORDER BY d.next_attempt_at, d.delivery_id
                LIMIT ${request.limit}
                FOR UPDATE OF d SKIP LOCKED
              )
              UPDATE webhook_deliveries d
              SET state = 'sending', attempt_count = d.attempt_count + 1, lease_owner = ${workerId},
                  lease_expires_at = ${leaseExpiresAt}, last_attempt_at = ${now}, updated_at = ${now}
              FROM due, webhook_events e, webhook_subscriptions s
              WHERE d.delivery_id = due.delivery_id AND e.event_id = d.event_id AND s.subscription_id = d.subscription_id
              RETURNING d.delivery_id, d.event_id, d.subscription_id, s.endpoint_url, e.body,
                (SELECT k.secret FROM webhook_signing_secrets k WHERE k.subscription_id = d.subscription_id
                 ORDER BY k.created_at DESC, k.secret_seq DESC LIMIT 1) AS secret,
                d.attempt_count, d.schedule_offset, d.max_attempts, d.lease_expires_at, due.previous_state`
          )
          .pipe(Effect.flatMap(decodeRows(LeasedRow, "webhooks.lease")))
        if (rows.length === 0) return []
        const stale = rows.filter((row) => row.previous_state === "sending").map((row) => row.delivery_id)
        if (stale.length > 0) {
          // The vanished worker's attempt never reported: it ended when its lease did.
          yield* client.run(
            "webhooks.lease.closeStaleAttempts",
            (sql) => sql`
              UPDATE webhook_delivery_attempts
              SET error_class = 'lease_expired', finished_at = ${now},
                  duration_ms = GREATEST(0, (EXTRACT(EPOCH FROM (${now}::timestamptz - started_at)) * 1000)::integer)
              WHERE delivery_id = ANY(${textArray(sql, stale)}::text[]) AND finished_at IS NULL`
          )
        }
        yield* client.run(
          "webhooks.lease.openAttempts",
          (sql) => sql`
            INSERT INTO webhook_delivery_attempts (delivery_id, attempt_number, worker_id, started_at)
            SELECT delivery_id, attempt_number, ${workerId}, ${now}
            FROM unnest(${textArray(sql, rows.map((row) => row.delivery_id))}::text[],
                        ${textArray(sql, rows.map((row) => String(row.attempt_count)))}::integer[]) AS opened (delivery_id, attempt_number)`
        )
        return rows.map(
          (row): LeasedDelivery => ({
            deliveryId: row.delivery_id,
            eventId: row.event_id,
            subscriptionId: row.subscription_id,
            endpointUrl: row.endpoint_url,
            rawBody: row.body,
            signingSecret: Redacted.make(row.secret),
            attemptNumber: row.attempt_count,
            scheduleAttemptNumber: Math.max(1, row.attempt_count - row.schedule_offset),
            maxAttempts: row.max_attempts,
            leaseOwner: workerId,
            leaseExpiresAt: row.lease_expires_at,
            reclaimedStale: row.previous_state === "sending"
          })
        )
      })
    )
  })

  const recordAttempt = Effect.fn("WebhookDeliveryQueuePostgres.recordAttempt")(function* (
    delivery: LeasedDelivery,
    result: DeliveryAttemptResult,
    step: DeliveryStep
  ) {
    const status = result.outcome._tag === "Response" ? result.outcome.status : null
    const errorClass = result.errorClass ?? (result.outcome._tag === "NetworkError" ? result.outcome.errorClass : null)
    const durationMs = Math.max(0, Math.round(result.durationMs))
    const at = result.finishedAt
    return yield* client.transactionally(
      Effect.gen(function* () {
        // The attempt happened whatever became of the lease: it is recorded in every case.
        yield* client.run(
          "webhooks.recordAttempt.attempt",
          (sql) => sql`
            UPDATE webhook_delivery_attempts
            SET finished_at = ${at}, duration_ms = ${durationMs}, response_status = ${status}, error_class = ${errorClass}
            WHERE delivery_id = ${delivery.deliveryId} AND attempt_number = ${delivery.attemptNumber}`
        )
        const next =
          step._tag === "Succeeded"
            ? { state: "succeeded" as const, nextAttemptAt: null, failureReason: null }
            : step._tag === "Retry"
              ? { state: "pending" as const, nextAttemptAt: step.at, failureReason: null }
              : { state: "failed" as const, nextAttemptAt: null, failureReason: step.reason }
        const written = yield* client.run(
          "webhooks.recordAttempt.delivery",
          (sql) => sql<Array<{ state: string }>>`
            UPDATE webhook_deliveries
            SET state = ${next.state}, next_attempt_at = COALESCE(${next.nextAttemptAt}::timestamptz, next_attempt_at),
                lease_owner = NULL, lease_expires_at = NULL, last_response_status = ${status},
                last_error_class = ${errorClass}, failure_reason = ${next.failureReason}, updated_at = ${at}
            WHERE delivery_id = ${delivery.deliveryId} AND state = 'sending'
              AND lease_owner = ${delivery.leaseOwner} AND attempt_count = ${delivery.attemptNumber}
            RETURNING state`
        )
        const recorded: RecordAttemptResult =
          written[0] === undefined ? { _tag: "LeaseLost" } : { _tag: "Written", state: next.state }
        return recorded
      })
    )
  })

  return WebhookDeliveryQueue.of({ lease, recordAttempt })
})

export const WebhookDeliveryQueuePostgres: Layer.Layer<WebhookDeliveryQueue, never, PgClient> = Layer.effect(
  WebhookDeliveryQueue,
  makeWebhookDeliveryQueuePostgres
)
