import { createHmac, createSecretKey, timingSafeEqual } from "node:crypto"
import type { TranscriptReadyEvent } from "./types.js"

/** The webhook contract version: body `api_version` and header `Service-Webhook-Version`. */
export const WEBHOOK_API_VERSION = "2026-05-01"

/** The signing time may differ from the receiver's clock by at most this, either way. */
export const WEBHOOK_TIMESTAMP_TOLERANCE_SECONDS = 300

export const WebhookHeaders = {
  eventId: "Service-Event-Id",
  deliveryId: "Service-Delivery-Id",
  timestamp: "Service-Timestamp",
  signature: "Service-Signature",
  version: "Service-Webhook-Version"
} as const

/** Sent by the operator's `webhooks send-test` to check an endpoint; not in the public inventory. */
export interface EndpointTestEvent {
  readonly id: string
  readonly type: "webhook.endpoint_test"
  readonly api_version: typeof WEBHOOK_API_VERSION
  readonly occurred_at: string
  readonly organization_id: string
}

/**
 * Why a delivery was refused, in the order the checks run: a `Service-` header is absent or
 * empty; the timestamp is not within the tolerance (or not decimal epoch seconds); no `v1`
 * signature matches a secret (checked before any byte of the body is read); the body is not a
 * JSON object with a string `type`; the type is not handled; `Service-Event-Id` or
 * `Service-Webhook-Version` differs from the body's `id` or `api_version`; the body is not
 * exactly the event (a missing or extra field, an empty id, a bad `occurred_at`).
 */
export type WebhookVerificationFailureReason =
  | "missing_header"
  | "stale_timestamp"
  | "invalid_signature"
  | "malformed_body"
  | "unsupported_event_type"
  | "header_body_mismatch"

/** A refused delivery: do no follow-up work. The message never holds a secret or a signature. */
export class WebhookVerificationError extends Error {
  override readonly name = "WebhookVerificationError"
  readonly reason: WebhookVerificationFailureReason

  constructor(reason: WebhookVerificationFailureReason, message: string) {
    super(message)
    this.reason = reason
  }
}

/** A Fetch `Headers`, Node's `IncomingMessage.headers`, or any record; names match case-insensitively. */
export type WebhookRequestHeaders =
  | { readonly get: (name: string) => string | null }
  | Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

export interface VerifyWebhookOptions {
  /** The exact request body as received: bytes, or text taken as its UTF-8 bytes. */
  readonly rawBody: Uint8Array | string
  readonly headers: WebhookRequestHeaders
  /** The endpoint's signing secret (`whsec_...`)... */
  readonly secret?: string
  /** ...or every secret valid during a rotation: any one may match. Empty strings are ignored. */
  readonly secrets?: ReadonlyArray<string>
  /** Default 300. */
  readonly toleranceSeconds?: number
  /** The receiver's clock (default: now). */
  readonly now?: Date
}

const headerValue = (headers: WebhookRequestHeaders, name: string): string | undefined => {
  if (typeof headers.get === "function") {
    return (headers as { readonly get: (name: string) => string | null }).get(name) ?? undefined
  }
  const wanted = name.toLowerCase()
  const values: Array<string> = []
  // Several values (an array, or keys differing in case) are joined as Fetch's Headers.get does.
  for (const [key, value] of Object.entries(headers as Readonly<Record<string, unknown>>)) {
    if (key.toLowerCase() !== wanted || value === undefined) continue
    if (typeof value === "string") values.push(value)
    else if (Array.isArray(value)) values.push(...value.map(String))
  }
  return values.length === 0 ? undefined : values.join(", ")
}

/** The `v1` digests of a `Service-Signature`; other schemes and values that are not 64 lowercase hex digits are ignored. */
const signatureCandidates = (header: string): ReadonlyArray<Buffer> => {
  const candidates: Array<Buffer> = []
  for (const entry of header.split(/[\s,]+/)) {
    if (!entry.startsWith("v1=")) continue
    const hex = entry.slice(3)
    if (/^[0-9a-f]{64}$/.test(hex)) candidates.push(Buffer.from(hex, "hex"))
  }
  return candidates
}

/**
 * HMAC-SHA256 keyed by the UTF-8 bytes of the whole secret, over `timestamp + "." + body bytes`
 * (keyed through a KeyObject: with bytes Node takes about four times as long).
 */
const signatureDigest = (secret: string, timestamp: string, body: Uint8Array): Buffer =>
  createHmac("sha256", createSecretKey(Buffer.from(secret, "utf8"))).update(Buffer.from(`${timestamp}.`, "utf8")).update(body).digest()

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))$/

const daysInMonth = (year: number, month: number): number =>
  month === 2
    ? (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28
    : [4, 6, 9, 11].includes(month)
    ? 30
    : 31

/** An RFC 3339 date-time with an offset naming a real instant (no 02-30, no leap second, no year 0000). */
const isRfc3339DateTime = (text: string): boolean => {
  const match = RFC3339.exec(text)
  if (match === null) return false
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number
  ]
  const offsetHours = match[9] === undefined ? 0 : Number(match[9])
  const offsetMinutes = match[10] === undefined ? 0 : Number(match[10])
  return year >= 1 && month >= 1 && month <= 12 && day >= 1 && day <= daysInMonth(year, month) && hour <= 23 &&
    minute <= 59 && second <= 59 && offsetHours <= 23 && offsetMinutes <= 59
}

const isRecord = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const isNonEmptyString = (value: unknown): value is string => typeof value === "string" && value.length > 0

const hasExactly = (value: Readonly<Record<string, unknown>>, keys: ReadonlyArray<string>): boolean => {
  const present = Object.keys(value)
  return present.length === keys.length && keys.every((key) => Object.hasOwn(value, key))
}

