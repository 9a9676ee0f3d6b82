import type { IncomingMessage, ServerResponse } from "node:http"
import {
  type EndpointTestEvent,
  ENDPOINT_TEST,
  type TranscriptReadyEvent,
  verifyWebhookOrEndpointTest,
  webhookHeaderValue,
  WebhookHeaders,
  type WebhookVerificationFailureReason
} from "@clinical-api/domain"
import { type Cause, Effect, Exit, Redacted, Result } from "effect"
import { IdempotencyStore, type IdempotencyStoreService } from "./idempotency-store.js"

/** Bodies above this size are refused with 413 before verification (events are a few hundred bytes). */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024

/**
 * The answer to each refused delivery, by receiver policy (contract 6.3). Every one is terminal
 * for the sender: the same bytes would be refused again.
 *
 * - 400 for a request that is not a well-formed delivery: a missing header (contract 6.3:
 *   "non-2xx by receiver policy"), a body that is not the event, headers disagreeing with it.
 * - 401 for a delivery that is not authenticated: no signature matches a secret, or the
 *   signing timestamp is outside the tolerance (a replay, or a clock to fix).
 *
 * `unsupported_event_type` has its own policy, `UnsupportedEventTypePolicy`.
 */
export const VERIFICATION_FAILURE_STATUS: { readonly [R in WebhookVerificationFailureReason]: number } = {
  missing_header: 400,
  malformed_body: 400,
  header_body_mismatch: 400,
  unsupported_event_type: 400,
  invalid_signature: 401,
  stale_timestamp: 401
}

/**
 * Contract 6.3 lets a receiver ignore or reject an event type it does not handle.
 * - `ignore` (default): 200 without any work, so event types added later never turn into failed
 *   deliveries. The signature was checked before the type, so only authentic events are ignored.
 * - `reject`: 400, terminal for the sender.
 */
export type UnsupportedEventTypePolicy = "ignore" | "reject"

/**
 * The statuses of the handler besides verification failures:
 * - 200: processed now, or already completed earlier (a duplicate event id).
 * - 409: the same event id is being processed by another delivery right now. 409 is
 *   retryable (contract 6.3), so the sender comes back later and then gets 200.
 * - 500: the business handler failed; its claim is released, and the sender's retry runs it again.
 * - 503: the idempotency store is unavailable; retryable, nothing was run.
 * - 405 (not POST), 413 (body over the limit): terminal.
 */
export const ReceiverStatus = {
  ok: 200,
  inProgress: 409,
  handlerFailed: 500,
  storeUnavailable: 503,
  methodNotAllowed: 405,
  bodyTooLarge: 413
} as const

export interface DeliveryMetadata {
  /** `Service-Delivery-Id`: debug metadata only, never an idempotency key. */
  readonly deliveryId: string
}

/** What became of one request; for logs and metrics. Holds no secret, signature or body. */
export type WebhookReceiptOutcome<A = unknown> =
  | {
      readonly _tag: "Processed"
      readonly event: TranscriptReadyEvent
      readonly deliveryId: string
      /** What `handle` returned. */
      readonly result: A
      readonly status: number
    }
  | {
      readonly _tag: "Duplicate"
      readonly event: TranscriptReadyEvent
      readonly deliveryId: string
      readonly state: "completed" | "in_progress"
      readonly status: number
    }
  | {
      readonly _tag: "HandlerFailed"
      readonly event: TranscriptReadyEvent
      readonly deliveryId: string
      readonly cause: Cause.Cause<unknown>
      readonly status: number
    }
  | { readonly _tag: "StoreUnavailable"; readonly eventId: string; readonly deliveryId: string; readonly cause: unknown; readonly status: number }
  | { readonly _tag: "EndpointTest"; readonly event: EndpointTestEvent; readonly deliveryId: string; readonly status: number }
  | { readonly _tag: "Rejected"; readonly reason: WebhookVerificationFailureReason; readonly status: number }
  | { readonly _tag: "IgnoredEventType"; readonly status: number }
  | { readonly _tag: "BadRequest"; readonly problem: "method_not_allowed" | "body_too_large" | "body_unreadable"; readonly status: number }

export type Secret = string | Redacted.Redacted<string>

