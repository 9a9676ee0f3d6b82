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

const fail = (reasonCode: ReasonCode, field: string) => Result.fail(PublicApiError.of(reasonCode, field))

/** Routes with no query parameters: any key is 400 `unsupported_filter` naming the first key. */
export const rejectQueryKeys = (pairs: QueryPairs): Result.Result<void, PublicApiError> => {
  const first = pairs[0]
  return first === undefined ? Result.void : fail("unsupported_filter", sanitizeField(first[0]))
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
    if (!isListQueryKey(key)) return fail("unsupported_filter", sanitizeField(key))
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

  const limit = integer("limit")
  if (limit === undefined) return fail("invalid_limit", "limit")
  const offset = integer("offset")
  if (offset === undefined) return fail("invalid_offset", "offset")
  const sort = sortOrder()
  if (sort === undefined) return fail("invalid_sort", "sort_order")
  const startAt = instant("start_at")
  if (startAt === undefined) return fail("invalid_query", "start_at")
  const endAt = instant("end_at")
  if (endAt === undefined) return fail("invalid_query", "end_at")
  // The contract leaves this reason open; docs/behaviour.md names `invalid_query` on `start_at`.
  if (startAt !== null && endAt !== null && startAt.getTime() >= endAt.getTime()) {
    return fail("invalid_query", "start_at")
  }
  return Result.succeed({ limit, offset, sortOrder: sort, startAt, endAt })
}

/** Step 3 of the order of checks for any operation: the list query, or `undefined` for the routes that take none. */
export const validateQuery = (
  operation: OperationId,
  pairs: QueryPairs
): Result.Result<EncounterListQuery | undefined, PublicApiError> =>
  acceptsQuery(operation) ? parseListQuery(pairs) : Result.map(rejectQueryKeys(pairs), () => undefined)
