import { describe, expect, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import fc from "fast-check"
import { categoryOf, PublicApiError, PublicApiErrorResponse, reasonCodes, statusOf } from "../src/errors.js"
import type { DocumentId, EncounterId, OrganizationId, PatientId } from "../src/ids.js"
import {
  exactParseOptions,
  PublicAmbientTranscriptMetadata,
  PublicClinicalDocument,
  PublicDocumentAudioResponse,
  PublicDocumentDetailResponse,
  PublicDocumentTranscriptResponse,
  PublicEncounterDetailResponse,
  PublicEncounterDocumentSummary,
  PublicEncounterListResponse,
  PublicEncounterSummary,
  PublicFinalTranscript,
  PublicPatientSummary,
  PublicTranscriptTurn
} from "../src/resources.js"
import { contractReasonTable } from "./support/contract-reason-table.js"
import { prop } from "./support/prop.js"

// ---------------------------------------------------------------------------------------------
// Contract section 2 (and 7), written out literally: the schemas must match these, not the reverse.
// ---------------------------------------------------------------------------------------------

const KEYS = {
  encounterSummary: ["encounter_id", "organization_id", "created_at", "updated_at", "date_of_service", "encounter_type", "status", "patient", "documents"],
  patient: ["patient_id", "first_name", "last_name", "date_of_birth"],
  documentSummary: ["document_id", "schema_type", "title", "status", "workflow_variant", "audio_duration_seconds"],
  clinicalDocument: ["document_id", "encounter_id", "schema_type", "content", "created_at", "updated_at", "title", "status", "workflow_variant"],
  content: ["format", "text"],
  ambientMetadata: ["document_id", "encounter_id", "schema_type", "created_at", "updated_at", "title", "status", "workflow_variant", "audio_duration_seconds"],
  finalTranscript: ["provider", "audio_duration_seconds", "turns"],
  turn: ["speaker", "text", "start", "end"],
  audio: ["audio_url", "expires_at"],
  listResponse: ["items", "limit", "offset", "total"],
  encounterDetailResponse: ["encounter"],
  documentDetailResponse: ["document"],
  transcriptResponse: ["document_id", "encounter_id", "transcript"],
  errorResponse: ["error", "reason_code", "message", "field"]
} as const

const UTC_MILLIS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }
type JsonObject = { readonly [key: string]: Json }

const asObject = (value: unknown): JsonObject => {
  expect(value !== null && typeof value === "object" && !Array.isArray(value)).toBe(true)
  return value as JsonObject
}

const expectKeys = (value: unknown, keys: ReadonlyArray<string>): JsonObject => {
  const object = asObject(value)
  expect(Object.keys(object).sort()).toEqual([...keys].sort())
  return object
}

const expectTimestamp = (value: unknown) => {
  expect(typeof value).toBe("string")
  expect(value).toMatch(UTC_MILLIS)
}

const expectNoTag = (value: unknown): void => {
  if (Array.isArray(value)) value.forEach(expectNoTag)
  else if (value !== null && typeof value === "object") {
    expect(Object.keys(value)).not.toContain("_tag")
    Object.values(value).forEach(expectNoTag)
  }
}

const checkPatient = (value: unknown) => {
  if (value === null) return
  const patient = expectKeys(value, KEYS.patient)
  if (patient.date_of_birth !== null) expect(patient.date_of_birth).toMatch(/^\d{4}-\d{2}-\d{2}$/)
}

const checkDocumentSummary = (value: unknown) => expectKeys(value, KEYS.documentSummary)

const checkEncounterSummary = (value: unknown) => {
  const summary = expectKeys(value, KEYS.encounterSummary)
  expectTimestamp(summary.created_at)
  expectTimestamp(summary.updated_at)
  if (summary.date_of_service !== null) expectTimestamp(summary.date_of_service)
  checkPatient(summary.patient)
  expect(Array.isArray(summary.documents)).toBe(true)
  ;(summary.documents as ReadonlyArray<Json>).forEach(checkDocumentSummary)
}

const checkDocumentDetail = (value: unknown) => {
  const detail = asObject(value)
  if (detail.schema_type === "document") {
    expectKeys(detail, KEYS.clinicalDocument)
    expectKeys(detail.content, KEYS.content)
    expect(asObject(detail.content).format).toBe("markdown")
    expect(detail.status).toBeNull()
    expect(detail.workflow_variant).toBeNull()
  } else {
    expect(detail.schema_type).toBe("ambient_transcript")
    expectKeys(detail, KEYS.ambientMetadata)
  }
  expectTimestamp(detail.created_at)
  expectTimestamp(detail.updated_at)
}