export interface WebhookRequestHandlerOptions<A, E> {
  /** Every valid signing secret (rotation: the newest and the previous one). At least one. */
  readonly secrets: ReadonlyArray<Secret>
  readonly store: IdempotencyStoreService
  /**
   * The business work for a new event, including the follow-up fetches. Runs at most once at a
   * time per event id; a failure (or defect) releases the claim and answers 500, so the sender's
   * retry runs it again. It must be idempotent itself: at-least-once means a claim whose lease
   * expired may be taken over while the first run is still going.
   */
  readonly handle: (event: TranscriptReadyEvent, delivery: DeliveryMetadata) => Effect.Effect<A, E>
  readonly toleranceSeconds?: number
  /** The receiver clock; the current time when omitted. */
  readonly now?: () => Date
  readonly maxBodyBytes?: number
  readonly unsupportedEventType?: UnsupportedEventTypePolicy
  /** Called once per request with what became of it. Must not throw. */
  readonly onOutcome?: (outcome: WebhookReceiptOutcome<A>) => void
}

export type NodeRequestHandler = (req: IncomingMessage, res: ServerResponse) => void

type BodyResult = { readonly _tag: "Body"; readonly bytes: Buffer } | { readonly _tag: "TooLarge" } | { readonly _tag: "Unreadable" }

const readRawBody = (req: IncomingMessage, maxBytes: number): Promise<BodyResult> =>
  new Promise((resolve) => {
    const declared = req.headers["content-length"]
    if (declared !== undefined && Number(declared) > maxBytes) {
      resolve({ _tag: "TooLarge" })
      return
    }
    const chunks: Array<Buffer> = []
    let size = 0
    let settled = false
    const settle = (result: BodyResult) => {
      if (settled) return
      settled = true
      resolve(result)
    }
    req.on("data", (chunk: Buffer) => {
      if (settled) return
      size += chunk.length
      if (size > maxBytes) {
        chunks.length = 0
        settle({ _tag: "TooLarge" })
        return
      }
      chunks.push(chunk)
    })
    req.on("end", () => settle({ _tag: "Body", bytes: Buffer.concat(chunks, size) }))
    req.on("error", () => settle({ _tag: "Unreadable" }))
    req.on("aborted", () => settle({ _tag: "Unreadable" }))
  })

const respond = (res: ServerResponse, status: number, body: Readonly<Record<string, string>>, extraHeaders: Readonly<Record<string, string>> = {}) => {
  if (res.headersSent || res.destroyed) return
  const text = JSON.stringify(body)
  res.writeHead(status, {
    "Content-Type": "application/json",
    "Content-Length": Buffer.byteLength(text),
    "Cache-Control": "no-store",
    ...extraHeaders
  })
  res.end(text)
}

const secretText = (secret: Secret): string => (Redacted.isRedacted(secret) ? Redacted.value(secret) : secret)

/**
 * A plain Node request handler for `recording.transcript_ready` deliveries (contract 6.2 and
 * 6.3), for `http.createServer` or any framework that hands over Node's request and response
 * untouched (the body must not have been parsed: the signature covers the exact bytes).
 *
 * Per request: POST only; the raw body up to `maxBodyBytes`; `verifyWebhook`; then the event id
 * is claimed in the idempotency store: completed earlier → 200 at once, in progress elsewhere →
 * 409, new → `handle`, complete, 200. No work is done for a refused delivery. The statuses are
 * those of `VERIFICATION_FAILURE_STATUS` and `ReceiverStatus`; response bodies are a short JSON
 * object (`{"status":...}` or `{"error": reason}`) that the sender never reads.
 *
 * `webhook.endpoint_test` (operator tooling) is verified like any event and answered 200 with
 * no claim and no `handle`, so an endpoint check exercises the whole signature path.
 */
