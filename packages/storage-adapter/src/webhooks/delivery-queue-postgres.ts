import {
  type AttemptToRecord,
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
 * `WebhookDeliveryQueue` on PostgreSQL. A lease of a batch is one statement, an `UPDATE` over a
 * `SELECT ... FOR UPDATE OF d SKIP LOCKED`, and so is the record of a batch of results: workers in any number of processes lease disjoint deliveries, and one that
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
    // One statement, so a batch costs one round trip. Stale deliveries come first, then pending
    // ones, oldest due first. Its parts see one snapshot: the stale deliveries it fails are
    // excluded from the lease by the same condition, and the attempts it opens are not among the
    // unfinished attempts it closes.
    const rows = yield* client
      .run(
        "webhooks.lease",
        (sql) => sql`
          WITH exhausted AS (
            -- A stale delivery whose last allowed attempt was cut off is failed, not tried again:
            -- a delivery that kills its worker every time must not be retried forever.
            UPDATE webhook_deliveries d
            SET state = 'failed', failure_reason = 'attempts_exhausted', last_error_class = 'lease_expired',
                lease_owner = NULL, lease_expires_at = NULL, updated_at = ${now}
            WHERE d.delivery_id IN (
              SELECT delivery_id FROM webhook_deliveries
              WHERE state = 'sending' AND lease_expires_at <= ${now} AND attempt_count >= max_attempts
              ${onlyDelivery === undefined ? sql`` : sql`AND delivery_id = ${onlyDelivery}`}
              FOR UPDATE SKIP LOCKED)
            RETURNING d.delivery_id
          ), stale AS (
            -- Each kind of due delivery is read in the order of its own partial index, so a claim
            -- reads about as many rows as it takes, however long the backlog.
            SELECT d.delivery_id, d.state AS previous_state
            FROM webhook_deliveries d
            JOIN webhook_subscriptions s ON s.subscription_id = d.subscription_id
            JOIN webhook_events e ON e.event_id = d.event_id
            WHERE d.state = 'sending' AND d.lease_expires_at <= ${now} AND d.attempt_count < d.max_attempts
              AND (s.state = 'active' OR e.event_type = ${ENDPOINT_TEST})
              ${onlyDelivery === undefined ? sql`` : sql`AND d.delivery_id = ${onlyDelivery}`}
            ORDER BY d.lease_expires_at
            LIMIT ${request.limit}
            FOR UPDATE OF d SKIP LOCKED
          ), pending AS (
            SELECT d.delivery_id, d.state AS previous_state
            FROM webhook_deliveries d
            JOIN webhook_subscriptions s ON s.subscription_id = d.subscription_id
            JOIN webhook_events e ON e.event_id = d.event_id
            WHERE d.state = 'pending' AND d.next_attempt_at <= ${now}
              AND (s.state = 'active' OR e.event_type = ${ENDPOINT_TEST})
              ${onlyDelivery === undefined ? sql`` : sql`AND d.delivery_id = ${onlyDelivery}`}
            ORDER BY d.next_attempt_at
            LIMIT ${request.limit} - (SELECT count(*) FROM stale)
            FOR UPDATE OF d SKIP LOCKED
          ), due AS (
            -- The LIMIT changes nothing but the planner's estimate: without it, the update below
            -- read the whole table (hash join) instead of 'limit' rows by primary key.
            SELECT * FROM stale UNION ALL SELECT * FROM pending LIMIT ${request.limit}
          ), leased AS (
            UPDATE webhook_deliveries d
            SET state = 'sending', attempt_count = d.attempt_count + 1, lease_owner = ${workerId},
                lease_expires_at = ${leaseExpiresAt}, last_attempt_at = ${now}, updated_at = ${now}
            FROM due, webhook_events e, webhook_subscriptions s
            WHERE d.delivery_id = due.delivery_id AND e.event_id = d.event_id AND s.subscription_id = d.subscription_id
            RETURNING d.delivery_id, d.event_id, d.subscription_id, s.endpoint_url, e.body,
              (SELECT k.secret FROM webhook_signing_secrets k WHERE k.subscription_id = d.subscription_id
               ORDER BY k.created_at DESC, k.secret_seq DESC LIMIT 1) AS secret,
              d.attempt_count, d.schedule_offset, d.max_attempts, d.lease_expires_at, due.previous_state
          ), closed AS (
            -- The vanished worker's attempt never reported: it ended when its lease did.
            UPDATE webhook_delivery_attempts
            SET error_class = 'lease_expired', finished_at = ${now},
                duration_ms = GREATEST(0, (EXTRACT(EPOCH FROM (${now}::timestamptz - started_at)) * 1000)::integer)
            WHERE finished_at IS NULL AND delivery_id IN (
              SELECT delivery_id FROM exhausted
              UNION ALL SELECT delivery_id FROM leased WHERE previous_state = 'sending')
          ), opened AS (
            INSERT INTO webhook_delivery_attempts (delivery_id, attempt_number, worker_id, started_at)
            SELECT delivery_id, attempt_count, ${workerId}, ${now} FROM leased
          )
          SELECT * FROM leased`
      )
      .pipe(Effect.flatMap(decodeRows(LeasedRow, "webhooks.lease")))
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

  const recordAttempts = Effect.fn("WebhookDeliveryQueuePostgres.recordAttempts")(function* (
    attempts: ReadonlyArray<AttemptToRecord>
  ) {
    if (attempts.length === 0) return []
    const rows = attempts.map(({ delivery, result, step }) => {
      const status = result.outcome._tag === "Response" ? result.outcome.status : null
      const errorClass = result.errorClass ?? (result.outcome._tag === "NetworkError" ? result.outcome.errorClass : null)
      const next =
        step._tag === "Succeeded"
          ? { state: "succeeded" as const, nextAttemptAt: null, failureReason: null }
          : step._tag === "Retry"
            ? { state: "pending" as const, nextAttemptAt: step.at.toISOString(), failureReason: null }
            : { state: "failed" as const, nextAttemptAt: null, failureReason: step.reason }
      return {
        deliveryId: delivery.deliveryId,
        attemptNumber: String(delivery.attemptNumber),
        leaseOwner: delivery.leaseOwner,
        finishedAt: result.finishedAt.toISOString(),
        durationMs: String(Math.max(0, Math.round(result.durationMs))),
        status: status === null ? null : String(status),
        errorClass,
        ...next
      }
    })
    const column = <K extends keyof (typeof rows)[number]>(key: K) => rows.map((row) => row[key] as string | null)
    // One statement for the whole batch: every attempt is recorded whatever became of its lease;
    // a delivery's state changes only under the lease (owner and attempt count) that sent it.
    const written = yield* client.run(
      "webhooks.recordAttempts",
      (sql) => sql<Array<{ delivery_id: string; attempt_count: number }>>`
        WITH input AS (
          SELECT * FROM unnest(
            ${textArray(sql, column("deliveryId"))}::text[], ${textArray(sql, column("attemptNumber"))}::integer[],
            ${textArray(sql, column("leaseOwner"))}::text[], ${textArray(sql, column("finishedAt"))}::timestamptz[],
            ${textArray(sql, column("durationMs"))}::integer[], ${textArray(sql, column("status"))}::integer[],
            ${textArray(sql, column("errorClass"))}::text[], ${textArray(sql, column("state"))}::text[],
            ${textArray(sql, column("nextAttemptAt"))}::timestamptz[], ${textArray(sql, column("failureReason"))}::text[]
          ) AS i (delivery_id, attempt_number, lease_owner, finished_at, duration_ms, response_status, error_class,
                  state, next_attempt_at, failure_reason)
        ), recorded AS (
          UPDATE webhook_delivery_attempts a
          SET finished_at = i.finished_at, duration_ms = i.duration_ms, response_status = i.response_status, error_class = i.error_class
          FROM input i
          WHERE a.delivery_id = i.delivery_id AND a.attempt_number = i.attempt_number
        )
        UPDATE webhook_deliveries d
        SET state = i.state, next_attempt_at = COALESCE(i.next_attempt_at, d.next_attempt_at),
            lease_owner = NULL, lease_expires_at = NULL, last_response_status = i.response_status,
            last_error_class = i.error_class, failure_reason = i.failure_reason, updated_at = i.finished_at
        FROM input i
        WHERE d.delivery_id = i.delivery_id AND d.state = 'sending'
          AND d.lease_owner = i.lease_owner AND d.attempt_count = i.attempt_number
        RETURNING d.delivery_id, d.attempt_count`
    )
    const writtenKeys = new Set(written.map((row) => `${row.delivery_id}/${row.attempt_count}`))
    return rows.map((row): RecordAttemptResult =>
      writtenKeys.has(`${row.deliveryId}/${row.attemptNumber}`) ? { _tag: "Written", state: row.state } : { _tag: "LeaseLost" }
    )
  })

  return WebhookDeliveryQueue.of({ lease, recordAttempts })
})

export const WebhookDeliveryQueuePostgres: Layer.Layer<WebhookDeliveryQueue, never, PgClient> = Layer.effect(
  WebhookDeliveryQueue,
  makeWebhookDeliveryQueuePostgres
)
