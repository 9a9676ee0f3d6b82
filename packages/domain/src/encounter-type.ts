import type { EncounterType, SchemaType, WorkflowVariant } from "./resources.js"

export interface EncounterTypeSource {
  readonly schemaType: SchemaType
  readonly workflowVariant: WorkflowVariant | null
}

/**
 * docs/behaviour.md, "Resources": the rules are tried in priority order over ALL documents of the
 * encounter, first match wins; the order of the documents plays no part.
 */
const rules: ReadonlyArray<readonly [EncounterType, (document: EncounterTypeSource) => boolean]> = [
  ["phone_call", (d) => d.schemaType === "ambient_transcript" && d.workflowVariant === "phone_call"],
  ["ambient", (d) => d.schemaType === "ambient_transcript"],
  ["clinical_documentation", (d) => d.schemaType === "document"],
  ["billing", (d) => d.schemaType === "billing"],
  ["checklist", (d) => d.schemaType === "encounter_checklist"]
]

export const deriveEncounterType = (documents: ReadonlyArray<EncounterTypeSource>): EncounterType | null => {
  for (const [encounterType, matches] of rules) {
    if (documents.some(matches)) return encounterType
  }
  return null
}
