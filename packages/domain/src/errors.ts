import { Effect, type Result, Schema } from "effect"

/**
 * The reason-code catalogue: contract section 7 plus docs/behaviour.md. This table is the only
 * place that knows which HTTP status and `error` category belong to a `reason_code`.
 * `route_not_found` and `method_not_allowed` are outside the contract (docs/behaviour.md,
 * "Errors outside the table") and marked so, as are the three transport refusals, answered
 * before there is a request for the API to see (docs/operations.md, "Limits"): a request line and headers
 * over 16 KiB, bytes that are not HTTP/1.1, a request not received in time.
 */
export const reasonCatalogue = {
  unsupported_filter: { status: 400, error: "public_api_bad_request", message: "The query parameter is not supported on this route.", inContract: true },
  unsupported_document_type: { status: 400, error: "public_api_bad_request", message: "The document type is not supported by this route.", inContract: true },
  audio_not_available_for_document: { status: 400, error: "public_api_bad_request", message: "Audio is not available for this document.", inContract: true },

  missing_bearer: { status: 401, error: "api_key_unauthorized", message: "No bearer API key was sent.", inContract: true },
  api_keys_disabled: { status: 401, error: "api_key_unauthorized", message: "API-key authentication is disabled.", inContract: true },
  test_prefix_not_allowed: { status: 401, error: "api_key_unauthorized", message: "Test keys are refused in this environment.", inContract: true },
  malformed_token: { status: 401, error: "api_key_unauthorized", message: "The API key token is malformed.", inContract: true },
  invalid_key: { status: 401, error: "api_key_unauthorized", message: "The API key is invalid.", inContract: true },
  disabled_key: { status: 401, error: "api_key_unauthorized", message: "The API key is disabled.", inContract: true },
  revoked_key: { status: 401, error: "api_key_unauthorized", message: "The API key was revoked.", inContract: true },
  expired_key: { status: 401, error: "api_key_unauthorized", message: "The API key has expired.", inContract: true },

  org_scope_only_required: { status: 403, error: "api_key_forbidden", message: "Only organization-scoped API keys are accepted.", inContract: true },
  route_not_allowed: { status: 403, error: "api_key_forbidden", message: "This route is not enabled for the organization.", inContract: true },
  organization_not_allowlisted: { status: 403, error: "api_key_forbidden", message: "The organization is not approved for the public API.", inContract: true },
  missing_scope: { status: 403, error: "api_key_forbidden", message: "The API key lacks a scope this route requires.", inContract: true },
  cross_organization_denied: { status: 403, error: "api_key_forbidden", message: "The encounter belongs to another organization.", inContract: true },
  demo_training_denied: { status: 403, error: "api_key_forbidden", message: "Demo and training encounters are not available.", inContract: true },

  encounter_not_found: { status: 404, error: "public_api_not_found", message: "The encounter was not found.", inContract: true },
  document_not_found: { status: 404, error: "public_api_not_found", message: "The document was not found in this encounter.", inContract: true },
  transcript_not_found: { status: 404, error: "public_api_not_found", message: "No finalized transcript exists for this document.", inContract: true },
  audio_not_found: { status: 404, error: "public_api_not_found", message: "The audio recording was not found.", inContract: true },
  route_not_found: { status: 404, error: "public_api_not_found", message: "No route matches this path.", inContract: false },

  method_not_allowed: { status: 405, error: "public_api_method_not_allowed", message: "Only GET is allowed on this route.", inContract: false },

  malformed_http_request: { status: 400, error: "public_api_bad_request", message: "The request is not valid HTTP/1.1.", inContract: false },
  request_timeout: { status: 408, error: "public_api_bad_request", message: "The request was not received in time.", inContract: false },
  request_header_fields_too_large: { status: 431, error: "public_api_bad_request", message: "The request line and headers exceed 16 KiB.", inContract: false },

  invalid_query: { status: 422, error: "api_key_validation_failed", message: "A query value is invalid.", inContract: true },
  invalid_limit: { status: 422, error: "api_key_validation_failed", message: "limit must be an integer from 1 to 100 in canonical decimal form.", inContract: true },
  invalid_offset: { status: 422, error: "api_key_validation_failed", message: "offset must be an integer from 0 to 10000 in canonical decimal form.", inContract: true },
  invalid_sort: { status: 422, error: "api_key_validation_failed", message: "sort_order must be asc or desc.", inContract: true },

  digest_key_unavailable: { status: 503, error: "public_api_unavailable", message: "The service is temporarily unavailable.", inContract: true },
  audio_storage_unavailable: { status: 503, error: "public_api_unavailable", message: "Audio storage is temporarily unavailable.", inContract: true }
} as const satisfies Record<string, {
  readonly status: number
  readonly error: string
  readonly message: string
  readonly inContract: boolean
}>

