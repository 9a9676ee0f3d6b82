import { spawn } from "node:child_process"
import { once } from "node:events"
import { mkdtemp, readdir, rm, stat } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { ApiKeyId, DisclosureEventId, type DisclosureEvent, EncounterId, OrganizationId, RequestId } from "@clinical-api/domain"
import { disclosureInsertStatement, PgClient } from "@clinical-api/storage-adapter"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import { CLI_ENTRY, type CliDatabase, freshDatabase, onTestDatabase, runChild, runInProcess, WORKSPACE_ROOT } from "./support/cli-harness.js"

/**
 * `disclosures archive` end to end on the database the suite is given (PostgreSQL with
 * DATABASE_URL, else the embedded PGlite): months of events archived to files that
 * `disclosures verify --file` accepts with the ledger's public key, their partitions gone, and
 * `disclosures verify` still passing over what is left.
 */
let database: CliDatabase
let directory: string

beforeAll(async () => {
  database = await freshDatabase()
  directory = await mkdtemp(join(tmpdir(), "cli-archive-"))
}, 60_000)

afterAll(async () => {
  await database?.drop()
  await rm(directory, { recursive: true, force: true })
})

const event = (n: number, occurredAt: string): DisclosureEvent =>
  ({
    eventId: Schema.decodeSync(DisclosureEventId)(`dsc_cliarchive${String(n).padStart(4, "0")}`),
    occurredAt: new Date(occurredAt),
    organizationId: Schema.decodeSync(OrganizationId)(n % 2 === 0 ? "org_a" : "org_b"),
    apiKeyId: Schema.decodeSync(ApiKeyId)("key_cli"),
    operationId: "getPublicEncounter",
    encounterId: Schema.decodeSync(EncounterId)(`enc_${n}`),
    documentId: null,
    patientId: null,
    requestId: Schema.decodeSync(RequestId)(`req_${n.toString(16).padStart(32, "0")}`),
    callerRequestId: null
  }) as DisclosureEvent

