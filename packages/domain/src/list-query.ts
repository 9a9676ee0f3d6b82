import { Result } from "effect"
import { PublicApiError, type ReasonCode, sanitizeField } from "./errors.js"
import type { EncounterListQuery, SortOrder } from "./records.js"
import { acceptsQuery, type OperationId } from "./routes.js"
import { parseRfc3339Instant } from "./time.js"

/** The raw query as ordered key/value pairs after percent-decoding, repeated keys kept. */
export type QueryPairs = ReadonlyArray<readonly [key: string, value: string]>

export const listQueryKeys = ["limit", "offset", "sort_order", "start_at", "end_at"] as const
export type ListQueryKey = (typeof listQueryKeys)[number]

/** Contract section 8. */
export const listQueryLimits = {
  limit: { default: 50, min: 1, max: 100 },
  offset: { default: 0, min: 0, max: 10_000 }
} as const

export const defaultListQuery: EncounterListQuery = {
  limit: listQueryLimits.limit.default,
  offset: listQueryLimits.offset.default,
  sortOrder: "desc",
  startAt: null,
  endAt: null
}

// A Set, not an object lookup: keys are case-sensitive and `__proto__` or `toString` must not match.
const supportedListKeys: ReadonlySet<string> = new Set(listQueryKeys)
const isListQueryKey = (key: string): key is ListQueryKey => supportedListKeys.has(key)

const CANONICAL_DECIMAL = /^(0|[1-9][0-9]*)$/

/**
 * The integer a canonical decimal text denotes when it lies in [min, max], else `undefined`.
 * Texts longer than the bound's own digits are out of range before any conversion, so a
 * huge digit string is never turned into an imprecise (or infinite) number.
 */
export const parseCanonicalIntegerInRange = (text: string, min: number, max: number): number | undefined => {
  if (!CANONICAL_DECIMAL.test(text)) return undefined
  if (text.length > String(max).length) return undefined
  const value = Number(text)
  return value >= min && value <= max ? value : undefined
}

const fail = (reasonCode: ReasonCode, field: string, explanation: string) =>
  Result.fail(PublicApiError.of(reasonCode, field, explanation))

/** Routes with no query parameters: any key is 400 `unsupported_filter` naming the first key. */
export const rejectQueryKeys = (pairs: QueryPairs): Result.Result<void, PublicApiError> => {
  const first = pairs[0]
  if (first === undefined) return Result.void
  const field = sanitizeField(first[0])
  return fail("unsupported_filter", field, `This route takes no query parameters; "${field}" was sent.`)
}

const INSTANT_FORM = "an RFC 3339 date-time with a time zone, for example 2026-01-31T09:00:00Z or " +
  "2026-01-31T09:00:00%2B02:00 (in a query string a + must be sent as %2B: a raw + reads as a space)"

/** Why a start_at or end_at value is not an instant, in the words of the rule it breaks. */
const instantExplanation = (key: "start_at" | "end_at", value: string | undefined): string => {
  if (value === undefined) return `${key} was given more than once; send it at most once.`
  if (/^\d{4}-\d{2}-\d{2}$/.test(value)) return `${key} is a date without a time; send ${INSTANT_FORM}.`
  if (/\d \d{2}:?\d{2}$/.test(value)) return `${key} has a space where its offset's + should be; send ${INSTANT_FORM}.`
  return `${key} must be ${INSTANT_FORM}.`
}

const integerExplanation = (key: "limit" | "offset", repeated: boolean): string => {
  const { min, max } = listQueryLimits[key]
  if (repeated) return `${key} was given more than once; send it at most once.`
  const beyond = key === "offset"
    ? "; to read further, narrow the window with start_at and end_at"
    : ""
  return `${key} must be a whole number from ${min} to ${max.toLocaleString("en-US")} in plain digits${beyond}.`
}

type Occurrence = { readonly kind: "absent" } | { readonly kind: "once"; readonly value: string } | { readonly kind: "repeated" }

