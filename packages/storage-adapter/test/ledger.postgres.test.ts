import { ApiKeyId, DisclosureEventId, type DisclosureEvent, EncounterId, OrganizationId, RequestId } from "@clinical-api/domain"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Schema, Scope } from "effect"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import postgres from "postgres"
import {
  DisclosureSealerLive,
  EVENTS_PER_DIGEST_SLICE,
  disclosureInsertStatement,
  ledgerHead,
  ledgerSealsMigration,
  ledgerSignerFromSecret,
  MAX_EVENTS_PER_SEAL,
  migrate,
  migrations,
  PgClient,
  PgClientLayer,
  sealAll,
  sealPending,
  verifyExportFile,
  verifyLedger,
  writeSealedExport
} from "../src/index.js"
import { serverDatabases } from "../src/testing/test-database.js"

/**
 * The disclosure ledger's seals on a real PostgreSQL server (DATABASE_URL): every tampering
 * the database's owner could do is named by `verifyLedger`, a sealed export verifies offline
 * and fails on any changed byte, and two sealers on concurrent writers make one chain that
 * verifies, each event sealed within 10 s of its commit.
 */
const adminUrl = process.env["DATABASE_URL"]
const signer = ledgerSignerFromSecret("a ledger key for the tests, at least 32 characters")
const allMigrations = migrations.some((migration) => migration.version === ledgerSealsMigration.version)
  ? migrations
  : [...migrations, ledgerSealsMigration]

let counter = 0
const event = (organization: string, occurredAt: Date = new Date()): DisclosureEvent => {
  counter++
  return {
    eventId: Schema.decodeSync(DisclosureEventId)(`dsc_ledger${String(counter).padStart(6, "0")}`),
    occurredAt,
    organizationId: Schema.decodeSync(OrganizationId)(organization),
    apiKeyId: Schema.decodeSync(ApiKeyId)("key_ledger"),
    operationId: "listPublicEncounters",
    encounterId: Schema.decodeSync(EncounterId)(`enc_${counter}`),
    documentId: null,
    patientId: null,
    requestId: Schema.decodeSync(RequestId)(`req_${counter.toString(16).padStart(32, "0")}`),
    callerRequestId: counter % 2 === 0 ? `caller-${counter}` : null
  } as DisclosureEvent
}

