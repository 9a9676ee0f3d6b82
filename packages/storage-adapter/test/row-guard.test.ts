import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import fc from "fast-check"
import {
  DocumentSummaryRow,
  EncounterRow,
  EncounterWithDocumentRow,
  JoinedDocumentRow,
  JoinedTranscriptRow,
  PageTotalRow
} from "../src/repositories/encounter-repository.js"
import { compileRowGuard } from "../src/sql/row-guard.js"

const created = new Date("2026-05-01T09:00:00.000Z")

const encounterRow = {
  encounter_id: "enc_1",
  organization_id: "org_1",
  data_class: "clinical",
  created_at: created,
  updated_at: created,
  date_of_service: null,
  status: "signed",
  patient_id: "pat_1",
  first_name: "Ada",
  last_name: null,
  date_of_birth: "2024-02-29"
}
const documentSummaryRow = {
  document_id: "doc_1",
  encounter_id: "enc_1",
  schema_type: "ambient_transcript",
  title: null,
  status: "final",
  workflow_variant: "ambient",
  audio_duration_seconds: 61.5,
  created_at: created
}

/** One valid row of each schema the repository checks its rows with. */
const cases = [
  { name: "EncounterRow", schema: EncounterRow, valid: encounterRow },
  { name: "PageTotalRow", schema: PageTotalRow, valid: { total: 3 } },
  { name: "DocumentSummaryRow", schema: DocumentSummaryRow, valid: documentSummaryRow },
  {
    name: "EncounterWithDocumentRow",
    schema: EncounterWithDocumentRow,
    valid: {
      ...encounterRow,
      doc_document_id: "doc_1",
      doc_schema_type: "billing",
      doc_title: "Bill",
      doc_status: null,
      doc_workflow_variant: null,
      doc_audio_duration_seconds: null,
      doc_created_at: created
    }
  },
  {
    name: "JoinedDocumentRow",
    schema: JoinedDocumentRow,
    valid: {
      doc_document_id: "doc_1",
      doc_encounter_id: "enc_1",
      doc_schema_type: "ambient_transcript",
      doc_title: null,
      doc_status: "final",
      doc_workflow_variant: "ambient",
      doc_audio_duration_seconds: 61.5,
      doc_created_at: created,
      doc_updated_at: created,
      doc_content_markdown: "# Note",
      storage_key: null,
      content_type: null
    }
  },
  {
    name: "JoinedTranscriptRow",
    schema: JoinedTranscriptRow,
    valid: { transcript_provider: "p", transcript_audio_duration_seconds: 0, transcript_turns_text: "[]" }
  }
] as const

/** Values close to and far from what the columns hold: each schema accepts some and refuses others. */
const fieldValues = fc.oneof(
  fc.constantFrom<unknown>(
    null, undefined, "", "enc_2", "clinical", "demo", "training", "Clinical", "ambient", "phone_call", "document",
    "ambient_transcript", "billing", "encounter_checklist", "2024-02-29", "2023-02-29", "10000-01-01", "2026-13-01",
    "0000-01-01", 0, -1, 1.5, 3, Number.NaN, Number.POSITIVE_INFINITY, -0, created, new Date(Number.NaN), [], {},
    [created], true, 10n
  ),
  fc.string(),
  fc.double(),
  fc.integer(),
  fc.date(),
  fc.anything()
)

type Mutation =
  | { readonly kind: "set"; readonly key: number; readonly value: unknown }
  | { readonly kind: "delete"; readonly key: number }
  | { readonly kind: "extra"; readonly name: string; readonly value: unknown }

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant("set" as const), key: fc.nat(), value: fieldValues }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("delete" as const), key: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("extra" as const), name: fc.string(), value: fieldValues }) }
)

const mutate = (valid: Record<string, unknown>, mutations: ReadonlyArray<Mutation>): Record<string, unknown> => {
  const row: Record<string, unknown> = { ...valid }
  const keys = Object.keys(valid)
  for (const change of mutations) {
    if (change.kind === "extra") row[change.name] = change.value
    else if (change.kind === "delete") delete row[keys[change.key % keys.length]!]
    else row[keys[change.key % keys.length]!] = change.value
  }
  return row
}

describe("compileRowGuard", () => {
  for (const { name, schema, valid } of cases) {
    it(`${name}: holds exactly when Schema.is does, on valid rows and on rows with one to three changes`, () => {
      const guard = compileRowGuard(schema as Schema.Codec<unknown>)
      const is = Schema.is(schema as Schema.Codec<unknown>)
      expect(guard(valid)).toBe(true)
      let accepted = 0
      let refused = 0
      fc.assert(
        fc.property(fc.array(mutation, { minLength: 0, maxLength: 3 }), (mutations) => {
          const row = mutate(valid, mutations)
          const expected = is(row)
          expect(guard(row)).toBe(expected)
          if (expected) accepted++
          else refused++
        }),
        { numRuns: 2000 }
      )
      // Both outcomes were exercised, so neither side can hold by always answering the same.
      expect(accepted).toBeGreaterThan(50)
      expect(refused).toBeGreaterThan(50)
    })
  }

  it("refuses what is not a row: null, arrays, strings, numbers", () => {
    const guard = compileRowGuard(EncounterRow)
    for (const input of [null, undefined, [], [encounterRow], "row", 1, true]) {
      expect(guard(input)).toBe(false)
      expect(Schema.is(EncounterRow)(input)).toBe(false)
    }
  })

  it("checks a DateFromSelf column as the library does: any Date, an invalid one too, and nothing else", () => {
    const guard = compileRowGuard(EncounterRow)
    const is = Schema.is(EncounterRow)
    const lookalikes = [new Date(Number.NaN), created.toISOString(), created.getTime(), { getTime: () => 0 }, null]
    for (const createdAt of lookalikes) {
      const row = { ...encounterRow, created_at: createdAt }
      expect(guard(row)).toBe(is(row))
    }
    expect(guard({ ...encounterRow, created_at: new Date(Number.NaN) })).toBe(true)
    expect(guard({ ...encounterRow, created_at: created.toISOString() })).toBe(false)
  })

  it("applies the filters: a date of birth that is no calendar date, an empty id, a negative or infinite duration", () => {
    expect(compileRowGuard(EncounterRow)({ ...encounterRow, date_of_birth: "10000-01-01" })).toBe(false)
    expect(compileRowGuard(EncounterRow)({ ...encounterRow, date_of_birth: "2023-02-29" })).toBe(false)
    expect(compileRowGuard(EncounterRow)({ ...encounterRow, encounter_id: "" })).toBe(false)
    const head = compileRowGuard(JoinedTranscriptRow)
    expect(head({ transcript_provider: "p", transcript_audio_duration_seconds: -1, transcript_turns_text: "[]" })).toBe(false)
    expect(head({ transcript_provider: "p", transcript_audio_duration_seconds: Number.POSITIVE_INFINITY, transcript_turns_text: "[]" })).toBe(false)
    expect(compileRowGuard(PageTotalRow)({ total: 1.5 })).toBe(false)
  })
})
