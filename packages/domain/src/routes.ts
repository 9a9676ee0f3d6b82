import { Schema } from "effect"

/** The five operations; their ids are also the names of the per-organization route allowlist. */
export const OperationId = Schema.Literals([
  "listPublicEncounters",
  "getPublicEncounter",
  "getPublicDocument",
  "getPublicDocumentTranscript",
  "getPublicDocumentAudio"
])
export type OperationId = typeof OperationId.Type
export const operationIds: ReadonlyArray<OperationId> = OperationId.literals

export const Scope = Schema.Literals(["encounters:read", "patients:read", "documents:read", "recordings:read"])
export type Scope = typeof Scope.Type
export const scopes: ReadonlyArray<Scope> = Scope.literals

/** Contract section 4.6. */
export const requiredScopes: { readonly [K in OperationId]: ReadonlyArray<Scope> } = {
  listPublicEncounters: ["encounters:read", "patients:read", "documents:read"],
  getPublicEncounter: ["encounters:read", "patients:read", "documents:read"],
  getPublicDocument: ["encounters:read", "documents:read"],
  getPublicDocumentTranscript: ["encounters:read", "documents:read"],
  getPublicDocumentAudio: ["encounters:read", "documents:read", "recordings:read"]
}

/** Only the list route takes query parameters (contract 4, common rule 2). */
export const acceptsQuery = (operation: OperationId): boolean => operation === "listPublicEncounters"
