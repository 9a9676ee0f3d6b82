import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { ClinicalApiClient, type FetchFunction, type SyncCheckpoint, type SyncItem } from "../src/index.js"

/**
 * The list route's paging rules (api.md 4.1, behaviour.md) over an in-memory table, behind a
 * `fetch`: `start_at` inclusive, `end_at` exclusive, `created_at` order with `encounter_id`
 * compared bytewise breaking ties, offset paging with no snapshot, the 10,000 offset cap.
 * `afterPage` runs after each answer, so a test can insert rows between pages.
 */
const simulatedService = () => {
  const rows: Array<{ readonly encounter_id: string; readonly createdMs: number }> = []
  const requests: Array<URLSearchParams> = []
  let afterPage: (page: ReadonlyArray<(typeof rows)[number]>, full: boolean) => void = () => {}
  const compare = (a: (typeof rows)[number], b: (typeof rows)[number]) =>
    a.createdMs - b.createdMs || Buffer.compare(Buffer.from(a.encounter_id), Buffer.from(b.encounter_id))
  const fetch: FetchFunction = async (url) => {
    const query = new URL(url).searchParams
    requests.push(query)
    const limit = Number(query.get("limit") ?? 50)
    const offset = Number(query.get("offset") ?? 0)
    const start = query.has("start_at") ? Date.parse(query.get("start_at") ?? "") : -Infinity
    const end = query.has("end_at") ? Date.parse(query.get("end_at") ?? "") : Infinity
    if (!(limit >= 1 && limit <= 100) || !(offset >= 0 && offset <= 10_000) || !(start < end)) {
      return Response.json({ error: "api_key_validation_failed", reason_code: "invalid_query", message: "no", field: null }, {
        status: 422
      })
    }
    const matching = rows.filter((row) => row.createdMs >= start && row.createdMs < end).sort(compare)
    if (query.get("sort_order") !== "asc") matching.reverse()
    const page = matching.slice(offset, offset + limit)
    const items = page.map((row) => ({ encounter_id: row.encounter_id, created_at: new Date(row.createdMs).toISOString() }))
    const response = Response.json({ items, limit, offset, total: matching.length })
    afterPage(page, page.length === limit)
    return response
  }
  return {
    rows,
    requests,
    insert: (encounter_id: string, createdMs: number) => void rows.push({ encounter_id, createdMs }),
    onPage: (hook: typeof afterPage) => void (afterPage = hook),
    ordered: () => [...rows].sort(compare).map((row) => row.encounter_id),
    client: new ClinicalApiClient({ baseUrl: "http://service.test", apiKey: "ce_test_k", fetch })
  }
}

const T0 = Date.UTC(2024, 0, 1)
const NOW = new Date(Date.UTC(2026, 0, 1))

const collect = async (items: AsyncIterable<SyncItem>, stopAfter = Infinity) => {
  const read: Array<SyncItem> = []
  for await (const item of items) {
    read.push(item)
    if (read.length >= stopAfter) break
  }
  return read
}

const ids = (items: ReadonlyArray<SyncItem>) => items.map((item) => item.encounter.encounter_id)

