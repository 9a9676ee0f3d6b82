import { randomUUID } from "node:crypto"
import { METHODS } from "node:http"
import { formatTimestamp, type OperationId, PublicApiError, type QueryPairs, type ReasonCode } from "@clinical-api/domain"
import { Cause, Context, Duration, Effect, Layer, Option, type Types } from "effect"
import { HttpRouter, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApi } from "effect/http-api"
import { refusalBody } from "../api/refusals.js"
import { PublicHttpApi } from "../api/definition.js"
import { RequestMetrics } from "./operations.js"
import { type RequestLogEntry, RequestLogSink } from "./request-log.js"

/**
 * The contract's exact wire behaviour where the platform's defaults differ, as one global
 * middleware of the platform router (the exchange of one request) and the routes' 405s:
 *
 * - every request gets the service's own id (`req_` and a new uuid), which its disclosure events
 *   record; every answer carries `Cache-Control: no-store` and `X-Request-Id` (the caller's when
 *   it is 1..128 characters of `[A-Za-z0-9._:-]`, kept beside the service's, else the service's);
 * - the router sees the canonical request target: each path segment percent-decoded once (a
 *   segment that is not valid percent-encoding is taken as written) and re-encoded, so the
 *   router's own leniencies (`;` as a query separator, a second decoding pass, a maximum
 *   parameter length) cannot change an id; a target that is not a path, or has an empty
 *   segment, matches no route;
 * - outside the routes, 404 `route_not_found`, and 405 `method_not_allowed` with `Allow: GET`
 *   for any method but GET and HEAD on a route, each with the four-field body;
 * - one deadline per request (`REQUEST_DEADLINE`), past which the answer is the 503 and the
 *   work is interrupted; a defect or any other escape is the 503 too, never a platform body;
 * - one log line per request (`RequestLogSink`) and the request metrics.
 */

/** The longest a request may take before it is answered 503 (docs/operations.md, "Limits"). */
export const REQUEST_DEADLINE = Duration.seconds(10)
const DEADLINE_MS = Duration.toMillis(REQUEST_DEADLINE)

/** What the exchange holds of one request, and what its route tells the log line. */
export interface ExchangeRecord {
  /** The service's own id of the request, always new. */
  readonly requestId: string
  /** The caller's valid `X-Request-Id`, or null. */
  readonly callerRequestId: string | null
  /** What `X-Request-Id` and the log line carry: the caller's id when it sent one, else the service's. */
  readonly echoedRequestId: string
  /** The raw query after the first `?`, or `undefined` when there is none. */
  readonly rawQuery: string | undefined
  /** The matched route's path as the router holds it (`/external/v1/encounters/:encounter_id`). */
  routePath: string | null
  /** The organization of the caller the handler authorized, once it did. */
  organizationId: string | null
  /** The reason code of the refusal answered, for the log line. */
  reasonCode: ReasonCode | null
  /** Operator detail for the log line (a refusal's `detail`, which never reaches the wire). */
  detail: string | null
}

export class Exchange extends Context.Service<Exchange, ExchangeRecord>()("@clinical-api/http-adapter/Exchange") {}

/** Notes the refusal a route answers with, for the log line. */
export const noteRefusal = (exchange: ExchangeRecord, error: PublicApiError): void => {
  exchange.reasonCode = error.reasonCode
  exchange.detail = error.detail ?? null
}

const CALLER_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

/** The caller's `X-Request-Id` when it is 1..128 characters of `[A-Za-z0-9._:-]`, else none. */
export const acceptCallerRequestId = (header: string | undefined): string | undefined =>
  header !== undefined && CALLER_REQUEST_ID.test(header) ? header : undefined

const newRequestId = () => `req_${randomUUID().replaceAll("-", "")}`

/**
 * The query as ordered (key, value) pairs after percent-decoding, repeated keys kept
 * (`application/x-www-form-urlencoded` as browsers and URLSearchParams read it: `+` is a space).
 */
export const parseQuery = (rawQuery: string | undefined): QueryPairs =>
  rawQuery === undefined ? [] : [...new URLSearchParams(rawQuery)]

/** A segment as the client meant it; one that is not valid percent-encoding is taken as written. */
const decodeSegment = (segment: string): string => {
  try {
    return decodeURIComponent(segment)
  } catch {
    return segment
  }
}

export interface RequestTarget {
  /** The path the router is given: every segment decoded once, then encoded by `encodeURIComponent`. */
  readonly path: string
  readonly rawQuery: string | undefined
}

