import { ApiKeyId, DisclosureEventId, type DisclosureEvent, EncounterId, OrganizationId, RequestId } from "@clinical-api/domain"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Schema, Scope } from "effect"
import postgres from "postgres"
import {
  archiveDisclosures,
  disclosureInsertStatement,
  disclosurePartitions,
  ensureDisclosurePartitions,
  ledgerSignerFromSecret,
  migrate,
  migrations,
  PgClient,
  PgClientLayer,
  sealableBound,
  sealPending,
  verifyExportFileAt,
  verifyLedger
} from "../src/index.js"
import { embeddedDatabases, serverDatabases } from "../src/testing/test-database.js"

/**
 * The disclosure ledger partitioned by month on a real PostgreSQL server (DATABASE_URL): a
 * database migrated with events keeps them and their chain, partitions are made ahead, and an
 * event of a month without a partition is recorded all the same and moved into its month.
 */
const adminUrl = process.env["DATABASE_URL"]
const signer = ledgerSignerFromSecret("a ledger key for the partition tests, 32 characters")
const beforePartitions = migrations.filter((migration) => migration.version < 10)

let counter = 0
const event = (organization: string, occurredAt: Date): DisclosureEvent => {
  counter++
  return {
    eventId: Schema.decodeSync(DisclosureEventId)(`dsc_part${String(counter).padStart(8, "0")}`),
    occurredAt,
    organizationId: Schema.decodeSync(OrganizationId)(organization),
    apiKeyId: Schema.decodeSync(ApiKeyId)("key_part"),
    operationId: "listPublicEncounters",
    encounterId: Schema.decodeSync(EncounterId)(`enc_${counter}`),
    documentId: null,
    patientId: null,
    requestId: Schema.decodeSync(RequestId)(`req_${counter.toString(16).padStart(32, "0")}`),
    callerRequestId: null
  } as DisclosureEvent
}

const at = (iso: string) => new Date(iso)

