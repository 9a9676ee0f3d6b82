import { createServer } from "node:http"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer, Option } from "effect"
import { HttpRouter, HttpServer, HttpServerResponse } from "effect/http"
import { HttpApiBuilder, HttpApiScalar } from "effect/http-api"
import { NetAddress } from "effect/net"
import { publishedAt } from "../api/definition.js"
import { docsPageOptions, type Publication } from "./docs-page.js"
import { apiRoutePaths, ExchangeLive, NoteRoute, refuseOtherMethods, routerConfig } from "./exchange.js"
import { PublicApiHandlersLive } from "./handlers.js"
import { MediaRoutes } from "./media.js"
import { OperationsRoutes, operationsPaths, RequestMetricsLive, ServerDraining } from "./operations.js"
import { answerClientError } from "./transport-errors.js"

const OPENAPI_PATH = "/openapi.json"
const DOCS_PATH = "/docs"
const ROOT_PATH = "/"

/** Someone who opens the service's bare address in a browser lands on the docs page. */
const RootRoute = HttpRouter.add("GET", ROOT_PATH, HttpServerResponse.redirect(DOCS_PATH, { status: 302 }))

/** The URL a client on this machine reaches the server at (a wildcard bind is reached on loopback). */
export const baseUrlOf = (address: NetAddress.SocketAddress): string => {
  if (address._tag === "UnixPathAddress") return `unix:${address.path}`
  const host = NetAddress.isUnspecified(address.address) ? "127.0.0.1" : NetAddress.formatIp(address.address)
  return `http://${NetAddress.formatUrlHostString(host)}:${address.port}`
}

/**
 * Every route of the service on the one platform router: the HttpApi's five operations and
 * `/openapi.json` (whose server is the service's public URL), the docs page (and `/`, a
 * redirect to it), the operations endpoints, the embedded media, the 405s of each path, and the
 * exchange around them all (exchange.ts).
 */
export const makeRoutes = (publication: Publication) =>
  // eslint-disable-next-line no-restricted-syntax -- made once, when the layer is built
  Layer.unwrap(Effect.gen(function*() {
    const { address } = yield* HttpServer.HttpServer
    const api = publishedAt(Option.getOrElse(publication.publicBaseUrl, () => baseUrlOf(address)))
    return Layer.mergeAll(
      HttpApiBuilder.layer(api, { openapiPath: OPENAPI_PATH }).pipe(Layer.provide(PublicApiHandlersLive)),
      HttpApiScalar.layer(api, { path: DOCS_PATH, scalar: docsPageOptions(publication) }),
      OperationsRoutes,
      MediaRoutes,
      RootRoute,
      refuseOtherMethods([...apiRoutePaths, OPENAPI_PATH, DOCS_PATH, ROOT_PATH, ...operationsPaths])
    )
  })).pipe(
    Layer.provide(NoteRoute.layer),
    Layer.provide(ExchangeLive)
  )

/**
 * Request line plus headers, in bytes (Node's default, stated so it is a decision): a larger
 * request is answered 431 by `answerClientError` before it reaches the router.
 */
export const MAX_HEADER_BYTES = 16 * 1024

const isOperationsProbe = (url: string | undefined): boolean => {
  const path = url?.split("?", 1)[0] ?? ""
  return (operationsPaths as ReadonlyArray<string>).includes(path)
}

export interface HttpServerOptions {
  readonly port: number
  readonly host?: string | undefined
  /** How long a shutdown waits for requests in flight before it closes their connections (default 10 s). */
  readonly shutdownGraceMs?: number | undefined
  /** What `/openapi.json` and `/docs` say of the service. */
  readonly publication: Publication
}

/**
 * The service's routes served on Node with a graceful shutdown. When the layer's scope closes
 * `/readyz` answers 503 `draining`, so a load balancer checking it stops sending requests, and
 * the server keeps serving, answering with `Connection: close`, until no request is in flight
 * and none has arrived for a short quiet period: a request whose bytes are still unread in a
 * socket buffer (a busy event loop) counts as idle to Node and would otherwise be cut off.
 * The balancer's own checks (`/healthz`, `/readyz`, `/metrics`) do not count as arrivals, or a
 * balancer checking more often than the quiet period would hold the drain to its grace period.
 * Then it stops listening and closes the connections (all of them once the grace period is
 * over). Only then is the handler detached and the layers below (the store) released.
 */
export const makeHttpServerLayer = (options: HttpServerOptions) =>
  Layer.unwrap(Effect.sync(() => {
    const server = createServer({ maxHeaderSize: MAX_HEADER_BYTES })
    server.on("clientError", answerClientError)
    const graceMs = options.shutdownGraceMs ?? 10_000
    const quietMs = Math.min(250, graceMs)
    let draining = false
    // Built after `serve`, so released before it: the drain runs while the handler is attached.
    // eslint-disable-next-line no-restricted-syntax -- made once, when the layer is built
    const drainOnShutdown = Layer.effectDiscard(Effect.gen(function*() {
      let inFlight = 0
      let lastArrival = 0
      server.prependListener("request", (request, response) => {
        inFlight++
        if (!isOperationsProbe(request.url)) lastArrival = Date.now()
        if (draining && !response.headersSent) response.setHeader("connection", "close")
        response.once("close", () => inFlight--)
      })
      yield* Effect.addFinalizer(() =>
        Effect.callback<void>((resume) => {
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
    const routes = makeRoutes(options.publication).pipe(Layer.provide(Layer.succeed(ServerDraining, { isDraining: () => draining })))
    const serve = HttpRouter.serve(routes, { routerConfig, disableLogger: true, disableListenLog: true })
    return drainOnShutdown.pipe(
      Layer.provide(serve),
      Layer.provide(RequestMetricsLive),
      Layer.provideMerge(NodeHttpServer.layerServer(() => server, {
        port: options.port,
        ...(options.host === undefined ? {} : { host: options.host }),
        disablePreemptiveShutdown: true
      })),
      Layer.provide(NodeHttpServer.layerHttpServices)
    )
  }))

export type HttpServerLayer = ReturnType<typeof makeHttpServerLayer>
export type { HttpServer }
