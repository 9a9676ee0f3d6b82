import {
  type ListQueryKey,
  type OperationId,
  PublicApiError,
  type PublicApiErrorResponse,
  type PublicAmbientTranscriptMetadata,
  type PublicClinicalDocument,
  type PublicDocumentAudioResponse,
  type PublicDocumentContent,
  type PublicDocumentDetailResponse,
  type PublicDocumentTranscriptResponse,
  type PublicEncounterDetailResponse,
  type PublicEncounterDocumentSummary,
  type PublicEncounterListResponse,
  type PublicEncounterSummary,
  type PublicFinalTranscript,
  type PublicPatientSummary,
  type PublicTranscriptTurn,
  type ReasonCode,
  signingTimestamp,
  signWebhookPayload,
  type TranscriptReadyEvent,
  WEBHOOK_API_VERSION,
  WebhookHeaders
} from "@clinical-api/domain"

/**
 * The one set of example values of the OpenAPI document and so of the docs page: encounter
 * `enc_rv_0010` of the sandbox data (packages/storage-adapter/fixtures/sandbox.fixture.json),
 * written as the sandbox answers for it, so each example request answers 200 with the sandbox
 * key and shows what it returns (openapi.test.ts holds both). Every other example is built
 * from these values.
 */

type Wire<S extends { readonly Encoded: unknown }> = S["Encoded"]

const organizationId = "org_riverside"
const encounterId = "enc_rv_0010"
const transcriptDocumentId = "doc_rv_0010_transcript"
const noteDocumentId = "doc_rv_0010_note"
const createdAt = "2026-01-22T13:31:08.940Z"

const patient = {
  patient_id: "pat_rv_008",
  first_name: "Rajesh",
  last_name: "Gupta",
  date_of_birth: "1986-07-26"
} satisfies Wire<typeof PublicPatientSummary>

const transcriptDocument = {
  document_id: transcriptDocumentId,
  encounter_id: encounterId,
  schema_type: "ambient_transcript",
  created_at: "2026-01-22T13:32:45.062Z",
  updated_at: "2026-01-22T13:37:03.426Z",
  title: "Visit recording",
  status: "completed",
  workflow_variant: "ambient",
  audio_duration_seconds: 76.49
} satisfies Wire<typeof PublicAmbientTranscriptMetadata>

const content = {
  format: "markdown",
  text: `# Progress note: Hypertension follow-up

**Date of service:** 2026-01-22  
**Clinician:** Priya Patel, MD

## Subjective

39-year-old here for hypertension follow-up on lisinopril 10 mg daily, adherent. Home readings around 135/85. Occasional orthostatic lightheadedness. No chest pain, palpitations or dyspnea. Mild evening ankle swelling. Reduced dietary sodium, walks 20 minutes most days. Reports snoring and daytime fatigue.

## Objective

- Vitals: BP 139/73, HR 82, Temp 98.7 F, RR 12, SpO2 98% on room air
- Repeat BP after 5 minutes: 136/84
- Cardiovascular: regular rate and rhythm, no murmurs
- Lungs: clear bilaterally
- Extremities: trace bilateral ankle edema

## Assessment

1. Essential hypertension (I10), near goal on current therapy.
2. Snoring with daytime fatigue, rule out obstructive sleep apnea.

## Plan

- Continue lisinopril 10 mg daily
- Basic metabolic panel today (potassium, creatinine)
- Referral for home sleep study
- Continue home BP log; follow up in 3 months
`
} satisfies Wire<typeof PublicDocumentContent>

const noteDocument = {
  document_id: noteDocumentId,
  encounter_id: encounterId,
  schema_type: "document",
  content,
  created_at: "2026-01-22T14:43:23.203Z",
  updated_at: "2026-01-22T21:25:34.275Z",
  title: "Office visit note: hypertension follow-up",
  status: null,
  workflow_variant: null
} satisfies Wire<typeof PublicClinicalDocument>

const documentSummaries = [
  {
    document_id: transcriptDocument.document_id,
    schema_type: transcriptDocument.schema_type,
    title: transcriptDocument.title,
    status: transcriptDocument.status,
    workflow_variant: transcriptDocument.workflow_variant,
    audio_duration_seconds: transcriptDocument.audio_duration_seconds
  },
  {
    document_id: noteDocument.document_id,
    schema_type: noteDocument.schema_type,
    title: noteDocument.title,
    status: noteDocument.status,
    workflow_variant: noteDocument.workflow_variant,
    audio_duration_seconds: null
  },
  {
    document_id: "doc_rv_0010_billing",
    schema_type: "billing",
    title: "Charge capture (CPT 99214)",
    status: "submitted",
    workflow_variant: null,
    audio_duration_seconds: null
  }
] as const satisfies ReadonlyArray<Wire<typeof PublicEncounterDocumentSummary>>

const encounter = {
  encounter_id: encounterId,
  organization_id: organizationId,
  created_at: createdAt,
  updated_at: "2026-01-24T12:45:17.374Z",
  date_of_service: "2026-01-22T13:15:00.000Z",
  encounter_type: "ambient",
  status: "signed",
  patient,
  documents: documentSummaries
} satisfies Wire<typeof PublicEncounterSummary>

const turns = [
  {
    speaker: "clinician",
    text: "Good to see you again. We're following up on your blood pressure today. How have things been?",
    start: 1.27,
    end: 7.7
  },
  {
    speaker: "patient",
    text: "Pretty good overall. I've been taking the lisinopril every morning.",
    start: 8.34,
    end: 12.6
  }
] as const satisfies ReadonlyArray<Wire<typeof PublicTranscriptTurn>>

