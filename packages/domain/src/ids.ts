import { Schema } from "effect"

/**
 * Every identifier of the contract is an opaque string: no prefix, format or meaning may be
 * inferred from it. The brands keep one kind of id from being passed where another is expected.
 */
const opaqueId = <const B extends string>(brand: B) =>
  Schema.String.pipe(Schema.minLength(1), Schema.brand(brand))

export const OrganizationId = opaqueId("OrganizationId")
export type OrganizationId = typeof OrganizationId.Type

export const EncounterId = opaqueId("EncounterId")
export type EncounterId = typeof EncounterId.Type

export const DocumentId = opaqueId("DocumentId")
export type DocumentId = typeof DocumentId.Type

export const PatientId = opaqueId("PatientId")
export type PatientId = typeof PatientId.Type

export const ApiKeyId = opaqueId("ApiKeyId")
export type ApiKeyId = typeof ApiKeyId.Type

export const DisclosureEventId = opaqueId("DisclosureEventId")
export type DisclosureEventId = typeof DisclosureEventId.Type

export const RequestId = opaqueId("RequestId")
export type RequestId = typeof RequestId.Type

export const WebhookEventId = opaqueId("WebhookEventId")
export type WebhookEventId = typeof WebhookEventId.Type

export const WebhookDeliveryId = opaqueId("WebhookDeliveryId")
export type WebhookDeliveryId = typeof WebhookDeliveryId.Type

export const WebhookSubscriptionId = opaqueId("WebhookSubscriptionId")
export type WebhookSubscriptionId = typeof WebhookSubscriptionId.Type
