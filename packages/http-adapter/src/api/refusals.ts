import {
  categoryOf,
  type ErrorStatus,
  type OperationId,
  operationReasonCodes,
  PublicApiError,
  reasonCatalogue,
  type ReasonCode,
  statusOf
} from "@clinical-api/domain"
import { Schema, SchemaTransformation } from "effect"
import { HttpApiSchema } from "effect/http-api"

/**
 * The refusals of each operation on the wire: `PublicApiError` <-> the four-field body of
 * contract section 7, one schema per (operation, status) with the reason codes the domain says
 * that operation can answer there (`operationReasonCodes`). The handlers fail with the domain's
 * error and the HttpApi encodes it with its status; the typed client decodes the body back; the
 * OpenAPI document shows the body with `reason_code` narrowed to those codes.
 */
export interface OperationRefusals {
  readonly status: ErrorStatus
  /** In the domain's order (the catalogue's). */
  readonly codes: readonly [ReasonCode, ...Array<ReasonCode>]
}

/** The reason codes `operation` can answer, grouped by status in ascending order. */
export const operationRefusals = (operation: OperationId): ReadonlyArray<OperationRefusals> => {
  const byStatus = new Map<ErrorStatus, [ReasonCode, ...Array<ReasonCode>]>()
  for (const code of operationReasonCodes[operation]) {
    const codes = byStatus.get(statusOf(code))
    if (codes === undefined) byStatus.set(statusOf(code), [code])
    else codes.push(code)
  }
  return [...byStatus.entries()].sort(([a], [b]) => a - b).map(([status, codes]) => ({ status, codes }))
}

const statusTitles: Readonly<Record<number, string>> = {
  400: "Bad request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not found",
  422: "Invalid query value",
  503: "Service unavailable"
}

/** The exact wire body of a refusal; `detail` is for the log only and never reaches a partner. */
export const refusalBody = (error: PublicApiError) => ({
  error: categoryOf(error.reasonCode),
  reason_code: error.reasonCode,
  message: error.message,
  field: error.field
})

/**
 * The refusals of `operation` at `status`: the four fields (`error` of the status's one
 * category, `reason_code` one of `codes`) on the wire, a `PublicApiError` with one of those
 * codes in the program.
 */
const refusalSchema = (operation: OperationId, { codes, status }: OperationRefusals) => {
  const categories = [...new Set(codes.map(categoryOf))]
  const [category] = categories
  if (category === undefined || categories.length !== 1) {
    throw new Error(`reason codes of ${operation} at ${status} span several categories: ${categories.join(", ")}`)
  }
  const answered: ReadonlySet<ReasonCode> = new Set(codes)
  const description = `${statusTitles[status] ?? "Refused"}: a PublicApiErrorResponse whose reason_code is one of ${codes.join(", ")}.`
  const Body = Schema.Struct({
    error: Schema.Literal(category),
    reason_code: codes.length === 1 ? Schema.Literal(codes[0]) : Schema.Literals(codes),
    message: Schema.String,
    field: Schema.NullOr(Schema.String)
  }).annotate({ title: `${operation} ${status}`, description })
  const Refusal = Schema.declare(
    (value: unknown): value is PublicApiError => value instanceof PublicApiError && answered.has(value.reasonCode)
  )
  return Body.pipe(
    Schema.decodeTo(
      Refusal,
      SchemaTransformation.transform({
        decode: (body) =>
          PublicApiError.of(
            body.reason_code,
            body.field,
            body.message === reasonCatalogue[body.reason_code].message ? undefined : body.message
          ),
        encode: (error) => refusalBody(error) as typeof Body.Type
      })
    ),
    HttpApiSchema.status(status),
    Schema.annotate({ description })
  )
}

/** Every refusal schema of `operation`, one per status. */
export const refusalsOf = (operation: OperationId) =>
  operationRefusals(operation).map((refusals) => refusalSchema(operation, refusals))
