import { type DocumentPath, type EncounterPath, PublicApi, type PublicApiError, type PublicRequest } from "@clinical-api/domain"
import { HttpApiBuilder } from "@effect/platform"
import { Effect, FiberRef, Option } from "effect"
import { PUBLIC_API_GROUP, PublicHttpApi } from "../api/definition.js"
import { currentRoutedRequest, respondWithError, type RoutedRequest } from "./request-context.js"
import type { PathParamName } from "./routing.js"

const pathParam = (routed: RoutedRequest, name: PathParamName) => {
  const value = routed.params[name]
  return value === undefined ? Effect.dieMessage(`path parameter ${name} was not matched`) : Effect.succeed(value)
}

const encounterPath = (routed: RoutedRequest): Effect.Effect<EncounterPath> =>
  Effect.map(pathParam(routed, "encounter_id"), (encounterId) => ({ encounterId }))

const documentPath = (routed: RoutedRequest): Effect.Effect<DocumentPath> =>
  Effect.zipWith(
    pathParam(routed, "encounter_id"),
    pathParam(routed, "document_id"),
    (encounterId, documentId) => ({ encounterId, documentId })
  )

/**
 * Runs one use case on the request as the HTTP app read it (raw Authorization header, raw
 * query pairs, exactly decoded path parameters) and answers a refusal with its exact body.
 */
const serve = <P, A>(
  readPath: (routed: RoutedRequest) => Effect.Effect<P>,
  useCase: (request: PublicRequest, path: P) => Effect.Effect<A, PublicApiError>
) =>
  // eslint-disable-next-line no-restricted-syntax -- made once per handler, when the handlers are defined
  Effect.gen(function*() {
    const routed = yield* FiberRef.get(currentRoutedRequest)
    if (Option.isNone(routed)) return yield* Effect.dieMessage("request served outside the public HTTP app")
    const path = yield* readPath(routed.value)
    return yield* useCase(routed.value.request, path).pipe(Effect.catchTag("PublicApiError", respondWithError))
  })

const noPath = () => Effect.void

/**
 * The handlers of the five operations, as the HttpApi builder requires them to serve
 * `/openapi.json` and `/docs`. The server answers the five operations before the platform
 * router sees them (app.ts, `serveOperation`), so these are not on the serving path: they
 * read the request as that app routed it (`currentRoutedRequest`), and without it they die,
 * which any caller answers 503.
 */
export const PublicApiHandlersLive = HttpApiBuilder.group(PublicHttpApi, PUBLIC_API_GROUP, (handlers) =>
  Effect.map(PublicApi, (api) =>
    handlers
      .handle("listPublicEncounters", () => serve(noPath, (request) => api.listPublicEncounters(request)))
      .handle("getPublicEncounter", () => serve(encounterPath, api.getPublicEncounter))
      .handle("getPublicDocument", () => serve(documentPath, api.getPublicDocument))
      .handle("getPublicDocumentTranscript", () => serve(documentPath, api.getPublicDocumentTranscript))
      .handle("getPublicDocumentAudio", () => serve(documentPath, api.getPublicDocumentAudio))))
