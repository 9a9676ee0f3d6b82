import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import fc from "fast-check"
import type { DocumentId, EncounterId, OrganizationId, PatientId } from "../src/ids.js"
import type { DocumentDetailTarget } from "../src/lookup.js"
import {
  compareBytewise,
  presentAudioResponse,
  presentDetailResponse,
  presentDocumentDetail,
  presentDocumentDetailResponse,
  presentDocumentSummary,
  presentEncounterSummary,
  presentListResponse,
  presentTranscriptResponse
} from "../src/present.js"
import type { StoredDocument, StoredDocumentSummary, StoredEncounter } from "../src/records.js"
import {
  PublicDocumentAudioResponse,
  PublicDocumentDetailResponse,
  PublicDocumentTranscriptResponse,
  PublicEncounterDetailResponse,
  PublicEncounterListResponse
} from "../src/resources.js"
import { prop } from "./support/prop.js"

const at = (iso: string) => new Date(iso)

const summary = (documentId: string, createdAt: string, overrides: Partial<StoredDocumentSummary> = {}): StoredDocumentSummary => ({
  documentId: documentId as DocumentId,
  schemaType: "document",
  title: null,
  status: null,
  workflowVariant: null,
  audioDurationSeconds: null,
  createdAt: at(createdAt),
  ...overrides
})

const encounter = (overrides: Partial<StoredEncounter> = {}): StoredEncounter => ({
  encounterId: "enc_1" as EncounterId,
  organizationId: "org_a" as OrganizationId,
  dataClass: "clinical",
  createdAt: at("2026-05-01T12:00:00.000Z"),
  updatedAt: at("2026-05-02T08:30:00.250Z"),
  dateOfService: at("2026-05-01T00:00:00.000Z"),
  status: "signed",
  patient: { patient_id: "pat_1" as PatientId, first_name: "Ada", last_name: "Lovelace", date_of_birth: "1815-12-10" },
  documents: [],
  ...overrides
})

const storedDocument = (overrides: Partial<StoredDocument> = {}): StoredDocument => ({
  documentId: "doc_1" as DocumentId,
  encounterId: "enc_1" as EncounterId,
  schemaType: "ambient_transcript",
  title: "Visit",
  status: "completed",
  workflowVariant: "phone_call",
  audioDurationSeconds: 61.5,
  createdAt: at("2026-05-01T12:00:00.000Z"),
  updatedAt: at("2026-05-01T12:05:00.000Z"),
  contentMarkdown: "# Note",
  recording: { storageKey: "secret/bucket/key.webm", contentType: "audio/webm" },
  ...overrides
})

