import { Effect, Schema } from "effect"
import { DocumentId, EncounterId, OrganizationId, PatientId } from "./ids.js"
import { CalendarDate, Timestamp } from "./time.js"

/**
 * The public resources of contract section 2. Each is a plain struct (no `_tag`) whose
 * encoded form is exactly the contract's JSON. Keys that are "not required" decode to `null`
 * (or `[]`) when absent and are always written, so partners see one stable shape. Their
 * encoded side is an optional key (`...TypeKey`), never `undefined`: the OpenAPI generator
 * would document an `undefined` as `null`, a value the wire never sends.
 */

/**
 * The parse options the contract's JSON is decoded with: any key the contract does not name is
 * refused. (Effect 4 takes excess-property handling from the call, not from the schema.)
 */
export const exactParseOptions = { onExcessProperty: "error" } as const

const optionalNullable = <S extends Schema.Top>(schema: S) =>
  Schema.NullOr(schema).pipe(Schema.withDecodingDefaultTypeKey(Effect.succeed(null)))

export const SchemaType = Schema.Literals(["document", "ambient_transcript", "billing", "encounter_checklist"])
export type SchemaType = typeof SchemaType.Type

export const WorkflowVariant = Schema.Literals(["ambient", "phone_call"])
export type WorkflowVariant = typeof WorkflowVariant.Type

export const EncounterType = Schema.Literals(["ambient", "phone_call", "clinical_documentation", "billing", "checklist"])
export type EncounterType = typeof EncounterType.Type

export const AudioDurationSeconds = Schema.Number.check(Schema.isFinite(), Schema.isGreaterThanOrEqualTo(0))

export const PublicPatientSummary = Schema.Struct({
  patient_id: PatientId,
  first_name: optionalNullable(Schema.String),
  last_name: optionalNullable(Schema.String),
  date_of_birth: optionalNullable(CalendarDate)
}).annotate({ identifier: "PublicPatientSummary" })
export type PublicPatientSummary = typeof PublicPatientSummary.Type

export const PublicEncounterDocumentSummary = Schema.Struct({
  document_id: DocumentId,
  schema_type: SchemaType,
  title: optionalNullable(Schema.String),
  status: optionalNullable(Schema.String),
  workflow_variant: optionalNullable(WorkflowVariant),
  audio_duration_seconds: optionalNullable(AudioDurationSeconds)
}).annotate({ identifier: "PublicEncounterDocumentSummary" })
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
  documents: Schema.Array(PublicEncounterDocumentSummary).pipe(Schema.withDecodingDefaultTypeKey(Effect.succeed([])))
}).annotate({ identifier: "PublicEncounterSummary" })
export type PublicEncounterSummary = typeof PublicEncounterSummary.Type

export const PublicEncounterListResponse = Schema.Struct({
  items: Schema.Array(PublicEncounterSummary),
  limit: Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)),
  offset: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)),
  total: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))
}).annotate({ identifier: "PublicEncounterListResponse" })
export type PublicEncounterListResponse = typeof PublicEncounterListResponse.Type

export const PublicEncounterDetailResponse = Schema.Struct({
  encounter: PublicEncounterSummary
}).annotate({ identifier: "PublicEncounterDetailResponse" })
export type PublicEncounterDetailResponse = typeof PublicEncounterDetailResponse.Type

export const PublicDocumentContent = Schema.Struct({
  format: Schema.Literal("markdown").pipe(Schema.withDecodingDefaultTypeKey(Effect.succeed("markdown" as const))),
  text: optionalNullable(Schema.String)
}).annotate({ identifier: "PublicDocumentContent" })
export type PublicDocumentContent = typeof PublicDocumentContent.Type

export const PublicClinicalDocument = Schema.Struct({
  document_id: DocumentId,
  encounter_id: EncounterId,
  schema_type: Schema.Literal("document"),
  content: PublicDocumentContent,
  created_at: Timestamp,
  updated_at: Timestamp,
  title: optionalNullable(Schema.String),
  status: Schema.Null.pipe(Schema.withDecodingDefaultTypeKey(Effect.succeed(null))),
  workflow_variant: Schema.Null.pipe(Schema.withDecodingDefaultTypeKey(Effect.succeed(null)))
}).annotate({ identifier: "PublicClinicalDocument" })
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
}).annotate({ identifier: "PublicAmbientTranscriptMetadata" })
export type PublicAmbientTranscriptMetadata = typeof PublicAmbientTranscriptMetadata.Type

export const PublicDocumentDetail = Schema.Union([PublicClinicalDocument, PublicAmbientTranscriptMetadata])
export type PublicDocumentDetail = typeof PublicDocumentDetail.Type

export const PublicDocumentDetailResponse = Schema.Struct({
  document: PublicDocumentDetail
}).annotate({ identifier: "PublicDocumentDetailResponse" })
export type PublicDocumentDetailResponse = typeof PublicDocumentDetailResponse.Type

export const PublicTranscriptTurn = Schema.Struct({
  speaker: Schema.String,
  text: Schema.String,
  start: Schema.Number.check(Schema.isFinite()),
  end: Schema.Number.check(Schema.isFinite())
}).annotate({ identifier: "PublicTranscriptTurn" })
export type PublicTranscriptTurn = typeof PublicTranscriptTurn.Type

export const PublicFinalTranscript = Schema.Struct({
  provider: Schema.String,
  audio_duration_seconds: optionalNullable(AudioDurationSeconds),
  turns: Schema.Array(PublicTranscriptTurn)
}).annotate({ identifier: "PublicFinalTranscript" })
export type PublicFinalTranscript = typeof PublicFinalTranscript.Type

export const PublicDocumentTranscriptResponse = Schema.Struct({
  document_id: DocumentId,
  encounter_id: EncounterId,
  transcript: PublicFinalTranscript
}).annotate({ identifier: "PublicDocumentTranscriptResponse" })
export type PublicDocumentTranscriptResponse = typeof PublicDocumentTranscriptResponse.Type

export const PublicDocumentAudioResponse = Schema.Struct({
  audio_url: Schema.String,
  expires_at: Timestamp
}).annotate({ identifier: "PublicDocumentAudioResponse" })
export type PublicDocumentAudioResponse = typeof PublicDocumentAudioResponse.Type
