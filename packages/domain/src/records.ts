import { Schema, Struct } from "effect"
import { ApiKeyId, DisclosureEventId, DocumentId, EncounterId, OrganizationId, PatientId, RequestId } from "./ids.js"
import { PublicPatientSummary, SchemaType, WorkflowVariant } from "./resources.js"
import { OperationId, Scope } from "./routes.js"

/**
 * Internal records: what the stores hold and the policy decides on. None of these is a
 * public resource; the public shapes are built from them by the domain.
 */

export const OrganizationRecord = Schema.Struct({
  organizationId: OrganizationId,
  name: Schema.String,
  /** Approved (allowlisted) for the public API. */
  approved: Schema.Boolean,
  enabledRoutes: Schema.Array(OperationId)
})
export type OrganizationRecord = typeof OrganizationRecord.Type

export const ApiKeyKind = Schema.Literals(["organization", "user", "service"])
export type ApiKeyKind = typeof ApiKeyKind.Type

export const ApiKeyState = Schema.Literals(["active", "disabled", "revoked"])
export type ApiKeyState = typeof ApiKeyState.Type

export const ApiKeyRecord = Schema.Struct({
  apiKeyId: ApiKeyId,
  organizationId: Schema.NullOr(OrganizationId),
  kind: ApiKeyKind,
  scopes: Schema.Array(Scope),
  state: ApiKeyState,
  expiresAt: Schema.NullOr(Schema.Date),
  label: Schema.NullOr(Schema.String)
})
export type ApiKeyRecord = typeof ApiKeyRecord.Type

export const DataClass = Schema.Literals(["clinical", "demo", "training"])
export type DataClass = typeof DataClass.Type

export const RecordingReference = Schema.Struct({
  /** Where the audio storage keeps the object; never shown to a partner. */
  storageKey: Schema.String,
  contentType: Schema.String
})
export type RecordingReference = typeof RecordingReference.Type

export const StoredDocument = Schema.Struct({
  documentId: DocumentId,
  encounterId: EncounterId,
  schemaType: SchemaType,
  title: Schema.NullOr(Schema.String),
  status: Schema.NullOr(Schema.String),
  workflowVariant: Schema.NullOr(WorkflowVariant),
  audioDurationSeconds: Schema.NullOr(Schema.Number),
  createdAt: Schema.Date,
  updatedAt: Schema.Date,
  contentMarkdown: Schema.NullOr(Schema.String),
  /** Null when the transcript is not recording-backed. */
  recording: Schema.NullOr(RecordingReference)
})
export type StoredDocument = typeof StoredDocument.Type

/** A document as the encounter views embed it: enough to build the public summary and order it. */
export const StoredDocumentSummary = StoredDocument.mapFields(
  Struct.pick(["documentId", "schemaType", "title", "status", "workflowVariant", "audioDurationSeconds", "createdAt"])
)
export type StoredDocumentSummary = typeof StoredDocumentSummary.Type

export const StoredEncounter = Schema.Struct({
  encounterId: EncounterId,
  organizationId: OrganizationId,
  dataClass: DataClass,
  createdAt: Schema.Date,
  updatedAt: Schema.Date,
  dateOfService: Schema.NullOr(Schema.Date),
  status: Schema.NullOr(Schema.String),
  patient: Schema.NullOr(PublicPatientSummary),
  documents: Schema.Array(StoredDocumentSummary)
})
export type StoredEncounter = typeof StoredEncounter.Type

/** An encounter without its documents: what a document route checks and names in its disclosure event. */
export const StoredEncounterHead = StoredEncounter.mapFields(Struct.omit(["documents"]))
export type StoredEncounterHead = typeof StoredEncounterHead.Type

/** One accounting-of-disclosures entry (docs/behaviour.md, "Disclosure events"). */
export const DisclosureEvent = Schema.Struct({
  eventId: DisclosureEventId,
  occurredAt: Schema.Date,
  organizationId: OrganizationId,
  apiKeyId: ApiKeyId,
  operationId: OperationId,
  encounterId: EncounterId,
  documentId: Schema.NullOr(DocumentId),
  patientId: Schema.NullOr(PatientId),
  /** The id the service made for the request (`req_` and 32 hex digits), unique per request. */
  requestId: RequestId,
  /** The caller's own `X-Request-Id`, when it sent a valid one: what the caller correlates with, never unique. */
  callerRequestId: Schema.NullOr(Schema.String)
})
export type DisclosureEvent = typeof DisclosureEvent.Type

export const SortOrder = Schema.Literals(["asc", "desc"])
export type SortOrder = typeof SortOrder.Type

/** A list query after validation (see list-query.ts). */
export interface EncounterListQuery {
  readonly limit: number
  readonly offset: number
  readonly sortOrder: SortOrder
  readonly startAt: Date | null
  readonly endAt: Date | null
}

export interface EncounterPage {
  readonly items: ReadonlyArray<StoredEncounter>
  readonly total: number
}
