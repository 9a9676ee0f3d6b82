import { serializeWebhookEvent, type WebhookDeliveryId, WebhookDeliveryQueue } from "@clinical-api/domain"
import { PgClient, WebhookOperatorStore } from "@clinical-api/storage-adapter"
import {
  type DeliveryWorkerOptions,
  runDeliveryPass,
  runDeliveryWorker,
  WebhookRuntimeDisabled
} from "@clinical-api/webhook-adapter"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import {
  activeSubscription,
  adminUrl,
  closedPortUrl,
  deliveriesOf,
  eventually,
  publishOne,
  showDelivery,
  startReceiver,
  webhookStack
} from "./cli-webhooks-support.js"

/**
 * The delivery worker end to end, in this process: real PostgreSQL (a fresh database per
 * test), the real worker, real HTTP on loopback, real HMAC, and the receiver kit as the
 * receiving side. The retry schedule is shortened (docs/webhooks.md's delays are minutes to hours).
 */

const SHORT_SCHEDULE = [50, 50, 50, 50, 50, 50, 50]

const worker = (overrides: Partial<DeliveryWorkerOptions> = {}): DeliveryWorkerOptions => ({
  runtime: "enabled",
  environment: "sandbox",
  leaseMs: 10_000,
  retryDelaysMs: SHORT_SCHEDULE,
  attemptTimeoutMs: 3000,
  pollIntervalMs: 20,
  concurrency: 2,
  ...overrides
})

/** Runs the worker loop until `deliveryId` reaches a terminal state, then stops it. */
const workUntilDone = (deliveryId: WebhookDeliveryId, options: DeliveryWorkerOptions = worker(), timeoutMs = 15_000) =>
  Effect.gen(function* () {
    const running = yield* Effect.forkChild(runDeliveryWorker(options))
    const shown = yield* eventually(
      Effect.map(showDelivery(deliveryId), (shown) =>
        ["succeeded", "failed", "cancelled"].includes(shown.delivery.state) ? shown : undefined
      ),
      timeoutMs,
      `delivery ${deliveryId} to finish`
    )
    yield* Fiber.interrupt(running)
    return shown
  })

const onlyDelivery = (subscriptionId: Parameters<typeof deliveriesOf>[0]) =>
  Effect.map(deliveriesOf(subscriptionId), (deliveries) => {
    expect(deliveries).toHaveLength(1)
    const delivery = deliveries[0]
    if (delivery === undefined) throw new Error("no delivery")
    return delivery
  })

