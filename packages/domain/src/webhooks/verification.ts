import { timingSafeEqual } from "node:crypto"
import { Result, Schema } from "effect"
import { exactParseOptions } from "../resources.js"
import {
  ENDPOINT_TEST,
  type EndpointTestEvent,
  EndpointTestEvent as EndpointTestEventSchema,
  TRANSCRIPT_READY,
  type TranscriptReadyEvent,
  TranscriptReadyEvent as TranscriptReadyEventSchema,
  WebhookHeaders
} from "./event.js"
import { webhookBodyBytes, WEBHOOK_SIGNATURE_SCHEME, webhookSignatureDigest } from "./signing.js"

/** Contract 8: the signing timestamp may differ from the receiver clock by at most 300 s, either way. */
export const WEBHOOK_TIMESTAMP_TOLERANCE_SECONDS = 300

/**
 * Why a delivery was refused, in the order the checks run:
 *
 * 1. `missing_header`: one of the five `Service-` headers is absent or empty.
 * 2. `stale_timestamp`: `Service-Timestamp` differs from the clock by more than the tolerance.
 *    A value that is not decimal Unix epoch seconds can never be within it and fails here too.
 * 3. `invalid_signature`: no `v1=` value of `Service-Signature` matches any configured secret.
 *    Checked before the body is even parsed, so unauthenticated bytes are never trusted.
 * 4. `malformed_body`: the body is not UTF-8 JSON holding an object with a string `type`.
 * 5. `unsupported_event_type`: `type` is not an event this receiver handles.
 * 6. `header_body_mismatch`: `Service-Event-Id` differs from body `id`, or
 *    `Service-Webhook-Version` from body `api_version` (compared on the raw body values).
 * 7. `malformed_body`: the body does not match the event schema exactly (a missing or extra
 *    field, an empty id, an unknown `api_version`, an `occurred_at` that is not a date-time).
 *
 * On any failure the receiver does no follow-up work (contract 6.2 and 6.3).
 */
export const WebhookVerificationFailureReason = Schema.Literals([
  "missing_header",
  "stale_timestamp",
  "invalid_signature",
  "malformed_body",
  "unsupported_event_type",
  "header_body_mismatch"
])
export type WebhookVerificationFailureReason = typeof WebhookVerificationFailureReason.Type

/** A refused delivery. The message names the check that failed and never any secret or signature. */
export class WebhookVerificationFailure extends Schema.TaggedError<WebhookVerificationFailure>()(
  "WebhookVerificationFailure",
  {
    reason: WebhookVerificationFailureReason,
    message: Schema.String
  }
) {}

const fail = (reason: WebhookVerificationFailureReason, message: string) =>
  Result.fail(new WebhookVerificationFailure({ reason, message }))

/** A Fetch `Headers` or anything else with a case-insensitive `get`. */
export interface HeadersLike {
  readonly get: (name: string) => string | null
}

/** Node's `IncomingMessage.headers` shape, or any plain record; names are matched case-insensitively. */
export type HeaderRecord = Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

export type WebhookRequestHeaders = HeadersLike | HeaderRecord

const isHeadersLike = (headers: WebhookRequestHeaders): headers is HeadersLike =>
  typeof (headers as { readonly get?: unknown }).get === "function"

/**
 * The value of a header, looked up case-insensitively. Several values (an array, or several
 * keys differing in case) are joined with ", " as Fetch `Headers.get` does, so both shapes
 * behave the same way.
 */
export const webhookHeaderValue = (headers: WebhookRequestHeaders, name: string): string | undefined => {
  if (isHeadersLike(headers)) return headers.get(name) ?? undefined
  const wanted = name.toLowerCase()
  const values: Array<string> = []
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() !== wanted || value === undefined) continue
    if (typeof value === "string") values.push(value)
    else values.push(...value)
  }
  return values.length === 0 ? undefined : values.join(", ")
}

const DECIMAL_EPOCH_SECONDS = /^[0-9]{1,12}$/

/**
 * The `v1` digests of a `Service-Signature` value. Entries are separated by commas and/or
 * white space; entries of other schemes, and `v1` values that are not 64 lowercase hex
 * characters, are ignored. Never throws, whatever the input.
 */
export const signatureCandidates = (header: string): ReadonlyArray<Buffer> => {
  const prefix = `${WEBHOOK_SIGNATURE_SCHEME}=`
  const candidates: Array<Buffer> = []
  for (const entry of header.split(/[\s,]+/)) {
    if (!entry.startsWith(prefix)) continue
    const hex = entry.slice(prefix.length)
    if (/^[0-9a-f]{64}$/.test(hex)) candidates.push(Buffer.from(hex, "hex"))
  }
  return candidates
}

export interface VerifyWebhookInput {
  /** The exact request body bytes as received (a string is taken as its UTF-8 bytes). */
  readonly rawBody: Uint8Array | string
  readonly headers: WebhookRequestHeaders
  /** Every currently valid secret (rotation): the delivery is authentic if any one matches. Empty strings are ignored. */
  readonly secrets: ReadonlyArray<string>
  /** The receiver's clock; defaults to the current time. */
  readonly now?: Date
  readonly toleranceSeconds?: number
}

type SupportedEvent = TranscriptReadyEvent | EndpointTestEvent

type SupportedType = SupportedEvent["type"]

