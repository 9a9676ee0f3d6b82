import {
  type ErrorCategory,
  PublicApiErrorResponse,
  type PublicDocumentAudioResponse,
  type PublicDocumentDetailResponse,
  type PublicDocumentTranscriptResponse,
  type PublicEncounterDetailResponse,
  type PublicEncounterListResponse,
  type QueryPairs,
  type ReasonCode,
  statusOf
} from "@clinical-api/domain"
import { HttpApiClient, HttpClient, HttpClientError, HttpClientRequest } from "@effect/platform"
import { Data, Effect, FiberRef, Redacted, Schema } from "effect"
import { PUBLIC_API_GROUP, PublicHttpApi } from "./api/definition.js"

/**
 * The typed client of the public API, generated from the same `HttpApi` the server serves
 * (`HttpApiClient`), for partners and internal services. Every refusal is a
 * `PublicApiClientError` carrying the contract's `reason_code`, status, category and field;
 * anything that is not a contract answer (network failure, unexpected body) is a
 * `PublicApiTransportError`.
 */

export class PublicApiClientError extends Data.TaggedError("PublicApiClientError")<{
  readonly status: number
  readonly error: ErrorCategory
  readonly reason_code: ReasonCode
  readonly message: string
  readonly field: string | null
}> {}

export class PublicApiTransportError extends Data.TaggedError("PublicApiTransportError")<{
  readonly reason: string
  readonly status: number | null
  readonly cause: unknown
}> {}

export type PublicApiClientFailure = PublicApiClientError | PublicApiTransportError

export interface ListEncountersQuery {
  readonly limit?: number
  readonly offset?: number
  readonly sort_order?: "asc" | "desc"
  readonly start_at?: Date | string
  readonly end_at?: Date | string
}

export interface PublicApiClient {
  /** Pass a query object, or raw (key, value) pairs to send exactly those. */
  readonly listPublicEncounters: (
    query?: ListEncountersQuery | QueryPairs
  ) => Effect.Effect<PublicEncounterListResponse, PublicApiClientFailure>
  readonly getPublicEncounter: (encounterId: string) => Effect.Effect<PublicEncounterDetailResponse, PublicApiClientFailure>
  readonly getPublicDocument: (
    encounterId: string,
    documentId: string
  ) => Effect.Effect<PublicDocumentDetailResponse, PublicApiClientFailure>
  readonly getPublicDocumentTranscript: (
    encounterId: string,
    documentId: string
  ) => Effect.Effect<PublicDocumentTranscriptResponse, PublicApiClientFailure>
  readonly getPublicDocumentAudio: (
    encounterId: string,
    documentId: string
  ) => Effect.Effect<PublicDocumentAudioResponse, PublicApiClientFailure>
}

export interface PublicApiClientOptions {
  readonly baseUrl: string | URL
  readonly apiKey: string | Redacted.Redacted<string>
}

/** The query of the call in progress: the generated client has no `urlParams` (the server declares none). */
const pendingQuery = FiberRef.unsafeMake<QueryPairs>([])

const toPairs = (query: ListEncountersQuery | QueryPairs | undefined): QueryPairs => {
  if (query === undefined) return []
  if (Array.isArray(query)) return query as QueryPairs
  const named = query as ListEncountersQuery
  const pairs: Array<readonly [string, string]> = []
  const text = (value: Date | string) => (value instanceof Date ? value.toISOString() : value)
  if (named.limit !== undefined) pairs.push(["limit", String(named.limit)])
  if (named.offset !== undefined) pairs.push(["offset", String(named.offset)])
  if (named.sort_order !== undefined) pairs.push(["sort_order", named.sort_order])
  if (named.start_at !== undefined) pairs.push(["start_at", text(named.start_at)])
  if (named.end_at !== undefined) pairs.push(["end_at", text(named.end_at)])
  return pairs
}

const isErrorBody = Schema.is(PublicApiErrorResponse)
const decodeErrorBody = Schema.decodeUnknown(Schema.parseJson(PublicApiErrorResponse))

const fromBody = (body: PublicApiErrorResponse, status: number) =>
  new PublicApiClientError({ status, ...body })

/** A refusal the generated client decoded, or a contract body at a status it did not expect (404 route_not_found, 405). */
const toFailure = (error: unknown): Effect.Effect<never, PublicApiClientFailure> => {
  if (isErrorBody(error)) return Effect.fail(fromBody(error, statusOf(error.reason_code)))
  if (HttpClientError.isHttpClientError(error) && error._tag === "ResponseError") {
    const response = error.response
    return Effect.flatMap(
      Effect.either(Effect.flatMap(response.text, decodeErrorBody)),
      (decoded) =>
        Effect.fail(
          decoded._tag === "Right"
            ? fromBody(decoded.right, response.status)
            : new PublicApiTransportError({ reason: "unexpected response", status: response.status, cause: error })
        )
    )
  }
  return Effect.fail(
    new PublicApiTransportError({
      reason: HttpClientError.isHttpClientError(error) ? "request failed" : "unexpected response body",
      status: null,
      cause: error
    })
  )
}

/** Needs an `HttpClient` (for example `FetchHttpClient.layer` or `NodeHttpClient.layerUndici`). */
export const makePublicApiClient = (
  options: PublicApiClientOptions
): Effect.Effect<PublicApiClient, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const apiKey = typeof options.apiKey === "string" ? Redacted.make(options.apiKey) : options.apiKey
    const generated = yield* HttpApiClient.make(PublicHttpApi, {
      baseUrl: options.baseUrl,
      transformClient: HttpClient.mapRequestEffect((request) =>
        Effect.map(FiberRef.get(pendingQuery), (query) =>
          HttpClientRequest.bearerToken(HttpClientRequest.appendUrlParams(request, query), Redacted.value(apiKey))
        )
      )
    })
    const api = generated[PUBLIC_API_GROUP]
    // The generated client inserts path parameters as given: each opaque id is encoded as one segment here.
    const encounterPath = (encounterId: string) => ({ encounter_id: encodeURIComponent(encounterId) })
    const documentPath = (encounterId: string, documentId: string) => ({
      encounter_id: encodeURIComponent(encounterId),
      document_id: encodeURIComponent(documentId)
    })
    const typed = <A, E>(effect: Effect.Effect<A, E>) => Effect.catchAll(effect, toFailure)

    return {
      listPublicEncounters: (query) =>
        typed(api.listPublicEncounters({})).pipe(Effect.locally(pendingQuery, toPairs(query))),
      getPublicEncounter: (encounterId) => typed(api.getPublicEncounter({ path: encounterPath(encounterId) })),
      getPublicDocument: (encounterId, documentId) =>
        typed(api.getPublicDocument({ path: documentPath(encounterId, documentId) })),
      getPublicDocumentTranscript: (encounterId, documentId) =>
        typed(api.getPublicDocumentTranscript({ path: documentPath(encounterId, documentId) })),
      getPublicDocumentAudio: (encounterId, documentId) =>
        typed(api.getPublicDocumentAudio({ path: documentPath(encounterId, documentId) }))
    }
  })
