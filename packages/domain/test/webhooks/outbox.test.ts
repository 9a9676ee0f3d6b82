import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Ref, Result, Schema } from "effect"
import { TestClock } from "effect/testing"
import { DocumentId, EncounterId, OrganizationId, WebhookSubscriptionId } from "../../src/ids.js"
import { IdGenerator, type IdKind } from "../../src/ports.js"
import {
  makeWebhookOutboxMemory,
  type MemoryWebhookSubscription,
  TranscriptReadyEvent,
  TranscriptReadyPublisher,
  WebhookOutbox
} from "../../src/webhooks/index.js"

const orgA = OrganizationId.make("org_a")
const orgB = OrganizationId.make("org_b")
const enc1 = EncounterId.make("enc_1")
const doc1 = DocumentId.make("doc_1")
const doc2 = DocumentId.make("doc_2")

const prefixes: Partial<Record<IdKind, string>> = { webhook_event: "evt", webhook_delivery: "dlv" }
const CountingIds = Layer.effect(
  IdGenerator,
  Effect.map(Ref.make(0), (counter) =>
    IdGenerator.of({
      next: (kind) => Effect.map(Ref.updateAndGet(counter, (n) => n + 1), (n) => `${prefixes[kind] ?? kind}_${n}`)
    })
  )
)

const subscription = (id: string, organizationId: OrganizationId, status: "active" | "disabled"): MemoryWebhookSubscription => ({
  subscriptionId: WebhookSubscriptionId.make(id),
  organizationId,
  status
})

/** The publisher over a memory outbox, with the outbox handle to look into. */
const setup = (subscriptions: ReadonlyArray<MemoryWebhookSubscription>) =>
  Effect.gen(function* () {
    const { outbox, handle } = yield* makeWebhookOutboxMemory(subscriptions)
    const publisher = yield* Effect.provide(
      TranscriptReadyPublisher,
      TranscriptReadyPublisher.Live.pipe(Layer.provide(Layer.succeed(WebhookOutbox, outbox)))
    )
    return { publisher, handle }
  }).pipe(Effect.provide(CountingIds))

describe("TranscriptReadyPublisher over the WebhookOutbox port", () => {
  it.effect("publishes a contract event: evt_ id, occurred_at from the clock, organization and resources", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.parse("2026-05-01T12:00:00.000Z"))
      const { publisher, handle } = yield* setup([])
      const result = yield* publisher.publish({ organizationId: orgA, encounterId: enc1, documentId: doc1 })
      expect(result.created).toBe(true)
      expect(result.event).toEqual({
        id: "evt_1",
        type: "recording.transcript_ready",
        api_version: "2026-05-01",
        occurred_at: "2026-05-01T12:00:00.000Z",
        organization_id: "org_a",
        resources: { encounter_id: "enc_1", document_id: "doc_1" }
      })
      expect(Result.isSuccess(Schema.decodeUnknownResult(TranscriptReadyEvent)(result.event))).toBe(true)
      const [stored] = yield* Ref.get(handle.events)
      expect(stored?.body).toBe(
        '{"id":"evt_1","type":"recording.transcript_ready","api_version":"2026-05-01","occurred_at":"2026-05-01T12:00:00.000Z","organization_id":"org_a","resources":{"encounter_id":"enc_1","document_id":"doc_1"}}'
      )
    }))

  it.effect("uses the given occurredAt", () =>
    Effect.gen(function* () {
      const { publisher } = yield* setup([])
      const result = yield* publisher.publish({
        organizationId: orgA,
        encounterId: enc1,
        documentId: doc1,
        occurredAt: new Date("2026-04-30T08:00:00+02:00")
      })
      expect(result.event.occurred_at).toBe("2026-04-30T06:00:00.000Z")
    }))

  it.effect("publishing the same (encounter, document) twice is one event: created false, no new delivery", () =>
    Effect.gen(function* () {
      const { publisher, handle } = yield* setup([subscription("sub_1", orgA, "active")])
      const first = yield* publisher.publish({ organizationId: orgA, encounterId: enc1, documentId: doc1 })
      yield* TestClock.adjust("1 hour")
      const second = yield* publisher.publish({ organizationId: orgA, encounterId: enc1, documentId: doc1 })
      expect(first).toMatchObject({ created: true, deliveries: 1 })
      expect(second).toMatchObject({ created: false, deliveries: 0 })
      expect(second.event).toEqual(first.event)
      expect(yield* Ref.get(handle.events)).toHaveLength(1)
      expect(yield* Ref.get(handle.deliveries)).toHaveLength(1)
      const third = yield* publisher.publish({ organizationId: orgA, encounterId: enc1, documentId: doc2 })
      expect(third.created).toBe(true)
      expect(third.event.id).not.toBe(first.event.id)
    }))

  it.effect("one pending delivery per active subscription of the organization, none for disabled or other organizations", () =>
    Effect.gen(function* () {
      const { publisher, handle } = yield* setup([
        subscription("sub_1", orgA, "active"),
        subscription("sub_2", orgA, "active"),
        subscription("sub_3", orgA, "disabled"),
        subscription("sub_4", orgB, "active")
      ])
      const result = yield* publisher.publish({ organizationId: orgA, encounterId: enc1, documentId: doc1 })
      expect(result.deliveries).toBe(2)
      const deliveries = yield* Ref.get(handle.deliveries)
      expect(deliveries.map((d) => d.subscriptionId).sort()).toEqual(["sub_1", "sub_2"])
      for (const delivery of deliveries) {
        expect(delivery.deliveryId).toMatch(/^dlv_/)
        expect(delivery).toMatchObject({ eventId: result.event.id, state: "pending", attemptCount: 0 })
      }
    }))

  it.effect("subscriptions start disabled by default: the event is recorded, nothing is to be delivered", () =>
    Effect.gen(function* () {
      const { publisher } = yield* setup([subscription("sub_1", orgA, "disabled")])
      const result = yield* publisher.publish({ organizationId: orgA, encounterId: enc1, documentId: doc1 })
      expect(result).toMatchObject({ created: true, deliveries: 0 })
    }))

  it.effect("fails with StoreUnavailable and writes nothing when the store is down", () =>
    Effect.gen(function* () {
      const { publisher, handle } = yield* setup([subscription("sub_1", orgA, "active")])
      yield* Ref.set(handle.unavailable, true)
      const error = yield* Effect.flip(publisher.publish({ organizationId: orgA, encounterId: enc1, documentId: doc1 }))
      expect(error._tag).toBe("StoreUnavailable")
      expect(yield* Ref.get(handle.events)).toHaveLength(0)
      expect(yield* Ref.get(handle.deliveries)).toHaveLength(0)
    }))
})