/**
 * The canonical form of a request target, or `undefined` when it can match no route (not a
 * path, or an empty segment other than the root's: a trailing or doubled slash). The router decodes the canonical
 * form back to exactly the decoded segments.
 */
export const canonicalTarget = (url: string): RequestTarget | undefined => {
  const queryStart = url.indexOf("?")
  const pathname = queryStart === -1 ? url : url.slice(0, queryStart)
  const rawQuery = queryStart === -1 ? undefined : url.slice(queryStart + 1)
  if (!pathname.startsWith("/")) return undefined
  if (pathname === "/") return { path: "/", rawQuery }
  const segments = pathname.slice(1).split("/")
  let path = ""
  for (const segment of segments) {
    if (segment === "") return undefined
    path += `/${encodeURIComponent(decodeSegment(segment))}`
  }
  return { path, rawQuery }
}

/** What the router is configured with: exact paths, no length limit of its own (the header limit bounds a path). */
export const routerConfig = {
  caseSensitive: true,
  ignoreTrailingSlash: false,
  ignoreDuplicateSlashes: false,
  maxParamLength: Number.MAX_SAFE_INTEGER
} as const

/** The operation of each route of the HttpApi, by the route's path as the router holds it. */
export const operationsByRoutePath: ReadonlyMap<string, OperationId> = (() => {
  const byPath = new Map<string, OperationId>()
  HttpApi.reflect(PublicHttpApi, {
    onGroup: () => undefined,
    onEndpoint: ({ endpoint }) => void byPath.set(endpoint.path, endpoint.identifier as OperationId)
  })
  return byPath
})()

/** Every path of the HttpApi's routes, for their 405s. */
export const apiRoutePaths: ReadonlyArray<HttpRouter.PathInput> = [...operationsByRoutePath.keys()] as Array<HttpRouter.PathInput>

const routeTemplates = new Map<string, string>()

/** `/external/v1/encounters/{encounter_id}` for the router's `/external/v1/encounters/:encounter_id`. */
const routeTemplate = (routePath: string): string => {
  let template = routeTemplates.get(routePath)
  if (template === undefined) {
    template = routePath.replace(/:(\w+)/g, "{$1}")
    routeTemplates.set(routePath, template)
  }
  return template
}

const JSON_CONTENT_TYPE = "application/json"

/** A refusal's four-field body with its catalogue status, and `Allow: GET` on a 405. */
export const refusalResponse = (error: PublicApiError): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.text(JSON.stringify(refusalBody(error)), {
    status: error.status,
    contentType: JSON_CONTENT_TYPE,
    headers: error.reasonCode === "method_not_allowed" ? { allow: "GET" } : undefined
  })

const refusal = (reasonCode: ReasonCode, detail?: string) =>
  new PublicApiError({ reasonCode, field: null, ...(detail === undefined ? {} : { detail }) })

const isRouteNotFound = (error: unknown): boolean =>
  HttpServerError.isHttpServerError(error) && error.reason._tag === "RouteNotFound"

/**
 * What escaped a route as the contract's answer: a path no route matches is 404
 * `route_not_found`; anything else (the deadline, a defect, an interruption) the contract's
 * 503 (docs/behaviour.md: never a 500). Only the class of a defect is logged, never its
 * message, which may quote data.
 */
const recover = (cause: Cause.Cause<unknown>, pastDeadline: boolean): PublicApiError => {
  const failure = Cause.findErrorOption(cause)
  if (Option.isSome(failure)) {
    if (isRouteNotFound(failure.value)) return refusal("route_not_found")
    if (failure.value instanceof PublicApiError) return failure.value
  }
  if (Cause.hasInterruptsOnly(cause)) {
    return refusal("digest_key_unavailable", pastDeadline ? "request deadline exceeded" : "interrupted")
  }
  const squashed = Cause.squash(cause)
  const kind = squashed instanceof Error ? squashed.name : typeof squashed
  return refusal("digest_key_unavailable", `unexpected ${Cause.hasDies(cause) ? "defect" : "failure"}: ${kind}`)
}

/** Answers 405 on every method but GET and HEAD (HEAD is routed as GET). */
const otherMethods = METHODS.filter((method) => method !== "GET" && method !== "HEAD" && method !== "CONNECT")

const methodNotAllowed = Effect.flatMap(Effect.service(Exchange), (exchange) => {
  const error = refusal("method_not_allowed")
  noteRefusal(exchange, error)
  return Effect.succeed(refusalResponse(error))
})

