import type { IncomingHttpHeaders } from "node:http"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterEach, describe, expect, it } from "@effect/vitest"
import { classifyDeliveryOutcome, WebhookDeliveryId, webhookEventBody } from "@clinical-api/domain"
import { Effect, Result } from "effect"
import {
  buildSignedDelivery,
  classifyNetworkError,
  deliverWebhook,
  makeDeliveryAgents,
  makeIdempotencyStoreMemory,
  makeWebhookRequestHandler,
  signStoredDelivery,
  verifyWebhook,
  WEBHOOK_USER_AGENT
} from "../src/index.js"
import { newEvent, newSecret, startServer, type TestServer } from "./support.js"

interface Received {
  readonly method: string | undefined
  readonly url: string | undefined
  readonly headers: IncomingHttpHeaders
  readonly body: Buffer
}

const servers: Array<TestServer> = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()))
})

/** A loopback receiver that records every request and answers with `reply`. */
const recordingServer = async (reply: (res: http.ServerResponse) => void) => {
  const received: Array<Received> = []
  const server = await startServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      received.push({ method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(chunks) })
      reply(res)
    })
  })
  servers.push(server)
  return { url: `${server.url}/hooks/clinical`, received }
}

const signed = (secret = newSecret()) => {
  const event = newEvent()
  const delivery = buildSignedDelivery({ event, deliveryId: WebhookDeliveryId.make("dlv_test_1"), secret, now: new Date() })
  return { event, secret, ...delivery }
}

describe("buildSignedDelivery", () => {
  it("signs the domain's serialised body with the given secret; the five Service- headers and JSON", () => {
    const { event, headers, rawBody, secret } = signed()
    expect(Buffer.from(rawBody).equals(Buffer.from(webhookEventBody(event)))).toBe(true)
    expect(headers["Content-Type"]).toBe("application/json")
    expect(headers["Service-Event-Id"]).toBe(event.id)
    expect(headers["Service-Delivery-Id"]).toBe("dlv_test_1")
    expect(headers["Service-Webhook-Version"]).toBe("2026-05-01")
    expect(headers["Service-Timestamp"]).toMatch(/^[0-9]+$/)
    expect(headers["Service-Signature"]).toMatch(/^v1=[0-9a-f]{64}$/)
    expect(Result.isSuccess(verifyWebhook({ rawBody, headers, secrets: [secret] }))).toBe(true)
  })

  it("signStoredDelivery signs stored bytes as they are (a retry re-signs, never re-serialises)", () => {
    const secret = newSecret()
    const stored = Buffer.from(
      `{"id":"evt_02","type":"recording.transcript_ready","api_version":"2026-05-01","occurred_at":"2026-05-01T12:00:00Z","organization_id":"org_é","resources":{"encounter_id":"e","document_id":"d"}}`,
      "utf8"
    )
    const { headers, rawBody } = signStoredDelivery({ rawBody: stored, eventId: "evt_02", deliveryId: "dlv_2", secret, now: new Date() })
    expect(rawBody).toBe(stored)
    const verified = verifyWebhook({ rawBody, headers, secrets: [secret] })
    expect(Result.isSuccess(verified) && verified.success.occurred_at).toBe("2026-05-01T12:00:00Z")
  })
})

