import { randomUUID } from "node:crypto"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import {
  type Caller,
  currentCaller,
  type OperationId,
  PublicApi,
  PublicApiError,
  type PublicRequest,
  RequestId,
  jsonText
} from "@clinical-api/domain"
import { EmbeddedAudioObjects, PgClient, type PgClientService } from "@clinical-api/storage-adapter"
import {
  HttpApiBuilder,
  HttpApiScalar,
  type HttpApp,
  type HttpRouter,
  HttpServer,
  HttpServerError,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Cause, Context, Duration, Effect, Exit, type Fiber, FiberRef, Layer, Option, Runtime } from "effect"
import { PublicApiHandlersLive } from "./handlers.js"
import { matchMediaPath, MEDIA_ROUTE_TEMPLATE, serveMedia } from "./media.js"
import { makeRequestMetrics, matchOperationsPath, type OperationsPath, serveOperations } from "./operations.js"
import { answerClientError } from "./transport-errors.js"
import { carriesAllowGet } from "./request-context.js"
import { type RequestLogEntry, RequestLogSink } from "./request-log.js"
import {
  acceptCallerRequestId,
  matchRoute,
  parseQuery,
  type RequestTarget,
  type RouteMatch,
  splitRequestTarget
} from "./routing.js"
import { PublicHttpApi } from "../api/definition.js"

export interface PublicHttpAppService {
  /** The whole HTTP surface as one app that never fails: every outcome is an exact response. */
  readonly app: HttpApp.Default<never, HttpRouter.HttpRouter.DefaultServices>
  /**
   * Serves a GET of one of the five operations directly on Node, with the answer `app` would
   * give, and returns true; returns false, touching nothing, for any other request.
   */
  readonly serveOnNode: (request: IncomingMessage, response: ServerResponse) => boolean
}

export class PublicHttpApp extends Context.Tag("@clinical-api/http-adapter/PublicHttpApp")<
  PublicHttpApp,
  PublicHttpAppService
>() {}

const newRequestId = () => `req_${randomUUID().replaceAll("-", "")}`

const refusal = (reasonCode: PublicApiError["reasonCode"], detail?: string) =>
  new PublicApiError({ reasonCode, field: null, ...(detail === undefined ? {} : { detail }) })

/**
 * Anything the platform or a handler lets escape: the router's `RouteNotFound` (a path that
 * matched our templates but not the router cannot happen, but is still a 404), otherwise the
 * contract's 503 (docs/behaviour.md: never a 500). Only the class of a defect is logged, never its
 * message, which may quote data.
 */
const recover = (cause: Cause.Cause<unknown>): PublicApiError => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure) && typeof failure.value === "object" && failure.value !== null &&
    "_tag" in failure.value && failure.value._tag === "RouteNotFound") {
    return refusal("route_not_found")
  }
  if (Option.isSome(failure) && Cause.isTimeoutException(failure.value)) {
    return refusal("digest_key_unavailable", "request deadline exceeded")
  }
  if (Cause.isInterruptedOnly(cause)) return refusal("digest_key_unavailable", "interrupted")
  const squashed = Cause.squash(cause)
  const kind = squashed instanceof Error ? squashed.name : typeof squashed
  return refusal("digest_key_unavailable", `unexpected ${Cause.isDie(cause) ? "defect" : "failure"}: ${kind}`)
}

/**
 * A JSON answer the app wrote itself: an operation's body, or the contract's four-field error
 * body (section 7) with the catalogue's status, and `Allow: GET` on a 405.
 */
interface JsonReply {
  readonly _tag: "Json"
  readonly status: number
  readonly body: string
  readonly allowGet: boolean
}

/** What an outcome answers: a JSON reply, or a response the platform built (documentation, media, operations). */
type Reply = JsonReply | HttpServerResponse.HttpServerResponse

const isJsonReply = (reply: Reply): reply is JsonReply => "_tag" in reply && reply._tag === "Json"

/** An answer and the headers every answer carries; each server writes them its own way. */
interface Answer {
  readonly reply: Reply
  readonly headers: CommonHeaders
}

interface Outcome {
  readonly reply: Reply
  readonly reasonCode: string | null
  readonly detail: string | null
  readonly organizationId: string | null
}