export const makeWebhookRequestHandler = <A, E>(options: WebhookRequestHandlerOptions<A, E>): NodeRequestHandler => {
  const secrets = options.secrets.map(secretText).filter((secret) => secret !== "")
  if (secrets.length === 0) throw new RangeError("makeWebhookRequestHandler needs at least one signing secret")
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
  const unsupportedPolicy = options.unsupportedEventType ?? "ignore"
  const { store } = options
  const report = (outcome: WebhookReceiptOutcome<A>) => {
    try {
      options.onOutcome?.(outcome)
    } catch {
      // A failing observer must not change the answer.
    }
  }

  const processEvent = (event: TranscriptReadyEvent, deliveryId: string): Effect.Effect<WebhookReceiptOutcome<A>> =>
    Effect.gen(function* () {
      const claimed = yield* Effect.result(store.claim(event.id))
      if (Result.isFailure(claimed)) {
        return { _tag: "StoreUnavailable", eventId: event.id, deliveryId, cause: claimed.failure.cause, status: ReceiverStatus.storeUnavailable } as const
      }
      const claim = claimed.success
      if (claim.status === "completed") {
        return { _tag: "Duplicate", event, deliveryId, state: "completed", status: ReceiverStatus.ok } as const
      }
      if (claim.status === "in_progress") {
        return { _tag: "Duplicate", event, deliveryId, state: "in_progress", status: ReceiverStatus.inProgress } as const
      }
      const handled = yield* Effect.exit(Effect.suspend(() => options.handle(event, { deliveryId })))
      if (Exit.isFailure(handled)) {
        // If the release itself fails, the claim lapses after the lease and a redelivery takes it over.
        yield* Effect.ignore(store.release(event.id, claim.claimToken))
        return { _tag: "HandlerFailed", event, deliveryId, cause: handled.cause, status: ReceiverStatus.handlerFailed } as const
      }
      const completed = yield* Effect.result(store.complete(event.id))
      if (Result.isFailure(completed)) {
        // The work is done but not recorded: release so a redelivery is not stuck behind a live
        // claim; it will run the (idempotent) handler again. 503 asks the sender to retry.
        yield* Effect.ignore(store.release(event.id, claim.claimToken))
        return { _tag: "StoreUnavailable", eventId: event.id, deliveryId, cause: completed.failure.cause, status: ReceiverStatus.storeUnavailable } as const
      }
      return { _tag: "Processed", event, deliveryId, result: handled.value, status: ReceiverStatus.ok } as const
    })

  const answer = (res: ServerResponse, outcome: WebhookReceiptOutcome<A>) => {
    switch (outcome._tag) {
      case "Processed":
        respond(res, outcome.status, { status: "processed" })
        break
      case "Duplicate":
        respond(res, outcome.status, { status: outcome.state === "completed" ? "duplicate" : "in_progress" })
        break
      case "HandlerFailed":
        respond(res, outcome.status, { error: "handler_failed" })
        break
      case "StoreUnavailable":
        respond(res, outcome.status, { error: "store_unavailable" })
        break
      case "EndpointTest":
        respond(res, outcome.status, { status: "endpoint_test" })
        break
      case "Rejected":
        respond(res, outcome.status, { error: outcome.reason })
        break
      case "IgnoredEventType":
        respond(res, outcome.status, { status: "ignored" })
        break
      case "BadRequest":
        respond(
          res,
          outcome.status,
          { error: outcome.problem },
          outcome.problem === "method_not_allowed" ? { Allow: "POST" } : { Connection: "close" }
        )
        break
    }
    report(outcome)
  }

  const handleRequest = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (req.method !== "POST") {
      req.resume()
      answer(res, { _tag: "BadRequest", problem: "method_not_allowed", status: ReceiverStatus.methodNotAllowed })
      return
    }
    const body = await readRawBody(req, maxBodyBytes)
    if (body._tag === "TooLarge") {
      // Discard the rest; `Connection: close` ends the exchange once the answer is written.
      req.resume()
      answer(res, { _tag: "BadRequest", problem: "body_too_large", status: ReceiverStatus.bodyTooLarge })
      return
    }
    if (body._tag === "Unreadable") {
      answer(res, { _tag: "BadRequest", problem: "body_unreadable", status: 400 })
      return
    }
    const verified = verifyWebhookOrEndpointTest({
      rawBody: body.bytes,
      headers: req.headers,
      secrets,
      ...(options.now === undefined ? {} : { now: options.now() }),
      ...(options.toleranceSeconds === undefined ? {} : { toleranceSeconds: options.toleranceSeconds })
    })
    if (Result.isFailure(verified)) {
      const { reason } = verified.failure
      if (reason === "unsupported_event_type" && unsupportedPolicy === "ignore") {
        answer(res, { _tag: "IgnoredEventType", status: ReceiverStatus.ok })
      } else {
        answer(res, { _tag: "Rejected", reason, status: VERIFICATION_FAILURE_STATUS[reason] })
      }
      return
    }
    const event = verified.success
    // Verification guarantees the header is present and non-empty.
    const deliveryId = webhookHeaderValue(req.headers, WebhookHeaders.deliveryId) ?? ""
    if (event.type === ENDPOINT_TEST) {
      answer(res, { _tag: "EndpointTest", event, deliveryId, status: ReceiverStatus.ok })
      return
    }
    answer(res, await Effect.runPromise(processEvent(event, deliveryId)))
  }

  return (req, res) => {
    handleRequest(req, res).catch(() => {
      // Unreachable in practice (every failure above is an outcome); never leave a request hanging.
      respond(res, 500, { error: "internal_error" })
    })
  }
}

/** `makeWebhookRequestHandler` with the store taken from the context. */
export const webhookRequestHandler = <A, E>(
  options: Omit<WebhookRequestHandlerOptions<A, E>, "store">
): Effect.Effect<NodeRequestHandler, never, IdempotencyStore> =>
  Effect.map(IdempotencyStore, (store) => makeWebhookRequestHandler({ ...options, store }))