const checkFinalTranscript = (value: unknown) => {
  const transcript = expectKeys(value, KEYS.finalTranscript)
  ;(transcript.turns as ReadonlyArray<Json>).forEach((turn) => expectKeys(turn, KEYS.turn))
}

// ---------------------------------------------------------------------------------------------
// Generators of the Type side.
// ---------------------------------------------------------------------------------------------

const dateArb = fc.date({ min: new Date("0001-01-01T00:00:00.000Z"), max: new Date("9999-12-31T23:59:59.999Z"), noInvalidDate: true })
const idArb = fc.string({ unit: "binary", minLength: 1, maxLength: 12 })
const nullable = <A>(arb: fc.Arbitrary<A>) => fc.option(arb, { nil: null })
const textArb = fc.string({ unit: "binary", maxLength: 20 })
const durationArb = fc.double({ min: 0, max: 1e7, noNaN: true, noDefaultInfinity: true })
const secondsArb = fc.double({ min: -1e7, max: 1e7, noNaN: true, noDefaultInfinity: true }).map((n) => (n === 0 ? 0 : n))
const variantArb = fc.constantFrom("ambient" as const, "phone_call" as const)

const patientArb = fc.record({
  patient_id: idArb.map((id) => id as PatientId),
  first_name: nullable(textArb),
  last_name: nullable(textArb),
  date_of_birth: nullable(dateArb.map((date) => date.toISOString().slice(0, 10)))
})

const documentSummaryArb = fc.record({
  document_id: idArb.map((id) => id as DocumentId),
  schema_type: fc.constantFrom("document" as const, "ambient_transcript" as const, "billing" as const, "encounter_checklist" as const),
  title: nullable(textArb),
  status: nullable(textArb),
  workflow_variant: nullable(variantArb),
  audio_duration_seconds: nullable(durationArb)
})

const encounterSummaryArb = fc.record({
  encounter_id: idArb.map((id) => id as EncounterId),
  organization_id: idArb.map((id) => id as OrganizationId),
  created_at: dateArb,
  updated_at: dateArb,
  date_of_service: nullable(dateArb),
  encounter_type: nullable(fc.constantFrom("ambient" as const, "phone_call" as const, "clinical_documentation" as const, "billing" as const, "checklist" as const)),
  status: nullable(textArb),
  patient: nullable(patientArb),
  documents: fc.array(documentSummaryArb, { maxLength: 4 })
})

const clinicalDocumentArb = fc.record({
  document_id: idArb.map((id) => id as DocumentId),
  encounter_id: idArb.map((id) => id as EncounterId),
  schema_type: fc.constant("document" as const),
  content: fc.record({ format: fc.constant("markdown" as const), text: nullable(textArb) }),
  created_at: dateArb,
  updated_at: dateArb,
  title: nullable(textArb),
  status: fc.constant(null),
  workflow_variant: fc.constant(null)
})

const ambientMetadataArb = fc.record({
  document_id: idArb.map((id) => id as DocumentId),
  encounter_id: idArb.map((id) => id as EncounterId),
  schema_type: fc.constant("ambient_transcript" as const),
  created_at: dateArb,
  updated_at: dateArb,
  title: nullable(textArb),
  status: nullable(textArb),
  workflow_variant: nullable(variantArb),
  audio_duration_seconds: nullable(durationArb)
})

const finalTranscriptArb = fc.record({
  provider: textArb,
  audio_duration_seconds: nullable(durationArb),
  turns: fc.array(fc.record({ speaker: textArb, text: textArb, start: secondsArb, end: secondsArb }), { maxLength: 4 })
})

const listResponseArb = fc.record({
  items: fc.array(encounterSummaryArb, { maxLength: 3 }),
  limit: fc.integer({ min: 1, max: 100 }),
  offset: fc.integer({ min: 0, max: 10_000 }),
  total: fc.nat()
})

/** Encode, go through JSON text as a partner would, decode again. */
const throughJson = <A, I>(schema: Schema.Codec<A, I>, value: A): { readonly encoded: unknown; readonly decoded: A } => {
  const encoded: unknown = JSON.parse(JSON.stringify(Schema.encodeSync(schema)(value)))
  return { encoded, decoded: Schema.decodeUnknownSync(schema)(encoded) }
}

