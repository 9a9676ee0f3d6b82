import { randomBytes } from "node:crypto"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import {
  DocumentId,
  EncounterId,
  OrganizationId,
  type TranscriptReadyEvent,
  TranscriptReadyPublisher,
  verifyWebhookOrEndpointTest,
  WEBHOOK_READINESS_ITEMS,
  type WebhookDeliveryId,
  WebhookHeaders,
  type WebhookSubscriptionId
} from "@clinical-api/domain"
import {
  IdGeneratorLive,
  makePgClient,
  migrate,
  OperatorStore,
  OperatorStoreLive,
  PgClient,
  WebhookOperatorStore,
  WebhookOutboxPostgres,
  WebhooksPostgresLive
} from "@clinical-api/storage-adapter"
import { serverDatabases } from "@clinical-api/storage-adapter/testing"
import { makeIdempotencyStoreMemory, makeWebhookRequestHandler } from "@clinical-api/webhook-adapter"
import { Duration, Effect, Layer, Result } from "effect"

/**
 * Shared pieces of the webhook end-to-end tests: a fresh migrated database per test with the
 * webhook stores on it, an active subscription, and a loopback receiver that either answers
 * by script (reading and verifying the delivery itself) or hands the request untouched to the
 * receiver kit (`makeWebhookRequestHandler`, idempotent by event id).
 */

export const adminUrl = process.env["DATABASE_URL"]?.trim() ?? ""

const servicesOn = <E>(database: Layer.Layer<PgClient, E>) =>
  Layer.mergeAll(
    WebhooksPostgresLive,
    OperatorStoreLive,
    TranscriptReadyPublisher.Live.pipe(Layer.provide(WebhookOutboxPostgres))
  ).pipe(Layer.provideMerge(IdGeneratorLive), Layer.provideMerge(Layer.effectDiscard(migrate())), Layer.provideMerge(database))

/** Everything on one fresh database (dropped when the layer is released). */
export const webhookStack = (options: { readonly maxConnections?: number } = {}) =>
  servicesOn(
    Layer.effect(
      PgClient,
      Effect.flatMap(serverDatabases(adminUrl).fresh, (db) => makePgClient({ url: db.url, maxConnections: options.maxConnections ?? 8 }))
    )
  )

/** Everything on the database at `url` (which the caller creates and drops). */
export const webhookStackOn = (url: string, maxConnections = 8) =>
  servicesOn(Layer.effect(PgClient, makePgClient({ url, maxConnections })))

export const unique = (prefix: string) => `${prefix}_${randomBytes(5).toString("hex")}`

/** A new organization and an active subscription of it to `url` (every readiness item confirmed). */
export const activeSubscription = (url: string) =>
  Effect.gen(function* () {
    const organizationId = OrganizationId.make(unique("org"))
    yield* OperatorStore.use((store) => store.createOrganization({ organizationId, name: "Receiver org" }))
    const store = yield* WebhookOperatorStore
    const { secret, subscription } = yield* store.createSubscription({ organizationId, endpointUrl: url })
    for (const item of WEBHOOK_READINESS_ITEMS) {
      yield* store.setReadiness({ subscriptionId: subscription.subscriptionId, item, confirmed: true, by: "test" })
    }
    yield* store.activate({ subscriptionId: subscription.subscriptionId, by: "test", reason: "end-to-end test" })
    return { organizationId, subscriptionId: subscription.subscriptionId, secret }
  })

export const publishOne = (organizationId: OrganizationId) =>
  TranscriptReadyPublisher.use((publisher) =>
    publisher.publish({
      organizationId,
      encounterId: EncounterId.make(unique("enc")),
      documentId: DocumentId.make(unique("doc"))
    })
  )

export const deliveriesOf = (subscriptionId: WebhookSubscriptionId) =>
  WebhookOperatorStore.use((store) => store.listDeliveries({ subscriptionId }))

export const showDelivery = (deliveryId: WebhookDeliveryId) =>
  WebhookOperatorStore.use((store) => store.showDelivery(deliveryId))

