import { describe, expect, it } from "@effect/vitest"
import { Result } from "effect"
import fc from "fast-check"
import { PublicApiError, sanitizeField } from "../src/errors.js"
import { parseListQuery, type QueryPairs, rejectQueryKeys, validateQuery } from "../src/list-query.js"
import type { EncounterListQuery } from "../src/records.js"
import { operationIds } from "../src/routes.js"
import { prop } from "./support/prop.js"

const errorOf = (result: Result.Result<unknown, PublicApiError>): { reason: string; field: string | null; status: number } => {
  if (Result.isSuccess(result)) throw new Error(`expected a failure, got ${JSON.stringify(result.success)}`)
  return { reason: result.failure.reasonCode, field: result.failure.field, status: result.failure.status }
}

const queryOf = (result: Result.Result<EncounterListQuery, PublicApiError>): EncounterListQuery => {
  if (Result.isFailure(result)) throw new Error(`expected success, got ${result.failure.reasonCode} (${result.failure.field})`)
  return result.success
}

// ---------------------------------------------------------------------------------------------
// Independent oracles (they must not share code with the implementation under test).
// ---------------------------------------------------------------------------------------------

const canonicalInRange = (text: string, min: bigint, max: bigint): boolean =>
  /^(0|[1-9][0-9]*)$/.test(text) && BigInt(text) >= min && BigInt(text) <= max

/** Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's days_from_civil). */
const daysFromCivil = (year: number, month: number, day: number): number => {
  const y = month <= 2 ? year - 1 : year
  const era = Math.floor(y / 400)
  const yoe = y - era * 400
  const mp = (month + 9) % 12
  const doy = Math.floor((153 * mp + 2) / 5) + day - 1
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
}

const monthLength = (year: number, month: number): number => {
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0
  return [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1] ?? 0
}

/** The epoch milliseconds an RFC 3339 date-time with offset denotes (fraction truncated to ms), or undefined. */
const rfc3339Oracle = (text: string): number | undefined => {
  const m = /^(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(?:\.(\d+))?(?:([Zz])|([+-])(\d\d):(\d\d))$/.exec(text)
  if (m === null) return undefined
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number]
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > monthLength(year, month)) return undefined
  if (hour > 23 || minute > 59 || second > 59) return undefined
  let offsetMinutes = 0
  if (m[8] === undefined) {
    const offsetHours = Number(m[10])
    const offsetMins = Number(m[11])
    if (offsetHours > 23 || offsetMins > 59) return undefined
    offsetMinutes = (m[9] === "-" ? -1 : 1) * (offsetHours * 60 + offsetMins)
  }
  const millis = Number((m[7] ?? "").padEnd(3, "0").slice(0, 3))
  return (
    daysFromCivil(year, month, day) * 86_400_000 +
    ((hour * 60 + minute) * 60 + second) * 1000 +
    millis -
    offsetMinutes * 60_000
  )
}

// ---------------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------------

const pad = (n: number, width: number) => String(n).padStart(width, "0")

interface InstantParts {
  readonly year: number
  readonly month: number
  readonly day: number
  readonly hour: number
  readonly minute: number
  readonly second: number
  readonly fraction: string | null
  readonly offset: string
}

const renderInstant = (p: InstantParts, separator = "T"): string =>
  `${pad(p.year, 4)}-${pad(p.month, 2)}-${pad(p.day, 2)}${separator}${pad(p.hour, 2)}:${pad(p.minute, 2)}:${pad(p.second, 2)}` +
  `${p.fraction === null ? "" : `.${p.fraction}`}${p.offset}`

const offsetArb = fc.oneof(
  fc.constantFrom("Z", "z", "+00:00", "-00:00"),
  fc.tuple(fc.constantFrom("+", "-"), fc.integer({ min: 0, max: 23 }), fc.integer({ min: 0, max: 59 })).map(
    ([sign, h, m]) => `${sign}${pad(h, 2)}:${pad(m, 2)}`
  )
)

// Fractions up to nanoseconds: what real clients send.
const fractionArb = fc.option(fc.stringMatching(/^[0-9]{1,9}$/), { nil: null })

