import { describe, expect, it } from "@effect/vitest"
import { Option, Result } from "effect"
import type { PublicApiError } from "../src/errors.js"
import type { DocumentId, EncounterId, OrganizationId } from "../src/ids.js"
import {
  checkAudioObjectExists,
  checkAudioTarget,
  checkDocumentDetailTarget,
  checkDocumentInEncounter,
  checkEncounterAccess,
  checkFinalTranscript,
  checkTranscriptTarget
} from "../src/lookup.js"
import type { StoredDocument, StoredEncounter } from "../src/records.js"
import type { PublicFinalTranscript, SchemaType } from "../src/resources.js"

const orgA = "org_a" as OrganizationId
const orgB = "org_b" as OrganizationId

const encounter = (overrides: Partial<StoredEncounter> = {}): StoredEncounter => ({
  encounterId: "enc_1" as EncounterId,
  organizationId: orgA,
  dataClass: "clinical",
  createdAt: new Date("2026-05-01T12:00:00.000Z"),
  updatedAt: new Date("2026-05-01T12:00:00.000Z"),
  dateOfService: null,
  status: null,
  patient: null,
  documents: [],
  ...overrides
})

const document = (overrides: Partial<StoredDocument> = {}): StoredDocument => ({
  documentId: "doc_1" as DocumentId,
  encounterId: "enc_1" as EncounterId,
  schemaType: "ambient_transcript",
  title: null,
  status: null,
  workflowVariant: "ambient",
  audioDurationSeconds: 12,
  createdAt: new Date("2026-05-01T12:00:00.000Z"),
  updatedAt: new Date("2026-05-01T12:00:00.000Z"),
  contentMarkdown: null,
  recording: { storageKey: "recordings/doc_1.webm", contentType: "audio/webm" },
  ...overrides
})

const reasonOf = (result: Result.Result<unknown, PublicApiError>) =>
  Result.isFailure(result) ? { reason: result.failure.reasonCode, status: result.failure.status, field: result.failure.field } : "accepted"

describe("checkEncounterAccess", () => {
  it("encounter_not_found (404) when the encounter is missing", () => {
    expect(reasonOf(checkEncounterAccess(orgA, Option.none()))).toEqual({ reason: "encounter_not_found", status: 404, field: null })
  })

  it("cross_organization_denied (403) for another organization's encounter", () => {
    expect(reasonOf(checkEncounterAccess(orgB, Option.some(encounter())))).toEqual({
      reason: "cross_organization_denied",
      status: 403,
      field: null
    })
  })

  it.each(["demo", "training"] as const)("demo_training_denied (403) for a %s encounter", (dataClass) => {
    expect(reasonOf(checkEncounterAccess(orgA, Option.some(encounter({ dataClass }))))).toEqual({
      reason: "demo_training_denied",
      status: 403,
      field: null
    })
  })

  it("cross_organization_denied comes before demo_training_denied", () => {
    expect(reasonOf(checkEncounterAccess(orgB, Option.some(encounter({ dataClass: "demo" }))))).toEqual({
      reason: "cross_organization_denied",
      status: 403,
      field: null
    })
  })

  it("an own clinical encounter is returned", () => {
    const own = encounter()
    expect(checkEncounterAccess(orgA, Option.some(own))).toEqual(Result.succeed(own))
  })
})

describe("checkDocumentInEncounter", () => {
  it("document_not_found (404) when the document is missing", () => {
    expect(reasonOf(checkDocumentInEncounter(encounter(), Option.none()))).toEqual({ reason: "document_not_found", status: 404, field: null })
  })

  it("document_not_found (404) when the document belongs to another encounter", () => {
    const elsewhere = document({ encounterId: "enc_2" as EncounterId })
    expect(reasonOf(checkDocumentInEncounter(encounter(), Option.some(elsewhere)))).toEqual({
      reason: "document_not_found",
      status: 404,
      field: null
    })
  })

  it("a document of this encounter is returned", () => {
    const own = document()
    expect(checkDocumentInEncounter(encounter(), Option.some(own))).toEqual(Result.succeed(own))
  })
})

describe("checkDocumentDetailTarget", () => {
  it.each(["billing", "encounter_checklist"] as const)("unsupported_document_type (400) for %s", (schemaType) => {
    expect(reasonOf(checkDocumentDetailTarget(document({ schemaType })))).toEqual({
      reason: "unsupported_document_type",
      status: 400,
      field: null
    })
  })

  it.each(["document", "ambient_transcript"] as const)("%s is a detail target", (schemaType) => {
    expect(reasonOf(checkDocumentDetailTarget(document({ schemaType })))).toBe("accepted")
  })
})

describe("checkTranscriptTarget and checkFinalTranscript", () => {
  it.each(["document", "billing", "encounter_checklist"] as const)("unsupported_document_type (400) for %s", (schemaType) => {
    expect(reasonOf(checkTranscriptTarget(document({ schemaType })))).toEqual({ reason: "unsupported_document_type", status: 400, field: null })
  })

  it("an ambient_transcript is a transcript target, with or without a recording", () => {
    expect(reasonOf(checkTranscriptTarget(document()))).toBe("accepted")
    expect(reasonOf(checkTranscriptTarget(document({ recording: null })))).toBe("accepted")
  })

  it("transcript_not_found (404) when no finalized transcript exists", () => {
    expect(reasonOf(checkFinalTranscript(Option.none()))).toEqual({ reason: "transcript_not_found", status: 404, field: null })
  })

  it("a finalized transcript is returned", () => {
    const transcript: PublicFinalTranscript = { provider: "p", audio_duration_seconds: null, turns: [] }
    expect(checkFinalTranscript(Option.some(transcript))).toEqual(Result.succeed(transcript))
  })
})

describe("checkAudioTarget and checkAudioObjectExists", () => {
  it.each(["document", "billing", "encounter_checklist"] as const satisfies ReadonlyArray<SchemaType>)(
    "unsupported_document_type (400) for %s, even when a recording is attached",
    (schemaType) => {
      expect(reasonOf(checkAudioTarget(document({ schemaType })))).toEqual({ reason: "unsupported_document_type", status: 400, field: null })
    }
  )

  it("audio_not_available_for_document (400) for an ambient transcript that is not recording-backed", () => {
    expect(reasonOf(checkAudioTarget(document({ recording: null })))).toEqual({
      reason: "audio_not_available_for_document",
      status: 400,
      field: null
    })
  })

  it("a recording-backed ambient transcript yields its recording reference", () => {
    expect(checkAudioTarget(document())).toEqual(Result.succeed({ storageKey: "recordings/doc_1.webm", contentType: "audio/webm" }))
  })

  it("audio_not_found (404) when the object is missing from storage", () => {
    expect(reasonOf(checkAudioObjectExists(false))).toEqual({ reason: "audio_not_found", status: 404, field: null })
    expect(reasonOf(checkAudioObjectExists(true))).toBe("accepted")
  })
})