const transcript = {
  provider: "scribe-asr-3.2",
  audio_duration_seconds: transcriptDocument.audio_duration_seconds,
  turns
} satisfies Wire<typeof PublicFinalTranscript>

/** The list query of the example: the one day of the example encounter, oldest first. */
export const listQueryExample: { readonly [K in ListQueryKey]: string | number } = {
  limit: 10,
  offset: 0,
  sort_order: "asc",
  start_at: "2026-01-22T00:00:00.000Z",
  end_at: "2026-01-23T00:00:00.000Z"
}

const listPage = {
  items: [encounter],
  limit: 10,
  offset: 0,
  total: 1
} satisfies Wire<typeof PublicEncounterListResponse>

const audioExpiresAt = "2026-01-22T13:41:05.000Z"

/** An embedded-storage URL (`/media/{storage key}.{expiry}.{signature}`, base64url); with S3 storage a presigned S3 URL. */
const audio = {
  audio_url: `http://127.0.0.1:8080/media/${Buffer.from("rec_5d0c8e2a9b7f41c3a6e8d2b0f4c19a7e").toString("base64url")}.${
    signingTimestamp(new Date(audioExpiresAt))
  }.Q2n7tVb0RfWj1n4Wk5yM8xqKp3sE2dLcHgA9uZoYi6c`,
  expires_at: audioExpiresAt
} satisfies Wire<typeof PublicDocumentAudioResponse>

/** The field a refusal of each query reason names in the examples; null for the others. */
const refusalFields: Partial<Record<ReasonCode, string>> = {
  unsupported_filter: "owners",
  invalid_limit: "limit",
  invalid_offset: "offset",
  invalid_sort: "sort_order",
  invalid_query: "start_at"
}

/** The wire body of a refusal with `code`, as the service writes it. */
export const refusalExample = (code: ReasonCode): Wire<typeof PublicApiErrorResponse> =>
  PublicApiError.of(code, refusalFields[code] ?? null).toResponse()

const transcriptReady = {
  id: "evt_7c1e0b9a4f2d48c6a35e91d0b2f4c6a8",
  type: "recording.transcript_ready",
  api_version: WEBHOOK_API_VERSION,
  occurred_at: transcriptDocument.updated_at,
  organization_id: organizationId,
  resources: { encounter_id: encounterId, document_id: transcriptDocumentId }
} satisfies Wire<typeof TranscriptReadyEvent>

const webhookTimestamp = signingTimestamp(new Date(transcriptReady.occurred_at))

/** The delivery headers of the example event, signed with a made-up secret. */
export const webhookHeaderExamples: Readonly<Record<string, string>> = {
  [WebhookHeaders.eventId]: transcriptReady.id,
  [WebhookHeaders.deliveryId]: "dlv_0f6b2d8e4a1c49e7b3d5a9c1e8f20b46",
  [WebhookHeaders.timestamp]: webhookTimestamp,
  [WebhookHeaders.signature]: signWebhookPayload({
    secret: "whsec_ZXhhbXBsZS1zZWNyZXQtbm90LWZvci1wcm9kdWN0aW9uLXVzZQ",
    timestamp: webhookTimestamp,
    rawBody: JSON.stringify(transcriptReady)
  }),
  [WebhookHeaders.version]: WEBHOOK_API_VERSION
}

/** The path parameters of each operation's example request. */
export const pathParameterExamples: { readonly [K in OperationId]: Readonly<Record<string, string>> } = {
  listPublicEncounters: {},
  getPublicEncounter: { encounter_id: encounterId },
  getPublicDocument: { encounter_id: encounterId, document_id: noteDocumentId },
  getPublicDocumentTranscript: { encounter_id: encounterId, document_id: transcriptDocumentId },
  getPublicDocumentAudio: { encounter_id: encounterId, document_id: transcriptDocumentId }
}

/** Each named schema of the document and its example. */
export const schemaExamples: Readonly<Record<string, unknown>> = {
  Timestamp: createdAt,
  CalendarDate: patient.date_of_birth,
  WebhookEventDateTime: transcriptReady.occurred_at,
  PublicPatientSummary: patient,
  PublicEncounterDocumentSummary: documentSummaries[0],
  PublicEncounterSummary: encounter,
  PublicEncounterListResponse: listPage,
  PublicEncounterDetailResponse: { encounter } satisfies Wire<typeof PublicEncounterDetailResponse>,
  PublicDocumentContent: content,
  PublicClinicalDocument: noteDocument,
  PublicAmbientTranscriptMetadata: transcriptDocument,
  PublicDocumentDetailResponse: { document: noteDocument } satisfies Wire<typeof PublicDocumentDetailResponse>,
  PublicTranscriptTurn: turns[0],
  PublicFinalTranscript: transcript,
  PublicDocumentTranscriptResponse: {
    document_id: transcriptDocumentId,
    encounter_id: encounterId,
    transcript
  } satisfies Wire<typeof PublicDocumentTranscriptResponse>,
  PublicDocumentAudioResponse: audio,
  PublicApiErrorResponse: refusalExample("invalid_query"),
  RecordingTranscriptReadyEvent: transcriptReady,
  RecordingTranscriptReadyResources: transcriptReady.resources
}
