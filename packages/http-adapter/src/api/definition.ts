import {
  type OperationId,
  PublicApiErrorResponse,
  PublicDocumentAudioResponse,
  PublicDocumentDetailResponse,
  PublicDocumentTranscriptResponse,
  PublicEncounterDetailResponse,
  PublicEncounterListResponse,
  TranscriptReadyEvent
} from "@clinical-api/domain"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { errorResponseSchema, operationErrorStatuses } from "./error-responses.js"
import { apiDescription, operationDocs } from "./descriptions.js"
import { finishOpenApiDocument } from "./openapi.js"

/**
 * The five routes of contract section 4 as one `HttpApi`. Only what the wire shows is
 * declared here: paths, success bodies and the error bodies per status. There is no
 * `urlParams` struct (it would silently drop unknown keys) and no `HttpApiSecurity`
 * (its bearer decoder does not check the scheme): the handlers hand the raw query and the
 * raw `Authorization` header to the domain, which owns every rule.
 */

/** Path parameters are opaque strings; on the wire each is one percent-encoded path segment. */
const EncounterPath = Schema.Struct({
  encounter_id: Schema.String.annotations({ description: "Opaque encounter id, percent-encoded as one path segment." })
})
const DocumentPath = Schema.Struct({
  encounter_id: Schema.String.annotations({ description: "Opaque encounter id, percent-encoded as one path segment." }),
  document_id: Schema.String.annotations({ description: "Opaque document id, percent-encoded as one path segment." })
})

/** All the error bodies of one operation: one member per status, each annotated with its status. */
const operationErrors = (operation: OperationId): Schema.Schema<PublicApiErrorResponse> => {
  const members = operationErrorStatuses(operation).map(({ codes, status }) => errorResponseSchema(operation, status, codes))
  const [first, ...rest] = members
  if (first === undefined) throw new Error(`no error responses for ${operation}`)
  return Schema.Union(first, ...rest)
}

const annotate = (operation: OperationId) => OpenApi.annotations({
  identifier: operation,
  summary: operationDocs[operation].summary,
  description: operationDocs[operation].description
})

export const listPublicEncounters = HttpApiEndpoint.get("listPublicEncounters", "/external/v1/encounters")
  .addSuccess(PublicEncounterListResponse)
  .addError(operationErrors("listPublicEncounters"))
  .annotateContext(annotate("listPublicEncounters"))

export const getPublicEncounter = HttpApiEndpoint.get("getPublicEncounter", "/external/v1/encounters/:encounter_id")
  .setPath(EncounterPath)
  .addSuccess(PublicEncounterDetailResponse)
  .addError(operationErrors("getPublicEncounter"))
  .annotateContext(annotate("getPublicEncounter"))

export const getPublicDocument = HttpApiEndpoint.get(
  "getPublicDocument",
  "/external/v1/encounters/:encounter_id/documents/:document_id"
)
  .setPath(DocumentPath)
  .addSuccess(PublicDocumentDetailResponse)
  .addError(operationErrors("getPublicDocument"))
  .annotateContext(annotate("getPublicDocument"))

export const getPublicDocumentTranscript = HttpApiEndpoint.get(
  "getPublicDocumentTranscript",
  "/external/v1/encounters/:encounter_id/documents/:document_id/transcript"
)
  .setPath(DocumentPath)
  .addSuccess(PublicDocumentTranscriptResponse)
  .addError(operationErrors("getPublicDocumentTranscript"))
  .annotateContext(annotate("getPublicDocumentTranscript"))

export const getPublicDocumentAudio = HttpApiEndpoint.get(
  "getPublicDocumentAudio",
  "/external/v1/encounters/:encounter_id/documents/:document_id/audio"
)
  .setPath(DocumentPath)
  .addSuccess(PublicDocumentAudioResponse)
  .addError(operationErrors("getPublicDocumentAudio"))
  .annotateContext(annotate("getPublicDocumentAudio"))

export const PUBLIC_API_GROUP = "publicApi" as const

export class PublicApiGroup extends HttpApiGroup.make(PUBLIC_API_GROUP)
  .add(listPublicEncounters)
  .add(getPublicEncounter)
  .add(getPublicDocument)
  .add(getPublicDocumentTranscript)
  .add(getPublicDocumentAudio)
  .annotateContext(OpenApi.annotations({
    title: "Encounters",
    description: "Read-only access to encounters, their documents, finalized transcripts and audio links."
  }))
{}

export class PublicHttpApi extends HttpApi.make("clinicalEncounterPublicApi")
  .add(PublicApiGroup)
  .annotate(HttpApi.AdditionalSchemas, [PublicApiErrorResponse, TranscriptReadyEvent])
  .annotateContext(OpenApi.annotations({
    title: "Clinical Encounter Public API",
    version: "v1",
    description: apiDescription,
    transform: finishOpenApiDocument
  }))
{}