const refused = (error: PublicApiError): Outcome => ({
  reply: {
    _tag: "Json",
    status: error.status,
    body: JSON.stringify(error.toResponse()),
    allowGet: carriesAllowGet(error)
  },
  reasonCode: error.reasonCode,
  detail: error.detail ?? null,
  organizationId: null
})

const ALLOWED_METHODS: ReadonlySet<string> = new Set(["GET", "HEAD"])

/** The longest an API request may take before it is answered 503 (docs/operations.md, "Limits"). */
export const REQUEST_DEADLINE = Duration.seconds(10)

/** The request deadline in milliseconds, for the fast path's timer. */
const REQUEST_DEADLINE_MS = Duration.toMillis(REQUEST_DEADLINE)

/**
 * On a fiber the platform runs: a store call that never settles (postgres.js can leave a query
 * queued for ever when its connections fail while it waits) must not hold the request, so past
 * the deadline the answer is the 503 and the stuck work is interrupted. (The server runs the
 * app uninterruptibly, so the deadline's region is made interruptible here.) The Node fast path
 * bounds its fiber with a timer instead (`serveOnNode`).
 */
const deadlineByRace = <A, E>(useCase: Effect.Effect<A, E>): Effect.Effect<A, E | Cause.TimeoutException> =>
  useCase.pipe(Effect.timeout(REQUEST_DEADLINE), Effect.interruptible)

/**
 * The use case of a matched operation, with its path parameters as the router read them,
 * answering its body's JSON text, made in the read's unit of work (`PublicUseCase`).
 *
 * The five operations are served straight from the domain: the body is the presenter's value
 * as JSON (the resource schemas' encoded form: their one transformation, Timestamp, encodes a
 * Date as `toISOString()`, which is what JSON.stringify writes; `present.test.ts` holds the
 * two equal). The platform router and the HttpApi handlers would decode and re-encode every
 * body through Schema and run a handful of fibers per request for nothing the contract needs;
 * the HttpApi definition stays the source of the OpenAPI document and the typed client. The
 * Dates are written as text first (`jsonText`): a Date sends `JSON.stringify` down its slow
 * path, which took 45% of the CPU of a list page over an in-memory store; and what the store
 * keeps as JSON text (a transcript's turns) is written as it is.
 */
const useCaseOf = (
  api: Context.Tag.Service<PublicApi>,
  operationId: OperationId,
  params: RouteMatch["params"],
  request: PublicRequest
): Effect.Effect<string, PublicApiError> => {
  const encounterId = params.encounter_id ?? ""
  const documentId = params.document_id ?? ""
  switch (operationId) {
    case "listPublicEncounters":
      return api.listPublicEncounters(request, jsonText)
    case "getPublicEncounter":
      return api.getPublicEncounter(request, { encounterId }, jsonText)
    case "getPublicDocument":
      return api.getPublicDocument(request, { encounterId, documentId }, jsonText)
    case "getPublicDocumentTranscript":
      return api.getPublicDocumentTranscript(request, { encounterId, documentId }, jsonText)
    case "getPublicDocumentAudio":
      return api.getPublicDocumentAudio(request, { encounterId, documentId }, jsonText)
  }
}

const jsonReply = (body: string): JsonReply => ({
  _tag: "Json",
  status: 200,
  body,
  allowGet: false
})

const JSON_CONTENT_TYPE = "application/json"

/** The response headers every answer carries. */
type CommonHeaders = {
  readonly "cache-control": string
  readonly "x-request-id": string
}

/** A reply as the platform's response, for the platform's handler. */
const platformResponse = (reply: Reply, headers: CommonHeaders): HttpServerResponse.HttpServerResponse =>
  isJsonReply(reply)
    ? HttpServerResponse.text(reply.body, {
      status: reply.status,
      contentType: JSON_CONTENT_TYPE,
      headers: reply.allowGet ? { allow: "GET", ...headers } : headers
    })
    : HttpServerResponse.setHeaders(reply, headers)

/** What `answer` reads of a request: the platform's request and Node's both have this shape. */
interface RequestView {
  readonly method: string
  readonly url: string
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
}

/** A header's value; Node gives an array only for `set-cookie`, which no request needs. */
const firstHeader = (value: string | ReadonlyArray<string> | undefined): string | undefined =>
  typeof value === "string" || value === undefined ? value : value[0]

