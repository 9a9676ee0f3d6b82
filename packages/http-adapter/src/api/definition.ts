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
import { Schema } from "effect"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { operationDocs } from "./descriptions.js"
import { finishOpenApiDocument } from "./openapi.js"
import { refusalsOf } from "./refusals.js"

/**
 * The five routes of contract section 4 as one `HttpApi`: the routing of the server, the
 * decoding of path parameters, the OpenAPI document, the docs page and the typed client all
 * come from it. Only what the wire shows is declared: paths, success bodies and the refusals
 * per status. There is no query schema (it would drop unknown keys, which the domain refuses
 * in order) and no `HttpApiSecurity` (the domain reads the raw `Authorization` header in the
 * contract's order): the handlers hand both to the domain as they came.
 */

/** Path parameters are opaque strings; on the wire each is one percent-encoded path segment. */
const opaqueId = (what: string) =>
  Schema.String.annotate({ description: `Opaque ${what} id, percent-encoded as one path segment.` })

const encounterParams = { encounter_id: opaqueId("encounter") }
const documentParams = { encounter_id: opaqueId("encounter"), document_id: opaqueId("document") }

const documented = (operation: OperationId) =>
  OpenApi.annotations({
    identifier: operation,
    summary: operationDocs[operation].summary,
    description: operationDocs[operation].description
  })

export const listPublicEncounters = HttpApiEndpoint.get("listPublicEncounters", "/external/v1/encounters", {
  success: PublicEncounterListResponse,
  error: refusalsOf("listPublicEncounters")
}).annotateMerge(documented("listPublicEncounters"))

export const getPublicEncounter = HttpApiEndpoint.get("getPublicEncounter", "/external/v1/encounters/:encounter_id", {
  params: encounterParams,
  success: PublicEncounterDetailResponse,
  error: refusalsOf("getPublicEncounter")
}).annotateMerge(documented("getPublicEncounter"))

export const getPublicDocument = HttpApiEndpoint.get(
  "getPublicDocument",
  "/external/v1/encounters/:encounter_id/documents/:document_id",
  { params: documentParams, success: PublicDocumentDetailResponse, error: refusalsOf("getPublicDocument") }
).annotateMerge(documented("getPublicDocument"))

export const getPublicDocumentTranscript = HttpApiEndpoint.get(
  "getPublicDocumentTranscript",
  "/external/v1/encounters/:encounter_id/documents/:document_id/transcript",
  { params: documentParams, success: PublicDocumentTranscriptResponse, error: refusalsOf("getPublicDocumentTranscript") }
).annotateMerge(documented("getPublicDocumentTranscript"))

export const getPublicDocumentAudio = HttpApiEndpoint.get(
  "getPublicDocumentAudio",
  "/external/v1/encounters/:encounter_id/documents/:document_id/audio",
  { params: documentParams, success: PublicDocumentAudioResponse, error: refusalsOf("getPublicDocumentAudio") }
).annotateMerge(documented("getPublicDocumentAudio"))

export const PUBLIC_API_GROUP = "publicApi" as const

export const PublicApiGroup = HttpApiGroup.make(PUBLIC_API_GROUP)
  .add(listPublicEncounters, getPublicEncounter, getPublicDocument, getPublicDocumentTranscript, getPublicDocumentAudio)
  .annotateMerge(OpenApi.annotations({
    title: "Encounters",
    description: "Read-only access to encounters, their documents, finalized transcripts and audio links."
  }))

export const PublicHttpApi = HttpApi.make("clinicalEncounterPublicApi")
  .add(PublicApiGroup)
  .annotate(HttpApi.AdditionalSchemas, [PublicApiErrorResponse, TranscriptReadyEvent])
  .annotateMerge(OpenApi.annotations({
    title: "Clinical Encounter Public API",
    version: "v1",
    transform: finishOpenApiDocument
  }))

/**
 * The API as one running service publishes it: the document's one server is the service's
 * public URL (PUBLIC_BASE_URL, else the address it listens on), so generators and the docs
 * page know where requests go without being told.
 */
export const publishedAt = (publicUrl: string) =>
  PublicHttpApi.annotate(OpenApi.Servers, [{ url: publicUrl, description: "This service" }])
