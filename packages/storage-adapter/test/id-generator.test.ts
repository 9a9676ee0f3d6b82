import { compareBytewise, type IdKind } from "@clinical-api/domain"
import { describe, expect, it } from "@effect/vitest"
import { newId } from "../src/index.js"

const kinds: ReadonlyArray<readonly [IdKind, string]> = [
  ["disclosure", "dsc_"],
  ["request", "req_"],
  ["api_key", "key_"],
  ["webhook_event", "evt_"],
  ["webhook_delivery", "dlv_"],
  ["webhook_subscription", "whs_"]
]

const pause = (ms: number) => new Promise((done) => setTimeout(done, ms))

describe("newId", () => {
  it("is the kind's prefix and 32 lowercase hex digits, for every kind", () => {
    for (const [kind, prefix] of kinds) {
      expect(newId(kind)).toMatch(new RegExp(`^${prefix}[0-9a-f]{32}$`))
    }
  })

  it("disclosure ids lead with the millisecond they were made, so later ids sort after earlier ones", async () => {
    const before = Date.now()
    const first = newId("disclosure")
    await pause(5)
    const second = newId("disclosure")
    const after = Date.now()
    expect(compareBytewise(first, second)).toBeLessThan(0)
    for (const id of [first, second]) {
      const madeAt = Number.parseInt(id.slice(4, 16), 16)
      expect(madeAt).toBeGreaterThanOrEqual(before)
      expect(madeAt).toBeLessThanOrEqual(after)
    }
  })

  it("ids made within one millisecond differ in their 80 random bits", () => {
    const ids = Array.from({ length: 20_000 }, () => newId("disclosure"))
    expect(new Set(ids).size).toBe(ids.length)
    expect(new Set(ids.map((id) => id.slice(16))).size).toBe(ids.length)
  })

  it("other kinds are random throughout: no shared leading digits between ids made together", () => {
    const ids = Array.from({ length: 64 }, () => newId("request"))
    expect(new Set(ids.map((id) => id.slice(4, 7))).size).toBeGreaterThan(32)
  })
})
