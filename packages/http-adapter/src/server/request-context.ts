import type { PublicApiError, PublicRequest, ReasonCode } from "@clinical-api/domain"
import { HttpServerResponse } from "@effect/platform"
import { Effect, FiberRef, Option } from "effect"
import type { PathParamName } from "./routing.js"

/** What the HTTP app read of the request before routing: the handlers serve from this, not from the router. */
export interface RoutedRequest {
  readonly request: PublicRequest
  readonly params: { readonly [K in PathParamName]?: string }
}

export const currentRoutedRequest: FiberRef.FiberRef<Option.Option<RoutedRequest>> = FiberRef.unsafeMake(
  Option.none()
)

/** The refusal the response carries, for the request log. */
export interface Refusal {
  readonly reasonCode: ReasonCode
  readonly detail: string | null
}

export const currentRefusal: FiberRef.FiberRef<Option.Option<Refusal>> = FiberRef.unsafeMake(Option.none())

/** Whether a refusal carries `Allow: GET`: only the 405 does. */
export const carriesAllowGet = (error: PublicApiError): boolean => error.reasonCode === "method_not_allowed"

/** The exact four-field body of contract section 7, with the catalogue's status. */
export const errorResponse = (error: PublicApiError): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.unsafeJson(error.toResponse(), {
    status: error.status,
    headers: carriesAllowGet(error) ? { allow: "GET" } : undefined
  })

/** Answers `error` and notes it for the request log. */
export const respondWithError = (error: PublicApiError): Effect.Effect<HttpServerResponse.HttpServerResponse> =>
  Effect.as(
    FiberRef.set(currentRefusal, Option.some({ reasonCode: error.reasonCode, detail: error.detail ?? null })),
    errorResponse(error)
  )
