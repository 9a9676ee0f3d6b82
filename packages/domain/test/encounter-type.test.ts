import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { deriveEncounterType, type EncounterTypeSource } from "../src/encounter-type.js"
import { prop } from "./support/prop.js"

const doc = (schemaType: EncounterTypeSource["schemaType"], workflowVariant: EncounterTypeSource["workflowVariant"] = null): EncounterTypeSource => ({
  schemaType,
  workflowVariant
})

const documentArb: fc.Arbitrary<EncounterTypeSource> = fc.record({
  schemaType: fc.constantFrom("document", "ambient_transcript", "billing", "encounter_checklist"),
  workflowVariant: fc.constantFrom("ambient", "phone_call", null)
})

/** docs/behaviour.md, "Resources", written as a rank: the lowest rank present wins. */
const rankOf = (d: EncounterTypeSource): [number, string] =>
  d.schemaType === "ambient_transcript"
    ? d.workflowVariant === "phone_call" ? [0, "phone_call"] : [1, "ambient"]
    : d.schemaType === "document"
    ? [2, "clinical_documentation"]
    : d.schemaType === "billing"
    ? [3, "billing"]
    : [4, "checklist"]

const expectedType = (documents: ReadonlyArray<EncounterTypeSource>): string | null =>
  documents.length === 0 ? null : documents.map(rankOf).sort((a, b) => a[0] - b[0])[0]![1]

describe("deriveEncounterType", () => {
  it("no documents gives null", () => {
    expect(deriveEncounterType([])).toBeNull()
  })

  it("phone_call: an ambient_transcript with workflow_variant phone_call wins over everything", () => {
    expect(deriveEncounterType([doc("billing"), doc("ambient_transcript", "ambient"), doc("document"), doc("ambient_transcript", "phone_call")])).toBe(
      "phone_call"
    )
  })

  it("ambient: any other ambient_transcript (variant ambient or null)", () => {
    expect(deriveEncounterType([doc("document"), doc("ambient_transcript", "ambient")])).toBe("ambient")
    expect(deriveEncounterType([doc("encounter_checklist"), doc("ambient_transcript", null)])).toBe("ambient")
  })

  it("a phone_call variant on a non-transcript document does not make a phone_call encounter", () => {
    expect(deriveEncounterType([doc("document", "phone_call")])).toBe("clinical_documentation")
    expect(deriveEncounterType([doc("billing", "phone_call")])).toBe("billing")
  })

  it("clinical_documentation: a document, over billing and checklist", () => {
    expect(deriveEncounterType([doc("encounter_checklist"), doc("billing"), doc("document")])).toBe("clinical_documentation")
  })

  it("billing over checklist", () => {
    expect(deriveEncounterType([doc("encounter_checklist"), doc("billing")])).toBe("billing")
  })

  it("checklist: only encounter_checklist documents", () => {
    expect(deriveEncounterType([doc("encounter_checklist"), doc("encounter_checklist")])).toBe("checklist")
  })

  prop("priority over all documents, first rule that matches wins", [fc.array(documentArb, { maxLength: 12 })], ([documents]) => {
    expect(deriveEncounterType(documents)).toBe(expectedType(documents))
  }, { fastCheck: { numRuns: 500 } })

  prop("the order of the documents plays no part", [
    fc.array(documentArb, { maxLength: 12 }).chain((documents) =>
      fc.tuple(fc.constant(documents), fc.shuffledSubarray(documents, { minLength: documents.length, maxLength: documents.length }))
    )
  ], ([[documents, shuffled]]) => {
    expect(deriveEncounterType(shuffled)).toBe(deriveEncounterType(documents))
  }, { fastCheck: { numRuns: 500 } })
})
