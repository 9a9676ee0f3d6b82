import * as http from "node:http"
import * as https from "node:https"
import type { LookupFunction } from "node:net"
import {
  type DeliveryOutcome,
  type NetworkErrorClass,
  signDelivery,
  type SigningSecret,
  WEBHOOK_API_VERSION,
  WEBHOOK_ATTEMPT_TIMEOUT_MS,
  webhookEventBody,
  type WebhookEvent
} from "@clinical-api/domain"
import { Effect } from "effect"

/** Sent with every delivery, so receivers can recognise (and allowlist) the sender. */
export const WEBHOOK_USER_AGENT = `ClinicalEncounterWebhooks/${WEBHOOK_API_VERSION}`

/** Response bytes read (and thrown away) before the connection is cut; the body is never kept. */
export const RESPONSE_DRAIN_LIMIT_BYTES = 64 * 1024

export interface SignedDelivery {
  /** The exact bytes to send; the signature covers them. */
  readonly rawBody: Uint8Array
  readonly headers: Readonly<Record<string, string>>
}

/**
 * A delivery of `event` signed at `now` with `secret`, the newest secret of the subscription
 * (docs/webhooks.md, rotation). The body is `serializeWebhookEvent`: for a stored event, sign its
 * stored bytes with `signStoredDelivery` instead, so that retries send the same bytes.
 */
export const buildSignedDelivery = (input: {
  readonly event: WebhookEvent
  readonly deliveryId: string
  readonly secret: SigningSecret
  readonly now: Date
}): SignedDelivery => {
  const rawBody = webhookEventBody(input.event)
  return signStoredDelivery({ rawBody, eventId: input.event.id, deliveryId: input.deliveryId, secret: input.secret, now: input.now })
}

/** Signs the stored body bytes of an event for one attempt (a fresh timestamp each attempt). */
export const signStoredDelivery = (input: {
  readonly rawBody: Uint8Array
  readonly eventId: string
  readonly deliveryId: string
  readonly secret: SigningSecret
  readonly now: Date
}): SignedDelivery => ({
  rawBody: input.rawBody,
  headers: signDelivery({
    secret: input.secret,
    eventId: input.eventId,
    deliveryId: input.deliveryId,
    rawBody: input.rawBody,
    now: input.now
  })
})

export interface DeliverWebhookInput {
  readonly url: string
  readonly rawBody: Uint8Array
  /** The headers of `signDelivery` / `buildSignedDelivery`. */
  readonly headers: Readonly<Record<string, string>>
  /** The whole attempt, from connecting to the response status line; 15 s by default. */
  readonly timeoutMs?: number
  /**
   * A DNS lookup to use instead of the system's, e.g. one that refuses private addresses in
   * production (docs/webhooks.md); its error is classified like any DNS error.
   */
  readonly lookup?: LookupFunction
  /**
   * Keep-alive connection pools (`makeDeliveryAgents`) to reuse connections across attempts;
   * without them each attempt opens a connection of its own and closes it.
   */
  readonly agents?: DeliveryAgents
}

export interface DeliveryAgents {
  readonly http: http.Agent
  readonly https: https.Agent
  /** Closes every pooled connection. */
  readonly destroy: () => void
}

/** A connection kept idle longer than this is closed (servers commonly drop idle ones after 5 s). */
const IDLE_CONNECTION_MS = 4000

/**
 * Keep-alive pools for one worker: at most `maxSockets` connections per endpoint host (the
 * worker's in-flight bound), idle ones closed after 4 s or the server's `Keep-Alive: timeout`
 * hint, whichever is sooner. A pooled connection went to an address the guarded lookup
 * checked when it was opened.
 */
export const makeDeliveryAgents = (maxSockets: number): DeliveryAgents => {
  const options = { keepAlive: true, maxSockets, maxFreeSockets: maxSockets, timeout: IDLE_CONNECTION_MS, scheduling: "lifo" as const }
  const agents = { http: new http.Agent(options), https: new https.Agent(options) }
  return { ...agents, destroy: () => (agents.http.destroy(), agents.https.destroy()) }
}

/** A reused connection the server had already closed: the request never reached it. */
const STALE_CONNECTION_CODES = new Set(["ECONNRESET", "EPIPE"])

const DNS_CODES = new Set(["ENOTFOUND", "EAI_AGAIN", "EAI_FAIL", "EAI_NODATA", "EAI_NONAME", "EAI_SERVICE", "ENODATA"])
const CONNECTION_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EHOSTUNREACH",
  "EHOSTDOWN",
  "ENETUNREACH",
  "ENETDOWN",
  "EPIPE",
  "EADDRNOTAVAIL",
  "HPE_INVALID_CONSTANT",
  "HPE_INVALID_STATUS",
  "HPE_INVALID_HEADER_TOKEN"
])
const TLS_CODES = new Set([
  "EPROTO",
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_UNTRUSTED",
  "CERT_REVOKED",
  "HOSTNAME_MISMATCH"
])