/** Polls `check` until it returns a value, every 25 ms, failing after `timeoutMs`. */
export const eventually = <A, E, R>(check: Effect.Effect<A | undefined, E, R>, timeoutMs = 10_000, what = "condition") =>
  Effect.gen(function* () {
    const deadline = Date.now() + timeoutMs
    while (Date.now() < deadline) {
      const value = yield* check
      if (value !== undefined) return value
      yield* Effect.sleep(Duration.millis(25))
    }
    return yield* Effect.die(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`))
  })

/** One request the receiver saw, before any answer. */
export interface ReceivedRequest {
  readonly index: number
  readonly at: number
  readonly eventId: string | undefined
  readonly deliveryId: string | undefined
  readonly timestamp: string | undefined
  readonly signature: string | undefined
  /** Only for scripted answers: the kit reads the body itself. */
  readonly body?: Buffer
  /** Only for scripted answers: did the delivery verify with the secret (contract 6.2)? */
  readonly verified?: boolean
}

export type ReceiverAnswer =
  | "kit"
  | { readonly status: number; readonly headers?: Readonly<Record<string, string>> }
  /** Never answered until the receiver closes (a hung endpoint). */
  | "hang"

export interface TestReceiver {
  readonly url: string
  readonly received: Array<ReceivedRequest>
  /** The business handler's runs, by event id (the kit runs it at most once per completed event). */
  readonly handled: Map<string, number>
  readonly events: Array<TranscriptReadyEvent>
  readonly close: () => Promise<void>
}

const header = (req: http.IncomingMessage, name: string) => {
  const value = req.headers[name.toLowerCase()]
  return Array.isArray(value) ? value[0] : value
}

const readBody = (req: http.IncomingMessage) =>
  new Promise<Buffer>((resolve) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => resolve(Buffer.concat(chunks)))
    req.on("error", () => resolve(Buffer.concat(chunks)))
  })

/**
 * A receiver on 127.0.0.1: request n (from 0) is answered by `script(n)`; "kit" hands it to the
 * receiver kit with `handle` as the business handler (by default: count and succeed).
 */
export const startReceiver = (input: {
  readonly secret: string
  readonly script?: (index: number) => ReceiverAnswer
  readonly handle?: (event: TranscriptReadyEvent) => Promise<void>
}): Promise<TestReceiver> => {
  const received: Array<ReceivedRequest> = []
  const handled = new Map<string, number>()
  const events: Array<TranscriptReadyEvent> = []
  const kit = makeWebhookRequestHandler({
    secrets: [input.secret],
    store: makeIdempotencyStoreMemory(),
    handle: (event) =>
      Effect.promise(async () => {
        handled.set(event.id, (handled.get(event.id) ?? 0) + 1)
        events.push(event)
        await input.handle?.(event)
      })
  })
  const script = input.script ?? (() => "kit")
  const hung: Array<http.ServerResponse> = []
  const server = http.createServer((req, res) => {
    const index = received.length
    const seen = {
      index,
      at: Date.now(),
      eventId: header(req, WebhookHeaders.eventId),
      deliveryId: header(req, WebhookHeaders.deliveryId),
      timestamp: header(req, WebhookHeaders.timestamp),
      signature: header(req, WebhookHeaders.signature)
    }
    const answer = script(index)
    if (answer === "kit") {
      received.push(seen)
      kit(req, res)
      return
    }
    void readBody(req).then((body) => {
      const verified = Result.isSuccess(verifyWebhookOrEndpointTest({ rawBody: body, headers: req.headers, secrets: [input.secret] }))
      received.push({ ...seen, body, verified })
      if (answer === "hang") {
        hung.push(res)
        return
      }
      res.writeHead(answer.status, { "Content-Type": "text/plain", ...answer.headers })
      res.end("receiver body that the sender must never store")
    })
  })
  return new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resolve({
        url: `http://127.0.0.1:${port}/webhooks`,
        received,
        handled,
        events,
        close: () =>
          new Promise<void>((done) => {
            for (const res of hung) res.destroy()
            server.close(() => done())
            server.closeAllConnections()
          })
      })
    })
  })
}

/** A loopback port with nothing listening (connection refused). */
export const closedPortUrl = (): Promise<string> =>
  new Promise((resolve) => {
    const server = http.createServer()
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      server.close(() => resolve(`http://127.0.0.1:${port}/webhooks`))
    })
  })

/** What `webhookStack` / `webhookStackOn` provide. */
export type WebhookServices = Layer.Success<ReturnType<typeof webhookStackOn>>