const instantPartsArb: fc.Arbitrary<InstantParts> = fc
  .record({
    year: fc.integer({ min: 1, max: 9999 }),
    month: fc.integer({ min: 1, max: 12 }),
    hour: fc.integer({ min: 0, max: 23 }),
    minute: fc.integer({ min: 0, max: 59 }),
    second: fc.integer({ min: 0, max: 59 }),
    fraction: fractionArb,
    offset: offsetArb
  })
  .chain((p) => fc.integer({ min: 1, max: monthLength(p.year, p.month) }).map((day) => ({ ...p, day })))

const validInstantArb = instantPartsArb.map((p) => renderInstant(p))

/** Near misses of valid instants plus garbage: each is judged by the oracle. */
const instantLikeArb = fc.oneof(
  validInstantArb,
  instantPartsArb.map((p) => renderInstant({ ...p, offset: "" })), // no offset
  instantPartsArb.map((p) => `${pad(p.year, 4)}-${pad(p.month, 2)}-${pad(p.day, 2)}`), // date only
  instantPartsArb.map((p) => renderInstant(p, " ")),
  instantPartsArb.chain((p) =>
    fc.record({ day: fc.integer({ min: 0, max: 39 }), month: fc.integer({ min: 0, max: 19 }) }).map((bad) =>
      renderInstant({ ...p, ...bad })
    )
  ),
  instantPartsArb.chain((p) =>
    fc.record({ hour: fc.integer({ min: 0, max: 99 }), minute: fc.integer({ min: 0, max: 99 }), second: fc.integer({ min: 0, max: 99 }) }).map(
      (bad) => renderInstant({ ...p, ...bad })
    )
  ),
  fc.tuple(validInstantArb, fc.nat(), fc.string({ maxLength: 2 })).map(([text, at, insert]) => {
    const i = at % (text.length + 1)
    return text.slice(0, i) + insert + text.slice(i + 1)
  }),
  fc.string(),
  fc.string({ unit: "binary" })
)

// ---------------------------------------------------------------------------------------------

describe("rejectQueryKeys (routes without query parameters)", () => {
  it("accepts an empty query", () => {
    expect(Result.isSuccess(rejectQueryKeys([]))).toBe(true)
  })

  it("unsupported_filter names the first key, even a key the list route supports", () => {
    expect(errorOf(rejectQueryKeys([["limit", "10"], ["owners", "x"]]))).toEqual({
      reason: "unsupported_filter",
      field: "limit",
      status: 400
    })
  })

  it("unsupported_filter field is sanitized", () => {
    expect(errorOf(rejectQueryKeys([["é\u0000" + "k".repeat(100), ""]])).field).toBe("??" + "k".repeat(62))
  })

  prop("unsupported_filter for any non-empty query, field = sanitizeField(first key)", [
    fc.array(fc.tuple(fc.string({ unit: "binary" }), fc.string()), { minLength: 1, maxLength: 5 })
  ], ([pairs]) => {
    const error = errorOf(rejectQueryKeys(pairs))
    expect(error.reason).toBe("unsupported_filter")
    expect(error.field).toBe(sanitizeField(pairs[0]![0]))
  })
})

describe("validateQuery dispatches on the operation", () => {
  it("list route: defaults when no query is given", () => {
    expect(validateQuery("listPublicEncounters", [])).toEqual(
      Result.succeed({ limit: 50, offset: 0, sortOrder: "desc", startAt: null, endAt: null })
    )
  })

  it("list route: parses its keys", () => {
    expect(queryOf(validateQuery("listPublicEncounters", [["limit", "7"]]) as Result.Result<EncounterListQuery, PublicApiError>).limit).toBe(7)
  })

  for (const operation of operationIds.filter((id) => id !== "listPublicEncounters")) {
    it(`${operation}: no query gives undefined, any key gives unsupported_filter`, () => {
      expect(validateQuery(operation, [])).toEqual(Result.succeed(undefined))
      expect(errorOf(validateQuery(operation, [["limit", "10"]]))).toEqual({
        reason: "unsupported_filter",
        field: "limit",
        status: 400
      })
    })
  }
})

