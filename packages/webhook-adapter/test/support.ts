import { randomBytes, randomUUID } from "node:crypto"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import {
  DocumentId,
  EncounterId,
  generateSigningSecret,
  makeTranscriptReadyEvent,
  OrganizationId,
  signDelivery,
  type TranscriptReadyEvent,
  webhookEventBody,
  WebhookEventId
} from "@clinical-api/domain"

export const newSecret = (): string => generateSigningSecret(randomBytes)

export const newEvent = (overrides: { readonly id?: string; readonly encounterId?: string; readonly documentId?: string } = {}): TranscriptReadyEvent =>
  makeTranscriptReadyEvent({
    id: WebhookEventId.make(overrides.id ?? `evt_${randomUUID()}`),
    occurredAt: new Date(),
    organizationId: OrganizationId.make("org_a"),
    encounterId: EncounterId.make(overrides.encounterId ?? `enc_${randomUUID()}`),
    documentId: DocumentId.make(overrides.documentId ?? `doc_${randomUUID()}`)
  })

export interface TestServer {
  readonly url: string
  readonly port: number
  readonly close: () => Promise<void>
}

export const startServer = (handler: http.RequestListener): Promise<TestServer> =>
  new Promise((resolve, reject) => {
    const server = http.createServer(handler)
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resolve({
        url: `http://127.0.0.1:${port}`,
        port,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done())
            server.closeAllConnections()
          })
      })
    })
  })

export interface SignedRequest {
  readonly body: Uint8Array
  readonly headers: Record<string, string>
}

/** A delivery as the sender builds it: the domain's body bytes and signed headers. */
export const signedRequest = (input: {
  readonly event?: TranscriptReadyEvent
  readonly body?: Uint8Array | string
  readonly eventId?: string
  readonly secret: string
  readonly deliveryId?: string
  readonly now?: Date
}): SignedRequest => {
  const event = input.event ?? newEvent()
  const body =
    input.body === undefined ? webhookEventBody(event) : typeof input.body === "string" ? Buffer.from(input.body, "utf8") : input.body
  const headers = signDelivery({
    secret: input.secret,
    eventId: input.eventId ?? event.id,
    deliveryId: input.deliveryId ?? `dlv_${randomUUID()}`,
    rawBody: body,
    now: input.now ?? new Date()
  })
  return { body, headers: { ...headers } }
}

export interface PostResult {
  readonly status: number
  readonly body: string
}

export const post = async (url: string, request: SignedRequest): Promise<PostResult> => {
  const response = await fetch(url, { method: "POST", body: request.body, headers: request.headers })
  return { status: response.status, body: await response.text() }
}

export const withoutHeader = (request: SignedRequest, name: string): SignedRequest => {
  const headers = { ...request.headers }
  delete headers[name]
  return { body: request.body, headers }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** A promise and its resolver, to hold a handler in flight until the test lets it go. */
export const gate = () => {
  let open: () => void = () => undefined
  const opened = new Promise<void>((resolve) => {
    open = resolve
  })
  return { opened, open }
}
