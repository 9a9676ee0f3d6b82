import { connect, createServer, type Server, type Socket } from "node:net"
import { StoreUnavailable } from "@clinical-api/domain"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { makePgClient, type PgClientOptions, textArray, withoutStatementTimeout } from "../src/index.js"
import { embeddedDatabases, serverDatabases, type TestDatabaseFactory } from "../src/testing/test-database.js"

const databaseUrl = process.env["DATABASE_URL"]?.trim()
const server = databaseUrl === undefined || databaseUrl === "" ? undefined : databaseUrl

/** A client on a fresh database of `factory`, its statements counted in `queries`. */
const freshClient = (factory: TestDatabaseFactory, options: Partial<PgClientOptions> = {}) =>
  Effect.gen(function* () {
    const database = yield* Effect.orDie(factory.fresh)
    const queries: Array<string> = []
    const client = yield* makePgClient({
      url: database.url,
      ...database.clientOptions,
      ...options,
      onQuery: (query) => queries.push(query)
    })
    return { client, queries }
  })

/**
 * A TCP proxy to PostgreSQL that lets a connection start up, then closes it (both sides) at the
 * first message the client sends after the server's first ReadyForQuery: a backend lost while
 * a fresh connection sends its first statement.
 */
const startProxyClosingAtFirstStatement = async (target: URL) => {
  const sockets = new Set<Socket>()
  let closedConnections = 0
  const proxy: Server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname)
    for (const socket of [client, upstream]) {
      sockets.add(socket)
      socket.on("close", () => sockets.delete(socket))
      socket.on("error", () => {})
    }
    client.on("close", () => upstream.destroy())
    upstream.on("close", () => client.destroy())
    let ready = false
    let unread = Buffer.alloc(0)
    upstream.on("data", (chunk: Buffer) => {
      if (!ready) {
        unread = Buffer.concat([unread, chunk])
        let offset = 0
        while (!ready && unread.length - offset >= 5) {
          const length = unread.readUInt32BE(offset + 1)
          if (unread.length - offset < 1 + length) break
          if (unread[offset] === 0x5a) ready = true
          offset += 1 + length
        }
        unread = unread.subarray(offset)
      }
      client.write(chunk)
    })
    client.on("data", (chunk: Buffer) => {
      if (!ready) return void upstream.write(chunk)
      closedConnections++
      client.destroy()
      upstream.destroy()
    })
  })
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve))
  const address = proxy.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  const url = new URL(target)
  url.hostname = "127.0.0.1"
  url.port = String(port)
  return {
    url: url.toString(),
    closedConnections: () => closedConnections,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        proxy.close(() => resolve())
      })
  }
}

/** Unhandled rejections raised while `effect` runs and for a moment after it. */
const unhandledRejectionsDuring = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const rejections: Array<unknown> = []
    const record = (reason: unknown) => void rejections.push(reason)
    process.on("unhandledRejection", record)
    const outcome = yield* Effect.exit(effect).pipe(
      Effect.tap(() => Effect.sleep("300 millis")),
      Effect.ensuring(Effect.sync(() => process.off("unhandledRejection", record)))
    )
    return { outcome, rejections }
  })

const firstStatementsAreTransactions = (factory: TestDatabaseFactory, maxConnections: number) =>
  Effect.gen(function* () {
    // The time-out bounds the reservations too: without it one that is never served waits forever.
    const { client } = yield* freshClient(factory, { maxConnections, statementTimeoutMs: 10_000 })
    const oneInTransaction = client.transactionally(client.run("test.one", (sql) => sql<Array<{ one: number }>>`SELECT 1 AS one`))
    const answers = yield* Effect.all(Array.from({ length: maxConnections + 1 }, () => oneInTransaction), {
      concurrency: "unbounded"
    }).pipe(Effect.mapError((cause) => new Error("a first reservation of a fresh pool was not handed a connection", { cause })))
    expect(answers.map((rows) => rows[0]?.one)).toEqual(Array.from({ length: maxConnections + 1 }, () => 1))
    const grouped = yield* client.groupTransactionally(client.run("test.two", (sql) => sql<Array<{ two: number }>>`SELECT 2 AS two`))
    expect(grouped[0]?.two).toBe(2)
  })