describe("parseListQuery: unsupported_filter", () => {
  it.each(["owners", "record_kind", "date_of_service", "patient_id", "Limit", "LIMIT", "sort", "sortOrder", "__proto__", "toString", ""])(
    "unsupported_filter for key %j",
    (key) => {
      expect(errorOf(parseListQuery([["limit", "5"], [key, "1"]]))).toEqual({ reason: "unsupported_filter", field: key, status: 400 })
    }
  )

  it("unsupported_filter is the first unsupported key in request order", () => {
    expect(errorOf(parseListQuery([["limit", "5"], ["zeta", "1"], ["alpha", "2"]])).field).toBe("zeta")
  })

  it("unsupported_filter comes before any 422, even when the bad value is earlier", () => {
    expect(errorOf(parseListQuery([["limit", "abc"], ["Offset", "1"]]))).toEqual({
      reason: "unsupported_filter",
      field: "Offset",
      status: 400
    })
  })

  it("unsupported_filter field: cut to 64 characters, non-printable-ASCII as ?", () => {
    expect(errorOf(parseListQuery([["x".repeat(70), "1"]])).field).toBe("x".repeat(64))
    expect(errorOf(parseListQuery([["dätum\t😀", "1"]])).field).toBe("d?tum??")
  })
})

describe("sanitizeField", () => {
  it.each([
    ["limit", "limit"],
    ["", ""],
    ["é", "?"],
    ["😀", "?"],
    ["a\u0000b", "a?b"],
    ["\u007f", "?"],
    ["\u001f ~", "? ~"],
    ["\ud800x", "?x"],
    ["a".repeat(64), "a".repeat(64)],
    ["b".repeat(65), "b".repeat(64)],
    ["é".repeat(70), "?".repeat(64)]
  ])("sanitizeField(%j) = %j", (key, expected) => {
    expect(sanitizeField(key)).toBe(expected)
  })

  prop("printable ASCII is kept, cut to 64 characters", [fc.stringMatching(/^[\x20-\x7e]*$/)], ([key]) => {
    expect(sanitizeField(key)).toBe(key.slice(0, 64))
  })

  prop("result is printable ASCII, one character per input character, at most 64", [
    fc.string({ unit: "binary", maxLength: 100 })
  ], ([key]) => {
    const characters = [...key]
    const result = sanitizeField(key)
    expect(result).toMatch(/^[\x20-\x7e]*$/)
    expect(result.length).toBe(Math.min(64, characters.length))
    characters.slice(0, 64).forEach((char, i) => {
      const printable = /^[\x20-\x7e]$/.test(char)
      expect(result[i]).toBe(printable ? char : "?")
    })
  })
})

