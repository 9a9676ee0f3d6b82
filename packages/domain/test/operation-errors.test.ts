import { describe, expect, it } from "@effect/vitest"
import { operationErrorStatuses, operationReasonCodes, reasonCatalogue, reasonCodes, statusOf } from "../src/index.js"
import type { OperationId, ReasonCode } from "../src/index.js"

// ---------------------------------------------------------------------------------------------
// Contract 4.1 to 4.5 and section 7, docs/behaviour.md "Order of checks", written out literally:
// the catalogue's derivation must give exactly these sets.

const authentication: ReadonlyArray<ReasonCode> = [
  "missing_bearer",
  "api_keys_disabled",
  "test_prefix_not_allowed",
  "malformed_token",
  "invalid_key",
  "disabled_key",
  "revoked_key",
  "expired_key",
  "digest_key_unavailable"
]
const authorization: ReadonlyArray<ReasonCode> = ["org_scope_only_required", "route_not_allowed", "organization_not_allowlisted", "missing_scope"]
const encounterLookup: ReadonlyArray<ReasonCode> = ["encounter_not_found", "cross_organization_denied", "demo_training_denied"]

const expected: { readonly [K in OperationId]: ReadonlyArray<ReasonCode> } = {
  listPublicEncounters: [
    ...authentication,
    ...authorization,
    "unsupported_filter",
    "invalid_limit",
    "invalid_offset",
    "invalid_sort",
    "invalid_query"
  ],
  getPublicEncounter: [...authentication, ...authorization, "unsupported_filter", ...encounterLookup],
  getPublicDocument: [
    ...authentication,
    ...authorization,
    "unsupported_filter",
    ...encounterLookup,
    "document_not_found",
    "unsupported_document_type"
  ],
  getPublicDocumentTranscript: [
    ...authentication,
    ...authorization,
    "unsupported_filter",
    ...encounterLookup,
    "document_not_found",
    "unsupported_document_type",
    "transcript_not_found"
  ],
  getPublicDocumentAudio: [
    ...authentication,
    ...authorization,
    "unsupported_filter",
    ...encounterLookup,
    "document_not_found",
    "unsupported_document_type",
    "audio_not_available_for_document",
    "audio_not_found",
    "audio_storage_unavailable"
  ]
}

const expectedStatuses: { readonly [K in OperationId]: ReadonlyArray<number> } = {
  listPublicEncounters: [400, 401, 403, 422, 503],
  getPublicEncounter: [400, 401, 403, 404, 503],
  getPublicDocument: [400, 401, 403, 404, 503],
  getPublicDocumentTranscript: [400, 401, 403, 404, 503],
  getPublicDocumentAudio: [400, 401, 403, 404, 503]
}

const operations = Object.keys(expected) as ReadonlyArray<OperationId>

describe("operationReasonCodes: every reason code each operation can answer", () => {
  it.each(operations.map((operation) => [operation]))("%s", (operation) => {
    expect([...operationReasonCodes[operation]].sort()).toEqual([...expected[operation]].sort())
  })

  it("covers the five operations", () => {
    expect(Object.keys(operationReasonCodes).sort()).toEqual([...operations].sort())
  })

  it("lists each code once, in catalogue order", () => {
    for (const operation of operations) {
      const codes = operationReasonCodes[operation]
      expect(codes).toEqual(reasonCodes.filter((code) => codes.includes(code)))
    }
  })

  it("every code of the contract is answered by some operation; no code outside it is", () => {
    const answered = new Set(operations.flatMap((operation) => operationReasonCodes[operation]))
    for (const code of reasonCodes) expect(answered.has(code), code).toBe(reasonCatalogue[code].inContract)
  })
})

describe("operationErrorStatuses: the distinct statuses, ascending", () => {
  it.each(operations.map((operation) => [operation]))("%s", (operation) => {
    expect(operationErrorStatuses(operation)).toEqual(expectedStatuses[operation])
    expect(operationErrorStatuses(operation)).toEqual(
      [...new Set(expected[operation].map(statusOf))].sort((a, b) => a - b)
    )
  })
})
