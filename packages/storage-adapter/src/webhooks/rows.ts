import {
  OrganizationId,
  WebhookDeliveryId,
  WebhookDeliveryState,
  WebhookEventId,
  WebhookReadinessItem,
  WebhookReadinessStatus,
  type WebhookReadiness,
  WebhookSubscriptionId,
  WebhookSubscriptionStatus
} from "@clinical-api/domain"
import { Schema } from "effect"
import { DateColumn } from "../sql/row-guard.js"

/** The database rows of the webhook tables (migration 3), decoded with Schema. */

export const ReadinessRecord = Schema.Record(WebhookReadinessItem, WebhookReadinessStatus)

export const SubscriptionRow = Schema.Struct({
  subscription_id: WebhookSubscriptionId,
  organization_id: OrganizationId,
  endpoint_url: Schema.String,
  state: WebhookSubscriptionStatus,
  revision: Schema.Number,
  readiness: ReadinessRecord,
  created_at: DateColumn,
  updated_at: DateColumn
})

export const subscriptionColumns =
  "subscription_id, organization_id, endpoint_url, state, revision, readiness, created_at, updated_at"

/** A subscription as operators see it (never its secret). */
export interface WebhookSubscriptionRecord {
  readonly subscriptionId: WebhookSubscriptionId
  readonly organizationId: OrganizationId
  readonly endpointUrl: string
  readonly state: WebhookSubscriptionStatus
  readonly revision: number
  readonly readiness: WebhookReadiness
  readonly createdAt: Date
  readonly updatedAt: Date
}

export const toSubscription = (row: typeof SubscriptionRow.Type): WebhookSubscriptionRecord => ({
  subscriptionId: row.subscription_id,
  organizationId: row.organization_id,
  endpointUrl: row.endpoint_url,
  state: row.state,
  revision: row.revision,
  readiness: row.readiness,
  createdAt: row.created_at,
  updatedAt: row.updated_at
})

export const RevisionRow = Schema.Struct({
  revision: Schema.Number,
  change: Schema.String,
  state: WebhookSubscriptionStatus,
  readiness: ReadinessRecord,
  changed_by: Schema.NullOr(Schema.String),
  reason: Schema.NullOr(Schema.String),
  created_at: DateColumn
})
export type RevisionRow = typeof RevisionRow.Type

export const DeliveryRow = Schema.Struct({
  delivery_id: WebhookDeliveryId,
  event_id: WebhookEventId,
  event_type: Schema.String,
  subscription_id: WebhookSubscriptionId,
  state: WebhookDeliveryState,
  attempt_count: Schema.Number,
  max_attempts: Schema.Number,
  next_attempt_at: DateColumn,
  lease_owner: Schema.NullOr(Schema.String),
  lease_expires_at: Schema.NullOr(DateColumn),
  last_attempt_at: Schema.NullOr(DateColumn),
  last_response_status: Schema.NullOr(Schema.Number),
  last_error_class: Schema.NullOr(Schema.String),
  failure_reason: Schema.NullOr(Schema.String),
  created_at: DateColumn,
  updated_at: DateColumn
})
export type DeliveryRow = typeof DeliveryRow.Type

export const deliveryColumns = `d.delivery_id, d.event_id, e.event_type, d.subscription_id, d.state, d.attempt_count,
  d.max_attempts, d.next_attempt_at, d.lease_owner, d.lease_expires_at, d.last_attempt_at, d.last_response_status,
  d.last_error_class, d.failure_reason, d.created_at, d.updated_at`

export const AttemptRow = Schema.Struct({
  attempt_number: Schema.Number,
  worker_id: Schema.String,
  started_at: DateColumn,
  finished_at: Schema.NullOr(DateColumn),
  duration_ms: Schema.NullOr(Schema.Number),
  response_status: Schema.NullOr(Schema.Number),
  error_class: Schema.NullOr(Schema.String)
})
export type AttemptRow = typeof AttemptRow.Type