describe("parseListQuery: limit and offset (invalid_limit, invalid_offset)", () => {
  it("defaults: limit 50, offset 0, sort desc, no bounds", () => {
    expect(queryOf(parseListQuery([]))).toEqual({ limit: 50, offset: 0, sortOrder: "desc", startAt: null, endAt: null })
  })

  it.each(["1", "50", "100"])("limit %s is accepted", (text) => {
    expect(queryOf(parseListQuery([["limit", text]])).limit).toBe(Number(text))
  })

  it.each(["0", "101", "", " 5", "5 ", "+5", "-1", "05", "1e2", "1.0", "0x10", "٥", "５", "Infinity", "NaN", "9".repeat(400), "1".padEnd(30, "0")])(
    "invalid_limit for %j",
    (text) => {
      expect(errorOf(parseListQuery([["limit", text]]))).toEqual({ reason: "invalid_limit", field: "limit", status: 422 })
    }
  )

  it.each(["0", "1", "9999", "10000"])("offset %s is accepted", (text) => {
    expect(queryOf(parseListQuery([["offset", text]])).offset).toBe(Number(text))
  })

  it.each(["10001", "", "00", "-0", "+0", "1e4", "010", " 1", "１", "9".repeat(400), "1".padEnd(20, "0")])("invalid_offset for %j", (text) => {
    expect(errorOf(parseListQuery([["offset", text]]))).toEqual({ reason: "invalid_offset", field: "offset", status: 422 })
  })

  it("a supported key given twice is invalid for that key, even with equal valid values", () => {
    expect(errorOf(parseListQuery([["limit", "10"], ["limit", "10"]])).reason).toBe("invalid_limit")
    expect(errorOf(parseListQuery([["offset", "1"], ["offset", "2"]])).reason).toBe("invalid_offset")
    expect(errorOf(parseListQuery([["sort_order", "asc"], ["sort_order", "asc"]])).reason).toBe("invalid_sort")
    expect(errorOf(parseListQuery([["start_at", "2026-01-01T00:00:00Z"], ["start_at", "2026-01-01T00:00:00Z"]]))).toEqual({
      reason: "invalid_query",
      field: "start_at",
      status: 422
    })
    expect(errorOf(parseListQuery([["end_at", "2026-01-01T00:00:00Z"], ["end_at", "2026-01-02T00:00:00Z"]]))).toEqual({
      reason: "invalid_query",
      field: "end_at",
      status: 422
    })
  })

  const integerTextArb = fc.oneof(
    fc.string(),
    fc.string({ unit: "binary" }),
    fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }).map(String),
    fc.integer({ min: -5, max: 10_010 }).map(String),
    fc.integer({ min: 0, max: 10_010 }).map((n) => `0${n}`),
    fc.integer({ min: 0, max: 10_010 }).map((n) => `+${n}`),
    fc.tuple(fc.integer({ min: 0, max: 200 }), fc.constantFrom(" ", "\t", "\n", "\u00a0")).map(([n, s]) => `${s}${n}`),
    fc.tuple(fc.integer({ min: 0, max: 200 }), fc.constantFrom(" ", "\t", "\n")).map(([n, s]) => `${n}${s}`),
    fc.tuple(fc.integer({ min: 1, max: 9 }), fc.integer({ min: 0, max: 4 })).map(([m, e]) => `${m}e${e}`),
    fc.integer({ min: 0, max: 200 }).map((n) => `${n}.0`),
    // Unicode digits: Arabic-Indic, Devanagari, fullwidth.
    fc.integer({ min: 0, max: 200 }).map((n) => String(n).replace(/[0-9]/g, (d) => String.fromCodePoint(0x0660 + Number(d)))),
    fc.integer({ min: 0, max: 200 }).map((n) => String(n).replace(/[0-9]/g, (d) => String.fromCodePoint(0x0966 + Number(d)))),
    fc.integer({ min: 0, max: 200 }).map((n) => String(n).replace(/[0-9]/g, (d) => String.fromCodePoint(0xff10 + Number(d)))),
    fc.stringMatching(/^[0-9]{15,40}$/)
  )

  prop("limit accepts exactly the canonical decimals in 1..100", [integerTextArb], ([text]) => {
    const result = parseListQuery([["limit", text]])
    if (canonicalInRange(text, 1n, 100n)) expect(queryOf(result).limit).toBe(Number(text))
    else expect(errorOf(result)).toEqual({ reason: "invalid_limit", field: "limit", status: 422 })
  }, { fastCheck: { numRuns: 1000 } })

  prop("offset accepts exactly the canonical decimals in 0..10000", [integerTextArb], ([text]) => {
    const result = parseListQuery([["offset", text]])
    if (canonicalInRange(text, 0n, 10_000n)) expect(queryOf(result).offset).toBe(Number(text))
    else expect(errorOf(result)).toEqual({ reason: "invalid_offset", field: "offset", status: 422 })
  }, { fastCheck: { numRuns: 1000 } })
})

describe("parseListQuery: sort_order (invalid_sort)", () => {
  it.each(["asc", "desc"] as const)("sort_order %s is accepted", (value) => {
    expect(queryOf(parseListQuery([["sort_order", value]])).sortOrder).toBe(value)
  })

  it.each(["", "ASC", "Desc", " asc", "asc ", "ascending", "1", "-created_at"])("invalid_sort for %j", (value) => {
    expect(errorOf(parseListQuery([["sort_order", value]]))).toEqual({ reason: "invalid_sort", field: "sort_order", status: 422 })
  })
})

