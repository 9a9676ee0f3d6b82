import type { components, operations } from "./generated/openapi.js"

type Schemas = components["schemas"]

/** The 200 body of an operation of the API definition. */
type Ok<Operation extends keyof operations> = operations[Operation]["responses"] extends {
  readonly 200: { content: { readonly "application/json": infer Body } }
} ? Body
  : never

export type EncounterListResponse = Ok<"listPublicEncounters">
export type EncounterDetailResponse = Ok<"getPublicEncounter">
export type DocumentDetailResponse = Ok<"getPublicDocument">
export type DocumentTranscriptResponse = Ok<"getPublicDocumentTranscript">
export type DocumentAudioResponse = Ok<"getPublicDocumentAudio">

export type EncounterSummary = Schemas["PublicEncounterSummary"]
export type PatientSummary = Schemas["PublicPatientSummary"]
export type EncounterDocumentSummary = Schemas["PublicEncounterDocumentSummary"]
export type DocumentDetail = DocumentDetailResponse["document"]
export type FinalTranscript = Schemas["PublicFinalTranscript"]
export type TranscriptTurn = Schemas["PublicTranscriptTurn"]
export type ErrorBody = Schemas["PublicApiErrorResponse"]
export type TranscriptReadyEvent = Schemas["RecordingTranscriptReadyEvent"]

/** The contract's error category (`error`) and reason (`reason_code`). */
export type ErrorCategory = ErrorBody["error"]
export type ReasonCode = ErrorBody["reason_code"]

type ContractOperation = Exclude<keyof operations, "recordingTranscriptReady">

/** The `reason_code`s the API definition lists for an HTTP status, over the five operations. */
export type ReasonCodeOf<Status extends number> = {
  [Operation in ContractOperation]: operations[Operation]["responses"] extends {
    readonly [S in Status]: { content: { readonly "application/json": { readonly reason_code: infer Reason } } }
  } ? Reason
    : never
}[ContractOperation]

type WireListQuery = NonNullable<operations["listPublicEncounters"]["parameters"]["query"]>

/**
 * The list route's query, with the contract's names. `start_at` and `end_at` take a `Date` or
 * an RFC 3339 date-time with an offset; the client encodes every value (a `+` offset included).
 */
export type ListEncountersQuery = Omit<WireListQuery, "start_at" | "end_at"> & {
  readonly start_at?: Date | string
  readonly end_at?: Date | string
}