if (adminUrl === "") {
  console.warn("Skipping the webhook delivery end-to-end tests: set DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/postgres)")
  describe("webhook delivery end to end", () => {
    it.skip("skipped: DATABASE_URL is not set", () => {})
  })
} else {
  describe("webhook delivery end to end (real PostgreSQL, worker, HTTP and receiver kit)", () => {
    it.live("the event arrives signed, verifies with the subscription's secret, and the kit runs the business handler once", () =>
      Effect.gen(function* () {
        // The secret exists once the subscription does, and the receiver's port once it listens:
        // the subscription is made first and pointed at the receiver afterwards.
        const probe = yield* Effect.promise(() => closedPortUrl())
        const { organizationId, secret: signingSecret, subscriptionId } = yield* activeSubscription(probe)
        const receiver = yield* Effect.promise(() => startReceiver({ secret: signingSecret }))
        yield* setEndpoint(subscriptionId, receiver.url)
        const published = yield* publishOne(organizationId)
        const pass = yield* runDeliveryPass(worker())
        expect(pass).toMatchObject({ attempts: 1, succeeded: 1, failed: 0, retried: 0, leaseLost: 0 })
        expect([...receiver.handled.entries()]).toEqual([[published.event.id, 1]])
        expect(receiver.events).toEqual([published.event])
        const delivery = yield* onlyDelivery(subscriptionId)
        expect(receiver.received.map((r) => [r.eventId, r.deliveryId])).toEqual([[published.event.id, delivery.deliveryId]])
        expect(receiver.received[0]?.signature).toMatch(/^v1=[0-9a-f]{64}$/)
        const shown = yield* showDelivery(delivery.deliveryId)
        expect(shown.delivery).toMatchObject({ state: "succeeded", attemptCount: 1, lastResponseStatus: 200 })
        expect(shown.attempts.map((a) => [a.attemptNumber, a.responseStatus, a.errorClass])).toEqual([[1, 200, null]])
        yield* Effect.promise(() => receiver.close())
      }).pipe(Effect.provide(webhookStack())))

    it.live("500 then 200: retried after the shortened schedule with the same body bytes and Service-Delivery-Id, freshly signed", () =>
      Effect.gen(function* () {
        const { organizationId, secret, subscriptionId } = yield* activeSubscription(yield* Effect.promise(() => closedPortUrl()))
        const receiver = yield* Effect.promise(() =>
          startReceiver({ secret, script: (index) => (index === 0 ? { status: 500 } : "kit") })
        )
        yield* setEndpoint(subscriptionId, receiver.url)
        const published = yield* publishOne(organizationId)
        const delivery = yield* onlyDelivery(subscriptionId)
        const shown = yield* workUntilDone(delivery.deliveryId)
        expect(shown.delivery).toMatchObject({ state: "succeeded", attemptCount: 2 })
        expect(shown.attempts.map((a) => a.responseStatus)).toEqual([500, 200])
        const [first, second] = receiver.received
        expect(first?.verified).toBe(true)
        expect(first?.body?.toString("utf8")).toBe(serializeWebhookEvent(published.event))
        expect(second?.deliveryId).toBe(first?.deliveryId)
        expect(second?.eventId).toBe(first?.eventId)
        expect((second?.at ?? 0) - (first?.at ?? 0)).toBeGreaterThanOrEqual(50)
        expect([...receiver.handled.values()]).toEqual([1])
        yield* Effect.promise(() => receiver.close())
      }).pipe(Effect.provide(webhookStack())))

    it.live("429 with Retry-After: 1 postpones the retry to at least 1 s although the shortened schedule says 50 ms", () =>
      Effect.gen(function* () {
        const { organizationId, secret, subscriptionId } = yield* activeSubscription(yield* Effect.promise(() => closedPortUrl()))
        const receiver = yield* Effect.promise(() =>
          startReceiver({ secret, script: (index) => (index === 0 ? { status: 429, headers: { "Retry-After": "1" } } : "kit") })
        )
        yield* setEndpoint(subscriptionId, receiver.url)
        yield* publishOne(organizationId)
        const delivery = yield* onlyDelivery(subscriptionId)
        const shown = yield* workUntilDone(delivery.deliveryId)
        expect(shown.attempts.map((a) => a.responseStatus)).toEqual([429, 200])
        expect((receiver.received[1]?.at ?? 0) - (receiver.received[0]?.at ?? 0)).toBeGreaterThanOrEqual(1000)
        expect(shown.delivery.state).toBe("succeeded")
        yield* Effect.promise(() => receiver.close())
      }).pipe(Effect.provide(webhookStack())))

    it.live("a receiver that never answers: the attempt times out (error class timeout) and is retried", () =>
      Effect.gen(function* () {
        const { organizationId, secret, subscriptionId } = yield* activeSubscription(yield* Effect.promise(() => closedPortUrl()))
        const receiver = yield* Effect.promise(() => startReceiver({ secret, script: (index) => (index === 0 ? "hang" : "kit") }))
        yield* setEndpoint(subscriptionId, receiver.url)
        yield* publishOne(organizationId)
        const delivery = yield* onlyDelivery(subscriptionId)
        const shown = yield* workUntilDone(delivery.deliveryId, worker({ attemptTimeoutMs: 300 }))
        expect(shown.attempts.map((a) => [a.responseStatus, a.errorClass])).toEqual([[null, "timeout"], [200, null]])
        expect(shown.attempts[0]?.durationMs).toBeGreaterThanOrEqual(290)
        expect(shown.attempts[0]?.durationMs).toBeLessThan(2000)
        expect(shown.delivery.state).toBe("succeeded")
        yield* Effect.promise(() => receiver.close())
      }).pipe(Effect.provide(webhookStack())))

    it.live("a refused connection is retried per schedule, 8 attempts in all, then failed with attempts_exhausted", () =>
      Effect.gen(function* () {
        const { organizationId, subscriptionId } = yield* activeSubscription(yield* Effect.promise(() => closedPortUrl()))
        yield* publishOne(organizationId)
        const delivery = yield* onlyDelivery(subscriptionId)
        const shown = yield* workUntilDone(delivery.deliveryId, worker({ retryDelaysMs: [30] }))
        expect(shown.delivery).toMatchObject({ state: "failed", failureReason: "attempts_exhausted", attemptCount: 8, lastErrorClass: "connection" })
        expect(shown.attempts.map((a) => a.errorClass)).toEqual(Array(8).fill("connection"))
        const starts = shown.attempts.map((a) => a.startedAt.getTime())
        for (let index = 1; index < starts.length; index++) {
          expect((starts[index] ?? 0) - (starts[index - 1] ?? 0)).toBeGreaterThanOrEqual(30)
        }
      }).pipe(Effect.provide(webhookStack())))

    it.live("400, 401, 404 and 302 are terminal: failed at once after one attempt, the redirect not followed", () =>
      Effect.gen(function* () {
        for (const status of [400, 401, 404, 302]) {
          const { organizationId, secret, subscriptionId } = yield* activeSubscription(yield* Effect.promise(() => closedPortUrl()))
          const receiver = yield* Effect.promise(() =>
            startReceiver({ secret, script: () => ({ status, headers: status === 302 ? { Location: "/elsewhere" } : {} }) })
          )
          yield* setEndpoint(subscriptionId, receiver.url)
          yield* publishOne(organizationId)
          const pass = yield* runDeliveryPass(worker())
          expect(pass).toMatchObject({ attempts: 1, failed: 1 })
          const delivery = yield* onlyDelivery(subscriptionId)
          expect(delivery).toMatchObject({ state: "failed", failureReason: "terminal_status", attemptCount: 1, lastResponseStatus: status })
          expect(receiver.received).toHaveLength(1)
          yield* Effect.promise(() => receiver.close())
        }
      }).pipe(Effect.provide(webhookStack())))

    it.live("revocation during a leased send cancels the delivery; the in-flight send's 200 is recorded but never written over cancelled", () =>
      Effect.gen(function* () {
        const { organizationId, secret, subscriptionId } = yield* activeSubscription(yield* Effect.promise(() => closedPortUrl()))
        let release: () => void = () => undefined
        const entered = { value: false }
        const held = new Promise<void>((resolve) => {
          release = resolve
        })
        const receiver = yield* Effect.promise(() =>
          startReceiver({
            secret,
            handle: async () => {
              entered.value = true
              await held
            }
          })
        )
        yield* setEndpoint(subscriptionId, receiver.url)
        yield* publishOne(organizationId)
        const delivery = yield* onlyDelivery(subscriptionId)
        const pass = yield* Effect.forkChild(runDeliveryPass(worker()))
        yield* eventually(Effect.sync(() => (entered.value ? true : undefined)), 5000, "the send to be in flight")
        expect((yield* showDelivery(delivery.deliveryId)).delivery.state).toBe("sending")
        const store = yield* WebhookOperatorStore
        const revoked = yield* store.revokeReadiness({ subscriptionId, by: "ops", reason: "receiver compromised" })
        expect(revoked.cancelled).toEqual({ pending: 0, sending: 1, staleSending: 0 })
        release()
        const report = yield* Fiber.join(pass)
        expect(report).toMatchObject({ attempts: 1, leaseLost: 1, succeeded: 0 })
        const shown = yield* showDelivery(delivery.deliveryId)
        expect(shown.delivery.state).toBe("cancelled")
        expect(shown.attempts.map((a) => a.responseStatus)).toEqual([200])
        // And nothing more is ever sent for it.
        expect(yield* runDeliveryPass(worker())).toMatchObject({ attempts: 0 })
        yield* Effect.promise(() => receiver.close())
      }).pipe(Effect.provide(webhookStack())))

    it.live("a worker that dies mid-batch (its sends answered, none recorded) loses no event: after the lease another worker delivers each, the kit handles each once", () =>
      Effect.gen(function* () {
        const { organizationId, secret, subscriptionId } = yield* activeSubscription(yield* Effect.promise(() => closedPortUrl()))
        const receiver = yield* Effect.promise(() => startReceiver({ secret }))
        yield* setEndpoint(subscriptionId, receiver.url)
        const published = yield* Effect.forEach(Array.from({ length: 12 }), () => publishOne(organizationId), { concurrency: 4 })
        // The first worker's record never completes, as when its process dies between the
        // answers and the batch's record: its claimed batch stays leased.
        const queue = yield* WebhookDeliveryQueue
        const dying = runDeliveryWorker(worker({ concurrency: 8, leaseMs: 1500 })).pipe(
          Effect.provideService(WebhookDeliveryQueue, WebhookDeliveryQueue.of({ lease: queue.lease, recordAttempts: () => Effect.never }))
        )
        const first = yield* Effect.forkChild(dying)
        yield* eventually(Effect.sync(() => (receiver.handled.size === 8 ? true : undefined)), 10_000, "the first batch to be answered")
        yield* Fiber.interrupt(first)
        const states = yield* Effect.map(deliveriesOf(subscriptionId), (deliveries) => deliveries.map((d) => d.state).toSorted())
        expect(states).toEqual([...Array(4).fill("pending"), ...Array(8).fill("sending")])

        const reclaimed: Array<boolean> = []
        const second = yield* Effect.forkChild(
          runDeliveryWorker(worker({ concurrency: 8, onAttempt: (report) => Effect.sync(() => void reclaimed.push(report.reclaimedStale)) }))
        )
        yield* eventually(
          Effect.map(deliveriesOf(subscriptionId), (deliveries) => (deliveries.every((d) => d.state === "succeeded") ? true : undefined)),
          15_000,
          "every delivery to succeed"
        )
        yield* Fiber.interrupt(second)
        expect(reclaimed.filter((stale) => stale)).toHaveLength(8)
        expect(reclaimed).toHaveLength(12)
        expect(receiver.handled.size).toBe(12)
        expect([...receiver.handled.values()].every((runs) => runs === 1)).toBe(true)
        expect(new Set(receiver.handled.keys())).toEqual(new Set(published.map((p) => p.event.id)))
        // Each reclaimed delivery shows the cut-off attempt and the one that succeeded.
        for (const delivery of yield* deliveriesOf(subscriptionId)) {
          const shown = yield* showDelivery(delivery.deliveryId)
          const attempts = shown.attempts.map((a) => [a.errorClass ?? a.responseStatus])
          expect([[[200]], [["lease_expired"], [200]]]).toContainEqual(attempts)
        }
        yield* Effect.promise(() => receiver.close())
      }).pipe(Effect.provide(webhookStack())), 60_000)

    it.live("runtime gate: with the default runtime status (planned_not_generally_available) nothing is sent", () =>
      Effect.gen(function* () {
        const { organizationId, secret, subscriptionId } = yield* activeSubscription(yield* Effect.promise(() => closedPortUrl()))
        const receiver = yield* Effect.promise(() => startReceiver({ secret }))
        yield* setEndpoint(subscriptionId, receiver.url)
        yield* publishOne(organizationId)
        const gated = worker({ runtime: "planned_not_generally_available" })
        const refusedPass = yield* Effect.flip(runDeliveryPass(gated))
        expect(refusedPass).toBeInstanceOf(WebhookRuntimeDisabled)
        expect(refusedPass.message).toContain("planned_not_generally_available")
        expect(yield* Effect.flip(runDeliveryWorker(gated))).toBeInstanceOf(WebhookRuntimeDisabled)
        yield* Effect.sleep("200 millis")
        expect(receiver.received).toEqual([])
        expect(yield* onlyDelivery(subscriptionId)).toMatchObject({ state: "pending", attemptCount: 0 })
        yield* Effect.promise(() => receiver.close())
      }).pipe(Effect.provide(webhookStack())))

    it.live("production: an endpoint whose host resolves to loopback is refused at send time (address_refused), nothing reaches it", () =>
      Effect.gen(function* () {
        const { organizationId, secret, subscriptionId } = yield* activeSubscription(yield* Effect.promise(() => closedPortUrl()))
        const receiver = yield* Effect.promise(() => startReceiver({ secret }))
        const port = new URL(receiver.url).port
        for (const url of [`https://localhost:${port}/webhooks`, `https://127.0.0.1:${port}/webhooks`]) {
          yield* setEndpoint(subscriptionId, url)
          yield* publishOne(organizationId)
        }
        // A pass drains whatever is due, so a retry must not fall due inside it: with the
        // shortened 50 ms schedule a slow machine took each delivery a second time.
        const pass = yield* runDeliveryPass(worker({ environment: "production", retryDelaysMs: [60_000] }))
        expect(pass).toMatchObject({ attempts: 2, retried: 2 })
        const deliveries = yield* deliveriesOf(subscriptionId)
        expect(deliveries.map((d) => [d.state, d.lastErrorClass])).toEqual([
          ["pending", "address_refused"],
          ["pending", "address_refused"]
        ])
        expect(receiver.received).toEqual([])
        yield* Effect.promise(() => receiver.close())
      }).pipe(Effect.provide(webhookStack())))
  })
}

/** Points a subscription at `url` (the receiver's port is known only once it listens). */
const setEndpoint = (subscriptionId: string, url: string) =>
  PgClient.use((client) =>
    client.run("test.setEndpoint", (sql) => sql`UPDATE webhook_subscriptions SET endpoint_url = ${url} WHERE subscription_id = ${subscriptionId}`)
  )
