import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import postgres from "postgres"
import {
  ensureSchema,
  IdempotencyStore,
  IdempotencyStorePostgres,
  makeIdempotencyStorePostgres,
  type PostgresSql
} from "../src/index.js"
import { receiverHandlerSuite } from "./receiver-suite.js"
import { sleep } from "./support.js"

const databaseUrl = process.env["DATABASE_URL"]

if (databaseUrl === undefined || databaseUrl === "") {
  console.warn(
    "Skipping the PostgreSQL idempotency store tests: set DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/postgres)"
  )
}

describe.skipIf(databaseUrl === undefined || databaseUrl === "")("IdempotencyStorePostgres (real PostgreSQL)", () => {
  const databaseName = `webhook_receiver_test_${randomBytes(6).toString("hex")}`
  let admin: PostgresSql
  let sql: PostgresSql

  beforeAll(async () => {
    admin = postgres(databaseUrl ?? "", { max: 1, onnotice: () => undefined })
    await admin.unsafe(`CREATE DATABASE ${databaseName}`)
    const url = new URL(databaseUrl ?? "")
    url.pathname = `/${databaseName}`
    sql = postgres(url.href, { max: 10, onnotice: () => undefined })
    // Two receivers starting together: both succeed, one table.
    await Effect.runPromise(Effect.all([ensureSchema(sql), ensureSchema(sql)], { concurrency: 2 }))
  })

  afterAll(async () => {
    await sql?.end({ timeout: 5 })
    await admin?.unsafe(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`)
    await admin?.end({ timeout: 5 })
  })

  receiverHandlerSuite("PostgreSQL", async () => makeIdempotencyStorePostgres({ sql }))

  it("creates webhook_receiver_events with event_id as primary key", async () => {
    const columns = await sql<Array<{ column_name: string }>>`
      SELECT column_name FROM information_schema.columns WHERE table_name = 'webhook_receiver_events' ORDER BY ordinal_position`
    expect(columns.map((column) => column.column_name)).toEqual([
      "event_id",
      "state",
      "claim_token",
      "claimed_at",
      "completed_at"
    ])
  })

  it.effect("claim: new, then in_progress; complete: completed; release by the holder frees it", () =>
    Effect.gen(function* () {
      const store = makeIdempotencyStorePostgres({ sql })
      const first = yield* store.claim("evt_pg_1")
      expect(first.status).toBe("new")
      expect((yield* store.claim("evt_pg_1")).status).toBe("in_progress")
      if (first.status === "new") yield* store.release("evt_pg_1", first.claimToken)
      const again = yield* store.claim("evt_pg_1")
      expect(again.status).toBe("new")
      yield* store.complete("evt_pg_1")
      expect((yield* store.claim("evt_pg_1")).status).toBe("completed")
      const rows = yield* Effect.promise(() => sql`SELECT state, claim_token, completed_at FROM webhook_receiver_events WHERE event_id = 'evt_pg_1'`)
      expect(rows[0]?.["state"]).toBe("completed")
      expect(rows[0]?.["claim_token"]).toBeNull()
      expect(rows[0]?.["completed_at"]).toBeInstanceOf(Date)
    }))

  it.effect("a claim older than the lease is taken over; the crashed holder's late release leaves the new claim", () =>
    Effect.gen(function* () {
      const store = makeIdempotencyStorePostgres({ sql, leaseMs: 300 })
      const crashed = yield* store.claim("evt_pg_lease")
      expect(crashed.status).toBe("new")
      expect((yield* store.claim("evt_pg_lease")).status).toBe("in_progress")
      yield* Effect.promise(() => sleep(400))
      const takeover = yield* store.claim("evt_pg_lease")
      expect(takeover.status).toBe("new")
      if (crashed.status === "new") yield* store.release("evt_pg_lease", crashed.claimToken)
      expect((yield* store.claim("evt_pg_lease")).status).toBe("in_progress")
      yield* store.complete("evt_pg_lease")
      yield* Effect.promise(() => sleep(400))
      // A completed event is never taken over, whatever its age.
      expect((yield* store.claim("evt_pg_lease")).status).toBe("completed")
    }))

  it.effect("30 concurrent claims of one event on 10 connections: exactly one is new", () =>
    Effect.gen(function* () {
      const store = makeIdempotencyStorePostgres({ sql })
      const claims = yield* Effect.all(
        Array.from({ length: 30 }, () => store.claim("evt_pg_race")),
        { concurrency: "unbounded" }
      )
      expect(claims.filter((claim) => claim.status === "new").length).toBe(1)
      expect(claims.filter((claim) => claim.status === "in_progress").length).toBe(29)
    }))

  it.effect("two stores (two receiver processes) on one table share the claims", () =>
    Effect.gen(function* () {
      const url = new URL(databaseUrl ?? "")
      url.pathname = `/${databaseName}`
      const otherPool = postgres(url.href, { max: 2, onnotice: () => undefined })
      yield* Effect.addFinalizer(() => Effect.promise(() => otherPool.end({ timeout: 5 })))
      const one = makeIdempotencyStorePostgres({ sql })
      const other = yield* Effect.provide(IdempotencyStore, IdempotencyStorePostgres({ sql: otherPool }))
      expect((yield* one.claim("evt_pg_shared")).status).toBe("new")
      expect((yield* other.claim("evt_pg_shared")).status).toBe("in_progress")
      yield* one.complete("evt_pg_shared")
      expect((yield* other.claim("evt_pg_shared")).status).toBe("completed")
    }).pipe(Effect.scoped))

  it.effect("an unreachable database is IdempotencyStoreUnavailable, not a defect", () =>
    Effect.gen(function* () {
      const closed = postgres("postgres://postgres@127.0.0.1:1/none", { max: 1, connect_timeout: 2, onnotice: () => undefined })
      const store = makeIdempotencyStorePostgres({ sql: closed })
      const error = yield* Effect.flip(store.claim("evt_unreachable"))
      expect(error._tag).toBe("IdempotencyStoreUnavailable")
      expect(error.operation).toBe("claim")
      yield* Effect.promise(() => closed.end({ timeout: 1 }))
    }))

  it("the layer fails with IdempotencyStoreUnavailable when the schema cannot be created", async () => {
    const closed = postgres("postgres://postgres@127.0.0.1:1/none", { max: 1, connect_timeout: 2, onnotice: () => undefined })
    const exit = await Effect.runPromiseExit(Layer.build(IdempotencyStorePostgres({ sql: closed })).pipe(Effect.scoped))
    expect(exit._tag).toBe("Failure")
    await closed.end({ timeout: 1 })
  })
})
