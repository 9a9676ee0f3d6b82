import { randomBytes } from "node:crypto"
import {
  type DeliveryAttemptResult,
  type DeliveryStep,
  DocumentId,
  EncounterId,
  IdGenerator,
  OrganizationId,
  type LeasedDelivery,
  TranscriptReadyPublisher,
  WebhookDeliveryQueue,
  WebhookEventId,
  WebhookOutbox,
  type WebhookReadinessItem,
  WEBHOOK_READINESS_ITEMS,
  type WebhookSubscriptionId
} from "@clinical-api/domain"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Layer, Redacted, Result } from "effect"
import {
  ActivationRefused,
  IdGeneratorLive,
  makePgClient,
  migrate,
  OperatorStore,
  OperatorStoreLive,
  PgClient,
  RedeliveryRefused,
  ReadinessChangeRefused,
  type Sql,
  textArray,
  WebhookOperatorStore,
  WebhooksPostgresLive
} from "../src/index.js"
import { serverDatabases } from "../src/testing/test-database.js"

/**
 * The webhook tables (migration 3) on a real PostgreSQL server: publishing, subscriptions,
 * activation and revocation, and the delivery queue's leases. One fresh database for the file.
 */
const databaseUrl = process.env["DATABASE_URL"]?.trim()

const unique = (prefix: string) => `${prefix}_${randomBytes(5).toString("hex")}`

const minute = 60_000

const environmentFor = (adminUrl: string) => {
  const database = Layer.effect(PgClient, Effect.flatMap(serverDatabases(adminUrl).fresh, (db) => makePgClient({ url: db.url, maxConnections: 8 })))
  return Layer.mergeAll(WebhooksPostgresLive, OperatorStoreLive, TranscriptReadyPublisher.Live.pipe(Layer.provide(WebhooksPostgresLive))).pipe(
    Layer.provideMerge(IdGeneratorLive),
    Layer.provideMerge(Layer.effectDiscard(migrate())),
    Layer.provideMerge(database)
  )
}

const newOrganization = Effect.gen(function* () {
  const organizationId = OrganizationId.make(unique("org"))
  yield* Effect.flatMap(OperatorStore, (store) => store.createOrganization({ organizationId, name: "Webhook test org" }))
  return organizationId
})

const confirmAll = (subscriptionId: WebhookSubscriptionId, except: ReadonlyArray<WebhookReadinessItem> = []) =>
  Effect.flatMap(WebhookOperatorStore, (store) =>
    Effect.forEach(
      WEBHOOK_READINESS_ITEMS.filter((item) => !except.includes(item)),
      (item) => store.setReadiness({ subscriptionId, item, confirmed: true, by: "test" }),
      { discard: true }
    )
  )

const activeSubscription = (organizationId: OrganizationId, url = "http://127.0.0.1:9/hook") =>
  Effect.gen(function* () {
    const store = yield* WebhookOperatorStore
    const { secret, subscription } = yield* store.createSubscription({ organizationId, endpointUrl: url })
    yield* confirmAll(subscription.subscriptionId)
    yield* store.activate({ subscriptionId: subscription.subscriptionId, by: "alice", reason: "go-live" })
    return { subscriptionId: subscription.subscriptionId, secret }
  })

const publish = (organizationId: OrganizationId, encounter = unique("enc"), document = unique("doc")) =>
  Effect.flatMap(TranscriptReadyPublisher, (publisher) =>
    publisher.publish({
      organizationId,
      encounterId: EncounterId.make(encounter),
      documentId: DocumentId.make(document)
    })
  )

const deliveriesOf = (subscriptionId: WebhookSubscriptionId) =>
  Effect.flatMap(WebhookOperatorStore, (store) => store.listDeliveries({ subscriptionId }))

const sql = <A>(query: (sql: Sql) => Promise<A>) =>
  Effect.flatMap(PgClient, (client) => client.run("test.sql", query))

