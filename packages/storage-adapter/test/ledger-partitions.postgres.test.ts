import { ApiKeyId, DisclosureEventId, type DisclosureEvent, EncounterId, OrganizationId, RequestId } from "@clinical-api/domain"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Schema, Scope } from "effect"
import postgres from "postgres"
import {
  disclosureInsertStatement,
  disclosurePartitions,
  ensureDisclosurePartitions,
  ledgerSignerFromSecret,
  migrate,
  migrations,
  PgClient,
  PgClientLayer,
  sealPending,
  verifyLedger
} from "../src/index.js"
import { serverDatabases } from "../src/testing/test-database.js"

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

  beforeAll(async () => {
    scope = await Effect.runPromise(Scope.make())
  })
  afterAll(async () => {
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

  it("migrates a database holding sealed events of several months: every event kept in its month's partition, the chain verifies and goes on", async () => {
    const { url, owner } = await freshDatabase()
    const run = runOn(url)
    await run(migrate(beforePartitions))
    await recordOn(url, [event("org_a", at("2026-01-30T10:00:00Z")), event("org_b", at("2026-01-31T23:59:59.999Z"))])
    await run(sealPending(signer, () => at("2026-01-31T23:59:59.999Z")))
    await recordOn(url, [event("org_a", at("2026-02-01T00:00:00Z")), event("org_a", at("2026-02-15T12:00:00Z"))])
    await recordOn(url, [event("org_b", at("2026-03-02T08:00:00Z"))])
    await run(sealPending(signer, () => at("2026-03-02T08:00:01Z")))
    await recordOn(url, [event("org_a", at("2026-03-02T08:00:02Z"))])
    const before = await owner`SELECT event_id, recorded_seq::text, recorded_xid::text FROM disclosure_events ORDER BY recorded_xid, recorded_seq`
    expect((await run(verifyLedger(signer))).finding).toBeNull()

    const report = await run(migrate(migrations))
    expect(report.applied).toEqual([10])
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
    await run(sealPending(signer, () => at("2026-03-02T08:00:04Z")))
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
    await run(sealPending(signer))
    expect(await run(ensureDisclosurePartitions(now))).toBe(1)
    const [moved] = await owner.unsafe(
      `SELECT (SELECT count(*)::int FROM disclosure_events_default) AS waiting, (SELECT count(*)::int FROM ${monthName(5)}) AS moved`
    )
    expect(moved).toEqual({ waiting: 0, moved: 1 })
    expect(await run(verifyLedger(signer))).toMatchObject({ finding: null, verified: 2, unsealed: 0 })
  })
})