/** Where a request's target leads, read once per request (the fast path decides on it, `answer` serves it). */
interface Routed {
  readonly rawQuery: RequestTarget["rawQuery"]
  readonly operationsPath: OperationsPath | undefined
  readonly mediaToken: string | undefined
  readonly match: RouteMatch | undefined
}

type OtherTarget =
  | { readonly _tag: "Operations"; readonly path: OperationsPath }
  | { readonly _tag: "Media"; readonly token: string }
  | { readonly _tag: "Documentation"; readonly match: RouteMatch }

const answered = (response: HttpServerResponse.HttpServerResponse): Outcome => ({
  reply: response,
  reasonCode: null,
  detail: null,
  organizationId: null
})

/** The outcome of a use case's exit, with the organization of the caller it authorized, if any. */
const outcomeOf = (served: Exit.Exit<string, unknown>, caller: Caller | null): Outcome => {
  const organizationId = caller === null ? null : caller.organizationId
  if (Exit.isSuccess(served)) return { reply: jsonReply(served.value), reasonCode: null, detail: null, organizationId }
  const failure = Cause.failureOption(served.cause)
  const error = Option.isSome(failure) && failure.value instanceof PublicApiError ? failure.value : recover(served.cause)
  return { ...refused(error), organizationId }
}

/** How an answer started: its request id and the time, for its log line. */
interface Begun {
  readonly requestId: string
  readonly startedAt: number
}