type Catalogue = typeof reasonCatalogue
export type ReasonCode = keyof Catalogue
export type ErrorCategory = Catalogue[ReasonCode]["error"]
export type ErrorStatus = Catalogue[ReasonCode]["status"]

export const reasonCodes = Object.keys(reasonCatalogue) as ReadonlyArray<ReasonCode>

export const ReasonCode = Schema.Literals(reasonCodes as [ReasonCode, ...Array<ReasonCode>])

export const ErrorCategory = Schema.Literals(
  [...new Set(reasonCodes.map((code) => reasonCatalogue[code].error))] as [ErrorCategory, ...Array<ErrorCategory>]
)

/** The reason codes answered with `status`, in catalogue order. */
export const reasonCodesWithStatus = <S extends ErrorStatus>(
  status: S
): ReadonlyArray<Extract<ReasonCode, { [K in ReasonCode]: Catalogue[K]["status"] extends S ? K : never }[ReasonCode]>> =>
  reasonCodes.filter((code) => reasonCatalogue[code].status === status) as never

export const statusOf = (code: ReasonCode): ErrorStatus => reasonCatalogue[code].status
export const categoryOf = (code: ReasonCode): ErrorCategory => reasonCatalogue[code].error

/**
 * The error body of contract section 7: exactly four fields, all always present. Decoded with
 * `exactParseOptions` (resources.ts) it refuses any other key.
 */
export const PublicApiErrorResponse = Schema.Struct({
  error: ErrorCategory,
  reason_code: ReasonCode,
  message: Schema.String,
  field: Schema.NullOr(Schema.String)
}).annotate({ identifier: "PublicApiErrorResponse" })
export type PublicApiErrorResponse = typeof PublicApiErrorResponse.Type

/**
 * The one failure of the public API. It carries a reason code and, where the contract says
 * so, the offending query field; status, category and default message come from the catalogue.
 */
export class PublicApiError extends Schema.TaggedError<PublicApiError>()("PublicApiError", {
  reasonCode: ReasonCode,
  field: Schema.NullOr(Schema.String),
  detail: Schema.optional(Schema.String),
  /** Why the request was refused and what is accepted instead, when more than the catalogue's message can be said. */
  explanation: Schema.optional(Schema.String)
}) {
  static of(reasonCode: ReasonCode, field: string | null = null, explanation?: string): PublicApiError {
    return new PublicApiError(explanation === undefined ? { reasonCode, field } : { reasonCode, field, explanation })
  }

  get status(): ErrorStatus {
    return statusOf(this.reasonCode)
  }

  override get message(): string {
    return this.explanation ?? reasonCatalogue[this.reasonCode].message
  }

  /** The exact wire body. `detail` is for logs only and never reaches a partner. */
  toResponse(): PublicApiErrorResponse {
    return {
      error: categoryOf(this.reasonCode),
      reason_code: this.reasonCode,
      message: this.message,
      field: this.field
    }
  }
}

/** The value a check passed, or its refusal as the failure. */
export const orRefuse = <A>(check: Result.Result<A, PublicApiError>): Effect.Effect<A, PublicApiError> =>
  Effect.fromResult(check)

/** `field` as docs/behaviour.md says: the key after percent-decoding, cut to 64 characters, non-printable-ASCII as `?`. */
export const sanitizeField = (key: string): string =>
  Array.from(key)
    .slice(0, 64)
    .map((char) => {
      const code = char.codePointAt(0) ?? 0
      return code >= 0x20 && code <= 0x7e ? char : "?"
    })
    .join("")
