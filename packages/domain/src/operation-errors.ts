import { type ErrorStatus, reasonCatalogue, type ReasonCode, reasonCodes, statusOf } from "./errors.js"
import { type OperationId, operationIds } from "./routes.js"

/**
 * Which operations can answer each reason code of the contract (contract 4.1 to 4.5 and
 * section 7, docs/behaviour.md "Order of checks"). The codes outside the contract (routing and
 * transport refusals) are answered before there is an operation, so by none.
 */
const everyOperation = operationIds
const listOnly: ReadonlyArray<OperationId> = ["listPublicEncounters"]
const withEncounterId = operationIds.filter((operation) => operation !== "listPublicEncounters")
const withDocumentId = withEncounterId.filter((operation) => operation !== "getPublicEncounter")
const transcriptOnly: ReadonlyArray<OperationId> = ["getPublicDocumentTranscript"]
const audioOnly: ReadonlyArray<OperationId> = ["getPublicDocumentAudio"]

/** Every code of a status that some operation answers alike. */
const byStatus: Partial<Record<ErrorStatus, ReadonlyArray<OperationId>>> = {
  // Authentication runs for every operation.
  401: everyOperation,
  // Query values: only the list takes a query.
  422: listOnly
}

const byCode: Partial<Record<ReasonCode, ReadonlyArray<OperationId>>> = {
  // The list refuses an unknown key, the other routes any key.
  unsupported_filter: everyOperation,
  unsupported_document_type: withDocumentId,
  audio_not_available_for_document: audioOnly,
  org_scope_only_required: everyOperation,
  route_not_allowed: everyOperation,
  organization_not_allowlisted: everyOperation,
  missing_scope: everyOperation,
  cross_organization_denied: withEncounterId,
  demo_training_denied: withEncounterId,
  encounter_not_found: withEncounterId,
  document_not_found: withDocumentId,
  transcript_not_found: transcriptOnly,
  audio_not_found: audioOnly,
  // The digest lookup of authentication, and any store failure while serving.
  digest_key_unavailable: everyOperation,
  audio_storage_unavailable: audioOnly
}

const operationsAnswering = (code: ReasonCode): ReadonlyArray<OperationId> => {
  if (!reasonCatalogue[code].inContract) return []
  const operations = byCode[code] ?? byStatus[statusOf(code)]
  if (operations === undefined) throw new Error(`No operation is known to answer ${code}`)
  return operations
}

const codesOf = (operation: OperationId): ReadonlyArray<ReasonCode> =>
  reasonCodes.filter((code) => operationsAnswering(code).includes(operation))

/** Every reason code each operation can answer, in catalogue order. */
export const operationReasonCodes: { readonly [K in OperationId]: ReadonlyArray<ReasonCode> } = {
  listPublicEncounters: codesOf("listPublicEncounters"),
  getPublicEncounter: codesOf("getPublicEncounter"),
  getPublicDocument: codesOf("getPublicDocument"),
  getPublicDocumentTranscript: codesOf("getPublicDocumentTranscript"),
  getPublicDocumentAudio: codesOf("getPublicDocumentAudio")
}

/** The distinct statuses of the reason codes `operation` can answer, ascending. */
export const operationErrorStatuses = (operation: OperationId): ReadonlyArray<ErrorStatus> =>
  [...new Set(operationReasonCodes[operation].map(statusOf))].sort((a, b) => a - b)