/** The 405 routes of `paths`: each path's other methods. */
export const refuseOtherMethods = (paths: ReadonlyArray<HttpRouter.PathInput>) =>
  HttpRouter.addAll(paths.flatMap((path) =>
    otherMethods.map((method) => HttpRouter.route(method as HttpRouter.Route["method"], path, methodNotAllowed))
  ))

/**
 * Notes the matched route's path in the exchange, for the log line and the metrics; provided to
 * every layer that adds routes.
 */
export const NoteRoute = HttpRouter.middleware((handler) =>
  Effect.withFiber((fiber) => {
    const exchange = Context.getOrUndefined(fiber.context, Exchange)
    const route = Context.getOrUndefined(fiber.context, HttpRouter.RouteContext)
    if (exchange !== undefined && route !== undefined) exchange.routePath = route.route.path
    return handler
  })
)

/** The global middleware: every request's exchange, around the router. */
export const ExchangeLive = HttpRouter.middleware<{ provides: Exchange; handles: unknown }>()(
  Effect.gen(function*() {
    const sink = yield* RequestLogSink
    const metrics = yield* RequestMetrics

    const conclude = (
      request: HttpServerRequest.HttpServerRequest,
      exchange: ExchangeRecord,
      startedAt: number,
      response: HttpServerResponse.HttpServerResponse
    ): HttpServerResponse.HttpServerResponse => {
      const status = response.status
      const operationId = exchange.routePath === null ? null : operationsByRoutePath.get(exchange.routePath) ?? null
      const route = exchange.routePath === null ? null : routeTemplate(exchange.routePath)
      const entry: RequestLogEntry = {
        level: status >= 500 ? "error" : status >= 400 ? "warn" : "info",
        message: "http_request",
        time: formatTimestamp(new Date()),
        request_id: exchange.echoedRequestId,
        method: request.method,
        route,
        operation_id: operationId,
        status,
        reason_code: exchange.reasonCode,
        organization_id: exchange.organizationId,
        duration_ms: Math.round((performance.now() - startedAt) * 1000) / 1000,
        detail: exchange.detail
      }
      sink.write(JSON.stringify(entry))
      metrics.observe(operationId ?? route ?? "unmatched", status, entry.duration_ms / 1000)
      return HttpServerResponse.setHeaders(response, { "cache-control": "no-store", "x-request-id": exchange.echoedRequestId })
    }

    const refused = (exchange: ExchangeRecord, error: PublicApiError) => {
      noteRefusal(exchange, error)
      return refusalResponse(error)
    }

    return (routed): Effect.Effect<HttpServerResponse.HttpServerResponse, Types.unhandled> =>
      Effect.withFiber((fiber) => {
        const startedAt = performance.now()
        metrics.started()
        const request = Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest)
        const target = canonicalTarget(request.url)
        const requestId = newRequestId()
        const callerRequestId = acceptCallerRequestId(request.headers["x-request-id"]) ?? null
        const exchange: ExchangeRecord = {
          requestId,
          callerRequestId,
          echoedRequestId: callerRequestId ?? requestId,
          rawQuery: target?.rawQuery,
          routePath: null,
          organizationId: null,
          reasonCode: null,
          detail: null
        }
        if (target === undefined) {
          metrics.finished()
          return Effect.succeed(conclude(request, exchange, startedAt, refused(exchange, refusal("route_not_found"))))
        }
        // The deadline interrupts this fiber from a plain timer: `Effect.timeout` would fork the
        // route and a sleep into a race on every request.
        let pastDeadline = false
        const deadline = setTimeout(() => {
          pastDeadline = true
          fiber.interruptUnsafe(fiber.id)
        }, DEADLINE_MS)
        const pathEnd = target.rawQuery === undefined ? request.url.length : request.url.length - target.rawQuery.length - 1
        const routedRequest = target.path.length === pathEnd && request.url.startsWith(target.path)
          ? routed
          : Effect.provideService(routed, HttpServerRequest.HttpServerRequest, request.modify({ url: target.path }))
        return Effect.provideService(routedRequest, Exchange, exchange).pipe(
          Effect.onExit(() => Effect.sync(() => clearTimeout(deadline))),
          // The server runs the answer uninterruptibly; the deadline must be able to stop it.
          Effect.interruptible,
          Effect.catchCause((cause) => Effect.succeed(refused(exchange, recover(cause, pastDeadline)))),
          Effect.map((response) => {
            metrics.finished()
            return conclude(request, exchange, startedAt, response)
          })
        )
      })
  }),
  { global: true }
)

/** The router's configuration, for `HttpRouter.serve`. */
export const RouterConfigLive = Layer.succeed(HttpRouter.RouterConfig, routerConfig)