describe("encoding gives exactly the contract's keys, no _tag, UTC timestamps with milliseconds", () => {
  prop("PublicEncounterListResponse (with encounter summaries, patients, document summaries)", [listResponseArb], ([response]) => {
    const { encoded, decoded } = throughJson(PublicEncounterListResponse, response)
    const list = expectKeys(encoded, KEYS.listResponse)
    ;(list.items as ReadonlyArray<Json>).forEach(checkEncounterSummary)
    expectNoTag(encoded)
    expect(decoded).toEqual(response)
  }, { fastCheck: { numRuns: 200 } })

  prop("PublicEncounterDetailResponse", [encounterSummaryArb], ([encounter]) => {
    const { encoded, decoded } = throughJson(PublicEncounterDetailResponse, { encounter })
    checkEncounterSummary(expectKeys(encoded, KEYS.encounterDetailResponse).encounter)
    expectNoTag(encoded)
    expect(decoded).toEqual({ encounter })
  })

  prop("PublicDocumentDetailResponse, both variants", [fc.oneof(clinicalDocumentArb, ambientMetadataArb)], ([document]) => {
    const { encoded, decoded } = throughJson(PublicDocumentDetailResponse, { document })
    checkDocumentDetail(expectKeys(encoded, KEYS.documentDetailResponse).document)
    expectNoTag(encoded)
    expect(decoded).toEqual({ document })
  })

  prop("PublicDocumentTranscriptResponse", [idArb, idArb, finalTranscriptArb], ([documentId, encounterId, transcript]) => {
    const response = { document_id: documentId as DocumentId, encounter_id: encounterId as EncounterId, transcript }
    const { encoded, decoded } = throughJson(PublicDocumentTranscriptResponse, response)
    checkFinalTranscript(expectKeys(encoded, KEYS.transcriptResponse).transcript)
    expectNoTag(encoded)
    expect(decoded).toEqual(response)
  })

  prop("PublicDocumentAudioResponse", [fc.webUrl(), dateArb], ([url, expiresAt]) => {
    const { encoded, decoded } = throughJson(PublicDocumentAudioResponse, { audio_url: url, expires_at: expiresAt })
    expectTimestamp(expectKeys(encoded, KEYS.audio).expires_at)
    expect(decoded).toEqual({ audio_url: url, expires_at: expiresAt })
  })

  prop("PublicApiErrorResponse from any PublicApiError: exactly four keys", [
    fc.constantFrom(...reasonCodes),
    nullable(fc.string({ unit: "binary" }))
  ], ([reasonCode, field]) => {
    const encoded = Schema.encodeSync(PublicApiErrorResponse)(PublicApiError.of(reasonCode, field).toResponse())
    expect(expectKeys(encoded, KEYS.errorResponse)).toEqual({
      error: categoryOf(reasonCode),
      reason_code: reasonCode,
      message: expect.any(String),
      field
    })
    expectNoTag(encoded)
  })
})