describe("parseListQuery: start_at and end_at (invalid_query)", () => {
  it("accepts Z and offsets and converts to the instant", () => {
    const query = queryOf(parseListQuery([["start_at", "2026-05-01T14:00:00+02:00"], ["end_at", "2026-05-01T12:00:00.5Z"]]))
    expect(query.startAt?.toISOString()).toBe("2026-05-01T12:00:00.000Z")
    expect(query.endAt?.toISOString()).toBe("2026-05-01T12:00:00.500Z")
  })

  it.each([
    "2026-05-01",
    "2026-05-01T12:00:00",
    "2026-05-01T12:00",
    "2026-05-01T12:00Z",
    "2026-02-30T00:00:00Z",
    "2025-02-29T00:00:00Z",
    "2026-04-31T00:00:00Z",
    "2026-13-01T00:00:00Z",
    "2026-05-01T24:00:00Z",
    "2026-05-01T12:60:00Z",
    "2026-05-01T12:00:60Z",
    "2026-05-01T12:00:00+24:00",
    "2026-05-01T12:00:00+0200",
    "2026-05-01 12:00:00Z",
    "0000-01-01T00:00:00Z",
    "1714564800",
    "now",
    ""
  ])("invalid_query for start_at/end_at %j", (value) => {
    expect(errorOf(parseListQuery([["start_at", value]]))).toEqual({ reason: "invalid_query", field: "start_at", status: 422 })
    expect(errorOf(parseListQuery([["end_at", value]]))).toEqual({ reason: "invalid_query", field: "end_at", status: 422 })
  })

  it("2024-02-29 (a leap day) is accepted", () => {
    expect(queryOf(parseListQuery([["start_at", "2024-02-29T23:59:59.999-00:30"]])).startAt?.toISOString()).toBe(
      "2024-03-01T00:29:59.999Z"
    )
  })

  prop("every RFC 3339 instant with an offset is accepted as the instant it denotes", [validInstantArb, validInstantArb], ([text, other]) => {
    expect(queryOf(parseListQuery([["start_at", text]])).startAt?.getTime()).toBe(rfc3339Oracle(text))
    expect(queryOf(parseListQuery([["end_at", other]])).endAt?.getTime()).toBe(rfc3339Oracle(other))
  }, { fastCheck: { numRuns: 500 } })

  prop("anything else is invalid_query with the right field", [instantLikeArb], ([text]) => {
    const expected = rfc3339Oracle(text)
    for (const key of ["start_at", "end_at"] as const) {
      const result = parseListQuery([[key, text]])
      if (expected === undefined) expect(errorOf(result)).toEqual({ reason: "invalid_query", field: key, status: 422 })
      else expect(queryOf(result)[key === "start_at" ? "startAt" : "endAt"]?.getTime()).toBe(expected)
    }
  }, { fastCheck: { numRuns: 1000 } })

  it("invalid_query on start_at when start_at equals end_at (the same instant written differently)", () => {
    expect(errorOf(parseListQuery([["start_at", "2026-05-01T14:00:00+02:00"], ["end_at", "2026-05-01T12:00:00Z"]]))).toEqual({
      reason: "invalid_query",
      field: "start_at",
      status: 422
    })
  })

  it("invalid_query on start_at when start_at is after end_at; accepted when earlier by 1 ms", () => {
    expect(errorOf(parseListQuery([["end_at", "2026-05-01T12:00:00Z"], ["start_at", "2026-05-01T12:00:00.001Z"]])).field).toBe("start_at")
    const query = queryOf(parseListQuery([["end_at", "2026-05-01T12:00:00.001Z"], ["start_at", "2026-05-01T12:00:00Z"]]))
    expect(query.endAt!.getTime() - query.startAt!.getTime()).toBe(1)
  })
})