const makePublicHttpApp = (
  api: Context.Tag.Service<PublicApi>,
  inner: HttpApp.Default<unknown, HttpRouter.HttpRouter.DefaultServices>,
  sink: Context.Tag.Service<RequestLogSink>,
  media: Option.Option<Context.Tag.Service<EmbeddedAudioObjects>>,
  database: Option.Option<PgClientService>,
  runFork: <A, E>(effect: Effect.Effect<A, E>) => Fiber.RuntimeFiber<A, E>
): PublicHttpAppService => {
  const metrics = makeRequestMetrics()

  // The request's generator functions are made once, here: one made per request would get a V8
  // map of its own in the old generation, which keeps the function and all it closes over (the
  // request, its rows, its response) alive through every scavenge until the next full
  // collection.
  const operationOutcome = Effect.fnUntraced(function*(
    operationId: OperationId,
    match: RouteMatch,
    request: PublicRequest
  ) {
    const served = yield* Effect.exit(deadlineByRace(useCaseOf(api, operationId, match.params, request)))
    return outcomeOf(served, yield* FiberRef.get(currentCaller))
  })

  /** `/openapi.json` and `/docs`, served by the platform router. */
  const serveDocumentation = (
    request: HttpServerRequest.HttpServerRequest,
    match: RouteMatch
  ): Effect.Effect<Outcome, never, HttpRouter.HttpRouter.DefaultServices> =>
    inner.pipe(
      Effect.provideService(HttpServerRequest.HttpServerRequest, request.modify({ url: match.routerPath })),
      Effect.map((response): Outcome => ({ reply: response, reasonCode: null, detail: null, organizationId: null })),
      Effect.catchAllCause((cause) => Effect.succeed(refused(recover(cause))))
    )

  const routeOf = (url: string): Routed => {
    const { pathname, rawQuery } = splitRequestTarget(url)
    const operationsPath = matchOperationsPath(pathname)
    const mediaToken = Option.isSome(media) ? matchMediaPath(pathname) : undefined
    const match = mediaToken === undefined ? matchRoute(pathname) : undefined
    return { rawQuery, operationsPath, mediaToken, match }
  }

  /** What starts every answer: its request id (the caller's, if acceptable), its start time, the metrics' count. */
  const begin = (view: RequestView): Begun => {
    const startedAt = performance.now()
    const requestId = acceptCallerRequestId(firstHeader(view.headers["x-request-id"])) ?? newRequestId()
    metrics.started()
    return { startedAt, requestId }
  }

  const publicRequest = (view: RequestView, routed: Routed, requestId: string): PublicRequest => ({
    requestId: RequestId.make(requestId),
    authorization: firstHeader(view.headers.authorization),
    query: parseQuery(routed.rawQuery)
  })

  /**
   * What ends every answer, on both servers: the log line, the metrics, and the headers every
   * answer carries. (`metrics.finished` is the caller's, once the answer is written or lost.)
   */
  const conclude = (view: RequestView, routed: Routed, begun: Begun, outcome: Outcome): Answer => {
    const { match, mediaToken, operationsPath } = routed
    const reply = outcome.reply
    const status = reply.status
    const entry: RequestLogEntry = {
      level: status >= 500 ? "error" : status >= 400 ? "warn" : "info",
      message: "http_request",
      time: new Date().toISOString(),
      request_id: begun.requestId,
      method: view.method,
      route: operationsPath ?? (mediaToken === undefined ? match?.route.template ?? null : MEDIA_ROUTE_TEMPLATE),
      operation_id: match?.route.operationId ?? null,
      status,
      reason_code: outcome.reasonCode,
      organization_id: outcome.organizationId,
      duration_ms: Math.round((performance.now() - begun.startedAt) * 1000) / 1000,
      detail: outcome.detail
    }
    sink.write(JSON.stringify(entry))
    metrics.observe(entry.operation_id ?? entry.route ?? "unmatched", entry.status, entry.duration_ms / 1000)
    return { reply, headers: { "cache-control": "no-store", "x-request-id": begun.requestId } }
  }

  /**
   * The platform's answer to one request, routed by `routeOf`. `serveOther` answers what only
   * the platform can (documentation, media, operations endpoints).
   */
  const answer = <R>(
    view: RequestView,
    routed: Routed,
    serveOther: (target: OtherTarget) => Effect.Effect<Outcome, never, R>
  ): Effect.Effect<Answer, never, R> =>
    Effect.suspend(() => {
      const begun = begin(view)
      return Effect.map(outcomeFor(view, routed, begun, serveOther), (outcome) => conclude(view, routed, begun, outcome))
    }).pipe(Effect.ensuring(Effect.sync(metrics.finished)))

  const outcomeFor = <R>(
    view: RequestView,
    routed: Routed,
    begun: Begun,
    serveOther: (target: OtherTarget) => Effect.Effect<Outcome, never, R>
  ): Effect.Effect<Outcome, never, R> => {
    const { match, mediaToken, operationsPath } = routed
    if (operationsPath !== undefined) {
      return ALLOWED_METHODS.has(view.method)
        ? serveOther({ _tag: "Operations", path: operationsPath })
        : Effect.succeed(refused(refusal("method_not_allowed")))
    }
    if (mediaToken !== undefined) {
      return ALLOWED_METHODS.has(view.method)
        ? serveOther({ _tag: "Media", token: mediaToken })
        : Effect.succeed(refused(refusal("method_not_allowed")))
    }
    if (match === undefined) return Effect.succeed(refused(refusal("route_not_found")))
    if (!ALLOWED_METHODS.has(view.method)) return Effect.succeed(refused(refusal("method_not_allowed")))
    if (match.route.operationId === null) return serveOther({ _tag: "Documentation", match })
    // Every request runs on a fiber of its own, which starts with no caller: the use case sets it.
    return operationOutcome(match.route.operationId, match, publicRequest(view, routed, begun.requestId)).pipe(
      Effect.catchAllCause((cause) => Effect.succeed(refused(recover(cause))))
    )
  }

  const app: PublicHttpAppService["app"] = Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
    Effect.map(answer(request, routeOf(request.url), (target) => {
      switch (target._tag) {
        case "Operations":
          return Effect.map(serveOperations(target.path, metrics, database), (response) => answered(response))
        case "Media":
          return Option.isSome(media)
            ? Effect.map(serveMedia(media.value, request, target.token), (served): Outcome => ({
              reply: served.response,
              reasonCode: served.reasonCode,
              detail: served.detail,
              organizationId: null
            }))
            : Effect.succeed(refused(refusal("route_not_found")))
        case "Documentation":
          return serveDocumentation(request, target.match)
      }
    }), ({ headers, reply }) => platformResponse(reply, headers)))

  /**
   * A GET of one of the five operations, served straight on Node: the same answer as the
   * platform app gives (the same outcome, headers, log line and metrics), without the platform's
   * per-request request and response wrappers, server span and response pipeline (together
   * about as much CPU as the use case itself). Only the use case runs on a fiber; the deadline
   * is a timer that interrupts it (`Effect.timeout` races two more fibers: about 90 µs of CPU per
   * request at eight in flight, a tenth of an encounter detail, against about 1 µs for a timer),
   * and the answer is written by the fiber's exit observer. Anything else is left to the
   * platform: the caller passes it on when this returns false.
   * (docs/decisions/0005-node-fast-path.md)
   */
  const serveOnNode = (nodeRequest: IncomingMessage, nodeResponse: ServerResponse): boolean => {
    const url = nodeRequest.url ?? "/"
    if (nodeRequest.method !== "GET") return false
    const routed = routeOf(url)
    if (routed.operationsPath !== undefined || routed.mediaToken !== undefined) return false
    const match = routed.match
    if (match === undefined || match.route.operationId === null) return false
    const view: RequestView = { method: "GET", url, headers: nodeRequest.headers }
    const begun = begin(view)
    const fiber = runFork(useCaseOf(api, match.route.operationId, match.params, publicRequest(view, routed, begun.requestId)))
    let expired = false
    const deadline = setTimeout(() => {
      expired = true
      fiber.unsafeInterruptAsFork(fiber.id())
    }, REQUEST_DEADLINE_MS)
    nodeResponse.on("close", () => {
      if (!nodeResponse.writableEnded) fiber.unsafeInterruptAsFork(fiber.id())
    })
    fiber.addObserver((exit) => {
      clearTimeout(deadline)
      try {
        const served = expired && Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)
          ? Exit.fail(new Cause.TimeoutException(`exceeded ${Duration.format(REQUEST_DEADLINE)}`))
          : exit
        const { headers, reply } = conclude(view, routed, begun, outcomeOf(served, fiber.getFiberRef(currentCaller)))
        if (nodeResponse.writableEnded) return
        // Only JSON replies come of an operation; the headers as the platform writes them for a
        // JSON text body, in its order.
        if (!isJsonReply(reply)) throw new Error("an operation answered with a platform response")
        nodeResponse.writeHead(reply.status, {
          "content-type": JSON_CONTENT_TYPE,
          "content-length": Buffer.byteLength(reply.body),
          ...(reply.allowGet ? { allow: "GET" } : {}),
          ...headers
        })
        nodeResponse.end(reply.body)
      } catch {
        // A response Node refuses to write must not leave the client waiting for ever.
        nodeResponse.destroy()
      } finally {
        metrics.finished()
      }
    })
    return true
  }

  return { app, serveOnNode }
}

