/**
 * @clinical-api/webhook-adapter
 *
 * Receiver kit (for partners): `verifyWebhook`, the idempotency store (in memory and
 * PostgreSQL), `makeWebhookRequestHandler` (a plain Node request handler) and the example
 * receiver. Sender side: `buildSignedDelivery` / `signStoredDelivery` and `deliverWebhook`
 * (one HTTP attempt, classified as the domain's `DeliveryOutcome`).
 */

// The partner-facing verification is the domain's, unchanged.
export {
  verifyWebhook,
  verifyWebhookOrEndpointTest,
  type VerifyWebhookInput,
  WebhookVerificationFailure,
  WebhookVerificationFailureReason,
  WEBHOOK_TIMESTAMP_TOLERANCE_SECONDS,
  type TranscriptReadyEvent,
  type EndpointTestEvent,
  WebhookHeaders
} from "@clinical-api/domain"

export * from "./receiver/idempotency-store.js"
export * from "./receiver/idempotency-store-memory.js"
export * from "./receiver/idempotency-store-postgres.js"
export * from "./receiver/request-handler.js"
export * from "./receiver/example-receiver-app.js"
export * from "./receiver/example-receiver-main.js"
export * from "./sender/deliver-webhook.js"
export * from "./worker/index.js"
