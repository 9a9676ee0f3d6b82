import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import { parseRfc3339Instant, Timestamp } from "../src/index.js"

describe("RFC 3339 instants", () => {
  it("cuts a long fraction to milliseconds instead of rounding into the next second", () => {
    expect(parseRfc3339Instant("2026-05-01T12:00:00.99999999999999999Z")?.toISOString()).toBe("2026-05-01T12:00:00.999Z")
    expect(parseRfc3339Instant("2026-05-01T12:00:00.5Z")?.toISOString()).toBe("2026-05-01T12:00:00.500Z")
  })

  it("applies the offset, and keeps years below 100 as written", () => {
    expect(parseRfc3339Instant("2026-05-01T14:00:00+02:00")?.toISOString()).toBe("2026-05-01T12:00:00.000Z")
    expect(parseRfc3339Instant("0099-12-31T23:59:59-00:30")?.toISOString()).toBe("0100-01-01T00:29:59.000Z")
  })

  it("refuses leap seconds, year 0000 and impossible dates (decision documented in the README)", () => {
    for (const text of ["2026-06-30T23:59:60Z", "0000-01-01T00:00:00Z", "2026-02-29T00:00:00Z", "2026-05-01T24:00:00Z"]) {
      expect(parseRfc3339Instant(text)).toBeUndefined()
    }
  })

  it("Timestamp encodes as UTC with milliseconds", () => {
    expect(Schema.encodeSync(Timestamp)(new Date("2026-05-01T12:00:00Z"))).toBe("2026-05-01T12:00:00.000Z")
  })
})