describe.skipIf(adminUrl === undefined)("disclosure ledger on PostgreSQL", () => {
  let scope: Scope.Closeable
  let url: string
  let owner: postgres.Sql

  beforeAll(async () => {
    scope = await Effect.runPromise(Scope.make())
    const database = await Effect.runPromise(Scope.provide(serverDatabases(adminUrl!).fresh, scope))
    url = database.url
    owner = postgres(url, { max: 2, onnotice: () => {} })
    await run(migrate(allMigrations))
  })
  afterAll(async () => {
    await owner?.end({ timeout: 5 })
    await Effect.runPromise(Scope.close(scope, Exit.void))
  })

  const client = () => PgClientLayer({ url, maxConnections: 4 })
  const run = <A, E>(effect: Effect.Effect<A, E, PgClient>) => Effect.runPromise(Effect.provide(effect, client()))
  const record = (events: ReadonlyArray<DisclosureEvent>) =>
    run(Effect.flatMap(PgClient, (pg) => pg.run("test.record", (sql) => disclosureInsertStatement(sql, events))))
  const verify = (query: Parameters<typeof verifyLedger>[1] = {}) => run(verifyLedger(signer, query))
  /** A fresh ledger for each test: the events and seals of the ones before are removed as the owner. */
  const reset = async () => {
    await owner.unsafe("ALTER TABLE disclosure_seals DISABLE TRIGGER USER")
    await owner.unsafe("TRUNCATE disclosure_seals, disclosure_events")
    await owner.unsafe("ALTER TABLE disclosure_seals ENABLE TRIGGER USER")
  }
  /**
   * Runs `seal` until it has sealed, for at most 10 s. On a server shared with other test
   * databases, a transaction the sealable bound cannot yet tell apart from this database's holds
   * sealing back until it ends (seen once under two CI runs at a time): later, never wrong.
   */
  const untilSealed = async <A>(seal: () => Promise<A>, sealed: (result: A) => boolean): Promise<A> => {
    const deadline = Date.now() + 10_000
    for (;;) {
      const result = await seal()
      if (sealed(result) || Date.now() > deadline) return result
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
  /** Three seals over 30 events of two organizations; returns the events in chain order. */
  const sealedLedger = async () => {
    await reset()
    for (let seal = 0; seal < 3; seal++) {
      for (let batch = 0; batch < 2; batch++) {
        await record([event("org_a"), event("org_b"), event("org_a"), event("org_a"), event("org_b")])
      }
      expect(await untilSealed(() => run(sealAll(signer)), (seals) => seals > 0)).toBe(1)
    }
    return owner<Array<{ event_id: string; recorded_seq: string; recorded_xid: string }>>`
      SELECT event_id, recorded_seq::text, recorded_xid::text FROM disclosure_events ORDER BY recorded_xid, recorded_seq`
  }

  it("seals committed events into a chain that verifies, counting an organization's and a range's", async () => {
    const events = await sealedLedger()
    expect(events).toHaveLength(30)
    const all = await verify()
    expect(all.finding).toBeNull()
    expect(all).toMatchObject({ verified: 30, counted: 30, seals: 3, unsealed: 0 })
    expect((await verify({ organizationId: "org_a" })).counted).toBe(18)
    expect((await verify({ organizationId: "org_b", to: new Date(Date.now() + 60_000) })).counted).toBe(12)
    expect((await verify({ from: new Date(Date.now() + 60_000) })).counted).toBe(0)
    const head = await run(ledgerHead)
    expect(head).toMatchObject({ sequence: 3, count: 10 })
    await record([event("org_a")])
    expect(await verify()).toMatchObject({ verified: 30, unsealed: 1, finding: null })
  })

  it("hashes a seal's events in slices, letting the event loop turn between them (requests wait for no whole seal)", async () => {
    await reset()
    const count = 4 * EVENTS_PER_DIGEST_SLICE
    for (let start = 0; start < count; start += 500) await record(Array.from({ length: 500 }, () => event("org_a")))
    let turns = 0
    let counting = true
    const countTurns = () => {
      turns++
      if (counting) setImmediate(countTurns)
    }
    const turnsAtEachEventHash: Array<number> = []
    const watching: typeof signer = {
      ...signer,
      sha256: (data) => {
        if (typeof data === "string" && data.startsWith("disclosure-event/")) turnsAtEachEventHash.push(turns)
        return signer.sha256(data)
      }
    }
    setImmediate(countTurns)
    const seal = await untilSealed(() => run(sealPending(watching)), (sealed) => sealed !== null).finally(() => (counting = false))
    expect(seal).toMatchObject({ count })
    expect(turnsAtEachEventHash).toHaveLength(count)
    // One value of the turn counter per slice: the loop turned between slices, never within one.
    expect(new Set(turnsAtEachEventHash).size).toBe(4)
    expect(await verify()).toMatchObject({ verified: count, finding: null })
  })

  it("holds a seal's events a slice at a time: when the first is hashed, the rest are not yet in memory", async () => {
    await reset()
    for (let start = 0; start < MAX_EVENTS_PER_SEAL; start += 1000) await record(Array.from({ length: 1000 }, () => event("org_a")))
    setFlagsFromString("--expose-gc")
    const collectGarbage = runInNewContext("gc") as () => void
    const liveHeap = () => {
      collectGarbage()
      return process.memoryUsage().heapUsed
    }
    let heapGrowthAtFirstHash: number | null = null
    let liveAtStart = 0
    const watching: typeof signer = {
      ...signer,
      sha256: (data) => {
        if (heapGrowthAtFirstHash === null && typeof data === "string" && data.startsWith("disclosure-event/")) {
          heapGrowthAtFirstHash = liveHeap() - liveAtStart
        }
        return signer.sha256(data)
      }
    }
    liveAtStart = liveHeap()
    const seal = await untilSealed(() => run(sealPending(watching)), (sealed) => sealed !== null)
    expect(seal).toMatchObject({ count: MAX_EVENTS_PER_SEAL })
    // Measured: about 0.3 MB; all 20,000 rows read at once were about 10 MB.
    expect(heapGrowthAtFirstHash).toBeLessThan(3_000_000)
    expect(await verify()).toMatchObject({ verified: MAX_EVENTS_PER_SEAL, finding: null })
  }, 60_000)

  it("names the event whose field the owner changed", async () => {
    const events = await sealedLedger()
    const target = events[13]!
    await owner`UPDATE disclosure_events SET organization_id = 'org_b' WHERE event_id = ${target.event_id}`
    const result = await verify()
    expect(result.finding).toMatchObject({ kind: "event_changed", eventId: target.event_id, sealSequence: 2 })
    expect(result.finding?.message).toContain(target.event_id)
  })

  it("names the event the owner deleted", async () => {
    const events = await sealedLedger()
    const target = events[22]!
    await owner`DELETE FROM disclosure_events WHERE event_id = ${target.event_id}`
    const result = await verify()
    expect(result.finding).toMatchObject({ kind: "event_removed", recordedSeq: target.recorded_seq, sealSequence: 3 })
    expect(result.finding?.message).toContain(`recorded_seq ${target.recorded_seq}`)
  })

  it("names an event the owner inserted into the past, inside a sealed range or after the newest seal", async () => {
    const events = await sealedLedger()
    const forged = event("org_a", new Date(Date.now() - 3_600_000))
    await record([forged])
    const late = await verify()
    expect(late.finding).toMatchObject({ kind: "event_inserted", eventId: forged.eventId })

    await owner`DELETE FROM disclosure_events WHERE event_id = ${forged.eventId}`
    expect((await verify()).finding).toBeNull()
    const inside = event("org_a")
    await record([inside])
    await owner`UPDATE disclosure_events SET recorded_xid = ${events[4]!.recorded_xid}::xid8 WHERE event_id = ${inside.eventId}`
    const result = await verify()
    expect(result.finding).toMatchObject({ kind: "event_inserted", eventId: inside.eventId, sealSequence: 1 })
  })

  it("names the first of two events the owner reordered", async () => {
    const events = await sealedLedger()
    // Two events of one seal from different transactions: their transaction ids swapped.
    const first = events[10]!
    const second = events[15]!
    expect(first.recorded_xid).not.toBe(second.recorded_xid)
    await owner.begin(async (tx) => {
      await tx`UPDATE disclosure_events SET recorded_xid = ${second.recorded_xid}::xid8 WHERE event_id = ${first.event_id}`
      await tx`UPDATE disclosure_events SET recorded_xid = ${first.recorded_xid}::xid8 WHERE event_id = ${second.event_id}`
    })
    const result = await verify()
    expect(result.finding).toMatchObject({ kind: "event_reordered", sealSequence: 2 })
    expect(result.finding?.eventId).toBe(events[11]!.event_id)
  })

  it("names a seal the owner changed or removed", async () => {
    await sealedLedger()
    await owner.unsafe("ALTER TABLE disclosure_seals DISABLE TRIGGER USER")
    await owner`UPDATE disclosure_seals SET event_count = event_count WHERE sequence = 2`
    await owner`UPDATE disclosure_seals SET sealed_at = sealed_at + interval '1 ms' WHERE sequence = 2`
    expect((await verify()).finding).toMatchObject({ kind: "seal_changed", sealSequence: 2 })
    await owner`DELETE FROM disclosure_seals WHERE sequence = 2`
    expect((await verify()).finding).toMatchObject({ kind: "seal_removed", sealSequence: 2 })
    await owner.unsafe("ALTER TABLE disclosure_seals ENABLE TRIGGER USER")
    await expect(owner`DELETE FROM disclosure_seals`).rejects.toThrow(/append-only/)
  })

  it("writes a sealed export that verifies offline, and fails on any changed byte", async () => {
    await sealedLedger()
    const lines: Array<string> = []
    const outcome = await run(
      writeSealedExport(signer, { organizationId: "org_b", from: null, to: null }, (more) => Effect.sync(() => void lines.push(...more)))
    )
    expect(outcome).toMatchObject({ exported: 12, finding: null })
    const file = lines.join("\n") + "\n"
    const checked = verifyExportFile(file)
    expect(checked).toMatchObject({ finding: null, events: 12, seals: 3 })
    expect(verifyExportFile(file, Buffer.from(signer.publicKey).toString("hex")).finding).toBeNull()
    expect(verifyExportFile(file, "00".repeat(32)).finding).toMatch(/pinned/)
    const bytes = Buffer.from(file)
    for (let at = 0; at < bytes.length; at++) {
      const changed = Buffer.from(bytes)
      changed[at] = changed[at] === 0x30 ? 0x31 : 0x30
      const result = verifyExportFile(changed.toString("latin1"))
      if (result.finding === null) throw new Error(`byte ${at} (${JSON.stringify(file.slice(Math.max(0, at - 20), at + 20))}) changed undetected`)
    }
    const withoutLine = file.split("\n").filter((_, i) => i !== 3).join("\n")
    expect(verifyExportFile(withoutLine).finding).not.toBeNull()
  })

  it("two sealers beside concurrent writers make one chain that verifies, every event sealed within 10 s of its commit", async () => {
    await reset()
    const committedAt = new Map<string, number>()
    const sealers = Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          yield* Layer.build(Layer.mergeAll(
            DisclosureSealerLive(signer, "200 millis").pipe(Layer.provide(client())),
            DisclosureSealerLive(signer, "300 millis").pipe(Layer.provide(client()))
          ))
          yield* Effect.sleep("8 seconds")
        })
      )
    )
    const writer = async (name: string) => {
      const sql = postgres(url, { max: 1, onnotice: () => {} })
      try {
        for (let i = 0; i < 25; i++) {
          const events = [event(name), event(name)]
          await sql.begin(async (tx) => {
            await disclosureInsertStatement(tx as unknown as postgres.Sql, events)
            // Some transactions stay open while others commit: they commit out of order.
            if (i % 5 === 0) await new Promise((resolve) => setTimeout(resolve, 700))
          })
          for (const e of events) committedAt.set(e.eventId, Date.now())
        }
      } finally {
        await sql.end({ timeout: 5 })
      }
    }
    await Promise.all([writer("org_a"), writer("org_b"), writer("org_c"), writer("org_a")])
    await sealers
    const result = await verify()
    expect(result.finding).toBeNull()
    expect(result).toMatchObject({ verified: 200, unsealed: 0 })
    const seals = await owner<Array<{ sealed_at: Date; event_index: Uint8Array }>>`SELECT sealed_at, event_index FROM disclosure_seals`
    expect(seals.length).toBeGreaterThan(3)
    const sealedAtBySeq = new Map<string, number>()
    for (const seal of seals) {
      const view = Buffer.from(seal.event_index)
      for (let at = 0; at < view.length; at += 24) sealedAtBySeq.set(view.readBigUInt64BE(at).toString(), seal.sealed_at.getTime())
    }
    const rows = await owner<Array<{ event_id: string; seq: string }>>`SELECT event_id, recorded_seq::text AS seq FROM disclosure_events`
    for (const row of rows) {
      const sealedAt = sealedAtBySeq.get(row.seq)
      expect(sealedAt).toBeDefined()
      expect(sealedAt! - committedAt.get(row.event_id)!).toBeLessThan(10_000)
    }
  }, 60_000)
})
