import {
  categoryOf,
  type OperationId,
  operationIds,
  type ReasonCode,
  reasonCodesWithStatus,
  statusOf
} from "@clinical-api/domain"
import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"

/**
 * Which reason codes each operation can answer, status by status (contract 4.1 to 4.5 and
 * section 7, docs/behaviour.md "Order of checks"). This is documentation of the wire, not a rule:
 * the domain decides; the OpenAPI document and the typed client are built from this table,
 * and the contract tests validate every response against it, so a code the domain returns
 * that is missing here fails a test.
 */
export type ErrorStatus = 400 | 401 | 403 | 404 | 422 | 503

const routesWithEncounterId: ReadonlyArray<OperationId> = [
  "getPublicEncounter",
  "getPublicDocument",
  "getPublicDocumentTranscript",
  "getPublicDocumentAudio"
]

const codesOf = (operation: OperationId): ReadonlyArray<ReasonCode> => {
  const withEncounter = routesWithEncounterId.includes(operation)
  const withDocument = withEncounter && operation !== "getPublicEncounter"
  const codes: Array<ReasonCode> = ["unsupported_filter"]
  if (withDocument) codes.push("unsupported_document_type")
  if (operation === "getPublicDocumentAudio") codes.push("audio_not_available_for_document")
  codes.push(...reasonCodesWithStatus(401))
  codes.push("org_scope_only_required", "route_not_allowed", "organization_not_allowlisted", "missing_scope")
  if (withEncounter) codes.push("cross_organization_denied", "demo_training_denied")
  if (withEncounter) codes.push("encounter_not_found")
  if (withDocument) codes.push("document_not_found")
  if (operation === "getPublicDocumentTranscript") codes.push("transcript_not_found")
  if (operation === "getPublicDocumentAudio") codes.push("audio_not_found")
  if (operation === "listPublicEncounters") codes.push(...reasonCodesWithStatus(422))
  codes.push("digest_key_unavailable")
  if (operation === "getPublicDocumentAudio") codes.push("audio_storage_unavailable")
  return codes
}

/** Every reason code an operation can answer, in check order. */
export const operationReasonCodes: { readonly [K in OperationId]: ReadonlyArray<ReasonCode> } = Object.fromEntries(
  operationIds.map((operation) => [operation, codesOf(operation)])
) as { readonly [K in OperationId]: ReadonlyArray<ReasonCode> }

/** The reason codes of `operation` answered with `status`, grouped by status in ascending order. */
export const operationErrorStatuses = (operation: OperationId): ReadonlyArray<{
  readonly status: ErrorStatus
  readonly codes: readonly [ReasonCode, ...Array<ReasonCode>]
}> => {
  const byStatus = new Map<ErrorStatus, Array<ReasonCode>>()
  for (const code of operationReasonCodes[operation]) {
    const status = statusOf(code) as ErrorStatus
    const codes = byStatus.get(status)
    if (codes === undefined) byStatus.set(status, [code])
    else codes.push(code)
  }
  return [...byStatus.entries()]
    .sort(([a], [b]) => a - b)
    .map(([status, codes]) => ({ status, codes: codes as [ReasonCode, ...Array<ReasonCode>] }))
}

const statusTitles: { readonly [S in ErrorStatus]: string } = {
  400: "Bad request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not found",
  422: "Invalid query value",
  503: "Service unavailable"
}

/**
 * The error body of one operation at one status: the four fields of `PublicApiErrorResponse`
 * (contract 7; encoded exactly so, no `_tag`), with `reason_code` narrowed to the codes the
 * operation can answer there.
 */
export const errorResponseSchema = (
  operation: OperationId,
  status: ErrorStatus,
  codes: readonly [ReasonCode, ...Array<ReasonCode>]
) => {
  const categories = [...new Set(codes.map(categoryOf))]
  const [category] = categories
  if (category === undefined || categories.length !== 1) {
    throw new Error(`reason codes of ${operation} at ${status} span several categories: ${categories.join(", ")}`)
  }
  return Schema.Struct({
    error: Schema.Literal(category),
    reason_code: Schema.Literal(...codes),
    message: Schema.String,
    field: Schema.NullOr(Schema.String)
  }).annotations({
    ...HttpApiSchema.annotations({ status }),
    title: `${operation} ${status}`,
    description: `${statusTitles[status]}: a PublicApiErrorResponse whose reason_code is one of ${codes.join(", ")}.`,
    parseOptions: { onExcessProperty: "error" }
  })
}

export type ErrorResponseSchema = ReturnType<typeof errorResponseSchema>