describe("decoding refuses keys the contract does not name", () => {
  const at = "2026-05-01T12:00:00.000Z"
  const patient = { patient_id: "p", first_name: null, last_name: null, date_of_birth: null }
  const documentSummary = { document_id: "d", schema_type: "billing", title: null, status: null, workflow_variant: null, audio_duration_seconds: null }
  const encounter = {
    encounter_id: "e",
    organization_id: "o",
    created_at: at,
    updated_at: at,
    date_of_service: null,
    encounter_type: null,
    status: null,
    patient,
    documents: [documentSummary]
  }
  const clinical = {
    document_id: "d",
    encounter_id: "e",
    schema_type: "document",
    content: { format: "markdown", text: "x" },
    created_at: at,
    updated_at: at,
    title: null,
    status: null,
    workflow_variant: null
  }
  const ambient = {
    document_id: "d",
    encounter_id: "e",
    schema_type: "ambient_transcript",
    created_at: at,
    updated_at: at,
    title: null,
    status: null,
    workflow_variant: "ambient",
    audio_duration_seconds: 3
  }
  const turn = { speaker: "A", text: "hi", start: 0, end: 1 }
  const transcript = { provider: "p", audio_duration_seconds: null, turns: [turn] }

  const cases: ReadonlyArray<readonly [string, Schema.Codec<unknown, unknown>, Record<string, unknown>]> = [
    ["PublicPatientSummary", PublicPatientSummary, patient],
    ["PublicEncounterDocumentSummary", PublicEncounterDocumentSummary, documentSummary],
    ["PublicEncounterSummary", PublicEncounterSummary, encounter],
    ["PublicEncounterListResponse", PublicEncounterListResponse, { items: [encounter], limit: 1, offset: 0, total: 1 }],
    ["PublicEncounterDetailResponse", PublicEncounterDetailResponse, { encounter }],
    ["PublicClinicalDocument", PublicClinicalDocument, clinical],
    ["PublicAmbientTranscriptMetadata", PublicAmbientTranscriptMetadata, ambient],
    ["PublicDocumentDetailResponse", PublicDocumentDetailResponse, { document: clinical }],
    ["PublicTranscriptTurn", PublicTranscriptTurn, turn],
    ["PublicFinalTranscript", PublicFinalTranscript, transcript],
    ["PublicDocumentTranscriptResponse", PublicDocumentTranscriptResponse, { document_id: "d", encounter_id: "e", transcript }],
    ["PublicDocumentAudioResponse", PublicDocumentAudioResponse, { audio_url: "https://x", expires_at: at }],
    ["PublicApiErrorResponse", PublicApiErrorResponse, { error: "public_api_not_found", reason_code: "encounter_not_found", message: "m", field: null }]
  ]

  for (const [name, schema, valid] of cases) {
    it(`${name}: the valid JSON decodes, the same with an extra key fails`, () => {
      expect(Result.isSuccess(Schema.decodeUnknownResult(schema, exactParseOptions)(valid))).toBe(true)
      expect(Result.isFailure(Schema.decodeUnknownResult(schema, exactParseOptions)({ ...valid, extra: 1 }))).toBe(true)
      expect(Result.isFailure(Schema.decodeUnknownResult(schema, exactParseOptions)({ ...valid, _tag: name }))).toBe(true)
    })
  }

  it("an extra key nested in patient, document summary, content or turn fails", () => {
    const decode = (schema: Schema.Codec<unknown, unknown>, value: unknown) => Result.isFailure(Schema.decodeUnknownResult(schema, exactParseOptions)(value))
    expect(decode(PublicEncounterSummary, { ...encounter, patient: { ...patient, ssn: "1" } })).toBe(true)
    expect(decode(PublicEncounterSummary, { ...encounter, documents: [{ ...documentSummary, content: "x" }] })).toBe(true)
    expect(decode(PublicClinicalDocument, { ...clinical, content: { format: "markdown", text: "x", html: "<p>" } })).toBe(true)
    expect(decode(PublicFinalTranscript, { ...transcript, turns: [{ ...turn, confidence: 1 }] })).toBe(true)
  })

  it("a clinical document with ambient-only fields, or non-null status, fails", () => {
    expect(Result.isFailure(Schema.decodeUnknownResult(PublicDocumentDetailResponse, exactParseOptions)({ document: { ...clinical, audio_duration_seconds: 1 } }))).toBe(true)
    expect(Result.isFailure(Schema.decodeUnknownResult(PublicClinicalDocument, exactParseOptions)({ ...clinical, status: "final" }))).toBe(true)
    expect(Result.isFailure(Schema.decodeUnknownResult(PublicAmbientTranscriptMetadata, exactParseOptions)({ ...ambient, content: clinical.content }))).toBe(true)
  })
})

describe("nullable and optional fields decode to null (or []) when absent", () => {
  const at = "2026-05-01T12:00:00Z"

  it("PublicEncounterSummary with only the required keys", () => {
    const decoded = Schema.decodeUnknownSync(PublicEncounterSummary)({ encounter_id: "e", organization_id: "o", created_at: at, updated_at: at })
    expect(decoded).toMatchObject({ date_of_service: null, encounter_type: null, status: null, patient: null, documents: [] })
    checkEncounterSummary(Schema.encodeSync(PublicEncounterSummary)(decoded))
  })

  it("PublicPatientSummary and PublicEncounterDocumentSummary", () => {
    expect(Schema.decodeUnknownSync(PublicPatientSummary)({ patient_id: "p" })).toEqual({
      patient_id: "p",
      first_name: null,
      last_name: null,
      date_of_birth: null
    })
    expect(Schema.decodeUnknownSync(PublicEncounterDocumentSummary)({ document_id: "d", schema_type: "document" })).toEqual({
      document_id: "d",
      schema_type: "document",
      title: null,
      status: null,
      workflow_variant: null,
      audio_duration_seconds: null
    })
  })

  it("PublicClinicalDocument: content.format defaults to markdown, text/title/status/workflow_variant to null", () => {
    const decoded = Schema.decodeUnknownSync(PublicClinicalDocument)({
      document_id: "d",
      encounter_id: "e",
      schema_type: "document",
      content: {},
      created_at: at,
      updated_at: at
    })
    expect(decoded).toMatchObject({ content: { format: "markdown", text: null }, title: null, status: null, workflow_variant: null })
  })

  it("PublicAmbientTranscriptMetadata and PublicFinalTranscript", () => {
    expect(
      Schema.decodeUnknownSync(PublicAmbientTranscriptMetadata)({
        document_id: "d",
        encounter_id: "e",
        schema_type: "ambient_transcript",
        created_at: at,
        updated_at: at
      })
    ).toMatchObject({ title: null, status: null, workflow_variant: null, audio_duration_seconds: null })
    expect(Schema.decodeUnknownSync(PublicFinalTranscript)({ provider: "p", turns: [] })).toEqual({ provider: "p", audio_duration_seconds: null, turns: [] })
  })

  it("required keys are required: a missing one fails", () => {
    expect(Result.isFailure(Schema.decodeUnknownResult(PublicEncounterSummary)({ encounter_id: "e", organization_id: "o", created_at: at }))).toBe(true)
    expect(Result.isFailure(Schema.decodeUnknownResult(PublicTranscriptTurn)({ speaker: "A", text: "x", start: 0 }))).toBe(true)
    expect(Result.isFailure(Schema.decodeUnknownResult(PublicApiErrorResponse)({ error: "public_api_not_found", reason_code: "encounter_not_found", message: "m" }))).toBe(true)
  })
})