const leaseAll = (workerId: string, now: Date, leaseMs = minute, limit = 100) =>
  Effect.flatMap(WebhookDeliveryQueue, (queue) => queue.lease({ workerId, now, limit, leaseMs }))

/** Records one attempt (the queue records a batch in one statement). */
const recordOne = (delivery: LeasedDelivery, result: DeliveryAttemptResult, step: DeliveryStep) =>
  Effect.flatMap(WebhookDeliveryQueue, (queue) => queue.recordAttempts([{ delivery, result, step }])).pipe(Effect.map((recorded) => recorded[0]))

const succeed = (delivery: LeasedDelivery, at: Date) =>
  recordOne(delivery, { outcome: { _tag: "Response", status: 204 }, finishedAt: at, durationMs: 5 }, { _tag: "Succeeded" })

if (databaseUrl === undefined || databaseUrl === "") {
  console.warn("Skipping the webhook store tests: set DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/postgres)")
  describe("webhook store on PostgreSQL", () => {
    it.skip("skipped: DATABASE_URL is not set", () => {})
  })
} else {
  layer(environmentFor(databaseUrl), { timeout: "60 seconds", excludeTestServices: true })("webhook store on PostgreSQL", (it) => {
    it.effect("publishing the same transcript twice is one event; one pending delivery per active subscription, none for disabled ones", () =>
      Effect.gen(function* () {
        const organizationId = yield* newOrganization
        const first = yield* activeSubscription(organizationId)
        const second = yield* activeSubscription(organizationId)
        const store = yield* WebhookOperatorStore
        const disabled = yield* store.createSubscription({ organizationId, endpointUrl: "http://127.0.0.1:9/disabled" })
        const encounter = unique("enc")
        const document = unique("doc")

        const published = yield* publish(organizationId, encounter, document)
        expect(published.created).toBe(true)
        expect(published.deliveries).toBe(2)
        expect(published.event.id.startsWith("evt_")).toBe(true)

        const again = yield* publish(organizationId, encounter, document)
        expect(again.created).toBe(false)
        expect(again.deliveries).toBe(0)
        expect(again.event).toEqual(published.event)

        const events = yield* sql((s) => s<Array<{ body: Buffer }>>`
          SELECT body FROM webhook_events WHERE encounter_id = ${encounter} AND document_id = ${document}`)
        expect(events).toHaveLength(1)
        expect(JSON.parse(Buffer.from(events[0]?.body ?? []).toString("utf8"))).toEqual(published.event)
        for (const subscriptionId of [first.subscriptionId, second.subscriptionId]) {
          const deliveries = yield* deliveriesOf(subscriptionId)
          expect(deliveries.map((d) => [d.eventId, d.state, d.attemptCount])).toEqual([[published.event.id, "pending", 0]])
          expect(deliveries[0]?.deliveryId.startsWith("dlv_")).toBe(true)
        }
        expect(yield* deliveriesOf(disabled.subscription.subscriptionId)).toEqual([])
      }))

    it.effect("publishing concurrently from many callers still makes one event and one delivery", () =>
      Effect.gen(function* () {
        const organizationId = yield* newOrganization
        const { subscriptionId } = yield* activeSubscription(organizationId)
        const encounter = unique("enc")
        const document = unique("doc")
        const results = yield* Effect.all(
          Array.from({ length: 8 }, () => publish(organizationId, encounter, document)),
          { concurrency: "unbounded" }
        )
        expect(results.filter((result) => result.created)).toHaveLength(1)
        expect(yield* deliveriesOf(subscriptionId)).toHaveLength(1)
      }))

    it.effect("subscriptions start disabled with receiver correlation not_confirmed_runtime_blocked and a whsec_ secret", () =>
      Effect.gen(function* () {
        const organizationId = yield* newOrganization
        const store = yield* WebhookOperatorStore
        const created = yield* store.createSubscription({ organizationId, endpointUrl: "https://receiver.example/hook" })
        expect(created.secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/)
        expect(created.subscription.state).toBe("disabled")
        expect(created.subscription.revision).toBe(1)
        expect(created.subscription.readiness.receiver_correlation).toBe("not_confirmed_runtime_blocked")
        const unknown = yield* Effect.result(
          store.createSubscription({ organizationId: OrganizationId.make(unique("nope")), endpointUrl: "https://x.example" })
        )
        expect(Result.isFailure(unknown) && unknown.failure._tag).toBe("UnknownOrganization")
      }))

    it.effect("activation is refused naming every missing item (receiver_correlation included) and changes nothing", () =>
      Effect.gen(function* () {
        const organizationId = yield* newOrganization
        const store = yield* WebhookOperatorStore
        const { subscription } = yield* store.createSubscription({ organizationId, endpointUrl: "https://r.example/h" })
        const subscriptionId = subscription.subscriptionId
        yield* confirmAll(subscriptionId, ["receiver_correlation", "signing_setup"])
        const refused = yield* Effect.flip(store.activate({ subscriptionId, by: "alice", reason: "launch" }))
        expect(refused).toBeInstanceOf(ActivationRefused)
        if (refused instanceof ActivationRefused) expect(refused.missing).toEqual(["signing_setup", "receiver_correlation"])
        expect(refused.message).toContain("signing_setup, receiver_correlation")
        const unchanged = yield* store.getSubscription(subscriptionId)
        expect(unchanged.subscription.state).toBe("disabled")
        expect(unchanged.revisions.map((r) => r.change)).not.toContain("activated")
      }))

    it.effect("activation writes the readiness record, provenance and the new active revision together", () =>
      Effect.gen(function* () {
        const organizationId = yield* newOrganization
        const store = yield* WebhookOperatorStore
        const { subscription } = yield* store.createSubscription({ organizationId, endpointUrl: "https://r.example/h" })
        const subscriptionId = subscription.subscriptionId
        yield* confirmAll(subscriptionId)
        const active = yield* store.activate({ subscriptionId, by: "alice", reason: "signed BAA #12" })
        expect(active.state).toBe("active")
        const { revisions } = yield* store.getSubscription(subscriptionId)
        const last = revisions.at(-1)
        expect(last?.revision).toBe(active.revision)
        expect(last?.change).toBe("activated")
        expect(last?.state).toBe("active")
        expect(last?.changedBy).toBe("alice")
        expect(last?.reason).toBe("signed BAA #12")
        expect(Object.values(last?.readiness ?? {}).every((status) => status === "confirmed")).toBe(true)
        expect(revisions.map((r) => r.revision)).toEqual(revisions.map((_, index) => index + 1))
        // Unconfirming an item of an active subscription is refused: revocation is the way.
        const refused = yield* Effect.flip(store.setReadiness({ subscriptionId, item: "signing_setup", confirmed: false }))
        expect(refused).toBeInstanceOf(ReadinessChangeRefused)
      }))

    it.effect("revocation disables the subscription and cancels pending, sending and stale sending deliveries in the same transaction", () =>
      Effect.gen(function* () {
        const organizationId = yield* newOrganization
        const { subscriptionId } = yield* activeSubscription(organizationId)
        const other = yield* activeSubscription(organizationId)
        const store = yield* WebhookOperatorStore
        for (let index = 0; index < 5; index++) yield* publish(organizationId)
        const now = new Date()
        // Lease 3 of this subscription's deliveries: 1 succeeds, 1 stays sending, 1 goes stale.
        const queue = yield* WebhookDeliveryQueue
        const leased = (yield* queue.lease({ workerId: "w1", now, limit: 1000, leaseMs: minute })).filter(
          (d) => d.subscriptionId === subscriptionId
        )
        expect(leased.length).toBe(5)
        const [done, live, stale] = leased
        if (done === undefined || live === undefined || stale === undefined) throw new Error("expected leases")
        yield* succeed(done, now)
        // Return the last two to pending, then make `stale` a sending delivery whose lease has expired.
        yield* sql((s) => s`UPDATE webhook_deliveries SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL
          WHERE delivery_id = ANY(${textArray(s, leased.slice(3).map((d) => d.deliveryId))})`)
        yield* sql((s) => s`UPDATE webhook_deliveries SET lease_expires_at = ${new Date(now.getTime() - 1000)}
          WHERE delivery_id = ${stale.deliveryId}`)

        const revoked = yield* store.revokeReadiness({ subscriptionId, by: "bob", reason: "receiver breach" })
        expect(revoked.cancelled).toEqual({ pending: 2, sending: 1, staleSending: 1 })
        expect(revoked.subscription.state).toBe("disabled")
        expect(revoked.subscription.readiness.receiver_correlation).toBe("not_confirmed_runtime_blocked")

        const states = yield* sql((s) => s<Array<{ state: string; n: number; stamps: number; revision_at: Date }>>`
          SELECT d.state, count(*)::int AS n, count(DISTINCT d.updated_at)::int AS stamps, max(r.created_at) AS revision_at
          FROM webhook_deliveries d
          JOIN webhook_subscription_revisions r ON r.subscription_id = d.subscription_id AND r.change = 'readiness_revoked'
          WHERE d.subscription_id = ${subscriptionId} GROUP BY d.state ORDER BY d.state`)
        expect(states.map((row) => [row.state, row.n])).toEqual([["cancelled", 4], ["succeeded", 1]])
        const cancelledRow = states.find((row) => row.state === "cancelled")
        // Same transaction: the cancellations carry the revision's instant.
        expect(cancelledRow?.stamps).toBe(1)
        const { revisions } = yield* store.getSubscription(subscriptionId)
        expect(revisions.at(-1)).toMatchObject({ change: "readiness_revoked", state: "disabled", changedBy: "bob", reason: "receiver breach" })

        // The in-flight sends of the cancelled deliveries finish later: their results are recorded as
        // attempts but never written over `cancelled`.
        for (const delivery of [live, stale]) {
          const result = yield* succeed(delivery, new Date())
          expect(result).toEqual({ _tag: "LeaseLost" })
        }
        const after = yield* store.showDelivery(live.deliveryId)
        expect(after.delivery.state).toBe("cancelled")
        expect(after.attempts.map((a) => a.responseStatus)).toEqual([204])
        // Nothing of the disabled subscription is leased again; the other subscription is untouched.
        const leasedAfter = yield* queue.lease({ workerId: "w2", now: new Date(now.getTime() + 10 * minute), limit: 100, leaseMs: minute })
        expect(leasedAfter.filter((d) => d.subscriptionId === subscriptionId)).toEqual([])
        expect((yield* deliveriesOf(other.subscriptionId)).every((d) => d.state !== "cancelled")).toBe(true)
        // A new event of the organization no longer gets a delivery for the revoked subscription.
        yield* publish(organizationId)
        expect((yield* deliveriesOf(subscriptionId)).filter((d) => d.state === "pending")).toEqual([])
      }))

    it.effect("concurrent leases (FOR UPDATE SKIP LOCKED) never hand one delivery to two workers", () =>
      Effect.gen(function* () {
        const organizationId = yield* newOrganization
        const { subscriptionId } = yield* activeSubscription(organizationId)
        yield* Effect.forEach(Array.from({ length: 60 }), () => publish(organizationId), { concurrency: 8, discard: true })
        const now = new Date(Date.now() + 1000)
        const batches = yield* Effect.all(
          Array.from({ length: 6 }, (_, index) => leaseAll(`worker-${index}`, now, minute, 7)),
          { concurrency: "unbounded" }
        )
        const mine = batches.flat().filter((d) => d.subscriptionId === subscriptionId)
        expect(new Set(mine.map((d) => d.deliveryId)).size).toBe(mine.length)
        // Drain: everything is leased exactly once.
        let more = yield* leaseAll("drain", now, minute, 100)
        const all = [...mine, ...more.filter((d) => d.subscriptionId === subscriptionId)]
        expect(new Set(all.map((d) => d.deliveryId)).size).toBe(60)
        expect(all.length).toBe(60)
        more = yield* leaseAll("drain-again", now, minute, 100)
        expect(more.filter((d) => d.subscriptionId === subscriptionId)).toEqual([])
        for (const delivery of all) yield* succeed(delivery, now)
      }))

    it.effect("a stale lease is taken again with the next attempt number; the first worker's late result is LeaseLost", () =>
      Effect.gen(function* () {
        const organizationId = yield* newOrganization
        const { subscriptionId } = yield* activeSubscription(organizationId)
        yield* publish(organizationId)
        const store = yield* WebhookOperatorStore
        const t0 = new Date(Date.now() + 1000)
        const first = (yield* leaseAll("crashed", t0, 2000)).find((d) => d.subscriptionId === subscriptionId)
        expect(first?.attemptNumber).toBe(1)
        expect(first?.reclaimedStale).toBe(false)
        // Still leased: not taken before it expires.
        expect((yield* leaseAll("other", new Date(t0.getTime() + 1000))).filter((d) => d.subscriptionId === subscriptionId)).toEqual([])
        const second = (yield* leaseAll("other", new Date(t0.getTime() + 2000))).find((d) => d.subscriptionId === subscriptionId)
        expect(second?.deliveryId).toBe(first?.deliveryId)
        expect(second?.attemptNumber).toBe(2)
        expect(second?.reclaimedStale).toBe(true)
        if (first === undefined || second === undefined) throw new Error("expected leases")
        expect(yield* succeed(first, new Date(t0.getTime() + 2500))).toEqual({ _tag: "LeaseLost" })
        expect(yield* succeed(second, new Date(t0.getTime() + 2600))).toEqual({ _tag: "Written", state: "succeeded" })
        const shown = yield* store.showDelivery(second.deliveryId)
        expect(shown.delivery.state).toBe("succeeded")
        expect(shown.delivery.attemptCount).toBe(2)
        expect(shown.attempts.map((a) => [a.attemptNumber, a.workerId])).toEqual([[1, "crashed"], [2, "other"]])
      }))

    it.effect("a batch of results is recorded at once: each delivery its own step; the result of a lease lost meanwhile is an attempt only", () =>
      Effect.gen(function* () {
        const organizationId = yield* newOrganization
        const { subscriptionId } = yield* activeSubscription(organizationId)
        yield* Effect.forEach(Array.from({ length: 4 }), () => publish(organizationId), { discard: true })
        const queue = yield* WebhookDeliveryQueue
        const store = yield* WebhookOperatorStore
        const t0 = new Date(Date.now() + 1000)
        const batch = (yield* queue.lease({ workerId: "batcher", now: t0, limit: 100, leaseMs: 2000 })).filter((d) => d.subscriptionId === subscriptionId)
        expect(batch.map((d) => [d.attemptNumber, d.leaseOwner])).toEqual(Array(4).fill([1, "batcher"]))
        const [succeeded, retried, failed, lost] = batch
        if (succeeded === undefined || retried === undefined || failed === undefined || lost === undefined) throw new Error("expected 4 leases")
        // The batch outlived its lease and another worker took one of its deliveries.
        const after = new Date(t0.getTime() + 2000)
        const taken = yield* queue.lease({ workerId: "other", now: after, limit: 1, leaseMs: minute, deliveryId: lost.deliveryId })
        expect(taken.map((d) => [d.attemptNumber, d.reclaimedStale])).toEqual([[2, true]])
        const retryAt = new Date(t0.getTime() + minute)
        const recorded = yield* queue.recordAttempts([
          { delivery: succeeded, result: { outcome: { _tag: "Response", status: 200 }, finishedAt: after, durationMs: 4 }, step: { _tag: "Succeeded" } },
          {
            delivery: retried,
            result: { outcome: { _tag: "NetworkError", errorClass: "timeout" }, finishedAt: after, durationMs: 1500 },
            step: { _tag: "Retry", at: retryAt, delayMs: minute }
          },
          {
            delivery: failed,
            result: { outcome: { _tag: "Response", status: 404 }, finishedAt: after, durationMs: 4 },
            step: { _tag: "Failed", reason: "terminal_status" }
          },
          { delivery: lost, result: { outcome: { _tag: "Response", status: 200 }, finishedAt: after, durationMs: 4 }, step: { _tag: "Succeeded" } }
        ])
        expect(recorded).toEqual([
          { _tag: "Written", state: "succeeded" },
          { _tag: "Written", state: "pending" },
          { _tag: "Written", state: "failed" },
          { _tag: "LeaseLost" }
        ])
        const shown = (delivery: LeasedDelivery) => store.showDelivery(delivery.deliveryId)
        const attempts = (delivery: LeasedDelivery) =>
          Effect.map(shown(delivery), (s) => s.attempts.map((a) => [a.attemptNumber, a.responseStatus, a.errorClass, a.durationMs]))
        expect((yield* shown(succeeded)).delivery).toMatchObject({ state: "succeeded", lastResponseStatus: 200 })
        expect(yield* attempts(succeeded)).toEqual([[1, 200, null, 4]])
        expect((yield* shown(retried)).delivery).toMatchObject({ state: "pending", nextAttemptAt: retryAt, lastErrorClass: "timeout" })
        expect(yield* attempts(retried)).toEqual([[1, null, "timeout", 1500]])
        expect((yield* shown(failed)).delivery).toMatchObject({ state: "failed", failureReason: "terminal_status", lastResponseStatus: 404 })
        // The lost one: its attempt 1 is recorded, the delivery stays with the worker that took it.
        expect((yield* shown(lost)).delivery).toMatchObject({ state: "sending", attemptCount: 2 })
        expect(yield* attempts(lost)).toEqual([[1, 200, null, 4], [2, null, null, null]])
        for (const delivery of taken) yield* succeed(delivery, after)
      }))

    it.effect("a stale delivery whose last allowed attempt was cut off is failed, not retried forever", () =>
      Effect.gen(function* () {
        const organizationId = yield* newOrganization
        const { subscriptionId } = yield* activeSubscription(organizationId)
        const store = yield* WebhookOperatorStore
        const { deliveryId } = yield* store.createEndpointTest(subscriptionId)
        const t0 = new Date(Date.now() + 1000)
        const queue = yield* WebhookDeliveryQueue
        expect(yield* queue.lease({ workerId: "w", now: t0, limit: 1, leaseMs: 100, deliveryId })).toHaveLength(1)
        expect(yield* queue.lease({ workerId: "w", now: new Date(t0.getTime() + 200), limit: 1, leaseMs: 100, deliveryId })).toEqual([])
        const shown = yield* store.showDelivery(deliveryId)
        expect(shown.delivery).toMatchObject({ state: "failed", failureReason: "attempts_exhausted", lastErrorClass: "lease_expired" })
        expect(shown.attempts.map((a) => a.errorClass)).toEqual(["lease_expired"])
      }))

    it.effect("retry returns the delivery to pending at its next time; redeliver brings a failed one back with a fresh schedule", () =>
      Effect.gen(function* () {
        const organizationId = yield* newOrganization
        const { subscriptionId } = yield* activeSubscription(organizationId)
        yield* publish(organizationId)
        const store = yield* WebhookOperatorStore
        const t0 = new Date(Date.now() + 1000)
        const first = (yield* leaseAll("w", t0)).find((d) => d.subscriptionId === subscriptionId)
        if (first === undefined) throw new Error("expected a lease")
        const retryAt = new Date(t0.getTime() + 5000)
        const retried = yield* recordOne(
          first,
          { outcome: { _tag: "Response", status: 503 }, finishedAt: t0, durationMs: 3 },
          { _tag: "Retry", at: retryAt, delayMs: 5000 }
        )
        expect(retried).toEqual({ _tag: "Written", state: "pending" })
        expect((yield* store.showDelivery(first.deliveryId)).delivery).toMatchObject({ state: "pending", nextAttemptAt: retryAt, lastResponseStatus: 503 })
        expect((yield* leaseAll("w", new Date(t0.getTime() + 4000))).filter((d) => d.subscriptionId === subscriptionId)).toEqual([])
        const second = (yield* leaseAll("w", retryAt)).find((d) => d.subscriptionId === subscriptionId)
        if (second === undefined) throw new Error("expected a lease")
        expect(second.scheduleAttemptNumber).toBe(2)
        yield* recordOne(
          second,
          { outcome: { _tag: "Response", status: 404 }, finishedAt: retryAt, durationMs: 3 },
          { _tag: "Failed", reason: "terminal_status" }
        )
        const refusedPending = yield* Effect.flip(store.redeliver(second.deliveryId).pipe(Effect.andThen(store.redeliver(second.deliveryId))))
        expect(refusedPending).toBeInstanceOf(RedeliveryRefused)
        const redelivered = (yield* store.showDelivery(second.deliveryId)).delivery
        expect(redelivered).toMatchObject({ state: "pending", attemptCount: 2, failureReason: null })
        const third = (yield* leaseAll("w", new Date(Date.now() + 2000))).find((d) => d.subscriptionId === subscriptionId)
        expect(third?.attemptNumber).toBe(3)
        expect(third?.scheduleAttemptNumber).toBe(1)
        if (third !== undefined) yield* succeed(third, new Date())
      }))

    it.effect("the sender signs with the newest secret after rotation", () =>
      Effect.gen(function* () {
        const organizationId = yield* newOrganization
        const { secret, subscriptionId } = yield* activeSubscription(organizationId)
        const store = yield* WebhookOperatorStore
        yield* publish(organizationId)
        const before = (yield* leaseAll("w", new Date(Date.now() + 1000))).find((d) => d.subscriptionId === subscriptionId)
        expect(before === undefined ? undefined : Redacted.value(before.signingSecret)).toBe(secret)
        if (before !== undefined) yield* succeed(before, new Date())
        const rotated = yield* store.rotateSecret(subscriptionId)
        expect(rotated).not.toBe(secret)
        yield* publish(organizationId)
        const after = (yield* leaseAll("w", new Date(Date.now() + 1000))).find((d) => d.subscriptionId === subscriptionId)
        expect(after === undefined ? undefined : Redacted.value(after.signingSecret)).toBe(rotated)
        if (after !== undefined) yield* succeed(after, new Date())
      }))

    it.effect("the outbox port alone (WebhookOutbox) keeps the event id of the first publish", () =>
      Effect.gen(function* () {
        const organizationId = yield* newOrganization
        const outbox = yield* WebhookOutbox
        const ids = yield* IdGenerator
        const input = {
          organizationId,
          encounterId: EncounterId.make(unique("enc")),
          documentId: DocumentId.make(unique("doc")),
          occurredAt: new Date("2026-05-01T12:00:00Z")
        }
        const first = yield* outbox.publishTranscriptReady({ ...input, eventId: WebhookEventId.make(yield* ids.next("webhook_event")) })
        const second = yield* outbox.publishTranscriptReady({ ...input, eventId: WebhookEventId.make(yield* ids.next("webhook_event")) })
        expect(second.event.id).toBe(first.event.id)
        expect(first.event.occurred_at).toBe("2026-05-01T12:00:00.000Z")
      }))
  })
}
