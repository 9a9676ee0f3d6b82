import { deriveEncounterType } from "./encounter-type.js"
import type { DocumentDetailTarget } from "./lookup.js"
import type { SignedAudioUrl } from "./ports.js"
import type {
  EncounterListQuery,
  EncounterPage,
  StoredDocument,
  StoredDocumentSummary,
  StoredEncounter
} from "./records.js"
import type {
  PublicDocumentAudioResponse,
  PublicDocumentDetail,
  PublicDocumentDetailResponse,
  PublicDocumentTranscriptResponse,
  PublicEncounterDetailResponse,
  PublicEncounterDocumentSummary,
  PublicEncounterListResponse,
  PublicEncounterSummary,
  PublicFinalTranscript
} from "./resources.js"

/**
 * The presenters: stored records in, public resources (the Type side of resources.ts) out.
 * Nothing internal (data class, storage keys, recording references) survives them.
 */

const LONE_SURROGATE_MIN = 0xd800
const LONE_SURROGATE_MAX = 0xdfff
const REPLACEMENT_CHARACTER = 0xfffd

/**
 * Orders two strings by their UTF-8 bytes, as PostgreSQL's `COLLATE "C"` does. For UTF-8 the
 * byte order is the code-point order, which differs from JavaScript's UTF-16 code-unit order
 * above U+FFFF (`"😀"` sorts after `"\uFFFF"` here, before it with `<`). A lone surrogate has
 * no UTF-8 form; it is compared as the U+FFFD an encoder writes for it.
 */
export const compareBytewise = (a: string, b: string): -1 | 0 | 1 => {
  let i = 0
  let j = 0
  while (i < a.length && j < b.length) {
    const rawA = a.codePointAt(i) ?? 0
    const rawB = b.codePointAt(j) ?? 0
    i += rawA > 0xffff ? 2 : 1
    j += rawB > 0xffff ? 2 : 1
    const codeA = rawA >= LONE_SURROGATE_MIN && rawA <= LONE_SURROGATE_MAX ? REPLACEMENT_CHARACTER : rawA
    const codeB = rawB >= LONE_SURROGATE_MIN && rawB <= LONE_SURROGATE_MAX ? REPLACEMENT_CHARACTER : rawB
    if (codeA !== codeB) return codeA < codeB ? -1 : 1
  }
  const restA = a.length - i
  const restB = b.length - j
  return restA === restB ? 0 : restA < restB ? -1 : 1
}

/** docs/behaviour.md: documents of an encounter by `created_at`, then `document_id` bytewise, ascending. */
export const compareDocumentsForEncounter = (
  a: Pick<StoredDocumentSummary, "createdAt" | "documentId">,
  b: Pick<StoredDocumentSummary, "createdAt" | "documentId">
): number => {
  const byCreation = a.createdAt.getTime() - b.createdAt.getTime()
  return byCreation !== 0 ? Math.sign(byCreation) : compareBytewise(a.documentId, b.documentId)
}

/**
 * Contract 2.3 and section 3: clinical documents always show `status` null; `workflow_variant`
 * applies to ambient workflows and `audio_duration_seconds` is known only for transcripts, so
 * both are null for any other document type whatever the store holds.
 */
export const presentDocumentSummary = (document: StoredDocumentSummary): PublicEncounterDocumentSummary => {
  const isTranscript = document.schemaType === "ambient_transcript"
  return {
    document_id: document.documentId,
    schema_type: document.schemaType,
    title: document.title,
    status: document.schemaType === "document" ? null : document.status,
    workflow_variant: isTranscript ? document.workflowVariant : null,
    audio_duration_seconds: isTranscript ? document.audioDurationSeconds : null
  }
}

/**
 * The documents in the order docs/behaviour.md gives. The stores already read them in that order,
 * so they are checked first and sorted only if they are not.
 */
const inEncounterOrder = (
  documents: ReadonlyArray<StoredDocumentSummary>
): ReadonlyArray<StoredDocumentSummary> => {
  for (let index = 1; index < documents.length; index++) {
    const previous = documents[index - 1]
    const current = documents[index]
    if (previous !== undefined && current !== undefined && compareDocumentsForEncounter(previous, current) > 0) {
      return [...documents].sort(compareDocumentsForEncounter)
    }
  }
  return documents
}

export const presentEncounterSummary = (encounter: StoredEncounter): PublicEncounterSummary => ({
  encounter_id: encounter.encounterId,
  organization_id: encounter.organizationId,
  created_at: encounter.createdAt,
  updated_at: encounter.updatedAt,
  date_of_service: encounter.dateOfService,
  encounter_type: deriveEncounterType(encounter.documents),
  status: encounter.status,
  patient: encounter.patient === null
    ? null
    : {
      patient_id: encounter.patient.patient_id,
      first_name: encounter.patient.first_name,
      last_name: encounter.patient.last_name,
      date_of_birth: encounter.patient.date_of_birth
    },
  documents: inEncounterOrder(encounter.documents).map(presentDocumentSummary)
})

/** Contract 2.4: a clinical document carries its markdown; an ambient transcript carries metadata only. */
export const presentDocumentDetail = (document: DocumentDetailTarget): PublicDocumentDetail =>
  document.schemaType === "document"
    ? {
      document_id: document.documentId,
      encounter_id: document.encounterId,
      schema_type: "document",
      content: { format: "markdown", text: document.contentMarkdown },
      created_at: document.createdAt,
      updated_at: document.updatedAt,
      title: document.title,
      status: null,
      workflow_variant: null
    }
    : {
      document_id: document.documentId,
      encounter_id: document.encounterId,
      schema_type: "ambient_transcript",
      created_at: document.createdAt,
      updated_at: document.updatedAt,
      title: document.title,
      status: document.status,
      workflow_variant: document.workflowVariant,
      audio_duration_seconds: document.audioDurationSeconds
    }

/** Contract 4.1: the limit and offset used, and the total when the query was evaluated. */
export const presentListResponse = (
  page: EncounterPage,
  query: Pick<EncounterListQuery, "limit" | "offset">
): PublicEncounterListResponse => ({
  items: page.items.map(presentEncounterSummary),
  limit: query.limit,
  offset: query.offset,
  total: page.total
})

/** Contract 4.2: `{ encounter }`. */
export const presentDetailResponse = (encounter: StoredEncounter): PublicEncounterDetailResponse => ({
  encounter: presentEncounterSummary(encounter)
})

/** Contract 4.3: `{ document }`. */
export const presentDocumentDetailResponse = (document: DocumentDetailTarget): PublicDocumentDetailResponse => ({
  document: presentDocumentDetail(document)
})

/** Contract 4.4. Turns are chronological (docs/behaviour.md): by start, ties kept in stored order. */
export const presentTranscriptResponse = (
  document: Pick<StoredDocument, "documentId" | "encounterId">,
  transcript: PublicFinalTranscript
): PublicDocumentTranscriptResponse => ({
  document_id: document.documentId,
  encounter_id: document.encounterId,
  transcript: {
    provider: transcript.provider,
    audio_duration_seconds: transcript.audio_duration_seconds,
    turns: [...transcript.turns]
      .sort((a, b) => a.start - b.start)
      .map((turn) => ({ speaker: turn.speaker, text: turn.text, start: turn.start, end: turn.end }))
  }
})

/** Contract 2.6. */
export const presentAudioResponse = (signed: SignedAudioUrl): PublicDocumentAudioResponse => ({
  audio_url: signed.url,
  expires_at: signed.expiresAt
})
