import {
  IdGenerator,
  makeTranscriptReadyEvent,
  type PublishTranscriptReadyInput,
  serializeWebhookEvent,
  StoreUnavailable,
  TranscriptReadyEvent,
  WEBHOOK_MAX_ATTEMPTS,
  WebhookOutbox
} from "@clinical-api/domain"
import { Clock, Effect, Layer, Schema } from "effect"
import { PgClient, textArray } from "../sql/pg-client.js"

const decodeStoredEvent = Schema.decodeUnknownEffect(Schema.fromJsonString(TranscriptReadyEvent))

/**
 * `WebhookOutbox` on PostgreSQL. One transaction: the event (`INSERT ... ON CONFLICT DO
 * NOTHING` on its (type, encounter, document) key, so a second publish writes nothing and
 * returns the stored event) and one `pending` delivery, due now, per subscription of the
 * organization that is active. Active subscriptions are read `FOR SHARE`: a concurrent
 * revocation either commits first (the subscription is then disabled and gets no delivery) or
 * waits for this transaction and cancels what it created.
 */
export const makeWebhookOutboxPostgres = Effect.gen(function* () {
  const client = yield* PgClient
  const ids = yield* IdGenerator

  const publishTranscriptReady = Effect.fn("WebhookOutboxPostgres.publishTranscriptReady")(function* (
    input: PublishTranscriptReadyInput
  ) {
    const event = makeTranscriptReadyEvent({
      id: input.eventId,
      occurredAt: input.occurredAt,
      organizationId: input.organizationId,
      encounterId: input.encounterId,
      documentId: input.documentId
    })
    const body = Buffer.from(serializeWebhookEvent(event), "utf8")
    const now = new Date(yield* Clock.currentTimeMillis)
    return yield* client.transactionally(
      Effect.gen(function* () {
        const inserted = yield* client.run(
          "webhooks.publish.event",
          (sql) => sql`
            INSERT INTO webhook_events
              (event_id, event_type, organization_id, encounter_id, document_id, body, occurred_at, created_at)
            VALUES (${event.id}, ${event.type}, ${event.organization_id}, ${input.encounterId}, ${input.documentId},
                    ${body}, ${input.occurredAt}, ${now})
            ON CONFLICT (event_type, encounter_id, document_id) DO NOTHING
            RETURNING event_id`
        )
        if (inserted.length === 0) {
          const stored = yield* client.run(
            "webhooks.publish.existing",
            (sql) => sql<Array<{ body: Buffer }>>`
              SELECT body FROM webhook_events
              WHERE event_type = ${event.type} AND encounter_id = ${input.encounterId} AND document_id = ${input.documentId}`
          )
          const storedBody = stored[0]?.body
          if (storedBody === undefined) return yield* Effect.die(new Error("ON CONFLICT without a conflicting row"))
          const existing = yield* decodeStoredEvent(Buffer.from(storedBody).toString("utf8")).pipe(
            Effect.mapError((cause) => new StoreUnavailable({ operation: "webhooks.publish.existing.decode", cause }))
          )
          return { event: existing, created: false, deliveries: 0 }
        }
        const subscriptions = yield* client.run(
          "webhooks.publish.subscriptions",
          (sql) => sql<Array<{ subscription_id: string }>>`
            SELECT subscription_id FROM webhook_subscriptions
            WHERE organization_id = ${input.organizationId} AND state = 'active'
            ORDER BY subscription_id
            FOR SHARE`
        )
        const deliveryIds: Array<string> = []
        for (let index = 0; index < subscriptions.length; index++) deliveryIds.push(yield* ids.next("webhook_delivery"))
        if (subscriptions.length > 0) {
          yield* client.run(
            "webhooks.publish.deliveries",
            (sql) => sql`
              INSERT INTO webhook_deliveries
                (delivery_id, event_id, subscription_id, state, max_attempts, next_attempt_at, created_at, updated_at)
              SELECT delivery_id, ${event.id}, subscription_id, 'pending', ${WEBHOOK_MAX_ATTEMPTS}, ${now}, ${now}, ${now}
              FROM unnest(${textArray(sql, deliveryIds)}::text[], ${textArray(sql, subscriptions.map((row) => row.subscription_id))}::text[])
                AS planned (delivery_id, subscription_id)`
          )
        }
        return { event, created: true, deliveries: subscriptions.length }
      })
    )
  })

  return WebhookOutbox.of({ publishTranscriptReady })
})

export const WebhookOutboxPostgres: Layer.Layer<WebhookOutbox, never, PgClient | IdGenerator> = Layer.effect(
  WebhookOutbox,
  makeWebhookOutboxPostgres
)