describe("timestamps", () => {
  it.each([
    ["2026-05-01T14:00:00+02:00", "2026-05-01T12:00:00.000Z"],
    ["2026-05-01T12:00:00Z", "2026-05-01T12:00:00.000Z"],
    ["2026-05-01T07:30:00.5-04:30", "2026-05-01T12:00:00.500Z"],
    ["2026-05-02T00:00:00.123456+12:00", "2026-05-01T12:00:00.123Z"]
  ])("%s encodes as %s", (input, expected) => {
    const decoded = Schema.decodeUnknownSync(PublicDocumentAudioResponse)({ audio_url: "u", expires_at: input })
    expect(Schema.encodeSync(PublicDocumentAudioResponse)(decoded).expires_at).toBe(expected)
  })

  it("an encounter summary decoded with offsets is written back in UTC with milliseconds", () => {
    const decoded = Schema.decodeUnknownSync(PublicEncounterSummary)({
      encounter_id: "e",
      organization_id: "o",
      created_at: "2026-05-01T14:00:00+02:00",
      updated_at: "2026-05-01T12:00:00-00:00",
      date_of_service: "2026-04-30T22:00:00-02:00"
    })
    expect(Schema.encodeSync(PublicEncounterSummary)(decoded)).toMatchObject({
      created_at: "2026-05-01T12:00:00.000Z",
      updated_at: "2026-05-01T12:00:00.000Z",
      date_of_service: "2026-05-01T00:00:00.000Z"
    })
  })

  it.each(["2026-05-01", "2026-05-01T12:00:00", "2026-02-30T00:00:00Z", "garbage"])("%s does not decode as a timestamp", (input) => {
    expect(Result.isFailure(Schema.decodeUnknownResult(PublicDocumentAudioResponse)({ audio_url: "u", expires_at: input }))).toBe(true)
  })

  it.each(["2026-02-30", "2026-5-1", "2026-05-01T00:00:00Z"])("date_of_birth %s is refused (YYYY-MM-DD only)", (input) => {
    expect(Result.isFailure(Schema.decodeUnknownResult(PublicPatientSummary)({ patient_id: "p", date_of_birth: input }))).toBe(true)
  })
})

describe("reason codes: status and category as the contract table (section 7) and docs/behaviour.md", () => {
  const table = contractReasonTable

  it("the reason_code enum is closed: exactly the codes of the table", () => {
    expect([...reasonCodes].sort()).toEqual(Object.keys(table).sort())
  })

  for (const [code, [status, category]] of Object.entries(table)) {
    it(`${code}: ${status} ${category}`, () => {
      const reasonCode = reasonCodes.find((known) => known === code)
      expect(reasonCode).toBeDefined()
      expect(statusOf(reasonCode!)).toBe(status)
      expect(categoryOf(reasonCode!)).toBe(category)
      const error = PublicApiError.of(reasonCode!)
      expect(error.status).toBe(status)
      expect(error.toResponse()).toEqual({ error: category, reason_code: code, message: expect.any(String), field: null })
      expect(error.toResponse().message.length).toBeGreaterThan(0)
    })
  }

  it("unsupported_filter and the 422 codes carry their field into the body", () => {
    expect(PublicApiError.of("invalid_limit", "limit").toResponse().field).toBe("limit")
    expect(PublicApiError.of("unsupported_filter", "owners").toResponse().field).toBe("owners")
  })
})