/** The class of a Node network error, from its `code` (contract 6.3 retries all of them). */
export const classifyNetworkError = (error: unknown): NetworkErrorClass => {
  const code = typeof error === "object" && error !== null && "code" in error ? String(error.code) : ""
  if (DNS_CODES.has(code)) return "dns"
  if (code === "ETIMEDOUT" || code === "ESOCKETTIMEDOUT") return "timeout"
  if (TLS_CODES.has(code) || code.startsWith("ERR_TLS_") || code.startsWith("ERR_SSL_") || code.startsWith("ERR_OSSL_")) {
    return "tls"
  }
  if (CONNECTION_CODES.has(code)) return "connection"
  return "other"
}

const networkError = (errorClass: NetworkErrorClass): DeliveryOutcome => ({ _tag: "NetworkError", errorClass })

/**
 * One delivery attempt: POST of the exact bytes with the signed headers, `Content-Type:
 * application/json` and the kit's `User-Agent`, on a fresh connection or, with `agents`, a
 * pooled keep-alive one (sent again once on a fresh connection if the pooled one turns out to
 * have been closed by the server before any answer).
 *
 * - Redirects are not followed: a 3xx is the outcome, like any status (terminal).
 * - The response body is drained up to `RESPONSE_DRAIN_LIMIT_BYTES` and discarded, never kept;
 *   `Retry-After` is the only response header kept.
 * - No answer within `timeoutMs` (connection, request and status line): `timeout`. Draining
 *   the body is bounded by the same deadline but does not change an outcome already known.
 * - Never fails: network errors are outcomes (`connection`, `dns`, `tls`, `timeout`, `other`);
 *   an unusable URL is `other`.
 */
export const deliverWebhook = (input: DeliverWebhookInput): Effect.Effect<DeliveryOutcome> =>
  Effect.callback<DeliveryOutcome>((resume) => {
    let target: URL
    try {
      target = new URL(input.url)
    } catch {
      resume(Effect.succeed(networkError("other")))
      return
    }
    const transport = target.protocol === "https:" ? https : target.protocol === "http:" ? http : undefined
    if (transport === undefined) {
      resume(Effect.succeed(networkError("other")))
      return
    }

    const headers: Record<string, string | number> = {}
    for (const [name, value] of Object.entries(input.headers)) {
      // Framing and identity are ours to set: the exact body length, JSON, the kit's agent.
      if (["content-length", "content-type", "user-agent", "host", "transfer-encoding", "connection"].includes(name.toLowerCase())) continue
      headers[name] = value
    }
    headers["Content-Type"] = "application/json"
    headers["Content-Length"] = input.rawBody.byteLength
    headers["User-Agent"] = WEBHOOK_USER_AGENT
    if (input.agents === undefined) headers["Connection"] = "close"
    const agent = input.agents === undefined ? false : target.protocol === "https:" ? input.agents.https : input.agents.http

    let settled = false
    let outcome: DeliveryOutcome | undefined
    let req: http.ClientRequest | undefined
    const finish = (result: DeliveryOutcome, keepConnection = false) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      // A fully read response leaves its connection to the pool; anything else closes it.
      if (!keepConnection) req?.destroy()
      resume(Effect.succeed(result))
    }
    const timer = setTimeout(() => finish(outcome ?? networkError("timeout")), input.timeoutMs ?? WEBHOOK_ATTEMPT_TIMEOUT_MS)

    const send = (pooled: http.Agent | false, mayResend: boolean) => {
      let sent: http.ClientRequest
      try {
        sent = transport.request(target, {
          method: "POST",
          headers,
          agent: pooled,
          ...(input.lookup === undefined ? {} : { lookup: input.lookup })
        })
      } catch {
        // e.g. a header value Node refuses to send.
        finish(networkError("other"))
        return
      }
      req = sent
      sent.on("response", (res) => {
        const retryAfter = res.headers["retry-after"]
        outcome = { _tag: "Response", status: res.statusCode ?? 0, ...(retryAfter === undefined ? {} : { retryAfter }) }
        let drained = 0
        res.on("data", (chunk: Buffer) => {
          drained += chunk.length
          if (drained > RESPONSE_DRAIN_LIMIT_BYTES && outcome !== undefined) finish(outcome)
        })
        res.on("end", () => {
          const ended = outcome
          if (ended === undefined) return
          // The pool takes the connection back just after the request's close event: resuming
          // on the next tick lets an attempt that follows at once reuse it.
          if (pooled === false) finish(ended)
          else sent.once("close", () => process.nextTick(() => finish(ended, true)))
        })
        res.on("error", () => outcome !== undefined && finish(outcome))
        res.on("aborted", () => outcome !== undefined && finish(outcome))
      })
      sent.on("error", (error) => {
        if (settled || req !== sent) return
        const code = typeof error === "object" && "code" in error ? String(error.code) : ""
        if (outcome === undefined && mayResend && sent.reusedSocket && STALE_CONNECTION_CODES.has(code)) {
          send(false, false)
          return
        }
        finish(outcome ?? networkError(classifyNetworkError(error)))
      })
      sent.end(input.rawBody)
    }
    send(agent, agent !== false)

    return Effect.sync(() => {
      settled = true
      clearTimeout(timer)
      req?.destroy()
    })
  })