/** Why the body is not exactly the event, or undefined when it is. */
const shapeProblem = (body: Readonly<Record<string, unknown>>, withResources: boolean): string | undefined => {
  const keys = ["id", "type", "api_version", "occurred_at", "organization_id", ...(withResources ? ["resources"] : [])]
  if (!hasExactly(body, keys)) return `it must hold exactly ${keys.join(", ")}`
  if (!isNonEmptyString(body["id"]) || !isNonEmptyString(body["organization_id"])) {
    return "id and organization_id must be non-empty strings"
  }
  if (body["api_version"] !== WEBHOOK_API_VERSION) return `api_version must be ${WEBHOOK_API_VERSION}`
  if (typeof body["occurred_at"] !== "string" || !isRfc3339DateTime(body["occurred_at"])) {
    return "occurred_at must be an RFC 3339 date-time with an offset"
  }
  if (withResources) {
    const resources = body["resources"]
    if (
      !isRecord(resources) || !hasExactly(resources, ["encounter_id", "document_id"]) ||
      !isNonEmptyString(resources["encounter_id"]) || !isNonEmptyString(resources["document_id"])
    ) {
      return "resources must hold exactly a non-empty encounter_id and document_id"
    }
  }
  return undefined
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

const TRANSCRIPT_READY = "recording.transcript_ready"
const ENDPOINT_TEST = "webhook.endpoint_test"

function refuse(reason: WebhookVerificationFailureReason, message: string): never {
  throw new WebhookVerificationError(reason, message)
}

const verify = (options: VerifyWebhookOptions, types: ReadonlyArray<string>): unknown => {
  const values: Partial<Record<keyof typeof WebhookHeaders, string>> = {}
  for (const key of Object.keys(WebhookHeaders) as Array<keyof typeof WebhookHeaders>) {
    const value = headerValue(options.headers, WebhookHeaders[key])
    if (value === undefined || value.trim() === "") refuse("missing_header", `The ${WebhookHeaders[key]} header is missing.`)
    values[key] = value
  }
  const timestamp = values.timestamp ?? ""

  const toleranceMs = (options.toleranceSeconds ?? WEBHOOK_TIMESTAMP_TOLERANCE_SECONDS) * 1000
  const nowMs = (options.now ?? new Date()).getTime()
  if (!/^[0-9]{1,12}$/.test(timestamp)) {
    refuse("stale_timestamp", `${WebhookHeaders.timestamp} is not decimal Unix epoch seconds.`)
  }
  if (!(Math.abs(nowMs - Number(timestamp) * 1000) <= toleranceMs)) {
    refuse("stale_timestamp", `${WebhookHeaders.timestamp} differs from the clock by more than the tolerance.`)
  }

  const body = typeof options.rawBody === "string" ? Buffer.from(options.rawBody, "utf8") : options.rawBody
  const secrets = [...(options.secret === undefined ? [] : [options.secret]), ...(options.secrets ?? [])]
  const candidates = signatureCandidates(values.signature ?? "")
  let authentic = false
  for (const secret of secrets) {
    if (typeof secret !== "string" || secret === "") continue
    const expected = signatureDigest(secret, timestamp, body)
    for (const candidate of candidates) {
      if (timingSafeEqual(candidate, expected)) authentic = true
    }
  }
  if (!authentic) refuse("invalid_signature", `No v1 value of ${WebhookHeaders.signature} matches a signing secret.`)

  let parsed: unknown
  try {
    parsed = JSON.parse(utf8.decode(body))
  } catch {
    refuse("malformed_body", "The body is not UTF-8 JSON.")
  }
  if (!isRecord(parsed) || typeof parsed["type"] !== "string") {
    refuse("malformed_body", "The body is not a JSON object with a string type.")
  }
  const type = parsed["type"]
  if (!types.includes(type)) refuse("unsupported_event_type", "The event type is not supported by this receiver.")
  if (parsed["id"] !== values.eventId) refuse("header_body_mismatch", `${WebhookHeaders.eventId} differs from the body id.`)
  if (parsed["api_version"] !== values.version) {
    refuse("header_body_mismatch", `${WebhookHeaders.version} differs from the body api_version.`)
  }
  const problem = shapeProblem(parsed, type === TRANSCRIPT_READY)
  if (problem !== undefined) refuse("malformed_body", `The body is not a ${type} event: ${problem}.`)
  return parsed
}

/**
 * Verifies a `recording.transcript_ready` delivery and returns its event, or throws a
 * `WebhookVerificationError` (its `reason` says which check failed). Pass the exact raw body:
 * the signature covers its bytes, so a body parsed and serialised again does not verify.
 * Deduplicate by the event's `id` (`Service-Event-Id`): delivery is at least once.
 */
export function verifyWebhook(options: VerifyWebhookOptions): TranscriptReadyEvent
/** As above, also accepting the operator's `webhook.endpoint_test`. */
export function verifyWebhook(
  options: VerifyWebhookOptions & { readonly acceptEndpointTest: true }
): TranscriptReadyEvent | EndpointTestEvent
export function verifyWebhook(
  options: VerifyWebhookOptions & { readonly acceptEndpointTest?: boolean }
): TranscriptReadyEvent | EndpointTestEvent {
  const types = options.acceptEndpointTest === true ? [TRANSCRIPT_READY, ENDPOINT_TEST] : [TRANSCRIPT_READY]
  return verify(options, types) as TranscriptReadyEvent | EndpointTestEvent
}

/** The `Service-Signature` value for a body: for tests of a receiver. */
export const signWebhookPayload = (secret: string, timestamp: string, rawBody: Uint8Array | string): string =>
  `v1=${
    signatureDigest(secret, timestamp, typeof rawBody === "string" ? Buffer.from(rawBody, "utf8") : rawBody).toString("hex")
  }`
