import { Option, Result } from "effect"
import { PublicApiError } from "./errors.js"
import type { OrganizationId } from "./ids.js"
import type { RecordingReference, StoredDocument, StoredEncounterHead } from "./records.js"
import type { PublicFinalTranscript } from "./resources.js"

/**
 * The lookup decisions (docs/behaviour.md, "Order of checks" step 4, and "Resources"). Each is a
 * pure function of what the stores returned; the use cases run them in this file's order.
 */

/** 404 `encounter_not_found`, then 403 `cross_organization_denied`, then 403 `demo_training_denied`. */
export const checkEncounterAccess = <Encounter extends StoredEncounterHead>(
  organizationId: OrganizationId,
  encounter: Option.Option<Encounter>
): Result.Result<Encounter, PublicApiError> => {
  if (Option.isNone(encounter)) return Result.fail(PublicApiError.of("encounter_not_found"))
  const found = encounter.value
  if (found.organizationId !== organizationId) return Result.fail(PublicApiError.of("cross_organization_denied"))
  if (found.dataClass !== "clinical") return Result.fail(PublicApiError.of("demo_training_denied"))
  return Result.succeed(found)
}

/** A document that is missing, or that belongs to another encounter, is 404 `document_not_found` alike. */
export const checkDocumentInEncounter = (
  encounter: StoredEncounterHead,
  document: Option.Option<StoredDocument>
): Result.Result<StoredDocument, PublicApiError> =>
  Option.isSome(document) && document.value.encounterId === encounter.encounterId
    ? Result.succeed(document.value)
    : Result.fail(PublicApiError.of("document_not_found"))

export type DocumentDetailTarget = StoredDocument & { readonly schemaType: "document" | "ambient_transcript" }
export type AmbientTranscriptDocument = StoredDocument & { readonly schemaType: "ambient_transcript" }

const isDocumentDetailTarget = (document: StoredDocument): document is DocumentDetailTarget =>
  document.schemaType === "document" || document.schemaType === "ambient_transcript"

const isAmbientTranscript = (document: StoredDocument): document is AmbientTranscriptDocument =>
  document.schemaType === "ambient_transcript"

/** Document detail: `billing` and `encounter_checklist` are summary-only, 400 `unsupported_document_type`. */
export const checkDocumentDetailTarget = (
  document: StoredDocument
): Result.Result<DocumentDetailTarget, PublicApiError> =>
  isDocumentDetailTarget(document) ? Result.succeed(document) : Result.fail(PublicApiError.of("unsupported_document_type"))

/** Transcript route: only an `ambient_transcript` document, else 400 `unsupported_document_type`. */
export const checkTranscriptTarget = (
  document: StoredDocument
): Result.Result<AmbientTranscriptDocument, PublicApiError> =>
  isAmbientTranscript(document) ? Result.succeed(document) : Result.fail(PublicApiError.of("unsupported_document_type"))

/** An ambient transcript with no finalized transcript: 404 `transcript_not_found`. */
export const checkFinalTranscript = (
  transcript: Option.Option<PublicFinalTranscript>
): Result.Result<PublicFinalTranscript, PublicApiError> =>
  Option.isSome(transcript) ? Result.succeed(transcript.value) : Result.fail(PublicApiError.of("transcript_not_found"))

/**
 * Audio route, before storage is asked: not `ambient_transcript` is 400
 * `unsupported_document_type`; an ambient transcript that is not recording-backed is 400
 * `audio_not_available_for_document`.
 */
export const checkAudioTarget = (document: StoredDocument): Result.Result<RecordingReference, PublicApiError> => {
  if (!isAmbientTranscript(document)) return Result.fail(PublicApiError.of("unsupported_document_type"))
  if (document.recording === null) return Result.fail(PublicApiError.of("audio_not_available_for_document"))
  return Result.succeed(document.recording)
}

/**
 * Audio route, after the AudioStorage port answered `exists`: a recording-backed transcript
 * whose object is missing is 404 `audio_not_found`. (Storage that cannot be reached is the
 * port's `AudioStorageUnavailable`, answered 503 `audio_storage_unavailable` by the use case.)
 */
export const checkAudioObjectExists = (exists: boolean): Result.Result<void, PublicApiError> =>
  exists ? Result.void : Result.fail(PublicApiError.of("audio_not_found"))
