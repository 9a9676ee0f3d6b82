import {
  categoryOf,
  type ErrorCategory,
  type ListQueryKey,
  listQueryKeys,
  PublicApiError,
  PublicApiErrorResponse,
  type PublicDocumentAudioResponse,
  type PublicDocumentDetailResponse,
  type PublicDocumentTranscriptResponse,
  type PublicEncounterDetailResponse,
  type PublicEncounterListResponse,
  type QueryPairs,
  reasonCatalogue,
  type ReasonCode,
  type SortOrder,
  statusOf
} from "@clinical-api/domain"
import { Context, Data, Effect, Redacted, Schema } from "effect"
import { HttpClient, HttpClientError, HttpClientRequest } from "effect/http"
import { HttpApiClient } from "effect/http-api"
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

/** The list route's query by name (the domain's keys); the server checks the values. */
export interface ListEncountersQuery extends Partial<Record<ListQueryKey, number | string | Date>> {
  readonly limit?: number
  readonly offset?: number
  readonly sort_order?: SortOrder
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

/** The query of the call in progress: the generated client has none (the server declares none). */
const PendingQuery = Context.Reference<QueryPairs>("@clinical-api/http-adapter/PublicApiClient/PendingQuery", {
  defaultValue: () => []
})

/** The named query as pairs, in the domain's order of the list query's keys. */
const toPairs = (query: ListEncountersQuery | QueryPairs | undefined): QueryPairs => {
  if (query === undefined) return []
  if (Array.isArray(query)) return query as QueryPairs
  const named: ListEncountersQuery = query as ListEncountersQuery
  const pairs: Array<readonly [string, string]> = []
  for (const key of listQueryKeys) {
    const value = named[key]
    if (value !== undefined) pairs.push([key, value instanceof Date ? value.toISOString() : String(value)])
  }
  return pairs
}

const decodeErrorBody = Schema.decodeUnknownEffect(Schema.fromJsonString(PublicApiErrorResponse))

const fromRefusal = (error: PublicApiError) =>
  new PublicApiClientError({
    status: statusOf(error.reasonCode),
    error: categoryOf(error.reasonCode),
    reason_code: error.reasonCode,
    message: reasonCatalogue[error.reasonCode].message,
    field: error.field
  })

/** A refusal the generated client decoded, or a contract body at a status it did not expect (404 route_not_found, 405). */
const toFailure = (error: unknown): Effect.Effect<never, PublicApiClientFailure> => {
  if (error instanceof PublicApiError) return Effect.fail(fromRefusal(error))
  const response = HttpClientError.isHttpClientError(error) ? error.response : undefined
  if (response !== undefined) {
    return Effect.flatMap(
      Effect.result(Effect.flatMap(response.text, decodeErrorBody)),
      (decoded) =>
        Effect.fail(
          decoded._tag === "Success"
            ? new PublicApiClientError({ status: response.status, ...decoded.success })
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
      transformClient: (client) =>
        HttpClient.mapRequestEffect(client, (request) =>
          Effect.map(Effect.service(PendingQuery), (query) =>
            HttpClientRequest.bearerToken(HttpClientRequest.appendUrlParams(request, query), Redacted.value(apiKey))
          ))
    })
    const api = generated[PUBLIC_API_GROUP]
    const encounterPath = (encounterId: string) => ({ encounter_id: encounterId })
    const documentPath = (encounterId: string, documentId: string) => ({ encounter_id: encounterId, document_id: documentId })
    const typed = <A, E>(effect: Effect.Effect<A, E>) => Effect.catch(effect, toFailure)

    return {
      listPublicEncounters: (query) =>
        typed(api.listPublicEncounters()).pipe(Effect.provideService(PendingQuery, toPairs(query))),
      getPublicEncounter: (encounterId) => typed(api.getPublicEncounter({ params: encounterPath(encounterId) })),
      getPublicDocument: (encounterId, documentId) =>
        typed(api.getPublicDocument({ params: documentPath(encounterId, documentId) })),
      getPublicDocumentTranscript: (encounterId, documentId) =>
        typed(api.getPublicDocumentTranscript({ params: documentPath(encounterId, documentId) })),
      getPublicDocumentAudio: (encounterId, documentId) =>
        typed(api.getPublicDocumentAudio({ params: documentPath(encounterId, documentId) }))
    }
  })
