import { Layer } from "effect"
import { WebhookDeliveryQueuePostgres } from "./delivery-queue-postgres.js"
import { WebhookOutboxPostgres } from "./outbox-postgres.js"
import { WebhookOperatorStoreLive } from "./subscription-store.js"

export * from "./delivery-queue-postgres.js"
export * from "./outbox-postgres.js"
export * from "./rows.js"
export * from "./subscription-store.js"

/** The webhook outbox, the delivery queue and the operator store on PostgreSQL, for a given `PgClient` and `IdGenerator`. */
export const WebhooksPostgresLive = Layer.mergeAll(WebhookOutboxPostgres, WebhookDeliveryQueuePostgres, WebhookOperatorStoreLive)
