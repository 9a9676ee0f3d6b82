export * from "./api/definition.js"
export { BEARER_SCHEME, finishOpenApiDocument } from "./api/openapi.js"
export * from "./api/refusals.js"
export * from "./client.js"
export {
  acceptCallerRequestId,
  canonicalTarget,
  operationsByRoutePath,
  parseQuery,
  REQUEST_DEADLINE,
  routerConfig
} from "./server/exchange.js"
export { type Publication } from "./server/docs-page.js"
export { baseUrlOf, type HttpServerOptions, makeHttpServerLayer, makeRoutes, MAX_HEADER_BYTES } from "./server/http-server.js"
export * from "./server/request-log.js"
export * from "./service.js"
