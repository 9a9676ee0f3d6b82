import type { OperationId, QueryPairs } from "@clinical-api/domain"

/**
 * The adapter's own reading of the request target. The platform router (find-my-way) is
 * lenient in ways the contract cannot afford: it is case-insensitive, ignores trailing and
 * duplicate slashes, cuts the path at `;`, refuses parameters longer than 100 characters and
 * decodes parameters in two passes. So the raw target is matched here, exactly, and the
 * router is only handed a canonical path (parameters replaced by a placeholder) to pick the
 * handler; the handlers take their path parameters and query from this match.
 */

export type PathParamName = "encounter_id" | "document_id"

export interface RouteTemplate {
  /** Null for the routes outside the contract (`/openapi.json`, `/docs`). */
  readonly operationId: OperationId | null
  /** The OpenAPI form, as logged. */
  readonly template: string
  readonly segments: ReadonlyArray<string | { readonly param: PathParamName }>
}

const encounters = ["external", "v1", "encounters"] as const
const encounterParam = { param: "encounter_id" } as const
const documentParam = { param: "document_id" } as const

export const routeTemplates: ReadonlyArray<RouteTemplate> = [
  { operationId: "listPublicEncounters", template: "/external/v1/encounters", segments: [...encounters] },
  {
    operationId: "getPublicEncounter",
    template: "/external/v1/encounters/{encounter_id}",
    segments: [...encounters, encounterParam]
  },
  {
    operationId: "getPublicDocument",
    template: "/external/v1/encounters/{encounter_id}/documents/{document_id}",
    segments: [...encounters, encounterParam, "documents", documentParam]
  },
  {
    operationId: "getPublicDocumentTranscript",
    template: "/external/v1/encounters/{encounter_id}/documents/{document_id}/transcript",
    segments: [...encounters, encounterParam, "documents", documentParam, "transcript"]
  },
  {
    operationId: "getPublicDocumentAudio",
    template: "/external/v1/encounters/{encounter_id}/documents/{document_id}/audio",
    segments: [...encounters, encounterParam, "documents", documentParam, "audio"]
  },
  { operationId: null, template: "/openapi.json", segments: ["openapi.json"] },
  { operationId: null, template: "/docs", segments: ["docs"] }
]

/** What the platform router sees in place of a path parameter. */
const ROUTER_PLACEHOLDER = "_"

export interface RouteMatch {
  readonly route: RouteTemplate
  readonly params: { readonly [K in PathParamName]?: string }
  /** The canonical path handed to the platform router. */
  readonly routerPath: string
}

export interface RequestTarget {
  readonly pathname: string
  /** The raw query after the first `?`, or `undefined` when there is none. */
  readonly rawQuery: string | undefined
}

export const splitRequestTarget = (url: string): RequestTarget => {
  const queryStart = url.indexOf("?")
  return queryStart === -1
    ? { pathname: url, rawQuery: undefined }
    : { pathname: url.slice(0, queryStart), rawQuery: url.slice(queryStart + 1) }
}

/** A segment as the client meant it; a segment that is not valid percent-encoding is taken as written. */
const decodeSegment = (segment: string): string => {
  try {
    return decodeURIComponent(segment)
  } catch {
    return segment
  }
}

/** The route whose template the raw path matches exactly (case-sensitive, no empty segment), if any. */
export const matchRoute = (pathname: string): RouteMatch | undefined => {
  if (!pathname.startsWith("/")) return undefined
  const segments = pathname.slice(1).split("/")
  for (const route of routeTemplates) {
    if (route.segments.length !== segments.length) continue
    const params: { [K in PathParamName]?: string } = {}
    const routerSegments: Array<string> = []
    const matches = route.segments.every((expected, index) => {
      const actual = segments[index]
      if (actual === undefined) return false
      if (typeof expected === "string") {
        routerSegments.push(expected)
        return actual === expected
      }
      if (actual === "") return false
      params[expected.param] = decodeSegment(actual)
      routerSegments.push(ROUTER_PLACEHOLDER)
      return true
    })
    if (matches) return { route, params, routerPath: `/${routerSegments.join("/")}` }
  }
  return undefined
}

/**
 * The query as ordered (key, value) pairs after percent-decoding, repeated keys kept
 * (`application/x-www-form-urlencoded` as browsers and URLSearchParams read it: `+` is a space).
 */
export const parseQuery = (rawQuery: string | undefined): QueryPairs =>
  rawQuery === undefined ? [] : [...new URLSearchParams(rawQuery)]

const CALLER_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

/** The caller's `X-Request-Id` when it is 1..128 characters of `[A-Za-z0-9._:-]`, else none. */
export const acceptCallerRequestId = (header: string | undefined): string | undefined =>
  header !== undefined && CALLER_REQUEST_ID.test(header) ? header : undefined
