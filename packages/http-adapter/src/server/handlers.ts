import {
  AccessPolicy,
  type Caller,
  type OperationId,
  PublicApi,
  type PublicApiError,
  type PublicRequest,
  RequestId
} from "@clinical-api/domain"
import { Effect } from "effect"
import type { HttpServerRequest } from "effect/http"
import { HttpApi, HttpApiBuilder } from "effect/http-api"
import { PUBLIC_API_GROUP, PublicHttpApi } from "../api/definition.js"
import { Exchange, noteRefusal, parseQuery } from "./exchange.js"

/**
 * Success bodies are encoded without the schemas' checks: the use cases return what the
 * presenters made of rows the storage adapter already checked, and the checks cost about a
 * fifth of a list page's encoding. Decoding keeps them.
 */
const ServedApi = PublicHttpApi.annotate(HttpApi.SuccessParseOptions, { disableChecks: true })

/**
 * The handlers of the five operations: the raw `Authorization` header to the access policy
 * (authentication, route, approval, scopes, in the contract's order), then the caller, the
 * request id and the raw query pairs to the use case with the path parameters the HttpApi
 * decoded. A refusal is the domain's `PublicApiError`, which the HttpApi encodes with its
 * status (api/refusals.ts); the exchange is told the caller's organization and the refusal
 * for the log line.
 */
export const PublicApiHandlersLive = HttpApiBuilder.group(ServedApi, PUBLIC_API_GROUP, (handlers) =>
  // eslint-disable-next-line no-restricted-syntax -- made once, when the layer is built
  Effect.gen(function*() {
    const api = yield* PublicApi
    const access = yield* AccessPolicy

    const serve = <A>(
      operationId: OperationId,
      request: HttpServerRequest.HttpServerRequest,
      useCase: (caller: Caller, request: PublicRequest) => Effect.Effect<A, PublicApiError>
    ): Effect.Effect<A, PublicApiError, Exchange> =>
      Effect.flatMap(Effect.service(Exchange), (exchange) =>
        access.authorize(request.headers.authorization, operationId).pipe(
          Effect.flatMap((caller) => {
            exchange.organizationId = caller.organizationId
            return useCase(caller, {
              requestId: RequestId.make(exchange.requestId),
              callerRequestId: exchange.callerRequestId,
              query: parseQuery(exchange.rawQuery)
            })
          }),
          Effect.tapError((error) => Effect.sync(() => noteRefusal(exchange, error)))
        ))

    return handlers
      .handle("listPublicEncounters", ({ request }) =>
        serve("listPublicEncounters", request, (caller, publicRequest) => api.listPublicEncounters(caller, publicRequest)))
      .handle("getPublicEncounter", ({ params, request }) =>
        serve("getPublicEncounter", request, (caller, publicRequest) =>
          api.getPublicEncounter(caller, publicRequest, { encounterId: params.encounter_id })))
      .handle("getPublicDocument", ({ params, request }) =>
        serve("getPublicDocument", request, (caller, publicRequest) =>
          api.getPublicDocument(caller, publicRequest, { encounterId: params.encounter_id, documentId: params.document_id })))
      .handle("getPublicDocumentTranscript", ({ params, request }) =>
        serve("getPublicDocumentTranscript", request, (caller, publicRequest) =>
          api.getPublicDocumentTranscript(caller, publicRequest, {
            encounterId: params.encounter_id,
            documentId: params.document_id
          })))
      .handle("getPublicDocumentAudio", ({ params, request }) =>
        serve("getPublicDocumentAudio", request, (caller, publicRequest) =>
          api.getPublicDocumentAudio(caller, publicRequest, { encounterId: params.encounter_id, documentId: params.document_id })))
  }))
