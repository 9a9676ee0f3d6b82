import { randomBytes } from "node:crypto"
import { migrate, PgClientLayer } from "@clinical-api/storage-adapter"
import { Effect } from "effect"
import postgres from "postgres"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createFreshDatabase, type FreshDatabase } from "../scripts/service-process.js"
import { startService } from "./support/harness.js"

/**
 * The two database roles (docs/operations.md, "Two database roles") on the real PostgreSQL:
 * the owner migrates and grants; PostgreSQL itself refuses the runtime role any UPDATE, DELETE
 * or TRUNCATE of the disclosure events; production refuses to serve on a role that could.
 * (The whole contract on the runtime role: contract-runtime-role.test.ts.)
 */
const databaseUrl = process.env["DATABASE_URL"]?.trim()

describe.skipIf(databaseUrl === undefined || databaseUrl === "")("two database roles (DATABASE_URL)", () => {
  let database: FreshDatabase
  const role = `clinical_api_runtime_test_${randomBytes(6).toString("hex")}`
  let runtimeUrl: string
  let admin: postgres.Sql
  let runtime: postgres.Sql

  beforeAll(async () => {
    database = await createFreshDatabase(databaseUrl ?? "")
    admin = postgres(databaseUrl ?? "", { max: 1, onnotice: () => {} })
    await admin.unsafe(`CREATE ROLE ${role} LOGIN`)
    const url = new URL(database.url)
    url.username = role
    runtimeUrl = url.toString()
    await Effect.runPromise(
      migrate(undefined, { runtimeRole: role }).pipe(Effect.provide(PgClientLayer({ url: database.url, maxConnections: 1 })))
    )
    await database.query((sql) => sql`
      INSERT INTO disclosure_events (event_id, occurred_at, organization_id, api_key_id, operation_id, encounter_id, request_id)
      VALUES ('dsc_roles_1', now(), 'org_a', 'key_a', 'getPublicEncounter', 'enc_a', 'req_00000000000000000000000000000001')`)
    runtime = postgres(runtimeUrl, { max: 1, onnotice: () => {}, fetch_types: false })
  }, 60_000)

  afterAll(async () => {
    await runtime?.end({ timeout: 5 })
    await database?.drop()
    await admin?.unsafe(`DROP ROLE IF EXISTS ${role}`)
    await admin?.end({ timeout: 5 })
  })

  const refusal = (statement: string) =>
    runtime.unsafe(statement).then(() => "accepted", (error: { code?: string }) => error.code ?? String(error))

  it("PostgreSQL refuses the runtime role any UPDATE, DELETE or TRUNCATE of the disclosure events (insufficient_privilege)", async () => {
    expect(await refusal(`UPDATE disclosure_events SET organization_id = 'org_b'`)).toBe("42501")
    expect(await refusal(`DELETE FROM disclosure_events`)).toBe("42501")
    expect(await refusal(`TRUNCATE disclosure_events`)).toBe("42501")
    const rows = await database.query((sql) => sql<Array<{ organization_id: string }>>`SELECT organization_id FROM disclosure_events`)
    expect(rows).toEqual([{ organization_id: "org_a" }])
  })

  it("the runtime role reads and inserts disclosure events, and changes none of the data it reads", async () => {
    expect(await refusal(`
      INSERT INTO disclosure_events (event_id, occurred_at, organization_id, api_key_id, operation_id, encounter_id, request_id)
      VALUES ('dsc_roles_2', now(), 'org_a', 'key_a', 'getPublicEncounter', 'enc_a', 'req_00000000000000000000000000000002')`))
      .toBe("accepted")
    expect(await refusal(`SELECT count(*) FROM encounters`)).toBe("accepted")
    expect(await refusal(`UPDATE api_keys SET state = 'active'`)).toBe("42501")
    expect(await refusal(`DELETE FROM organizations`)).toBe("42501")
    expect(await refusal(`CREATE TABLE disclosure_events_copy (id int)`)).toBe("42501")
    expect(await refusal(`ALTER TABLE disclosure_events DROP COLUMN caller_request_id`)).toBe("42501")
  })

  it("the runtime role makes the monthly partitions through the owner's function, and can change, detach or drop none of them", async () => {
    expect(await refusal(`SELECT disclosure_events_ensure_partitions(now() + interval '40 days')`)).toBe("accepted")
    const now = new Date()
    const partition = `disclosure_events_${now.getUTCFullYear()}_${String(now.getUTCMonth() + 1).padStart(2, "0")}`
    const [owned] = await database.query((sql) => sql<Array<{ owner: string }>>`
      SELECT pg_get_userbyid(relowner) AS owner FROM pg_class WHERE relname = ${partition}`)
    expect(owned?.owner).not.toBe(role)
    for (const table of [partition, "disclosure_events_default"]) {
      expect(await refusal(`UPDATE ${table} SET organization_id = 'org_b'`)).toBe("42501")
      expect(await refusal(`DELETE FROM ${table}`)).toBe("42501")
      expect(await refusal(`TRUNCATE ${table}`)).toBe("42501")
      expect(await refusal(`DROP TABLE ${table}`)).toBe("42501")
      expect(await refusal(`ALTER TABLE disclosure_events DETACH PARTITION ${table}`)).toBe("42501")
    }
    expect(await refusal(`SELECT disclosure_events_create_partition('2031-01-01T00:00:00Z')`)).toBe("42501")
    expect(await refusal(`DELETE FROM disclosure_archives`)).toBe("42501")
    expect(await refusal(`
      INSERT INTO disclosure_archives (month_start, file_name, file_sha256, event_count, shared_events, archived_at, signature)
      VALUES (now(), 'f', repeat('0', 64), 0, '', now(), '')`)).toBe("42501")
  })

  it("a second migration run keeps the grants exactly (privileges granted by hand are revoked)", async () => {
    await database.query((sql) => sql.unsafe(`GRANT UPDATE, DELETE ON disclosure_events TO ${role}`))
    await Effect.runPromise(
      migrate(undefined, { runtimeRole: role }).pipe(Effect.provide(PgClientLayer({ url: database.url, maxConnections: 1 })))
    )
    expect(await refusal(`UPDATE disclosure_events SET organization_id = 'org_b'`)).toBe("42501")
    expect(await refusal(`DELETE FROM disclosure_events`)).toBe("42501")
  })

  const productionEnv = {
    PUBLIC_API_ENVIRONMENT: "production",
    API_KEY_DIGEST_KEY: "roles-test-digest-key-0123456789abcdef0123",
    // Read only by a build that seals the ledger (issue 34, item 2); required in production there.
    LEDGER_KEY: "roles-test-ledger-key-0123456789abcdef012345"
  }

  it("production refuses to start with the owner's URL as DATABASE_URL: the role can change the ledger", async () => {
    const refused = await startService({ ...productionEnv, DATABASE_URL: database.url }).then(
      async (service) => {
        await service.close()
        return "started"
      },
      (error: unknown) => String(error)
    )
    expect(refused).toContain("cannot change the disclosure ledger")
    expect(refused).toMatch(/has UPDATE, DELETE, TRUNCATE, OWNER on disclosure_events/)
  }, 60_000)

  it("production starts on the runtime role, migrated by the owner (DATABASE_OWNER_URL)", async () => {
    const service = await startService({
      ...productionEnv,
      DATABASE_URL: runtimeUrl,
      DATABASE_OWNER_URL: database.url,
      DATABASE_RUNTIME_ROLE: role
    })
    try {
      const ready = await fetch(`${service.baseUrl}/readyz`)
      expect(ready.status).toBe(200)
    } finally {
      await service.close()
    }
  }, 60_000)
})