/**
 * The list route's query (docs/behaviour.md, "Order of checks" step 3 and "Query values"):
 * first 400 `unsupported_filter` for the first unsupported key in request order, then the
 * 422s in a fixed order whatever the order of the keys in the request.
 */
export const parseListQuery = (pairs: QueryPairs): Result.Result<EncounterListQuery, PublicApiError> => {
  const valuesByKey = new Map<ListQueryKey, Array<string>>()
  for (const [key, value] of pairs) {
    if (!isListQueryKey(key)) {
      const field = sanitizeField(key)
      return fail("unsupported_filter", field, `"${field}" is not a query parameter of this route; it takes ${listQueryKeys.join(", ")}.`)
    }
    const values = valuesByKey.get(key)
    if (values === undefined) valuesByKey.set(key, [value])
    else values.push(value)
  }

  const occurrence = (key: ListQueryKey): Occurrence => {
    const values = valuesByKey.get(key)
    if (values === undefined) return { kind: "absent" }
    const [only] = values
    return values.length === 1 && only !== undefined ? { kind: "once", value: only } : { kind: "repeated" }
  }

  const integer = (key: "limit" | "offset"): number | undefined => {
    const given = occurrence(key)
    const bounds = listQueryLimits[key]
    if (given.kind === "absent") return bounds.default
    if (given.kind === "repeated") return undefined
    return parseCanonicalIntegerInRange(given.value, bounds.min, bounds.max)
  }

  const instant = (key: "start_at" | "end_at"): Date | null | undefined => {
    const given = occurrence(key)
    if (given.kind === "absent") return null
    if (given.kind === "repeated") return undefined
    return parseRfc3339Instant(given.value)
  }

  const sortOrder = (): SortOrder | undefined => {
    const given = occurrence("sort_order")
    if (given.kind === "absent") return defaultListQuery.sortOrder
    if (given.kind === "repeated") return undefined
    return given.value === "asc" || given.value === "desc" ? given.value : undefined
  }

  const given = (key: ListQueryKey): string | undefined => {
    const found = occurrence(key)
    return found.kind === "once" ? found.value : undefined
  }
  const limit = integer("limit")
  if (limit === undefined) return fail("invalid_limit", "limit", integerExplanation("limit", occurrence("limit").kind === "repeated"))
  const offset = integer("offset")
  if (offset === undefined) return fail("invalid_offset", "offset", integerExplanation("offset", occurrence("offset").kind === "repeated"))
  const sort = sortOrder()
  if (sort === undefined) {
    const explanation = occurrence("sort_order").kind === "repeated"
      ? "sort_order was given more than once; send it at most once."
      : "sort_order must be asc or desc (lower case)."
    return fail("invalid_sort", "sort_order", explanation)
  }
  const startAt = instant("start_at")
  if (startAt === undefined) return fail("invalid_query", "start_at", instantExplanation("start_at", given("start_at")))
  const endAt = instant("end_at")
  if (endAt === undefined) return fail("invalid_query", "end_at", instantExplanation("end_at", given("end_at")))
  // The contract leaves this reason open; docs/behaviour.md names `invalid_query` on `start_at`.
  if (startAt !== null && endAt !== null && startAt.getTime() >= endAt.getTime()) {
    return fail("invalid_query", "start_at", "start_at must be before end_at: the window holds encounters created at or after start_at and before end_at.")
  }
  return Result.succeed({ limit, offset, sortOrder: sort, startAt, endAt })
}

/** Step 3 of the order of checks for any operation: the list query, or `undefined` for the routes that take none. */
export const validateQuery = (
  operation: OperationId,
  pairs: QueryPairs
): Result.Result<EncounterListQuery | undefined, PublicApiError> =>
  acceptsQuery(operation) ? parseListQuery(pairs) : Result.map(rejectQueryKeys(pairs), () => undefined)