describe.skipIf(adminUrl === undefined)("disclosure ledger partitions on PostgreSQL", () => {
  let scope: Scope.Closeable
  const databases: Array<{ url: string; owner: postgres.Sql }> = []

  let directory: string
  beforeAll(async () => {
    scope = await Effect.runPromise(Scope.make())
    directory = mkdtempSync(join(tmpdir(), "ledger-archive-"))
  })
  afterAll(async () => {
    rmSync(directory, { recursive: true, force: true })
    for (const database of databases) await database.owner.end({ timeout: 5 })
    await Effect.runPromise(Scope.close(scope, Exit.void))
  })

  const freshDatabase = async () => {
    const database = await Effect.runPromise(Scope.provide(serverDatabases(adminUrl!).fresh, scope))
    const entry = { url: database.url, owner: postgres(database.url, { max: 2, onnotice: () => {} }) }
    databases.push(entry)
    return entry
  }
  const runOn = (url: string) => <A, E>(effect: Effect.Effect<A, E, PgClient>) =>
    Effect.runPromise(Effect.provide(effect, PgClientLayer({ url, maxConnections: 2 })))
  const recordOn = (url: string, events: ReadonlyArray<DisclosureEvent>) =>
    runOn(url)(Effect.flatMap(PgClient, (pg) => pg.run("test.record", (sql) => disclosureInsertStatement(sql, events))))
  /**
   * One seal, sealed at `sealedAt`, of every event recorded so far. The sealer passes over an
   * event while a transaction it cannot tell from this database's is running (another test's,
   * on a loaded server): it waits until every event is sealable.
   */
  const sealOn = async (url: string, sealedAt: string) => {
    const run = runOn(url)
    for (let attempt = 0; ; attempt++) {
      const [state] = await run(Effect.flatMap(PgClient, (pg) => pg.run("test.sealable", (sql) => sql<Array<{ ready: boolean }>>`
        SELECT coalesce(max(recorded_xid) < (${sealableBound(sql)}), true) AS ready FROM disclosure_events`)))
      if (state!.ready) break
      if (attempt > 300) throw new Error("the events were never sealable")
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    const seal = await run(sealPending(signer, () => at(sealedAt)))
    expect(seal).not.toBeNull()
    const [unsealed] = await run(Effect.flatMap(PgClient, (pg) => pg.run("test.unsealed", (sql) => sql<Array<{ count: number }>>`
      SELECT count(*)::int AS count FROM disclosure_events
      WHERE (recorded_xid, recorded_seq) > (${seal!.last.xid}::xid8, ${seal!.last.seq}::bigint)`)))
    expect(unsealed!.count).toBe(0)
  }

  it("migrates a database holding sealed events of several months: every event kept in its month's partition, the chain verifies and goes on", async () => {
    const { url, owner } = await freshDatabase()
    const run = runOn(url)
    await run(migrate(beforePartitions))
    await recordOn(url, [event("org_a", at("2026-01-30T10:00:00Z")), event("org_b", at("2026-01-31T23:59:59.999Z"))])
    await sealOn(url, "2026-01-31T23:59:59.999Z")
    await recordOn(url, [event("org_a", at("2026-02-01T00:00:00Z")), event("org_a", at("2026-02-15T12:00:00Z"))])
    await recordOn(url, [event("org_b", at("2026-03-02T08:00:00Z"))])
    await sealOn(url, "2026-03-02T08:00:01Z")
    await recordOn(url, [event("org_a", at("2026-03-02T08:00:02Z"))])
    const before = await owner`SELECT event_id, recorded_seq::text, recorded_xid::text FROM disclosure_events ORDER BY recorded_xid, recorded_seq`
    expect((await run(verifyLedger(signer))).finding).toBeNull()

    const report = await run(migrate(migrations))
    expect(report.applied).toEqual([10, 11])
    const after = await owner`SELECT event_id, recorded_seq::text, recorded_xid::text FROM disclosure_events ORDER BY recorded_xid, recorded_seq`
    expect(after).toEqual(before)
    const partitions = await run(disclosurePartitions)
    expect(partitions.map((partition) => partition.name)).toEqual([
      "disclosure_events_2026_01",
      "disclosure_events_2026_02",
      "disclosure_events_2026_03"
    ])
    expect(partitions[1]!.monthStart.toISOString()).toBe("2026-02-01T00:00:00.000Z")
    const [counts] = await owner`
      SELECT (SELECT count(*)::int FROM disclosure_events_2026_01) AS january, (SELECT count(*)::int FROM disclosure_events_2026_02) AS february,
             (SELECT count(*)::int FROM disclosure_events_2026_03) AS march, (SELECT count(*)::int FROM disclosure_events_default) AS other`
    expect(counts).toEqual({ january: 2, february: 2, march: 2, other: 0 })
    expect(await run(verifyLedger(signer))).toMatchObject({ finding: null, verified: 5, seals: 2, unsealed: 1 })

    // Numbering goes on where it was: a new event follows every migrated one.
    await recordOn(url, [event("org_a", at("2026-03-02T08:00:03Z"))])
    const [newest] = await owner`SELECT max(recorded_seq)::int AS seq FROM disclosure_events`
    expect(newest!["seq"]).toBe(7)
    await sealOn(url, "2026-03-02T08:00:04Z")
    expect(await run(verifyLedger(signer))).toMatchObject({ finding: null, verified: 7, seals: 3, unsealed: 0 })
  })

  it("makes the partitions ahead, records an event of a month without one in the default partition, and moves it into its month's partition", async () => {
    const { url, owner } = await freshDatabase()
    const run = runOn(url)
    await run(migrate(migrations))
    const now = new Date()
    expect(await run(ensureDisclosurePartitions(now))).toBe(3)
    expect(await run(ensureDisclosurePartitions(now))).toBe(0)
    const names = (await run(disclosurePartitions)).map((partition) => partition.name)
    const monthName = (offset: number) => {
      const month = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + offset, 1))
      return `disclosure_events_${month.getUTCFullYear()}_${String(month.getUTCMonth() + 1).padStart(2, "0")}`
    }
    expect(names).toEqual([monthName(0), monthName(1), monthName(2)])

    // Five months ahead has no partition yet: the insert succeeds all the same.
    const later = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 5, 3))
    await recordOn(url, [event("org_a", now), event("org_a", later)])
    const [waiting] = await owner`SELECT count(*)::int AS count FROM disclosure_events_default`
    expect(waiting!["count"]).toBe(1)
    await sealOn(url, now.toISOString())
    expect(await run(ensureDisclosurePartitions(now))).toBe(1)
    const [moved] = await owner.unsafe(
      `SELECT (SELECT count(*)::int FROM disclosure_events_default) AS waiting, (SELECT count(*)::int FROM ${monthName(5)}) AS moved`
    )
    expect(moved).toEqual({ waiting: 0, moved: 1 })
    expect(await run(verifyLedger(signer))).toMatchObject({ finding: null, verified: 2, unsealed: 0 })
  })

  it("a month's partition is made while a request's transaction records an event of that month: the event moves into it, the partition is made", async () => {
    const { url, owner } = await freshDatabase()
    const run = runOn(url)
    await run(migrate(migrations))
    const now = new Date()
    // A request's transaction records an event of this month (no partition yet: the default's)
    // and has not committed when the partitions are made.
    const request = await owner.reserve()
    try {
      await request`BEGIN`
      await disclosureInsertStatement(request, [event("org_a", now)])
      const made = run(ensureDisclosurePartitions(now))
      for (let waited = 0; ; waited += 20) {
        const [blocked] = await owner`SELECT count(*)::int AS count FROM pg_locks WHERE NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`
        if (blocked!["count"] > 0) break
        if (waited > 10_000) throw new Error("the partitions were made without waiting for the request's transaction")
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      await request`COMMIT`
      expect(await made).toBe(3)
    } finally {
      request.release()
    }
    const month = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1))
    const name = `disclosure_events_${month.getUTCFullYear()}_${String(month.getUTCMonth() + 1).padStart(2, "0")}`
    const [placed] = await owner.unsafe(
      `SELECT (SELECT count(*)::int FROM disclosure_events_default) AS waiting, (SELECT count(*)::int FROM ${name}) AS placed`
    )
    expect(placed).toEqual({ waiting: 0, placed: 1 })
  })

  const publicKey = Buffer.from(signer.publicKey).toString("hex")

  /**
   * January, a seal across the end of January, February, a seal across the end of February
   * (one event each side), and March: 3, 3 and 4 events in 4 seals, in the default partition first.
   */
  const threeMonths = async (url: string) => {
    const run = runOn(url)
    await run(migrate(migrations))
    await recordOn(url, [event("org_a", at("2026-01-10T10:00:00Z")), event("org_b", at("2026-01-20T10:00:00Z"))])
    await sealOn(url, "2026-01-20T10:00:01Z")
    await recordOn(url, [event("org_a", at("2026-01-31T23:59:59.900Z")), event("org_b", at("2026-02-01T00:00:00.100Z"))])
    await recordOn(url, [event("org_a", at("2026-02-14T09:00:00Z"))])
    await sealOn(url, "2026-02-14T09:00:01Z")
    await recordOn(url, [event("org_b", at("2026-02-28T23:59:59.950Z")), event("org_a", at("2026-03-01T00:00:00.050Z"))])
    await sealOn(url, "2026-03-01T00:00:00.100Z")
    await recordOn(url, [event("org_a", at("2026-03-05T00:00:00Z")), event("org_b", at("2026-03-06T00:00:00Z")), event("org_a", at("2026-03-07T00:00:00Z"))])
    await sealOn(url, "2026-03-07T00:00:01Z")
    expect(await run(verifyLedger(signer))).toMatchObject({ finding: null, verified: 10, seals: 4 })
  }

  it("archive --before writes each month before it to a file that verifies with the public key, then drops its partition; the chain still verifies and names a deletion beside archived events", async () => {
    const { url, owner } = await freshDatabase()
    const run = runOn(url)
    await threeMonths(url)
    const outcome = await run(archiveDisclosures(signer, { before: at("2026-03-01T00:00:00Z"), directory }))
    expect(outcome.map(({ month, events, seals }) => ({ month, events, seals }))).toEqual([
      { month: "2026-01", events: 3, seals: 2 },
      { month: "2026-02", events: 3, seals: 2 }
    ])
    for (const month of outcome) {
      expect(month.file).toBe(join(directory, `disclosures-${month.month}.jsonl`))
      expect(await verifyExportFileAt(month.file, publicKey)).toMatchObject({ finding: null, events: month.events })
      expect(existsSync(`${month.file}.partial`)).toBe(false)
    }
    const names = (await run(disclosurePartitions)).map((partition) => partition.name)
    expect(names).not.toContain("disclosure_events_2026_01")
    expect(names).not.toContain("disclosure_events_2026_02")
    expect(names).toContain("disclosure_events_2026_03")
    const [left] = await owner`SELECT count(*)::int AS count FROM disclosure_events`
    expect(left!["count"]).toBe(4)
    expect(await run(verifyLedger(signer))).toMatchObject({ finding: null, verified: 4, archived: 6, seals: 4 })

    // One changed byte of an archive file fails it.
    const file = outcome[1]!.file
    const original = readFileSync(file)
    const changed = Buffer.from(original)
    changed[original.indexOf("org_b") + 4] = "c".charCodeAt(0)
    writeFileSync(file, changed)
    expect((await verifyExportFileAt(file, publicKey)).finding).not.toBeNull()
    writeFileSync(file, original)

    // The archive's record is signed: claiming more archived events is caught.
    await owner.unsafe("ALTER TABLE disclosure_archives DISABLE TRIGGER USER")
    await owner`UPDATE disclosure_archives SET last_seal = last_seal + 1 WHERE file_name = 'disclosures-2026-02.jsonl'`
    expect((await run(verifyLedger(signer))).finding).toMatchObject({ kind: "archive_changed" })
    await owner`UPDATE disclosure_archives SET last_seal = last_seal - 1 WHERE file_name = 'disclosures-2026-02.jsonl'`
    await owner.unsafe("ALTER TABLE disclosure_archives ENABLE TRIGGER USER")
    expect((await run(verifyLedger(signer))).finding).toBeNull()

    // March's first event shares its seal with archived February events: deleting it is named.
    const [first] = await owner`SELECT event_id, recorded_seq::text AS seq FROM disclosure_events ORDER BY recorded_xid, recorded_seq LIMIT 1`
    await owner`DELETE FROM disclosure_events WHERE event_id = ${first!["event_id"]}`
    expect((await run(verifyLedger(signer))).finding).toMatchObject({ kind: "event_removed", sealSequence: 3, recordedSeq: first!["seq"] })
  })

  it("a failure between the export and the drop loses nothing: the month stays in the database, and the archive run again completes", async () => {
    const { url, owner } = await freshDatabase()
    const run = runOn(url)
    await threeMonths(url)
    await run(ensureDisclosurePartitions())
    // Another session holds January's partition: the drop gives up after its lock timeout.
    const holder = postgres(url, { max: 1, onnotice: () => {} })
    let release: () => void = () => {}
    const released = new Promise<void>((resolve) => (release = resolve))
    let locked: () => void = () => {}
    const lockTaken = new Promise<void>((resolve) => (locked = resolve))
    const holding = holder.begin(async (tx) => {
      await tx`LOCK TABLE disclosure_events_2026_01 IN ACCESS SHARE MODE`
      locked()
      await released
    })
    await lockTaken
    const failed = await Effect.runPromise(
      Effect.provide(Effect.exit(archiveDisclosures(signer, { before: at("2026-02-01T00:00:00Z"), directory, lockTimeoutMs: 300 })), PgClientLayer({ url, maxConnections: 2 }))
    )
    release()
    await holding
    await holder.end({ timeout: 5 })
    expect(Exit.isFailure(failed)).toBe(true)
    const [kept] = await owner`SELECT count(*)::int AS count FROM disclosure_events_2026_01`
    expect(kept!["count"]).toBe(3)
    const [records] = await owner`SELECT count(*)::int AS count FROM disclosure_archives`
    expect(records!["count"]).toBe(0)
    expect(await run(verifyLedger(signer))).toMatchObject({ finding: null, verified: 10, archived: 0 })

    const again = await run(archiveDisclosures(signer, { before: at("2026-02-01T00:00:00Z"), directory }))
    expect(again.map(({ month, events }) => ({ month, events }))).toEqual([{ month: "2026-01", events: 3 }])
    expect(await verifyExportFileAt(again[0]!.file, publicKey)).toMatchObject({ finding: null, events: 3 })
    expect(await run(verifyLedger(signer))).toMatchObject({ finding: null, verified: 7, archived: 3 })
  })

  it("archive refuses a month that has not ended", async () => {
    const { url } = await freshDatabase()
    const run = runOn(url)
    await run(migrate(migrations))
    const now = new Date()
    const next = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1))
    const exit = await Effect.runPromise(
      Effect.provide(Effect.exit(archiveDisclosures(signer, { before: next, directory })), PgClientLayer({ url, maxConnections: 2 }))
    )
    expect(Exit.isFailure(exit)).toBe(true)
    expect(JSON.stringify(exit)).toMatch(/only months that have ended/)
  })

  it("verify reads the next page while it checks one: the same outcome at any page size, a finding included", async () => {
    const { url, owner } = await freshDatabase()
    const run = runOn(url)
    await threeMonths(url)
    for (const batchSize of [1, 2, 3, 100]) {
      expect(await run(verifyLedger(signer, { batchSize }))).toMatchObject({ finding: null, verified: 10, seals: 4 })
    }
    const [target] = await owner`SELECT event_id FROM disclosure_events ORDER BY recorded_xid, recorded_seq OFFSET 6 LIMIT 1`
    await owner`UPDATE disclosure_events SET api_key_id = 'key_other' WHERE event_id = ${target!["event_id"]}`
    for (const batchSize of [1, 2, 3, 100]) {
      expect((await run(verifyLedger(signer, { batchSize }))).finding).toMatchObject({ kind: "event_changed", eventId: target!["event_id"] })
    }
  })
})