describe("deliverWebhook (real HTTP on loopback)", () => {
  it.effect("200: the receiver gets the exact bytes, the headers and a signature that verifies", () =>
    Effect.gen(function* () {
      const server = yield* Effect.promise(() => recordingServer((res) => res.writeHead(200).end("thanks, here is a body")))
      const { event, headers, rawBody, secret } = signed()
      const outcome = yield* deliverWebhook({ url: server.url, rawBody, headers })
      // The outcome keeps the status only: no body, no other header.
      expect(outcome).toEqual({ _tag: "Response", status: 200 })
      expect(classifyDeliveryOutcome(outcome)).toBe("succeeded")
      expect(server.received).toHaveLength(1)
      const [request] = server.received
      expect(request?.method).toBe("POST")
      expect(request?.url).toBe("/hooks/clinical")
      expect(request?.body.equals(Buffer.from(rawBody))).toBe(true)
      expect(request?.headers["content-type"]).toBe("application/json")
      expect(request?.headers["content-length"]).toBe(String(rawBody.byteLength))
      expect(request?.headers["user-agent"]).toBe(WEBHOOK_USER_AGENT)
      for (const name of ["Service-Event-Id", "Service-Delivery-Id", "Service-Timestamp", "Service-Signature", "Service-Webhook-Version"]) {
        expect(request?.headers[name.toLowerCase()]).toBe(headers[name])
      }
      const verified = verifyWebhook({ rawBody: request?.body ?? "", headers: request?.headers ?? {}, secrets: [secret] })
      expect(verified).toEqual(Result.succeed(event))
    }))

  it.effect("500: a Response outcome, retryable", () =>
    Effect.gen(function* () {
      const server = yield* Effect.promise(() => recordingServer((res) => res.writeHead(500).end("boom")))
      const { headers, rawBody } = signed()
      const outcome = yield* deliverWebhook({ url: server.url, rawBody, headers })
      expect(outcome).toEqual({ _tag: "Response", status: 500 })
      expect(classifyDeliveryOutcome(outcome)).toBe("retryable")
    }))

  it.effect("429 with Retry-After: the status and the Retry-After value", () =>
    Effect.gen(function* () {
      const server = yield* Effect.promise(() =>
        recordingServer((res) => res.writeHead(429, { "Retry-After": "120" }).end())
      )
      const { headers, rawBody } = signed()
      const outcome = yield* deliverWebhook({ url: server.url, rawBody, headers })
      expect(outcome).toEqual({ _tag: "Response", status: 429, retryAfter: "120" })
      expect(classifyDeliveryOutcome(outcome)).toBe("retryable")
    }))

  it.effect("302: not followed (the Location target gets nothing), terminal", () =>
    Effect.gen(function* () {
      const target = yield* Effect.promise(() => recordingServer((res) => res.writeHead(200).end()))
      const redirecting = yield* Effect.promise(() =>
        recordingServer((res) => res.writeHead(302, { Location: target.url }).end())
      )
      const { headers, rawBody } = signed()
      const outcome = yield* deliverWebhook({ url: redirecting.url, rawBody, headers })
      expect(outcome).toEqual({ _tag: "Response", status: 302 })
      expect(classifyDeliveryOutcome(outcome)).toBe("terminal")
      expect(redirecting.received).toHaveLength(1)
      expect(target.received).toHaveLength(0)
    }))

  it.effect("a receiver that never answers: timeout after timeoutMs", () =>
    Effect.gen(function* () {
      const hanging = yield* Effect.promise(() => startServer(() => undefined))
      servers.push(hanging)
      const { headers, rawBody } = signed()
      const started = Date.now()
      const outcome = yield* deliverWebhook({ url: hanging.url, rawBody, headers, timeoutMs: 200 })
      const elapsed = Date.now() - started
      expect(outcome).toEqual({ _tag: "NetworkError", errorClass: "timeout" })
      expect(elapsed).toBeGreaterThanOrEqual(190)
      expect(elapsed).toBeLessThan(2_000)
      expect(classifyDeliveryOutcome(outcome)).toBe("retryable")
    }))

  it.effect("a refused connection (closed port): connection", () =>
    Effect.gen(function* () {
      const closedPort = yield* Effect.promise(
        () =>
          new Promise<number>((resolve) => {
            const probe = http.createServer()
            probe.listen(0, "127.0.0.1", () => {
              const { port } = probe.address() as AddressInfo
              probe.close(() => resolve(port))
            })
          })
      )
      const { headers, rawBody } = signed()
      const outcome = yield* deliverWebhook({ url: `http://127.0.0.1:${closedPort}/hook`, rawBody, headers })
      expect(outcome).toEqual({ _tag: "NetworkError", errorClass: "connection" })
    }))

  it.effect("https to a plain-HTTP port: tls", () =>
    Effect.gen(function* () {
      const plain = yield* Effect.promise(() => recordingServer((res) => res.writeHead(200).end()))
      const { headers, rawBody } = signed()
      const outcome = yield* deliverWebhook({ url: plain.url.replace("http:", "https:"), rawBody, headers, timeoutMs: 2_000 })
      expect(outcome).toEqual({ _tag: "NetworkError", errorClass: "tls" })
    }))

  it.effect("a name that does not resolve (injected lookup): dns", () =>
    Effect.gen(function* () {
      const { headers, rawBody } = signed()
      const outcome = yield* deliverWebhook({
        url: "http://receiver.example.invalid/hook",
        rawBody,
        headers,
        lookup: (hostname, _options, callback) => {
          const error = Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" })
          callback(error, "", 4)
        }
      })
      expect(outcome).toEqual({ _tag: "NetworkError", errorClass: "dns" })
    }))

  it.effect("a URL that is not http(s): other", () =>
    Effect.gen(function* () {
      const { headers, rawBody } = signed()
      expect(yield* deliverWebhook({ url: "ftp://127.0.0.1/x", rawBody, headers })).toEqual({ _tag: "NetworkError", errorClass: "other" })
      expect(yield* deliverWebhook({ url: "not a url", rawBody, headers })).toEqual({ _tag: "NetworkError", errorClass: "other" })
    }))

  it.effect("a 5 MiB response body is drained up to the cap and discarded; the status stands", () =>
    Effect.gen(function* () {
      const big = Buffer.alloc(5 * 1024 * 1024, 0x61)
      const server = yield* Effect.promise(() => recordingServer((res) => res.writeHead(200).end(big)))
      const { headers, rawBody } = signed()
      const outcome = yield* deliverWebhook({ url: server.url, rawBody, headers, timeoutMs: 5_000 })
      expect(outcome).toEqual({ _tag: "Response", status: 200 })
    }))

  it.effect("a status answered before a body that never ends: the status, not a timeout", () =>
    Effect.gen(function* () {
      const server = yield* Effect.promise(() =>
        recordingServer((res) => {
          res.writeHead(503, { "Retry-After": "30" })
          res.write("partial")
        })
      )
      const { headers, rawBody } = signed()
      const outcome = yield* deliverWebhook({ url: server.url, rawBody, headers, timeoutMs: 300 })
      expect(outcome).toEqual({ _tag: "Response", status: 503, retryAfter: "30" })
    }))

  it.effect("end to end with the receiver kit: delivered once (200), redelivered (200, handler not rerun)", () =>
    Effect.gen(function* () {
      const secret = newSecret()
      let calls = 0
      const receiver = yield* Effect.promise(() =>
        startServer(
          makeWebhookRequestHandler({ secrets: [secret], store: makeIdempotencyStoreMemory(), handle: () => Effect.sync(() => calls++) })
        )
      )
      servers.push(receiver)
      const event = newEvent()
      const first = buildSignedDelivery({ event, deliveryId: "dlv_a", secret, now: new Date() })
      const retry = buildSignedDelivery({ event, deliveryId: "dlv_a", secret, now: new Date() })
      expect(yield* deliverWebhook({ url: receiver.url, ...first })).toEqual({ _tag: "Response", status: 200 })
      expect(yield* deliverWebhook({ url: receiver.url, ...retry })).toEqual({ _tag: "Response", status: 200 })
      const wrongSecret = buildSignedDelivery({ event, deliveryId: "dlv_a", secret: newSecret(), now: new Date() })
      expect(yield* deliverWebhook({ url: receiver.url, ...wrongSecret })).toEqual({ _tag: "Response", status: 401 })
      expect(calls).toBe(1)
    }))
})

