import { Clock, Effect, Layer, Ref } from "effect"
import { type OrganizationId, WebhookDeliveryId, type WebhookEventId, type WebhookSubscriptionId } from "../ids.js"
import { IdGenerator, StoreUnavailable } from "../ports.js"
import { makeTranscriptReadyEvent, serializeWebhookEvent, type TranscriptReadyEvent } from "./event.js"
import { WebhookOutbox } from "./outbox.js"
import type { WebhookDeliveryState } from "./retry.js"
import type { WebhookSubscriptionStatus } from "./subscription.js"

export interface MemoryWebhookSubscription {
  readonly subscriptionId: WebhookSubscriptionId
  readonly organizationId: OrganizationId
  readonly status: WebhookSubscriptionStatus
}

export interface MemoryWebhookDelivery {
  readonly deliveryId: WebhookDeliveryId
  readonly eventId: WebhookEventId
  readonly subscriptionId: WebhookSubscriptionId
  readonly state: WebhookDeliveryState
  readonly attemptCount: number
  readonly nextAttemptAt: Date
}

export interface MemoryWebhookOutboxHandle {
  readonly subscriptions: Ref.Ref<ReadonlyArray<MemoryWebhookSubscription>>
  readonly events: Ref.Ref<ReadonlyArray<{ readonly event: TranscriptReadyEvent; readonly body: string }>>
  readonly deliveries: Ref.Ref<ReadonlyArray<MemoryWebhookDelivery>>
  /** When true every call fails with StoreUnavailable and writes nothing. */
  readonly unavailable: Ref.Ref<boolean>
}

/**
 * An in-memory `WebhookOutbox` that keeps the adapter's promises: one event per (encounter,
 * document), its body serialised once, and one `pending` delivery per active subscription of
 * the organization, all written together or not at all.
 */
export const makeWebhookOutboxMemory = (subscriptions: ReadonlyArray<MemoryWebhookSubscription> = []) =>
  Effect.gen(function* () {
    const ids = yield* IdGenerator
    const handle: MemoryWebhookOutboxHandle = {
      subscriptions: yield* Ref.make(subscriptions),
      events: yield* Ref.make<ReadonlyArray<{ readonly event: TranscriptReadyEvent; readonly body: string }>>([]),
      deliveries: yield* Ref.make<ReadonlyArray<MemoryWebhookDelivery>>([]),
      unavailable: yield* Ref.make(false)
    }
    const outbox = WebhookOutbox.of({
      publishTranscriptReady: Effect.fn("WebhookOutboxMemory.publishTranscriptReady")(function* (input) {
        if (yield* Ref.get(handle.unavailable)) {
          return yield* new StoreUnavailable({ operation: "publishTranscriptReady" })
        }
        const existing = (yield* Ref.get(handle.events)).find(
          ({ event }) =>
            event.resources.encounter_id === input.encounterId && event.resources.document_id === input.documentId
        )
        if (existing !== undefined) return { event: existing.event, created: false, deliveries: 0 }
        const event = makeTranscriptReadyEvent({
          id: input.eventId,
          occurredAt: input.occurredAt,
          organizationId: input.organizationId,
          encounterId: input.encounterId,
          documentId: input.documentId
        })
        const now = new Date(yield* Clock.currentTimeMillis)
        const active = (yield* Ref.get(handle.subscriptions)).filter(
          (subscription) => subscription.organizationId === input.organizationId && subscription.status === "active"
        )
        const deliveries: Array<MemoryWebhookDelivery> = []
        for (const subscription of active) {
          deliveries.push({
            deliveryId: WebhookDeliveryId.make(yield* ids.next("webhook_delivery")),
            eventId: event.id,
            subscriptionId: subscription.subscriptionId,
            state: "pending",
            attemptCount: 0,
            nextAttemptAt: now
          })
        }
        yield* Ref.update(handle.events, (events) => [...events, { event, body: serializeWebhookEvent(event) }])
        yield* Ref.update(handle.deliveries, (existingDeliveries) => [...existingDeliveries, ...deliveries])
        return { event, created: true, deliveries: deliveries.length }
      })
    })
    return { outbox, handle }
  })

/** `WebhookOutbox` in memory, with no subscriptions (the default: nothing is ever delivered). */
export const WebhookOutboxMemory = Layer.effect(
  WebhookOutbox,
  Effect.map(makeWebhookOutboxMemory(), ({ outbox }) => outbox)
)
