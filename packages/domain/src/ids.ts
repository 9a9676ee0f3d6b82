import { Schema } from "effect"

/**
 * Every identifier of the contract is an opaque string: no prefix, format or meaning may be
 * inferred from it. The brands keep one kind of id from being passed where another is expected.
 */
const OpaqueId = Schema.String.check(Schema.isMinLength(1)).annotate({
  description: "Opaque identifier: nothing may be inferred from its content."
})

export const OrganizationId = OpaqueId.pipe(Schema.brand("OrganizationId"))
export type OrganizationId = typeof OrganizationId.Type

export const EncounterId = OpaqueId.pipe(Schema.brand("EncounterId"))
export type EncounterId = typeof EncounterId.Type

export const DocumentId = OpaqueId.pipe(Schema.brand("DocumentId"))
export type DocumentId = typeof DocumentId.Type

export const PatientId = OpaqueId.pipe(Schema.brand("PatientId"))
export type PatientId = typeof PatientId.Type

export const ApiKeyId = OpaqueId.pipe(Schema.brand("ApiKeyId"))
export type ApiKeyId = typeof ApiKeyId.Type

export const DisclosureEventId = OpaqueId.pipe(Schema.brand("DisclosureEventId"))
export type DisclosureEventId = typeof DisclosureEventId.Type

export const RequestId = OpaqueId.pipe(Schema.brand("RequestId"))
export type RequestId = typeof RequestId.Type

export const WebhookEventId = OpaqueId.pipe(Schema.brand("WebhookEventId"))
export type WebhookEventId = typeof WebhookEventId.Type

export const WebhookDeliveryId = OpaqueId.pipe(Schema.brand("WebhookDeliveryId"))
export type WebhookDeliveryId = typeof WebhookDeliveryId.Type

export const WebhookSubscriptionId = OpaqueId.pipe(Schema.brand("WebhookSubscriptionId"))
export type WebhookSubscriptionId = typeof WebhookSubscriptionId.Type
