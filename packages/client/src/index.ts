export { ClinicalApiClient, type ClinicalApiClientOptions, type FetchFunction, type RequestOptions } from "./client.js"
export {
  ApiConnectionError,
  ApiError,
  AuthenticationError,
  InvalidRequestError,
  NotFoundError,
  PermissionError,
  ServiceUnavailableError
} from "./errors.js"
export { MAX_LIMIT, MAX_OFFSET, type SyncCheckpoint, type SyncItem, type SyncOptions } from "./sync.js"
export type * from "./types.js"
export {
  type EndpointTestEvent,
  signWebhookPayload,
  verifyWebhook,
  type VerifyWebhookOptions,
  WEBHOOK_API_VERSION,
  WEBHOOK_TIMESTAMP_TOLERANCE_SECONDS,
  WebhookHeaders,
  type WebhookRequestHeaders,
  WebhookVerificationError,
  type WebhookVerificationFailureReason
} from "./webhooks.js"
export type { components, operations, paths, webhooks } from "./generated/openapi.js"