describe("disclosure ledger partitions on the embedded PGlite", () => {
  it("makes the partitions ahead and moves an event of a month without one out of the default partition (PostgreSQL 17: partitions have the identity column)", async () => {
    const scope = await Effect.runPromise(Scope.make())
    try {
      const database = await Effect.runPromise(Scope.provide(embeddedDatabases.fresh, scope))
      const layer = PgClientLayer({ url: database.url, ...database.clientOptions })
      const run = <A, E>(effect: Effect.Effect<A, E, PgClient>) => Effect.runPromise(Effect.provide(effect, layer))
      await run(migrate(migrations))
      const now = new Date()
      const later = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 6, 2))
      await run(Effect.flatMap(PgClient, (pg) => pg.run("test.record", (sql) => disclosureInsertStatement(sql, [event("org_a", now), event("org_a", later)]))))
      await run(sealPending(signer))
      expect(await run(ensureDisclosurePartitions(now))).toBe(4)
      expect((await run(disclosurePartitions)).map((partition) => partition.monthStart.getTime())).toContain(
        Date.UTC(later.getUTCFullYear(), later.getUTCMonth(), 1)
      )
      const [waiting] = await run(Effect.flatMap(PgClient, (pg) => pg.run("test.default", (sql) => sql<Array<{ count: number }>>`
        SELECT count(*)::int AS count FROM disclosure_events_default`)))
      expect(waiting!.count).toBe(0)
      expect(await run(verifyLedger(signer))).toMatchObject({ finding: null, verified: 2 })
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }, 120_000)
})