describe("parseListQuery: order of checks when several fail", () => {
  const supported = ["limit", "offset", "sort_order", "start_at", "end_at"] as const
  type Supported = (typeof supported)[number]
  type Given = "absent" | "valid" | "invalid" | "twice"

  const validValue = { limit: ["1", "100", "42"], offset: ["0", "10000"], sort_order: ["asc", "desc"] } as const
  const invalidValue: Record<Supported, ReadonlyArray<string>> = {
    limit: ["0", "", "01", "abc"],
    offset: ["-1", "10001", "1.5"],
    sort_order: ["up", ""],
    start_at: ["2026-02-30T00:00:00Z", "2026-05-01"],
    end_at: ["yesterday", "2026-05-01T00:00:00"]
  }
  const instants = ["2026-05-01T00:00:00Z", "2026-05-01T02:00:00+02:00", "2026-05-02T00:00:00Z", "2026-04-30T23:59:59.999Z"]

  const scenarioArb = fc
    .record({
      limit: fc.constantFrom<Given>("absent", "valid", "invalid", "twice"),
      offset: fc.constantFrom<Given>("absent", "valid", "invalid", "twice"),
      sort_order: fc.constantFrom<Given>("absent", "valid", "invalid", "twice"),
      start_at: fc.constantFrom<Given>("absent", "valid", "invalid", "twice"),
      end_at: fc.constantFrom<Given>("absent", "valid", "invalid", "twice"),
      unsupported: fc.array(fc.oneof(fc.constantFrom("Limit", "owners", "patient_id", "__proto__", "end"), fc.string({ unit: "binary" })), {
        maxLength: 2
      }),
      seed: fc.nat()
    })
    .chain((s) => {
      const pairs: Array<[string, string]> = []
      for (const key of supported) {
        const pick = (values: ReadonlyArray<string>) => values[s.seed % values.length]!
        const valid = key === "start_at" || key === "end_at" ? pick(instants) : pick(validValue[key])
        const invalid = pick(invalidValue[key])
        if (s[key] === "valid") pairs.push([key, key === "end_at" ? instants[(s.seed >> 3) % instants.length]! : valid])
        if (s[key] === "invalid") pairs.push([key, invalid])
        if (s[key] === "twice") pairs.push([key, valid], [key, valid])
      }
      for (const key of s.unsupported) pairs.push([key, "x"])
      return fc.shuffledSubarray(pairs, { minLength: pairs.length, maxLength: pairs.length })
    })

  /** The order of docs/behaviour.md, written from scratch over the pairs. */
  const expectedFailure = (pairs: QueryPairs): { reason: string; field: string } | null => {
    const known = new Set<string>(supported)
    const firstUnknown = pairs.find(([key]) => !known.has(key))
    if (firstUnknown !== undefined) return { reason: "unsupported_filter", field: sanitizeField(firstUnknown[0]) }
    const single = (key: string) => {
      const values = pairs.filter(([k]) => k === key).map(([, v]) => v)
      return values.length === 0 ? { absent: true as const } : values.length === 1 ? { value: values[0]! } : { twice: true as const }
    }
    const limit = single("limit")
    if ("twice" in limit || ("value" in limit && !canonicalInRange(limit.value, 1n, 100n))) return { reason: "invalid_limit", field: "limit" }
    const offset = single("offset")
    if ("twice" in offset || ("value" in offset && !canonicalInRange(offset.value, 0n, 10_000n))) return { reason: "invalid_offset", field: "offset" }
    const sort = single("sort_order")
    if ("twice" in sort || ("value" in sort && sort.value !== "asc" && sort.value !== "desc")) return { reason: "invalid_sort", field: "sort_order" }
    const start = single("start_at")
    if ("twice" in start || ("value" in start && rfc3339Oracle(start.value) === undefined)) return { reason: "invalid_query", field: "start_at" }
    const end = single("end_at")
    if ("twice" in end || ("value" in end && rfc3339Oracle(end.value) === undefined)) return { reason: "invalid_query", field: "end_at" }
    if ("value" in start && "value" in end && rfc3339Oracle(start.value)! >= rfc3339Oracle(end.value)!) {
      return { reason: "invalid_query", field: "start_at" }
    }
    return null
  }

  prop("the reported error is the first failing check in the decided order", [scenarioArb], ([pairs]) => {
    const expected = expectedFailure(pairs)
    const result = parseListQuery(pairs)
    if (expected === null) {
      expect(Result.isSuccess(result)).toBe(true)
    } else {
      const error = errorOf(result)
      expect({ reason: error.reason, field: error.field }).toEqual(expected)
    }
  }, { fastCheck: { numRuns: 2000 } })

  it("all five wrong at once: invalid_limit wins", () => {
    expect(
      errorOf(parseListQuery([["end_at", "x"], ["start_at", "y"], ["sort_order", "z"], ["offset", "-1"], ["limit", "0"]])).reason
    ).toBe("invalid_limit")
  })

  it("invalid_offset before invalid_sort before invalid_query(start_at) before invalid_query(end_at)", () => {
    expect(errorOf(parseListQuery([["end_at", "x"], ["start_at", "y"], ["sort_order", "z"], ["offset", "-1"]])).reason).toBe("invalid_offset")
    expect(errorOf(parseListQuery([["end_at", "x"], ["start_at", "y"], ["sort_order", "z"]])).reason).toBe("invalid_sort")
    expect(errorOf(parseListQuery([["end_at", "x"], ["start_at", "y"]])).field).toBe("start_at")
    expect(errorOf(parseListQuery([["end_at", "x"], ["start_at", "2026-05-03T00:00:00Z"]])).field).toBe("end_at")
  })
})