const ScalarConfig = { withDefaultFonts: false, hideTestRequestButton: true, defaultOpenAllTags: true } as const

/** The `HttpApi`, its handlers, `/openapi.json` and `/docs`, on the platform router. */
const RoutesLive = Layer.mergeAll(
  HttpApiBuilder.middlewareOpenApi({ path: "/openapi.json" }),
  HttpApiScalar.layer({ path: "/docs", scalar: ScalarConfig })
).pipe(Layer.provideMerge(HttpApiBuilder.api(PublicHttpApi).pipe(Layer.provide(PublicApiHandlersLive))))

/**
 * The HTTP app of the public API, ready to serve: requires the domain's `PublicApi` and a
 * request-log sink. When the storage's `EmbeddedAudioObjects` is in the context it is built
 * in, the app also serves the signed media URLs at `/media/{token}` (see media.ts); without
 * it that path is 404 `route_not_found` like any other unknown path.
 */
export const HttpApiRoutesLive: Layer.Layer<PublicHttpApp, never, PublicApi | RequestLogSink> = Layer.effect(
  PublicHttpApp,
  Effect.gen(function*() {
    const api = yield* PublicApi
    const inner = yield* HttpApiBuilder.httpApp
    const sink = yield* RequestLogSink
    const media = yield* Effect.serviceOption(EmbeddedAudioObjects)
    // The operations endpoints probe the database when the app is built over one.
    const database = yield* Effect.serviceOption(PgClient)
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    return makePublicHttpApp(api, inner, sink, media, database, runFork)
  })
).pipe(
  Layer.provide(RoutesLive),
  Layer.provide([HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer])
)

/**
 * Request line plus headers, in bytes (Node's default, stated so it is a decision): a larger
 * request is answered 431 by `answerClientError` before it reaches the API.
 */
export const MAX_HEADER_BYTES = 16 * 1024

export interface HttpServerOptions {
  readonly port: number
  readonly host?: string | undefined
  /** How long a shutdown waits for requests in flight before it closes their connections (default 10 s). */
  readonly shutdownGraceMs?: number | undefined
}

