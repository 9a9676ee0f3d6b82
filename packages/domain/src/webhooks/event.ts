import { Schema } from "effect"
import { parseRfc3339Instant } from "../time.js"
import { DocumentId, EncounterId, OrganizationId, WebhookEventId } from "../ids.js"

/** The webhook contract version (contract 6.1 and 9): body `api_version` and header `Service-Webhook-Version`. */
export const WEBHOOK_API_VERSION = "2026-05-01" as const

/** The one event of the public inventory (contract 6.1). */
export const TRANSCRIPT_READY = "recording.transcript_ready" as const

/** Sent by operator tooling to check an endpoint; not in the public inventory nor the OpenAPI document. */
export const ENDPOINT_TEST = "webhook.endpoint_test" as const

/** The delivery headers of contract 6.1; the `Service-` prefix is part of each name. */
export const WebhookHeaders = {
  eventId: "Service-Event-Id",
  deliveryId: "Service-Delivery-Id",
  timestamp: "Service-Timestamp",
  signature: "Service-Signature",
  version: "Service-Webhook-Version"
} as const

/**
 * `occurred_at` is kept as the text it was sent as: the signature covers the exact bytes, so a
 * receiver must never see it rewritten (`12:00:00Z` stays `12:00:00Z`, not `12:00:00.000Z`).
 */
export const WebhookEventDateTime = Schema.String.check(
  Schema.makeFilter((text) => parseRfc3339Instant(text) !== undefined, {
    message: "Expected an RFC 3339 date-time with offset",
    toJsonSchema: () => ({ format: "date-time" })
  })
).annotate({
  identifier: "WebhookEventDateTime",
  description: "ISO 8601 date-time"
})

export const TranscriptReadyResources = Schema.Struct({
  encounter_id: EncounterId,
  document_id: DocumentId
}).annotate({ identifier: "RecordingTranscriptReadyResources" })

/**
 * Contract 6.1: a thin pointer, every field required and no other. It carries no transcript,
 * patient, audio, URL or secret; decoded with `exactParseOptions` it refuses any extra key.
 */
export const TranscriptReadyEvent = Schema.Struct({
  id: WebhookEventId,
  type: Schema.Literal(TRANSCRIPT_READY),
  api_version: Schema.Literal(WEBHOOK_API_VERSION),
  occurred_at: WebhookEventDateTime,
  organization_id: OrganizationId,
  resources: TranscriptReadyResources
}).annotate({
  identifier: "RecordingTranscriptReadyEvent",
  description: "A recording transcript is ready for follow-up fetches through the REST routes."
})
export type TranscriptReadyEvent = typeof TranscriptReadyEvent.Type

/**
 * `webhook.endpoint_test` (docs/webhooks.md): the same envelope without resources, so a
 * receiver can check its signature handling end to end. Operator tooling only.
 */
export const EndpointTestEvent = Schema.Struct({
  id: WebhookEventId,
  type: Schema.Literal(ENDPOINT_TEST),
  api_version: Schema.Literal(WEBHOOK_API_VERSION),
  occurred_at: WebhookEventDateTime,
  organization_id: OrganizationId
}).annotate({ identifier: "WebhookEndpointTestEvent" })
export type EndpointTestEvent = typeof EndpointTestEvent.Type

export const WebhookEvent = Schema.Union([TranscriptReadyEvent, EndpointTestEvent])
export type WebhookEvent = typeof WebhookEvent.Type

export const makeTranscriptReadyEvent = (input: {
  readonly id: WebhookEventId
  readonly occurredAt: Date
  readonly organizationId: OrganizationId
  readonly encounterId: EncounterId
  readonly documentId: DocumentId
}): TranscriptReadyEvent => ({
  id: input.id,
  type: TRANSCRIPT_READY,
  api_version: WEBHOOK_API_VERSION,
  occurred_at: input.occurredAt.toISOString(),
  organization_id: input.organizationId,
  resources: { encounter_id: input.encounterId, document_id: input.documentId }
})

export const makeEndpointTestEvent = (input: {
  readonly id: WebhookEventId
  readonly occurredAt: Date
  readonly organizationId: OrganizationId
}): EndpointTestEvent => ({
  id: input.id,
  type: ENDPOINT_TEST,
  api_version: WEBHOOK_API_VERSION,
  occurred_at: input.occurredAt.toISOString(),
  organization_id: input.organizationId
})

const encodeWebhookEvent = Schema.encodeSync(WebhookEvent)

/**
 * The exact body text of a delivery: compact JSON of the encoded event, keys in contract order.
 * These are the bytes that are signed and sent; they are stored once and never re-serialised.
 */
export const serializeWebhookEvent = (event: WebhookEvent): string => JSON.stringify(encodeWebhookEvent(event))

/** `serializeWebhookEvent` as UTF-8 bytes. */
export const webhookEventBody = (event: WebhookEvent): Uint8Array =>
  new TextEncoder().encode(serializeWebhookEvent(event))