describe("PublicApiError from the query checks", () => {
  it("is the tagged PublicApiError with its catalogue status", () => {
    const result = parseListQuery([["limit", "0"]])
    expect(Result.isFailure(result) && result.failure instanceof PublicApiError).toBe(true)
  })
})

describe("a refused query says why, in its message (reason_code and field unchanged)", () => {
  const refusal = (pairs: QueryPairs) => {
    const result = parseListQuery(pairs)
    if (Result.isSuccess(result)) throw new Error("expected a refusal")
    return { reason: result.failure.reasonCode, field: result.failure.field, message: result.failure.toResponse().message }
  }

  it("a date without a time", () => {
    const { field, message, reason } = refusal([["start_at", "2026-01-31"]])
    expect([reason, field]).toEqual(["invalid_query", "start_at"])
    expect(message).toContain("start_at is a date without a time")
    expect(message).toContain("2026-01-31T09:00:00Z")
  })

  it("an offset's + sent raw, so read as a space, says to send %2B", () => {
    const { field, message, reason } = refusal([["end_at", "2026-01-31T09:00:00 02:00"]])
    expect([reason, field]).toEqual(["invalid_query", "end_at"])
    expect(message).toContain("a space where its offset's + should be")
    expect(message).toContain("%2B")
  })

  it("a start not before the end", () => {
    const { field, message, reason } = refusal([["start_at", "2026-02-01T00:00:00Z"], ["end_at", "2026-01-01T00:00:00Z"]])
    expect([reason, field]).toEqual(["invalid_query", "start_at"])
    expect(message).toContain("start_at must be before end_at")
  })

  it("limit, offset and sort_order name their accepted forms and bounds; a repeated key says so", () => {
    expect(refusal([["limit", "500"]]).message).toBe("limit must be a whole number from 1 to 100 in plain digits.")
    expect(refusal([["offset", "10001"]]).message).toContain("from 0 to 10,000 in plain digits; to read further, narrow the window with start_at and end_at")
    expect(refusal([["sort_order", "ASC"]]).message).toBe("sort_order must be asc or desc (lower case).")
    expect(refusal([["limit", "5"], ["limit", "5"]]).message).toBe("limit was given more than once; send it at most once.")
  })

  it("an unsupported key lists the supported ones; a route without a query says it takes none", () => {
    expect(refusal([["page", "2"]]).message).toBe("\"page\" is not a query parameter of this route; it takes limit, offset, sort_order, start_at, end_at.")
    const detail = rejectQueryKeys([["expand", "1"]])
    if (Result.isSuccess(detail)) throw new Error("expected a refusal")
    expect(detail.failure.toResponse()).toEqual({
      error: "public_api_bad_request",
      reason_code: "unsupported_filter",
      message: "This route takes no query parameters; \"expand\" was sent.",
      field: "expand"
    })
  })
})