describe("disclosures archive", { timeout: 180_000 }, () => {
  it("archives the months before --before to files that verify offline, drops their partitions, and verify passes over the rest", async () => {
    expect((await runInProcess(["migrate"], database.env)).code).toBe(0)
    await onTestDatabase(
      database.env,
      PgClient.use((client) =>
        client.run("test.events", (sql) =>
          disclosureInsertStatement(sql, [
            event(1, "2026-01-05T10:00:00Z"),
            event(2, "2026-01-31T23:59:59Z"),
            event(3, "2026-02-01T00:00:01Z"),
            event(4, "2026-03-10T12:00:00Z")
          ]))
      )
    )
    const refused = await runInProcess(["disclosures", "archive", "--before", "2026-13", "--directory", directory], database.env)
    expect(refused).toMatchObject({ code: 1 })
    expect(refused.stderr).toMatch(/--before must be a month as YYYY-MM/)

    const archived = await runInProcess(["disclosures", "archive", "--before", "2026-03", "--directory", directory], database.env)
    expect(archived.stderr).toBe("")
    expect(archived.code).toBe(0)
    expect(archived.stdout).toMatch(/^2026-01: 2 events in 1 seals archived to .*disclosures-2026-01\.jsonl/m)
    expect(archived.stdout).toMatch(/^2026-02: 1 events in 1 seals archived to .*disclosures-2026-02\.jsonl/m)
    expect((await readdir(directory)).sort()).toEqual(["disclosures-2026-01.jsonl", "disclosures-2026-02.jsonl"])

    const head = await runInProcess(["disclosures", "head"], database.env)
    const publicKey = (JSON.parse(head.stdout) as { public_key: string }).public_key
    for (const [month, events] of [["2026-01", 2], ["2026-02", 1]] as const) {
      const checked = await runInProcess(
        ["disclosures", "verify", "--file", join(directory, `disclosures-${month}.jsonl`), "--public-key", publicKey],
        database.env
      )
      expect(checked).toMatchObject({ code: 0 })
      expect(checked.stdout).toContain(`${events} events verified in 1 seals`)
    }
    const verified = await runInProcess(["disclosures", "verify"], database.env)
    expect(verified.code).toBe(0)
    expect(verified.stdout).toMatch(/^1 events verified in 1 seals; 0 newer events not yet sealed; 3 archived events/)

    const partitions = await onTestDatabase(
      database.env,
      PgClient.use((client) =>
        client.run("test.partitions", (sql) => sql<Array<{ name: string }>>`
          SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
          WHERE i.inhparent = 'disclosure_events'::regclass ORDER BY 1`)
      )
    )
    const names = partitions.map((row) => row.name)
    expect(names).toContain("disclosure_events_2026_03")
    expect(names).toContain("disclosure_events_default")
    expect(names).not.toContain("disclosure_events_2026_01")
    expect(names).not.toContain("disclosure_events_2026_02")

    // Nothing is left before March: a second run archives nothing.
    const again = await runInProcess(["disclosures", "archive", "--before", "2026-03", "--directory", directory], database.env)
    expect(again).toMatchObject({ code: 0 })
    expect(again.stdout).toContain("no month before 2026-03 is in the database")
  })

  // The CLI's own heap is about 40 MB; 300,000 events make a 115 MB file.
  it.skipIf(process.env["DATABASE_URL"] === undefined)(
    "archives and verifies a month of 300,000 events in a 96 MB heap (the export and the file's check stream), after an archive killed while writing its file left the month whole",
    async () => {
      const large = await freshDatabase()
      const key = { LEDGER_KEY: "a ledger key for the archive memory test, 32+ chars" }
      try {
        expect((await runInProcess(["migrate"], large.env)).code).toBe(0)
        await onTestDatabase(
          large.env,
          PgClient.use((client) =>
            client.run("test.manyEvents", (sql) => sql`
              INSERT INTO disclosure_events (event_id, occurred_at, organization_id, api_key_id, operation_id, encounter_id,
                document_id, patient_id, request_id, caller_request_id)
              SELECT 'dsc_' || lpad(i::text, 12, '0'), timestamptz '2026-01-01' + i * interval '8 seconds',
                     CASE WHEN i % 2 = 0 THEN 'org_a' ELSE 'org_b' END, 'key_many', 'listPublicEncounters', 'enc_' || (i % 5000),
                     'doc_' || (i % 7000), NULL, 'req_' || md5(i::text), CASE WHEN i % 3 = 0 THEN 'caller-' || i END
              FROM generate_series(1, 300000) AS i`)
          )
        )
        // Killed while it writes the file: the month stays in the database, whole.
        const killedDirectory = await mkdtemp(join(tmpdir(), "cli-archive-killed-"))
        try {
          const child = spawn(process.execPath, [CLI_ENTRY, "disclosures", "archive", "--before", "2026-02", "--directory", killedDirectory], {
            cwd: WORKSPACE_ROOT,
            env: { ...process.env, ...large.env, ...key },
            stdio: "ignore"
          })
          const closed = once(child, "close")
          const partial = join(killedDirectory, "disclosures-2026-01.jsonl.partial")
          for (let waited = 0; ; waited += 50) {
            const size = await stat(partial).then((info) => info.size, () => 0)
            if (size > 1_000_000) break
            if (waited > 150_000 || child.exitCode !== null) throw new Error(`the archive never wrote its file (exit ${child.exitCode})`)
            await new Promise((resolve) => setTimeout(resolve, 50))
          }
          child.kill("SIGKILL")
          await closed
          const [left] = await onTestDatabase(
            large.env,
            PgClient.use((client) => client.run("test.left", (sql) => sql<Array<{ events: number; archives: number }>>`
              SELECT (SELECT count(*)::int FROM disclosure_events WHERE occurred_at < '2026-02-01T00:00:00Z') AS events,
                     (SELECT count(*)::int FROM disclosure_archives) AS archives`))
          )
          expect(left).toEqual({ events: 300_000, archives: 0 })
        } finally {
          await rm(killedDirectory, { recursive: true, force: true })
        }

        const capped = { ...large.env, ...key, NODE_OPTIONS: "--max-old-space-size=96" }
        const archived = await runChild(["disclosures", "archive", "--before", "2026-02", "--directory", directory], capped)
        expect(archived.stderr).toBe("")
        expect(archived.stdout).toMatch(/^2026-01: 300000 events in 15 seals archived/)
        const checked = await runChild(["disclosures", "verify", "--file", join(directory, "disclosures-2026-01.jsonl")], capped)
        expect(checked.stdout).toMatch(/^300000 events verified in 15 seals/)
      } finally {
        await large.drop()
      }
    }
  )
})