/** The independent oracle: the actual UTF-8 bytes. */
const utf8Order = (a: string, b: string) => Math.sign(Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8")))

describe("compareBytewise (UTF-8 byte order)", () => {
  it("orders by UTF-8 bytes, not localeCompare and not UTF-16 code units", () => {
    const ids = ["😀", "é", "a", "\uE000", "B", "ab", "", "\uFFFF"]
    expect([...ids].sort(compareBytewise)).toEqual(["", "B", "a", "ab", "é", "\uE000", "\uFFFF", "😀"])
    // UTF-16 code-unit order would put the astral "😀" (D83D DE00) before U+E000.
    expect([...ids].sort()).not.toEqual([...ids].sort(compareBytewise))
    expect(compareBytewise("😀", "\uE000")).toBe(1)
    expect(compareBytewise("B", "a")).toBe(-1)
    expect(compareBytewise("a", "a")).toBe(0)
    expect(compareBytewise("a", "ab")).toBe(-1)
  })

  it("a lone surrogate compares as the U+FFFD an encoder writes for it", () => {
    expect(compareBytewise("\ud800", "\ufffd")).toBe(0)
    expect(compareBytewise("\ud800", "\ue000")).toBe(1)
  })

  const unitsString = fc.array(fc.oneof(fc.integer({ min: 0, max: 0x7f }), fc.integer({ min: 0xd7f0, max: 0xe010 }), fc.integer({ min: 0, max: 0xffff })), {
    maxLength: 8
  }).map((units) => String.fromCharCode(...units))
  const anyString = fc.oneof(fc.string({ unit: "binary", maxLength: 8 }), unitsString, fc.constantFrom("B", "a", "é", "😀", "\uE000", "\uFFFF"))

  prop("agrees with Buffer.compare of the UTF-8 encodings", [anyString, anyString], ([a, b]) => {
    expect(compareBytewise(a, b)).toBe(utf8Order(a, b))
  }, { fastCheck: { numRuns: 2000 } })

  prop("shared prefixes are decided by the rest", [anyString, anyString, anyString], ([prefix, a, b]) => {
    expect(compareBytewise(prefix + a, prefix + b)).toBe(utf8Order(prefix + a, prefix + b))
  })
})

describe("presentEncounterSummary", () => {
  it("maps every field of the contract and derives encounter_type", () => {
    const presented = presentEncounterSummary(encounter({ documents: [summary("d", "2026-05-01T12:00:00Z", { schemaType: "billing" })] }))
    expect(presented).toEqual({
      encounter_id: "enc_1",
      organization_id: "org_a",
      created_at: at("2026-05-01T12:00:00.000Z"),
      updated_at: at("2026-05-02T08:30:00.250Z"),
      date_of_service: at("2026-05-01T00:00:00.000Z"),
      encounter_type: "billing",
      status: "signed",
      patient: { patient_id: "pat_1", first_name: "Ada", last_name: "Lovelace", date_of_birth: "1815-12-10" },
      documents: [{ document_id: "d", schema_type: "billing", title: null, status: null, workflow_variant: null, audio_duration_seconds: null }]
    })
    expect(presented).not.toHaveProperty("dataClass")
  })

  it("no documents: encounter_type null and an empty documents array", () => {
    const presented = presentEncounterSummary(encounter({ patient: null, dateOfService: null, status: null }))
    expect(presented.encounter_type).toBeNull()
    expect(presented.documents).toEqual([])
    expect(presented.patient).toBeNull()
  })

  it("documents ordered by created_at, then document_id bytewise, ascending", () => {
    const documents = [
      summary("😀", "2026-05-01T10:00:00Z"),
      summary("z", "2026-05-01T09:00:00Z"),
      summary("\uE000", "2026-05-01T10:00:00Z"),
      summary("é", "2026-05-01T10:00:00Z"),
      summary("a", "2026-05-01T10:00:00Z"),
      summary("B", "2026-05-01T10:00:00Z"),
      summary("A", "2026-05-01T11:00:00Z")
    ]
    expect(presentEncounterSummary(encounter({ documents })).documents.map((d) => d.document_id)).toEqual(["z", "B", "a", "é", "\uE000", "😀", "A"])
  })

  it("does not reorder the stored documents in place", () => {
    const documents = [summary("b", "2026-05-01T10:00:00Z"), summary("a", "2026-05-01T10:00:00Z")]
    presentEncounterSummary(encounter({ documents }))
    expect(documents.map((d) => d.documentId)).toEqual(["b", "a"])
  })

  const idArb = fc.oneof(fc.constantFrom("B", "a", "é", "😀", "\uE000", "A", "aa"), fc.string({ unit: "grapheme", minLength: 1, maxLength: 3 }))
  const createdArb = fc.constantFrom("2026-05-01T10:00:00.000Z", "2026-05-01T10:00:00.001Z", "2026-04-30T23:59:59.999Z")
  const documentArb = fc.tuple(idArb, createdArb, fc.constantFrom("document" as const, "ambient_transcript" as const, "billing" as const, "encounter_checklist" as const)).map(
    ([id, created, schemaType]) => summary(id, created, { schemaType })
  )

  prop("every adjacent pair respects (created_at, UTF-8 bytes of document_id)", [
    fc.uniqueArray(documentArb, { maxLength: 10, selector: (d) => d.documentId })
  ], ([documents]) => {
    const presented = presentEncounterSummary(encounter({ documents })).documents
    expect(presented.map((d) => d.document_id).sort()).toEqual(documents.map((d) => d.documentId as string).sort())
    const createdAtOf = new Map(documents.map((d) => [d.documentId as string, d.createdAt.getTime()]))
    for (let i = 1; i < presented.length; i++) {
      const previous = presented[i - 1]!.document_id
      const current = presented[i]!.document_id
      const previousCreated = createdAtOf.get(previous)!
      const currentCreated = createdAtOf.get(current)!
      if (previousCreated === currentCreated) expect(utf8Order(previous, current)).toBe(-1)
      else expect(previousCreated).toBeLessThan(currentCreated)
    }
  }, { fastCheck: { numRuns: 500 } })
})

describe("presentDocumentSummary", () => {
  it("clinical documents always show status null (contract section 3) and no workflow_variant or duration", () => {
    expect(presentDocumentSummary(summary("d", "2026-05-01T10:00:00Z", { status: "final", workflowVariant: "ambient", audioDurationSeconds: 3 }))).toEqual({
      document_id: "d",
      schema_type: "document",
      title: null,
      status: null,
      workflow_variant: null,
      audio_duration_seconds: null
    })
  })

  it("ambient transcripts carry status, workflow_variant and audio_duration_seconds", () => {
    expect(
      presentDocumentSummary(summary("t", "2026-05-01T10:00:00Z", { schemaType: "ambient_transcript", title: "T", status: "done", workflowVariant: "phone_call", audioDurationSeconds: 9.5 }))
    ).toEqual({ document_id: "t", schema_type: "ambient_transcript", title: "T", status: "done", workflow_variant: "phone_call", audio_duration_seconds: 9.5 })
  })

  it("billing and checklist summaries keep status, never a workflow_variant or duration", () => {
    expect(
      presentDocumentSummary(summary("b", "2026-05-01T10:00:00Z", { schemaType: "encounter_checklist", status: "open", workflowVariant: "ambient", audioDurationSeconds: 1 }))
    ).toMatchObject({ status: "open", workflow_variant: null, audio_duration_seconds: null })
  })
})

describe("presentDocumentDetail", () => {
  it("clinical document: markdown content, status null, workflow_variant null", () => {
    const detail = presentDocumentDetail(storedDocument({ schemaType: "document" }) as DocumentDetailTarget)
    expect(detail).toEqual({
      document_id: "doc_1",
      encounter_id: "enc_1",
      schema_type: "document",
      content: { format: "markdown", text: "# Note" },
      created_at: at("2026-05-01T12:00:00.000Z"),
      updated_at: at("2026-05-01T12:05:00.000Z"),
      title: "Visit",
      status: null,
      workflow_variant: null
    })
  })

  it("clinical document without text: content.text null", () => {
    const detail = presentDocumentDetail(storedDocument({ schemaType: "document", contentMarkdown: null }) as DocumentDetailTarget)
    expect(detail).toMatchObject({ content: { format: "markdown", text: null } })
  })

  it("ambient transcript: metadata only, no content, no turns, no recording", () => {
    const detail = presentDocumentDetail(storedDocument() as DocumentDetailTarget)
    expect(detail).toEqual({
      document_id: "doc_1",
      encounter_id: "enc_1",
      schema_type: "ambient_transcript",
      created_at: at("2026-05-01T12:00:00.000Z"),
      updated_at: at("2026-05-01T12:05:00.000Z"),
      title: "Visit",
      status: "completed",
      workflow_variant: "phone_call",
      audio_duration_seconds: 61.5
    })
    const wire = JSON.stringify(Schema.encodeSync(PublicDocumentDetailResponse)(presentDocumentDetailResponse(storedDocument() as DocumentDetailTarget)))
    expect(wire).not.toContain("secret/bucket")
    expect(wire).not.toContain("# Note")
  })
})

describe("response presenters", () => {
  it("presentListResponse: items, the limit and offset used, total; encodes to the contract JSON", () => {
    const response = presentListResponse(
      { items: [encounter({ documents: [summary("d2", "2026-05-01T10:00:00Z", { schemaType: "ambient_transcript", workflowVariant: "ambient" })] })], total: 7 },
      { limit: 1, offset: 3 }
    )
    expect(Schema.encodeSync(PublicEncounterListResponse)(response)).toEqual({
      items: [
        {
          encounter_id: "enc_1",
          organization_id: "org_a",
          created_at: "2026-05-01T12:00:00.000Z",
          updated_at: "2026-05-02T08:30:00.250Z",
          date_of_service: "2026-05-01T00:00:00.000Z",
          encounter_type: "ambient",
          status: "signed",
          patient: { patient_id: "pat_1", first_name: "Ada", last_name: "Lovelace", date_of_birth: "1815-12-10" },
          documents: [
            { document_id: "d2", schema_type: "ambient_transcript", title: null, status: null, workflow_variant: "ambient", audio_duration_seconds: null }
          ]
        }
      ],
      limit: 1,
      offset: 3,
      total: 7
    })
  })

  it("presentDetailResponse: { encounter }", () => {
    expect(presentDetailResponse(encounter())).toEqual({ encounter: presentEncounterSummary(encounter()) })
    expect(Object.keys(Schema.encodeSync(PublicEncounterDetailResponse)(presentDetailResponse(encounter())))).toEqual(["encounter"])
  })

  it("presentTranscriptResponse: ids and the final transcript, turns in chronological order", () => {
    const response = presentTranscriptResponse(storedDocument(), {
      provider: "acme-asr",
      audio_duration_seconds: 20,
      turns: [
        { speaker: "B", text: "second", start: 5, end: 8 },
        { speaker: "A", text: "first", start: 0, end: 4 },
        { speaker: "A", text: "third", start: 5, end: 9 }
      ]
    })
    expect(Schema.encodeSync(PublicDocumentTranscriptResponse)(response)).toEqual({
      document_id: "doc_1",
      encounter_id: "enc_1",
      transcript: {
        provider: "acme-asr",
        audio_duration_seconds: 20,
        turns: [
          { speaker: "A", text: "first", start: 0, end: 4 },
          { speaker: "B", text: "second", start: 5, end: 8 },
          { speaker: "A", text: "third", start: 5, end: 9 }
        ]
      }
    })
  })

  it("presentAudioResponse: audio_url and expires_at in UTC with milliseconds", () => {
    const response = presentAudioResponse({ url: "http://127.0.0.1:8080/audio/abc?sig=x", expiresAt: at("2026-05-01T12:05:00Z") })
    expect(Schema.encodeSync(PublicDocumentAudioResponse)(response)).toEqual({
      audio_url: "http://127.0.0.1:8080/audio/abc?sig=x",
      expires_at: "2026-05-01T12:05:00.000Z"
    })
  })
})

describe("the wire form of every response is JSON.stringify of the presenter's value", () => {
  // The HTTP adapter writes the presenters' values with JSON.stringify instead of encoding them
  // through the resource schemas: on every value a presenter makes, the two must agree.
  const instant = fc.date({ min: new Date("0000-01-01T00:00:00.000Z"), max: new Date("9999-12-31T23:59:59.999Z"), noInvalidDate: true })
  const text = fc.option(fc.string({ unit: "grapheme", maxLength: 12 }), { nil: null })
  const documentArb = fc.record({
    documentId: fc.string({ minLength: 1, maxLength: 6 }).map((id) => id as DocumentId),
    schemaType: fc.constantFrom("document" as const, "ambient_transcript" as const, "billing" as const, "encounter_checklist" as const),
    title: text,
    status: text,
    workflowVariant: fc.constantFrom(null, "ambient" as const, "phone_call" as const),
    audioDurationSeconds: fc.option(fc.double({ min: 0, max: 1e6, noNaN: true }), { nil: null }),
    createdAt: instant
  })
  const encounterArb = fc.record({
    encounterId: fc.string({ minLength: 1, maxLength: 8 }).map((id) => id as EncounterId),
    organizationId: fc.constant("org_a" as OrganizationId),
    dataClass: fc.constant("clinical" as const),
    createdAt: instant,
    updatedAt: instant,
    dateOfService: fc.option(instant, { nil: null }),
    status: text,
    patient: fc.option(fc.record({
      patient_id: fc.string({ minLength: 1, maxLength: 6 }).map((id) => id as PatientId),
      first_name: text,
      last_name: text,
      date_of_birth: fc.constantFrom(null, "1815-12-10", "2000-02-29")
    }), { nil: null }),
    documents: fc.array(documentArb, { maxLength: 4 })
  })
  const sameAsEncoded = <A, I>(schema: Schema.Codec<A, I>, value: A) => {
    const encoded = Schema.encodeSync(schema)(value)
    expect(JSON.parse(JSON.stringify(value))).toEqual(encoded)
  }

  prop("list and detail responses", [fc.array(encounterArb, { maxLength: 5 }), fc.nat({ max: 10_000 })], ([items, offset]) => {
    sameAsEncoded(PublicEncounterListResponse, presentListResponse({ items, total: items.length + offset }, { limit: 100, offset }))
    for (const item of items) sameAsEncoded(PublicEncounterDetailResponse, presentDetailResponse(item))
  })

  prop("document, transcript and audio responses", [documentArb, instant, fc.string({ maxLength: 40 })], ([document, updatedAt, url]) => {
    const stored = storedDocument({ ...document, updatedAt })
    if (stored.schemaType === "document" || stored.schemaType === "ambient_transcript") {
      sameAsEncoded(PublicDocumentDetailResponse, presentDocumentDetailResponse(stored as DocumentDetailTarget))
    }
    sameAsEncoded(PublicDocumentTranscriptResponse, presentTranscriptResponse(stored, {
      provider: "acme-asr",
      audio_duration_seconds: 20,
      turns: [{ speaker: "A", text: "first", start: 0, end: 4 }]
    }))
    sameAsEncoded(PublicDocumentAudioResponse, presentAudioResponse({ url, expiresAt: updatedAt }))
  })

  prop("a transcript the store keeps in order is presented as a plain object with the same fields", [
    fc.array(fc.record({ speaker: fc.string({ maxLength: 8 }), text: fc.string({ maxLength: 30 }), start: fc.integer({ min: 0, max: 9_999 }), end: fc.integer({ min: 0, max: 9_999 }) }), { maxLength: 6 }),
    fc.option(fc.nat({ max: 10_000 }), { nil: null })
  ], ([unordered, seconds]) => {
    const turns = [...unordered].sort((a, b) => a.start - b.start)
    const transcript = { provider: "acme-asr", audio_duration_seconds: seconds, turns }
    const response = presentTranscriptResponse(storedDocument(), transcript)
    expect(Object.getPrototypeOf(response.transcript)).toBe(Object.prototype)
    expect(response.transcript).toEqual(transcript)
    sameAsEncoded(PublicDocumentTranscriptResponse, response)
    expect(Schema.encodeSync(PublicDocumentTranscriptResponse)(response).transcript).toEqual(transcript)
  })
})
