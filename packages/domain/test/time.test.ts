import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import fc from "fast-check"
import { formatTimestamp, parseRfc3339Instant, Timestamp, withTimestampsAsText } from "../src/index.js"

describe("RFC 3339 instants", () => {
  it("cuts a long fraction to milliseconds instead of rounding into the next second", () => {
    expect(parseRfc3339Instant("2026-05-01T12:00:00.99999999999999999Z")?.toISOString()).toBe("2026-05-01T12:00:00.999Z")
    expect(parseRfc3339Instant("2026-05-01T12:00:00.5Z")?.toISOString()).toBe("2026-05-01T12:00:00.500Z")
  })

  it("applies the offset, and keeps years below 100 as written", () => {
    expect(parseRfc3339Instant("2026-05-01T14:00:00+02:00")?.toISOString()).toBe("2026-05-01T12:00:00.000Z")
    expect(parseRfc3339Instant("0099-12-31T23:59:59-00:30")?.toISOString()).toBe("0100-01-01T00:29:59.000Z")
  })

  it("refuses leap seconds, year 0000 and impossible dates (docs/behaviour.md, Query values)", () => {
    for (const text of ["2026-06-30T23:59:60Z", "0000-01-01T00:00:00Z", "2026-02-29T00:00:00Z", "2026-05-01T24:00:00Z"]) {
      expect(parseRfc3339Instant(text)).toBeUndefined()
    }
  })

  it("Timestamp encodes as UTC with milliseconds", () => {
    expect(Schema.encodeSync(Timestamp)(new Date("2026-05-01T12:00:00Z"))).toBe("2026-05-01T12:00:00.000Z")
  })
})

describe("timestamps written as text", () => {
  const edges = [
    "0001-01-01T00:00:00.000Z", "0099-12-31T23:59:59.999Z", "0999-03-01T00:00:00.000Z", "1969-12-31T23:59:59.999Z",
    "1970-01-01T00:00:00.000Z", "2000-02-29T12:34:56.007Z", "2100-02-28T23:59:59.090Z", "2400-02-29T00:00:00.100Z",
    "9999-12-31T23:59:59.999Z"
  ]

  it("formatTimestamp writes what toISOString writes, at the edges of its fast range and past them", () => {
    for (const text of edges) expect(formatTimestamp(new Date(text))).toBe(text)
    for (const ms of [-62_135_596_800_001, 253_402_300_800_000, -8.64e15, 8.64e15]) {
      expect(formatTimestamp(new Date(ms))).toBe(new Date(ms).toISOString())
    }
    expect(() => formatTimestamp(new Date(Number.NaN))).toThrow(RangeError)
  })

  it("formatTimestamp writes what toISOString writes, for any instant", () => {
    fc.assert(fc.property(fc.date({ noInvalidDate: true }), (date) => formatTimestamp(date) === date.toISOString()), {
      numRuns: 20_000
    })
    const years1To9999 = fc.integer({ min: -62_135_596_800_000, max: 253_402_300_799_999 }).map((ms) => new Date(ms))
    fc.assert(fc.property(years1To9999, (date) => formatTimestamp(date) === date.toISOString()), { numRuns: 20_000 })
  })

  it("JSON.stringify of withTimestampsAsText(value) is JSON.stringify(value), and the value is left as it was", () => {
    const withDates = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: "small" },
        fc.jsonValue({ maxDepth: 1 }),
        fc.date(),
        fc.constant(undefined),
        fc.array(tie("value"), { maxLength: 4 }),
        fc.dictionary(fc.string({ maxLength: 6 }), tie("value"), { maxKeys: 4 })
      )
    })).value
    const hostileKey = JSON.parse('{"__proto__":{"at":"x"},"b":[1,null]}') as Record<string, unknown>
    hostileKey["at"] = new Date(0)
    expect(JSON.stringify(withTimestampsAsText(hostileKey))).toBe(JSON.stringify(hostileKey))
    fc.assert(fc.property(withDates, (value) => {
      const before = JSON.stringify(value)
      expect(JSON.stringify(withTimestampsAsText(value))).toBe(before)
      expect(JSON.stringify(value)).toBe(before)
    }), { numRuns: 2000 })
  })

  it("withTimestampsAsText copies only what holds a Date: the rest is returned as it is", () => {
    const turns = [{ speaker: "clinician", text: "Hello", start: 0, end: 1.5 }]
    const patient = { patient_id: "pat_1", first_name: "Ada" }
    const page = { items: [{ created_at: new Date(0), patient, documents: [] }], total: 1 }
    const written = withTimestampsAsText(page) as typeof page
    expect(written).not.toBe(page)
    expect(written.items[0]).not.toBe(page.items[0])
    expect(written.items[0]?.created_at).toBe("1970-01-01T00:00:00.000Z")
    expect(written.items[0]?.patient).toBe(patient)
    expect(page.items[0]?.created_at).toEqual(new Date(0))
    const transcript = { turns, provider: "x" }
    expect(withTimestampsAsText(transcript)).toBe(transcript)
    fc.assert(fc.property(fc.jsonValue(), (value) => withTimestampsAsText(value) === value), { numRuns: 1000 })
  })
})
