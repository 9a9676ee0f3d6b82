import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { createHash } from "node:crypto"
import { canonicalEventText, type LedgerEvent, type LedgerHashing, startEventsDigest, toHex } from "../src/index.js"
import { prop } from "./support/prop.js"

const hashing: LedgerHashing = { sha256: (data) => createHash("sha256").update(data).digest() }

const ledgerEvent = (n: number): LedgerEvent => ({
  recordedSeq: String(n + 1),
  eventId: `dsc_${n}`,
  occurredAt: "2026-11-27T10:00:00.000000Z",
  organizationId: "org_a",
  apiKeyId: "key_a",
  operationId: "getPublicEncounter",
  encounterId: `enc_${n}`,
  documentId: n % 3 === 0 ? null : `doc_${n}`,
  patientId: null,
  requestId: `req_${n}`,
  callerRequestId: n % 2 === 0 ? "caller-é✓" : null
})

/** What a seal states, by its definition (docs/ledger.md), from all the events at once. */
const expected = (events: ReadonlyArray<LedgerEvent>) => {
  const hashes = events.map((event) => hashing.sha256(canonicalEventText(event)))
  const index = Buffer.concat(events.map((event, i) => {
    const entry = Buffer.alloc(24)
    entry.writeBigUInt64BE(BigInt(event.recordedSeq))
    Buffer.from(hashes[i]!).copy(entry, 8, 0, 16)
    return entry
  }))
  return { count: events.length, eventsDigest: toHex(hashing.sha256(Buffer.concat(hashes))), index: toHex(index) }
}

describe("startEventsDigest", () => {
  prop(
    "events fed in any parts, past the buffers' growth, give the seal's digest and index of all of them",
    [fc.integer({ min: 1, max: 1500 }), fc.array(fc.integer({ min: 1, max: 700 }), { minLength: 1, maxLength: 6 })],
    ([count, parts]) => {
      const events = Array.from({ length: count }, (_, n) => ledgerEvent(n))
      const digest = startEventsDigest(hashing, 20_000)
      let fed = 0
      for (let part = 0; fed < count; part++) {
        const end = Math.min(count, fed + parts[part % parts.length]!)
        for (; fed < end; fed++) digest.add(events[fed]!)
      }
      const sealed = digest.finish()
      expect({ ...sealed, index: toHex(sealed.index) }).toEqual(expected(events))
    },
    { fastCheck: { numRuns: 25 } }
  )

  it("refuses an event past its capacity, and a digest of no event", () => {
    const full = startEventsDigest(hashing, 2)
    full.add(ledgerEvent(0))
    full.add(ledgerEvent(1))
    expect(() => full.add(ledgerEvent(2))).toThrow(RangeError)
    expect(full.finish().count).toBe(2)
    expect(() => startEventsDigest(hashing, 2).finish()).toThrow(RangeError)
  })
})