/**
 * Serves `PublicHttpApp` on Node, with a graceful shutdown. When the layer's scope closes the
 * server keeps serving, answering with `Connection: close`, until no request is in flight and
 * none has arrived for a short quiet period: a request whose bytes are still unread in a
 * socket buffer (a busy event loop) counts as idle to Node and would otherwise be cut off.
 * Then it stops listening and closes the connections (all of them once the grace period is
 * over). Only then is the handler detached and the layers below (the store) released.
 */
export const makeHttpServerLayer = (
  options: HttpServerOptions
): Layer.Layer<HttpServer.HttpServer, HttpServerError.ServeError, PublicHttpApp> =>
  Layer.unwrapEffect(Effect.sync(() => {
    const server = createServer({ maxHeaderSize: MAX_HEADER_BYTES })
    server.on("clientError", answerClientError)
    const graceMs = options.shutdownGraceMs ?? 10_000
    const quietMs = Math.min(250, graceMs)
    // Built after `serve`, so released before it: the drain runs while the handler is attached.
    // eslint-disable-next-line no-restricted-syntax -- made once, when the layer is built
    const drainOnShutdown = Layer.scopedDiscard(Effect.gen(function*() {
      let inFlight = 0
      let lastArrival = 0
      let draining = false
      server.prependListener("request", (_request, response) => {
        inFlight++
        lastArrival = Date.now()
        if (draining && !response.headersSent) response.setHeader("connection", "close")
        response.once("close", () => inFlight--)
      })
      yield* Effect.addFinalizer(() =>
        Effect.async<void>((resume) => {
          draining = true
          const started = Date.now()
          lastArrival = Math.max(lastArrival, started)
          const poll = setInterval(() => {
            const now = Date.now()
            const settled = inFlight === 0 && now - lastArrival >= quietMs
            if (!settled && now - started < graceMs) return
            clearInterval(poll)
            server.close(() => resume(Effect.void))
            server.closeAllConnections()
          }, 10)
        })
      )
    }))
    const serve = Layer.unwrapEffect(Effect.map(PublicHttpApp, (app) => HttpServer.serve(app.app)))
    return drainOnShutdown.pipe(
      Layer.provideMerge(serve),
      Layer.provideMerge(Layer.scoped(HttpServer.HttpServer, listen(server, options))),
      Layer.provideMerge(NodeHttpServer.layerContext)
    )
  }))

/**
 * `NodeHttpServer.make` without WebSockets, and with the five operations answered on Node
 * first (`PublicHttpApp.serveOnNode`); every other request goes to the platform's handler.
 */
const listen = (server: Server, options: HttpServerOptions) =>
  // eslint-disable-next-line no-restricted-syntax -- made once per server
  Effect.gen(function*() {
    yield* Effect.acquireRelease(
      Effect.async<void, HttpServerError.ServeError>((resume) => {
        const onError = (cause: unknown) => resume(Effect.fail(new HttpServerError.ServeError({ cause })))
        server.once("error", onError)
        server.listen({ port: options.port, ...(options.host === undefined ? {} : { host: options.host }) }, () => {
          server.off("error", onError)
          resume(Effect.void)
        })
      }),
      () => Effect.async<void>((resume) => {
        if (!server.listening) return resume(Effect.void)
        server.close(() => resume(Effect.void))
      })
    )
    const address = server.address()
    const { serveOnNode } = yield* PublicHttpApp
    return HttpServer.make({
      address: typeof address === "string" || address === null
        ? { _tag: "UnixAddress", path: String(address) }
        : { _tag: "TcpAddress", hostname: address.address === "::" ? "0.0.0.0" : address.address, port: address.port },
      serve: (app, middleware) =>
        // eslint-disable-next-line no-restricted-syntax -- made once per server
        Effect.gen(function*() {
          const platformHandler = yield* (middleware === undefined
            ? NodeHttpServer.makeHandler(app)
            : NodeHttpServer.makeHandler(app, middleware))
          const handler = (request: IncomingMessage, response: ServerResponse) => {
            if (!serveOnNode(request, response)) platformHandler(request, response)
          }
          server.on("request", handler)
          yield* Effect.addFinalizer(() => Effect.sync(() => server.off("request", handler)))
        })
    })
  })