describe("PgClient statements", () => {
  it.live("statements are built without a captured stack (decision 0011's debug callback), and the stack limit is left as it was", () =>
    Effect.gen(function* () {
      const { client } = yield* freshClient(embeddedDatabases)
      const limitBefore = Error.stackTraceLimit
      let origin: unknown
      const rows = yield* client.run("test.origin", (sql) => {
        const query = sql<Array<{ one: number }>>`SELECT 1 AS one`
        // postgres.js's own record of where a query was built, shown in its error text.
        origin = (query as unknown as { readonly origin: unknown }).origin
        return query.execute()
      })
      expect(rows[0]?.one).toBe(1)
      expect(typeof origin).toBe("string")
      expect(origin as string).not.toMatch(/\n\s+at /)
      expect(Error.stackTraceLimit).toBe(limitBefore)
      const failed = yield* Effect.flip(client.run("test.throws", () => {
        throw new Error("a statement builder that throws")
      }))
      expect(failed).toBeInstanceOf(StoreUnavailable)
      expect(Error.stackTraceLimit).toBe(limitBefore)
    }), 60_000)
})

describe("PgClient without fetched types (postgres.js `fetch_types: false`)", () => {
  it.live("text arrays go out and come back as the repositories use them, with no type query on a fresh connection", () =>
    Effect.gen(function* () {
      const { client, queries } = yield* freshClient(embeddedDatabases)
      const values = ["a", "b,c", 'd"e', "f\\g", "NULL", "", "{h}", " i "]
      const rows = yield* client.run(
        "test.array",
        (sql) => sql<Array<{ values: Array<string>; found: boolean; count: number }>>`
          SELECT ${textArray(sql, values)}::text[] AS values,
                 'b,c' = ANY(${textArray(sql, values)}) AS found,
                 array_length(${textArray(sql, [])}::text[] || ${textArray(sql, values)}::text[], 1) AS count`
      )
      expect(rows[0]).toEqual({ values, found: true, count: values.length })
      const numbers = yield* client.run(
        "test.integers",
        (sql) => sql<Array<{ total: number }>>`SELECT sum(n)::int AS total FROM unnest(${textArray(sql, ["1", "2", "39"])}::integer[]) AS n`
      )
      expect(numbers[0]?.total).toBe(42)
      expect(queries.filter((query) => query.includes("pg_catalog.pg_type"))).toEqual([])
    }), 60_000)

  it.live("a transaction as the first statements of a fresh pool of one (PGlite) is handed its connection", () =>
    firstStatementsAreTransactions(embeddedDatabases, 1), 60_000)

  if (server === undefined) {
    it.skip("skipped: no DATABASE_URL (the tests against a PostgreSQL server)", () => {})
  } else {
    const databases = serverDatabases(server)

    it.live("transactions as the first statements of a fresh pool of one or of four (server) are handed connections", () =>
      Effect.gen(function* () {
        yield* firstStatementsAreTransactions(databases, 1)
        yield* firstStatementsAreTransactions(databases, 4)
      }), 60_000)

    it.live("statementTimeoutMs bounds the client's wait for a statement and a transaction, except within withoutStatementTimeout", () =>
      Effect.gen(function* () {
        const { client } = yield* freshClient(databases, { maxConnections: 2, statementTimeoutMs: 200 })
        const slow = client.run("test.sleep", (sql) => sql<Array<{ slept: boolean }>>`SELECT pg_sleep(0.6) IS NOT NULL AS slept`)
        const slowTransaction = client.transactionally(Effect.andThen(client.run("test.one", (sql) => sql`SELECT 1`), slow))
        expect(yield* Effect.flip(slow)).toBeInstanceOf(StoreUnavailable)
        expect(yield* Effect.flip(slowTransaction)).toBeInstanceOf(StoreUnavailable)
        expect((yield* withoutStatementTimeout(slow))[0]?.slept).toBe(true)
        expect((yield* withoutStatementTimeout(slowTransaction))[0]?.slept).toBe(true)
        // The bound is the fiber's: outside the wrapper it holds again.
        expect(yield* Effect.flip(slow)).toBeInstanceOf(StoreUnavailable)
      }), 60_000)

    it.live("a group takes as many units as fit their recent read time into its budget: light units share one transaction, heavy ones spread over several", () =>
      Effect.gen(function* () {
        const { client } = yield* freshClient(databases, { maxConnections: 4, groupReadBudgetMs: 80 })
        const transactionId = client.run("test.txid", (sql) => sql<Array<{ id: string }>>`SELECT txid_current()::text AS id`).pipe(
          Effect.map((rows) => rows[0]!.id)
        )
        const unit = (then: Effect.Effect<unknown, StoreUnavailable> = Effect.void) =>
          client.groupTransactionally(Effect.tap(transactionId, () => then))
        const transactionsOf = (units: ReadonlyArray<Effect.Effect<string, StoreUnavailable>>) =>
          Effect.map(Effect.all(units, { concurrency: "unbounded" }), (ids) => new Set(ids).size)
        const sleep = client.run("test.sleep", (sql) => sql`SELECT pg_sleep(0.1)`)

        // Nothing measured yet: eight light units started together share one transaction.
        expect(yield* transactionsOf(Array.from({ length: 8 }, () => unit()))).toBe(1)
        // Units that each keep the connection busy for 100 ms, more than the budget: a group takes the least, four.
        expect(yield* transactionsOf(Array.from({ length: 4 }, () => unit(sleep)))).toBe(1)
        expect(yield* transactionsOf(Array.from({ length: 10 }, () => unit(sleep)))).toBe(3)
        // Light units again: as their reads prove short, groups grow back to take them all.
        for (let group = 0; group < 30; group++) yield* transactionsOf(Array.from({ length: 2 }, () => unit()))
        expect(yield* transactionsOf(Array.from({ length: 8 }, () => unit()))).toBe(1)

        // With no budget every unit started together shares one transaction, however heavy.
        const { client: unlimited } = yield* freshClient(databases, { maxConnections: 4, groupReadBudgetMs: 0 })
        const heavy = unlimited.groupTransactionally(Effect.tap(
          unlimited.run("test.txid", (sql) => sql<Array<{ id: string }>>`SELECT txid_current()::text AS id`),
          () => unlimited.run("test.sleep", (sql) => sql`SELECT pg_sleep(0.1)`)
        ))
        yield* Effect.all(Array.from({ length: 4 }, () => heavy), { concurrency: "unbounded" })
        const ids = yield* Effect.all(Array.from({ length: 6 }, () => heavy), { concurrency: "unbounded" })
        expect(new Set(ids.map((rows) => rows[0]!.id)).size).toBe(1)
      }), 60_000)

    it.live("a backend lost as a fresh connection sends its first statement: StoreUnavailable, no unhandled rejection", () =>
      Effect.gen(function* () {
        const proxy = yield* Effect.acquireRelease(
          Effect.promise(() => startProxyClosingAtFirstStatement(new URL(server))),
          (proxy) => Effect.promise(() => proxy.close())
        )
        const client = yield* makePgClient({ url: proxy.url, maxConnections: 2, connectTimeoutSeconds: 2 })
        const { outcome, rejections } = yield* unhandledRejectionsDuring(
          Effect.flip(client.run("test.one", (sql) => sql`SELECT 1 AS one`)).pipe(
            Effect.timeoutOrElse({ duration: "10 seconds", orElse: () => Effect.die(new Error("the statement never settled")) })
          )
        )
        expect(outcome._tag).toBe("Success")
        if (outcome._tag === "Success") expect(outcome.value).toBeInstanceOf(StoreUnavailable)
        expect(proxy.closedConnections()).toBeGreaterThan(0)
        expect(rejections).toEqual([])
      }), 60_000)
  }
})

