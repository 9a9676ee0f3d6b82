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
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApi, HttpApiBuilder } from "effect/http-api"
import { PUBLIC_API_GROUP, PublicHttpApi } from "../api/definition.js"
import { Exchange, noteRefusal, parseQuery } from "./exchange.js"
import { compileJsonWriter, type JsonWriter } from "./json-writer.js"

/**
 * Success bodies are written without the schemas' checks, by their compiled writers or, where
 * none compiles, by the HttpApi's encoding: the use cases return what the presenters made of
 * rows the storage adapter already checked. Decoding keeps them.
 */
const ServedApi = PublicHttpApi.annotate(HttpApi.SuccessParseOptions, { disableChecks: true })

/** The writer of each operation's success body, compiled from its success schema (server/json-writer.ts). */
export const successWriters: ReadonlyMap<OperationId, JsonWriter> = (() => {
  const writers = new Map<OperationId, JsonWriter>()
  HttpApi.reflect(PublicHttpApi, {
    onGroup: () => undefined,
    onEndpoint: ({ endpoint }) => {
      const [success, ...others] = endpoint.success
      const writer = success === undefined || others.length > 0 ? undefined : compileJsonWriter(success)
      if (writer !== undefined) writers.set(endpoint.identifier as OperationId, writer)
    }
  })
  return writers
})()

/** The 200 of a success body: its compiled writer's text, or the value for the HttpApi to encode through its schema. */
const answer = <A>(operationId: OperationId, body: A): A | HttpServerResponse.HttpServerResponse => {
  const writer = successWriters.get(operationId)
  return writer === undefined ? body : HttpServerResponse.text(writer(body), { contentType: "application/json" })
}

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
    ): Effect.Effect<A | HttpServerResponse.HttpServerResponse, PublicApiError, Exchange> =>
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
          Effect.map((body) => answer(operationId, body)),
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
