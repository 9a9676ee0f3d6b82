import { randomUUID } from "node:crypto"
import { afterEach, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { type IdempotencyStoreService, makeWebhookRequestHandler, type TranscriptReadyEvent } from "../src/index.js"
import { gate, newEvent, newSecret, post, signedRequest, startServer, type TestServer } from "./support.js"

/**
 * The behaviours of the receiver handler that depend on the idempotency store, run against a
 * real node:http server on loopback with really signed requests, for each store.
 */
export const receiverHandlerSuite = (storeName: string, makeStore: () => Promise<IdempotencyStoreService>) => {
  describe(`makeWebhookRequestHandler with the ${storeName} store`, () => {
    const servers: Array<TestServer> = []
    afterEach(async () => {
      await Promise.all(servers.splice(0).map((server) => server.close()))
    })

    const receiver = async (handle: (event: TranscriptReadyEvent) => Effect.Effect<unknown, Error>) => {
      const secret = newSecret()
      const store = await makeStore()
      const server = await startServer(makeWebhookRequestHandler({ secrets: [secret], store, handle }))
      servers.push(server)
      return { secret, url: `${server.url}/webhooks` }
    }

    it("a valid event: 200 and the handler runs once with the verified event", async () => {
      const seen: Array<TranscriptReadyEvent> = []
      const { secret, url } = await receiver((event) => Effect.sync(() => seen.push(event)))
      const event = newEvent()
      const response = await post(url, signedRequest({ event, secret }))
      expect(response.status).toBe(200)
      expect(seen).toEqual([event])
    })

    it("the same event id twice (new delivery id): the handler runs once, the duplicate gets 200", async () => {
      let calls = 0
      const { secret, url } = await receiver(() => Effect.sync(() => calls++))
      const event = newEvent()
      const first = await post(url, signedRequest({ event, secret, deliveryId: "dlv_first" }))
      const second = await post(url, signedRequest({ event, secret, deliveryId: "dlv_second" }))
      expect([first.status, second.status]).toEqual([200, 200])
      expect(JSON.parse(second.body)).toEqual({ status: "duplicate" })
      expect(calls).toBe(1)
    })

    it("deduplicates by Service-Event-Id, never by Service-Delivery-Id: two events with one delivery id both run", async () => {
      const handled: Array<string> = []
      const { secret, url } = await receiver((event) => Effect.sync(() => handled.push(event.id)))
      const a = newEvent()
      const b = newEvent()
      expect((await post(url, signedRequest({ event: a, secret, deliveryId: "dlv_same" }))).status).toBe(200)
      expect((await post(url, signedRequest({ event: b, secret, deliveryId: "dlv_same" }))).status).toBe(200)
      expect(handled).toEqual([a.id, b.id])
    })

    it("a duplicate arriving while the first is in progress: 409 (retryable), the handler runs once", async () => {
      const held = gate()
      let calls = 0
      const { secret, url } = await receiver(() =>
        Effect.promise(async () => {
          calls++
          await held.opened
        })
      )
      const event = newEvent()
      const first = post(url, signedRequest({ event, secret }))
      // Wait until the first delivery holds the claim.
      while (calls === 0) await new Promise((resolve) => setTimeout(resolve, 5))
      const duplicates = await Promise.all(
        Array.from({ length: 4 }, () => post(url, signedRequest({ event, secret })))
      )
      expect(duplicates.map((response) => response.status)).toEqual([409, 409, 409, 409])
      held.open()
      expect((await first).status).toBe(200)
      expect((await post(url, signedRequest({ event, secret }))).status).toBe(200)
      expect(calls).toBe(1)
    })

    it("20 concurrent deliveries of one event: the handler runs exactly once, every answer is 200 or 409", async () => {
      let calls = 0
      const { secret, url } = await receiver(() =>
        Effect.promise(async () => {
          calls++
          await new Promise((resolve) => setTimeout(resolve, 50))
        })
      )
      const event = newEvent()
      const statuses = (
        await Promise.all(Array.from({ length: 20 }, () => post(url, signedRequest({ event, secret, deliveryId: `dlv_${randomUUID()}` }))))
      ).map((response) => response.status)
      expect(calls).toBe(1)
      expect(statuses.filter((status) => status === 200).length).toBeGreaterThanOrEqual(1)
      expect(statuses.every((status) => status === 200 || status === 409)).toBe(true)
    })

    it("a failing handler: 500 (retryable), the claim is released and a redelivery runs it again", async () => {
      let calls = 0
      const { secret, url } = await receiver(() =>
        Effect.suspend(() => {
          calls++
          return calls === 1 ? Effect.fail(new Error("downstream unavailable")) : Effect.void
        })
      )
      const event = newEvent()
      const failed = await post(url, signedRequest({ event, secret }))
      expect(failed.status).toBe(500)
      expect(JSON.parse(failed.body)).toEqual({ error: "handler_failed" })
      expect((await post(url, signedRequest({ event, secret }))).status).toBe(200)
      expect((await post(url, signedRequest({ event, secret }))).status).toBe(200)
      expect(calls).toBe(2)
    })
  })
}