describe("syncEncounters (list rules simulated)", () => {
  it("yields every encounter once, in order, across instants shared by more encounters than a page", async () => {
    const service = simulatedService()
    // 3,000 encounters on 40 instants: groups of up to ~150, ids in an order unlike insertion order.
    for (let index = 0; index < 3_000; index += 1) service.insert(`enc_${(index * 7919) % 3001}_é`, T0 + (index % 40) * 1000)
    const read = await collect(service.client.syncEncounters({ since: new Date(T0), now: () => NOW }))
    expect(ids(read)).toEqual(service.ordered())
    for (const query of service.requests) {
      expect(Number(query.get("offset"))).toBeLessThanOrEqual(100)
      expect(query.get("sort_order")).toBe("asc")
    }
  })

  it("reads far past the 10,000 offset cap", async () => {
    const service = simulatedService()
    for (let index = 0; index < 12_345; index += 1) service.insert(`enc_${index}`, T0 + index)
    const read = await collect(service.client.syncEncounters({ since: "2023-12-31T23:00:00-01:00", now: () => NOW }))
    expect(read).toHaveLength(12_345)
    expect(ids(read)).toEqual(service.ordered())
  })

  it("starts at since, inclusive, and stops settleSeconds before the clock", async () => {
    const service = simulatedService()
    service.insert("before", T0 - 1)
    service.insert("at_since", T0)
    service.insert("settled", NOW.getTime() - 60_001)
    service.insert("too_recent", NOW.getTime() - 60_000)
    const first = await collect(service.client.syncEncounters({ since: new Date(T0), now: () => NOW }))
    expect(ids(first)).toEqual(["at_since", "settled"])
    const last = first.at(-1)?.checkpoint
    expect(last).toEqual({ createdAt: new Date(NOW.getTime() - 60_001).toISOString(), encounterIds: ["settled"] })
    const later = await collect(service.client.syncEncounters({
      since: new Date(T0),
      checkpoint: last ?? null,
      now: () => new Date(NOW.getTime() + 1000)
    }))
    expect(ids(later)).toEqual(["too_recent"])
    const none = await collect(service.client.syncEncounters({ since: new Date(NOW), settleSeconds: 0, now: () => NOW }))
    expect(none).toEqual([])
  })

  it("property: encounters created during the sync neither repeat nor skip anything; those ahead are yielded in place", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 9999 })), { minLength: 1, maxLength: 400 }),
        fc.array(fc.tuple(fc.integer({ min: -20, max: 20 }), fc.integer({ min: 0, max: 9999 })), { maxLength: 60 }),
        fc.integer({ min: 1, max: 30 }),
        async (initial, inserts, pageSize) => {
          const service = simulatedService()
          initial.forEach(([second, id], index) => service.insert(`a${id}_${index}`, T0 + second * 1000))
          const yielded: Array<string> = []
          const ahead = new Set<string>()
          const pending = [...inserts]
          let readUpTo = -Infinity
          service.onPage((page, full) => {
            // The sync has read up to the end of this page; it reads on only when the page is full.
            const position = page.at(-1)
            for (const [delta, id] of pending.splice(0, 3)) {
              const createdMs = (position?.createdMs ?? T0) + delta * 1000
              // Sorting before and after the initial ids ("a...") at a shared instant.
              const encounterId = `${id % 2 === 0 ? "0" : "b"}${id}_${service.rows.length}`
              service.insert(encounterId, createdMs)
              // Guaranteed: an instant after every one the sync has been answered, before the bound.
              readUpTo = Math.max(readUpTo, position?.createdMs ?? -Infinity)
              if (full && createdMs > readUpTo && createdMs < NOW.getTime() - 60_000) ahead.add(encounterId)
            }
          })
          for await (const { encounter } of service.client.syncEncounters({ since: new Date(T0), pageSize, now: () => NOW })) {
            yielded.push(encounter.encounter_id)
          }
          expect(new Set(yielded).size).toBe(yielded.length)
          const createdMs = new Map(service.rows.map((row) => [row.encounter_id, row.createdMs]))
          for (let index = 1; index < yielded.length; index += 1) {
            expect(createdMs.get(yielded[index] ?? "")).toBeGreaterThanOrEqual(createdMs.get(yielded[index - 1] ?? "") ?? 0)
          }
          // In the service's order exactly, apart from encounters created at an instant already read.
          const rank = new Map(service.ordered().map((id, index) => [id, index]))
          const guaranteed = yielded.filter((id) => id.startsWith("a") || ahead.has(id))
          for (let index = 1; index < guaranteed.length; index += 1) {
            expect(rank.get(guaranteed[index] ?? "")).toBeGreaterThan(rank.get(guaranteed[index - 1] ?? "") ?? -1)
          }
          const read = new Set(yielded)
          for (let index = 0; index < initial.length; index += 1) {
            const id = `a${initial[index]?.[1]}_${index}`
            expect(read.has(id), id).toBe(true)
          }
          for (const id of ahead) expect(read.has(id), id).toBe(true)
        }
      ),
      { numRuns: 300 }
    )
  })

  it("property: stopped at any point, it resumes from the last checkpoint and ends as one uninterrupted sync", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 0, max: 50 }), { minLength: 1, maxLength: 300 }),
        fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 10 }),
        fc.integer({ min: 1, max: 25 }),
        async (seconds, stops, pageSize) => {
          const service = simulatedService()
          seconds.forEach((second, index) => service.insert(`enc_${(index * 31) % 997}_${index}`, T0 + second * 1000))
          const options = { since: new Date(T0), pageSize, now: () => NOW }
          const whole = ids(await collect(service.client.syncEncounters(options)))
          const pieces: Array<string> = []
          let checkpoint: SyncCheckpoint | null = null
          for (const stop of [...stops, Infinity]) {
            // The checkpoint goes through JSON, as a job would store it.
            const stored: SyncCheckpoint | null = JSON.parse(JSON.stringify(checkpoint))
            const read = await collect(service.client.syncEncounters({ ...options, checkpoint: stored }), stop)
            pieces.push(...ids(read))
            checkpoint = read.at(-1)?.checkpoint ?? checkpoint
          }
          expect(pieces).toEqual(whole)
          expect(whole).toEqual(service.ordered())
        }
      ),
      { numRuns: 150 }
    )
  })

  it("checks its options", async () => {
    const service = simulatedService()
    const run = (options: Parameters<typeof service.client.syncEncounters>[0]) => collect(service.client.syncEncounters(options))
    await expect(run({ since: "2026-05-01T12:00:00" })).rejects.toThrow(TypeError)
    await expect(run({ since: "2026-05-01" })).rejects.toThrow(TypeError)
    await expect(run({ since: "yesterday" })).rejects.toThrow(TypeError)
    await expect(run({ since: new Date(T0), pageSize: 101 })).rejects.toThrow(RangeError)
    await expect(run({ since: new Date(T0), settleSeconds: -1 })).rejects.toThrow(RangeError)
    await expect(run({ since: new Date(T0), checkpoint: { createdAt: "soon", encounterIds: [] } })).rejects.toThrow(TypeError)
    expect(service.requests).toEqual([])
  })
})
