import { Schema } from "effect"
import { DocumentId, EncounterId, OrganizationId, PatientId } from "./ids.js"
import { CalendarDate, Timestamp } from "./time.js"

/**
 * The public resources of contract section 2. Each is a plain struct (no `_tag`) whose
 * encoded form is exactly the contract's JSON; decoding refuses any key the contract does
 * not name. Keys that are "not required" decode to `null` (or `[]`) when absent and are
 * always written, so partners see one stable shape.
 */
const exact = { parseOptions: { onExcessProperty: "error" } } as const

const optionalNullable = <S extends Schema.Schema.Any>(schema: S) =>
  Schema.optionalWith(Schema.NullOr(schema), { default: () => null })

export const SchemaType = Schema.Literal("document", "ambient_transcript", "billing", "encounter_checklist")
export type SchemaType = typeof SchemaType.Type

export const WorkflowVariant = Schema.Literal("ambient", "phone_call")
export type WorkflowVariant = typeof WorkflowVariant.Type

export const EncounterType = Schema.Literal("ambient", "phone_call", "clinical_documentation", "billing", "checklist")
export type EncounterType = typeof EncounterType.Type

export const AudioDurationSeconds = Schema.Number.pipe(Schema.finite(), Schema.nonNegative())

export const PublicPatientSummary = Schema.Struct({
  patient_id: PatientId,
  first_name: optionalNullable(Schema.String),
  last_name: optionalNullable(Schema.String),
  date_of_birth: optionalNullable(CalendarDate)
}).annotations({ ...exact, identifier: "PublicPatientSummary" })
export type PublicPatientSummary = typeof PublicPatientSummary.Type

export const PublicEncounterDocumentSummary = Schema.Struct({
  document_id: DocumentId,
  schema_type: SchemaType,
  title: optionalNullable(Schema.String),
  status: optionalNullable(Schema.String),
  workflow_variant: optionalNullable(WorkflowVariant),
  audio_duration_seconds: optionalNullable(AudioDurationSeconds)
}).annotations({ ...exact, identifier: "PublicEncounterDocumentSummary" })
export type PublicEncounterDocumentSummary = typeof PublicEncounterDocumentSummary.Type

export const PublicEncounterSummary = Schema.Struct({
  encounter_id: EncounterId,
  organization_id: OrganizationId,
  created_at: Timestamp,
  updated_at: Timestamp,
  date_of_service: optionalNullable(Timestamp),
  encounter_type: optionalNullable(EncounterType),
  status: optionalNullable(Schema.String),
  patient: optionalNullable(PublicPatientSummary),
  documents: Schema.optionalWith(Schema.Array(PublicEncounterDocumentSummary), { default: () => [] })
}).annotations({ ...exact, identifier: "PublicEncounterSummary" })
export type PublicEncounterSummary = typeof PublicEncounterSummary.Type

export const PublicEncounterListResponse = Schema.Struct({
  items: Schema.Array(PublicEncounterSummary),
  limit: Schema.Int,
  offset: Schema.Int,
  total: Schema.Int
}).annotations({ ...exact, identifier: "PublicEncounterListResponse" })
export type PublicEncounterListResponse = typeof PublicEncounterListResponse.Type

export const PublicEncounterDetailResponse = Schema.Struct({
  encounter: PublicEncounterSummary
}).annotations({ ...exact, identifier: "PublicEncounterDetailResponse" })
export type PublicEncounterDetailResponse = typeof PublicEncounterDetailResponse.Type

export const PublicDocumentContent = Schema.Struct({
  format: Schema.optionalWith(Schema.Literal("markdown"), { default: () => "markdown" as const }),
  text: optionalNullable(Schema.String)
}).annotations({ ...exact, identifier: "PublicDocumentContent" })
export type PublicDocumentContent = typeof PublicDocumentContent.Type

export const PublicClinicalDocument = Schema.Struct({
  document_id: DocumentId,
  encounter_id: EncounterId,
  schema_type: Schema.Literal("document"),
  content: PublicDocumentContent,
  created_at: Timestamp,
  updated_at: Timestamp,
  title: optionalNullable(Schema.String),
  status: Schema.optionalWith(Schema.Null, { default: () => null }),
  workflow_variant: Schema.optionalWith(Schema.Null, { default: () => null })
}).annotations({ ...exact, identifier: "PublicClinicalDocument" })
export type PublicClinicalDocument = typeof PublicClinicalDocument.Type

export const PublicAmbientTranscriptMetadata = Schema.Struct({
  document_id: DocumentId,
  encounter_id: EncounterId,
  schema_type: Schema.Literal("ambient_transcript"),
  created_at: Timestamp,
  updated_at: Timestamp,
  title: optionalNullable(Schema.String),
  status: optionalNullable(Schema.String),
  workflow_variant: optionalNullable(WorkflowVariant),
  audio_duration_seconds: optionalNullable(AudioDurationSeconds)
}).annotations({ ...exact, identifier: "PublicAmbientTranscriptMetadata" })
export type PublicAmbientTranscriptMetadata = typeof PublicAmbientTranscriptMetadata.Type

export const PublicDocumentDetail = Schema.Union(PublicClinicalDocument, PublicAmbientTranscriptMetadata)
export type PublicDocumentDetail = typeof PublicDocumentDetail.Type

export const PublicDocumentDetailResponse = Schema.Struct({
  document: PublicDocumentDetail
}).annotations({ ...exact, identifier: "PublicDocumentDetailResponse" })
export type PublicDocumentDetailResponse = typeof PublicDocumentDetailResponse.Type

export const PublicTranscriptTurn = Schema.Struct({
  speaker: Schema.String,
  text: Schema.String,
  start: Schema.Number.pipe(Schema.finite()),
  end: Schema.Number.pipe(Schema.finite())
}).annotations({ ...exact, identifier: "PublicTranscriptTurn" })
export type PublicTranscriptTurn = typeof PublicTranscriptTurn.Type

export const PublicFinalTranscript = Schema.Struct({
  provider: Schema.String,
  audio_duration_seconds: optionalNullable(AudioDurationSeconds),
  turns: Schema.Array(PublicTranscriptTurn)
}).annotations({ ...exact, identifier: "PublicFinalTranscript" })
export type PublicFinalTranscript = typeof PublicFinalTranscript.Type

export const PublicDocumentTranscriptResponse = Schema.Struct({
  document_id: DocumentId,
  encounter_id: EncounterId,
  transcript: PublicFinalTranscript
}).annotations({ ...exact, identifier: "PublicDocumentTranscriptResponse" })
export type PublicDocumentTranscriptResponse = typeof PublicDocumentTranscriptResponse.Type

export const PublicDocumentAudioResponse = Schema.Struct({
  audio_url: Schema.String,
  expires_at: Timestamp
}).annotations({ ...exact, identifier: "PublicDocumentAudioResponse" })
export type PublicDocumentAudioResponse = typeof PublicDocumentAudioResponse.Type