const decodeTranscriptReady = Schema.decodeUnknownResult(TranscriptReadyEventSchema, exactParseOptions)
const decodeEndpointTest = Schema.decodeUnknownResult(EndpointTestEventSchema, exactParseOptions)

const decodeSupportedEvent = (
  type: SupportedType,
  value: unknown
): Result.Result<SupportedEvent, Schema.SchemaError> =>
  type === TRANSCRIPT_READY ? decodeTranscriptReady(value) : decodeEndpointTest(value)

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

const isRecord = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const verify = (
  input: VerifyWebhookInput,
  supported: ReadonlyArray<SupportedType>
): Result.Result<SupportedEvent, WebhookVerificationFailure> => {
  // 1. Every required header is present.
  const values = {
    eventId: webhookHeaderValue(input.headers, WebhookHeaders.eventId),
    deliveryId: webhookHeaderValue(input.headers, WebhookHeaders.deliveryId),
    timestamp: webhookHeaderValue(input.headers, WebhookHeaders.timestamp),
    signature: webhookHeaderValue(input.headers, WebhookHeaders.signature),
    version: webhookHeaderValue(input.headers, WebhookHeaders.version)
  }
  for (const key of ["eventId", "deliveryId", "timestamp", "signature", "version"] as const) {
    const value = values[key]
    if (value === undefined || value.trim() === "") {
      return fail("missing_header", `The ${WebhookHeaders[key]} header is missing.`)
    }
  }
  const timestamp = values.timestamp ?? ""
  const signature = values.signature ?? ""

  // 2. The signing timestamp is fresh.
  const toleranceMs = (input.toleranceSeconds ?? WEBHOOK_TIMESTAMP_TOLERANCE_SECONDS) * 1000
  const nowMs = (input.now ?? new Date()).getTime()
  if (!DECIMAL_EPOCH_SECONDS.test(timestamp)) {
    return fail("stale_timestamp", `${WebhookHeaders.timestamp} is not decimal Unix epoch seconds.`)
  }
  if (!(Math.abs(nowMs - Number(timestamp) * 1000) <= toleranceMs)) {
    return fail("stale_timestamp", `${WebhookHeaders.timestamp} differs from the clock by more than the tolerance.`)
  }

  // 3. The signature matches one of the secrets, before any byte of the body is interpreted.
  const body = webhookBodyBytes(input.rawBody)
  const candidates = signatureCandidates(signature)
  let authentic = false
  for (const secret of input.secrets) {
    if (secret === "") continue
    const expected = webhookSignatureDigest({ secret, timestamp, rawBody: body })
    for (const candidate of candidates) {
      // Both are 32-byte digests, so timingSafeEqual cannot throw on a length difference.
      if (candidate.length === expected.length && timingSafeEqual(candidate, expected)) authentic = true
    }
  }
  if (!authentic) {
    return fail("invalid_signature", `No ${WEBHOOK_SIGNATURE_SCHEME} value of ${WebhookHeaders.signature} matches a signing secret.`)
  }

  // 4. The authenticated body is a JSON object with a type.
  let parsed: unknown
  try {
    parsed = JSON.parse(utf8.decode(body))
  } catch {
    return fail("malformed_body", "The body is not UTF-8 JSON.")
  }
  if (!isRecord(parsed) || typeof parsed["type"] !== "string") {
    return fail("malformed_body", "The body is not a JSON object with a string type.")
  }

  // 5. The event type is handled.
  const type = parsed["type"]
  const supportedType = supported.find((candidate) => candidate === type)
  if (supportedType === undefined) {
    return fail("unsupported_event_type", "The event type is not supported by this receiver.")
  }

  // 6. The headers agree with the body.
  if (parsed["id"] !== values.eventId) {
    return fail("header_body_mismatch", `${WebhookHeaders.eventId} differs from the body id.`)
  }
  if (parsed["api_version"] !== values.version) {
    return fail("header_body_mismatch", `${WebhookHeaders.version} differs from the body api_version.`)
  }

  // 7. The body is exactly the event of the contract.
  const decoded = decodeSupportedEvent(supportedType, parsed)
  if (Result.isFailure(decoded)) {
    return fail("malformed_body", `The body does not match the ${type} event: ${decoded.failure.message}`)
  }
  return Result.succeed(decoded.success)
}

/**
 * The receiver check of contract 6.2 for `recording.transcript_ready`. Returns the decoded event
 * only when every check passes; see `WebhookVerificationFailureReason` for their order.
 * `webhook.endpoint_test` is refused as `unsupported_event_type` here.
 */
export const verifyWebhook = (
  input: VerifyWebhookInput
): Result.Result<TranscriptReadyEvent, WebhookVerificationFailure> =>
  Result.flatMap(verify(input, [TRANSCRIPT_READY]), (event) =>
    event.type === TRANSCRIPT_READY
      ? Result.succeed(event)
      : fail("unsupported_event_type", "The event type is not supported by this receiver."))

/** As `verifyWebhook`, and also accepts the operator's `webhook.endpoint_test`. */
export const verifyWebhookOrEndpointTest = (
  input: VerifyWebhookInput
): Result.Result<TranscriptReadyEvent | EndpointTestEvent, WebhookVerificationFailure> =>
  verify(input, [TRANSCRIPT_READY, ENDPOINT_TEST])