describe("deliverWebhook with keep-alive agents (a worker's connection pool)", () => {
  /** A receiver counting connections; `onRequest` may answer or drop the connection. */
  const countingServer = async (onRequest: (req: http.IncomingMessage, res: http.ServerResponse, served: number) => void) => {
    const state = { connections: 0, requests: 0 }
    const server = http.createServer((req, res) => {
      state.requests++
      req.resume()
      req.on("end", () => onRequest(req, res, state.requests))
    })
    server.on("connection", () => state.connections++)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    servers.push({
      url: "",
      port: 0,
      close: () =>
        new Promise<void>((done) => {
          server.close(() => done())
          server.closeAllConnections()
        })
    })
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, state }
  }

  it.effect("consecutive attempts to one endpoint share one connection; without agents each has its own", () =>
    Effect.gen(function* () {
      const pooled = yield* Effect.promise(() => countingServer((_req, res) => res.writeHead(204).end()))
      const agents = makeDeliveryAgents(4)
      for (let index = 0; index < 3; index++) {
        const { headers, rawBody } = signed()
        expect(yield* deliverWebhook({ url: pooled.url, rawBody, headers, agents })).toEqual({ _tag: "Response", status: 204 })
      }
      agents.destroy()
      expect(pooled.state).toEqual({ connections: 1, requests: 3 })

      const fresh = yield* Effect.promise(() => countingServer((_req, res) => res.writeHead(204).end()))
      for (let index = 0; index < 3; index++) {
        const { headers, rawBody } = signed()
        expect(yield* deliverWebhook({ url: fresh.url, rawBody, headers })).toEqual({ _tag: "Response", status: 204 })
      }
      expect(fresh.state).toEqual({ connections: 3, requests: 3 })
    }))

  it.effect("a pooled connection the receiver dropped before answering: sent again once on a fresh connection", () =>
    Effect.gen(function* () {
      // The second request arrives on the first request's kept-alive connection and is dropped
      // unanswered, as a receiver closing an idle connection at that moment would.
      const server = yield* Effect.promise(() =>
        countingServer((req, res, served) => (served === 2 ? req.socket.destroy() : res.writeHead(200).end()))
      )
      const agents = makeDeliveryAgents(4)
      const first = signed()
      expect(yield* deliverWebhook({ url: server.url, rawBody: first.rawBody, headers: first.headers, agents })).toEqual({ _tag: "Response", status: 200 })
      const second = signed()
      expect(yield* deliverWebhook({ url: server.url, rawBody: second.rawBody, headers: second.headers, agents })).toEqual({ _tag: "Response", status: 200 })
      agents.destroy()
      expect(server.state).toEqual({ connections: 2, requests: 3 })
    }))
})

describe("classifyNetworkError", () => {
  const code = (value: string) => Object.assign(new Error(value), { code: value })
  it("maps Node error codes to the contract's classes", () => {
    expect(classifyNetworkError(code("ECONNREFUSED"))).toBe("connection")
    expect(classifyNetworkError(code("ECONNRESET"))).toBe("connection")
    expect(classifyNetworkError(code("ENOTFOUND"))).toBe("dns")
    expect(classifyNetworkError(code("EAI_AGAIN"))).toBe("dns")
    expect(classifyNetworkError(code("ETIMEDOUT"))).toBe("timeout")
    expect(classifyNetworkError(code("ERR_TLS_CERT_ALTNAME_INVALID"))).toBe("tls")
    expect(classifyNetworkError(code("DEPTH_ZERO_SELF_SIGNED_CERT"))).toBe("tls")
    expect(classifyNetworkError(code("ERR_SOMETHING_ELSE"))).toBe("other")
    expect(classifyNetworkError("not an error")).toBe("other")
  })
})
