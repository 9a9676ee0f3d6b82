import type { ErrorCategory, ReasonCode, ReasonCodeOf } from "./types.js"

interface ErrorDetails {
  readonly status: number
  readonly error: ErrorCategory | null
  readonly reasonCode: ReasonCode | null
  readonly field: string | null
  readonly requestId: string | null
  readonly message: string
}

/**
 * The service answered with an error status. From the contract's error body: `error` (the
 * category), `reasonCode` (`reason_code`, the value to branch on), `message` and `field` (the
 * offending query key, else null); `requestId` is the answer's `X-Request-Id`, to quote to
 * support. An answer without the contract's body (a proxy's page, say) has `error`,
 * `reasonCode` and `field` null and a message saying what came back.
 */
export class ApiError extends Error {
  override readonly name: string = "ApiError"
  readonly status: number
  readonly error: ErrorCategory | null
  readonly reasonCode: ReasonCode | null
  readonly field: string | null
  readonly requestId: string | null

  constructor(details: ErrorDetails) {
    super(details.message)
    this.status = details.status
    this.error = details.error
    this.reasonCode = details.reasonCode
    this.field = details.field
    this.requestId = details.requestId
  }
}

/** 401: no usable API key (`missing_bearer`, `invalid_key`, `revoked_key`, `expired_key`...). */
export class AuthenticationError extends ApiError {
  override readonly name: string = "AuthenticationError"
  declare readonly reasonCode: ReasonCodeOf<401> | null
}

/** 403: the key may not read this (`missing_scope`, `route_not_allowed`, `cross_organization_denied`...). */
export class PermissionError extends ApiError {
  override readonly name: string = "PermissionError"
  declare readonly reasonCode: ReasonCodeOf<403> | null
}

/** 404: not available to your organization (`encounter_not_found`, `document_not_found`...). */
export class NotFoundError extends ApiError {
  override readonly name: string = "NotFoundError"
  declare readonly reasonCode: ReasonCodeOf<404> | "route_not_found" | null
}

/** 400 or 422: the request cannot be served as sent (`unsupported_filter`, `invalid_query`, `invalid_limit`...). */
export class InvalidRequestError extends ApiError {
  override readonly name: string = "InvalidRequestError"
  declare readonly reasonCode: ReasonCodeOf<400> | ReasonCodeOf<422> | "malformed_http_request" | null
}

/** 503: unavailable for the moment (`digest_key_unavailable`, `audio_storage_unavailable`); retry later. */
export class ServiceUnavailableError extends ApiError {
  override readonly name: string = "ServiceUnavailableError"
  declare readonly reasonCode: ReasonCodeOf<503> | null
}

/** No answer at all: the connection failed or the request was aborted. The cause is `cause`. */
export class ApiConnectionError extends Error {
  override readonly name: string = "ApiConnectionError"
}

const CATEGORIES: ReadonlySet<string> = new Set<ErrorCategory>([
  "public_api_bad_request",
  "api_key_unauthorized",
  "api_key_forbidden",
  "public_api_not_found",
  "public_api_method_not_allowed",
  "api_key_validation_failed",
  "public_api_unavailable"
])

interface ContractErrorBody {
  readonly error: ErrorCategory
  readonly reason_code: ReasonCode
  readonly message: string
  readonly field: string | null
}

/**
 * The contract's four-field body. Reason codes are not checked against a list, so a reason
 * added to the closed list later still reaches the caller as it was sent.
 */
const contractBody = (text: string): ContractErrorBody | undefined => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return undefined
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined
  const body = value as Record<string, unknown>
  const { error, reason_code, message, field } = body
  return typeof error === "string" && CATEGORIES.has(error) && typeof reason_code === "string" &&
      typeof message === "string" && (field === null || typeof field === "string")
    ? { error: error as ErrorCategory, reason_code: reason_code as ReasonCode, message, field }
    : undefined
}

const classFor = (status: number): typeof ApiError => {
  switch (status) {
    case 400:
    case 422:
      return InvalidRequestError
    case 401:
      return AuthenticationError
    case 403:
      return PermissionError
    case 404:
      return NotFoundError
    case 503:
      return ServiceUnavailableError
    default:
      return ApiError
  }
}

const excerpt = (text: string) => {
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length > 200 ? `${flat.slice(0, 200)}...` : flat
}

/** The error for a non-2xx answer: its class by status, its fields from the contract's body when there is one. */
export const errorFromResponse = (
  status: number,
  statusText: string,
  headers: { readonly get: (name: string) => string | null },
  text: string
): ApiError => {
  const requestId = headers.get("x-request-id")
  const ErrorClass = classFor(status)
  const body = contractBody(text)
  if (body !== undefined) {
    return new ErrorClass({
      status,
      error: body.error,
      reasonCode: body.reason_code,
      field: body.field,
      requestId,
      message: body.message
    })
  }
  const contentType = headers.get("content-type") ?? "no content type"
  const shown = text.length === 0 ? "an empty body" : `${contentType}: ${excerpt(text)}`
  return new ErrorClass({
    status,
    error: null,
    reasonCode: null,
    field: null,
    requestId,
    message: `HTTP ${status}${statusText === "" ? "" : ` ${statusText}`} without the API's error body (${shown})`
  })
}
