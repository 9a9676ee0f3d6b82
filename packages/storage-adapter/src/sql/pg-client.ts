import { StoreUnavailable } from "@clinical-api/domain"
import { Context, Effect, FiberRef, Layer, Option, Redacted, type Scope } from "effect"
import postgres from "postgres"

/**
 * One postgres.js pool and the transaction the current fiber runs in, if any. Every
 * repository reaches the database through `run`, so inside `transactionally` all of them use
 * the transaction's connection (the FiberRef below, as @effect/sql does) and every driver or
 * connection failure becomes the domain's `StoreUnavailable`.
 */
export type Sql = postgres.Sql
/** The connection of a `pool.begin` transaction (typed apart from the pool by postgres.js). */
export type TransactionSql = postgres.TransactionSql
/** A query or fragment, not yet sent (postgres.js nests fragments into queries). */
export type Fragment = postgres.PendingQuery<postgres.Row[]>

export interface PgClientOptions {
  readonly url: string | Redacted.Redacted<string>
  /** Pool size; 1 for the embedded PGlite, which serves one session. */
  readonly maxConnections?: number
  readonly connectTimeoutSeconds?: number
  /** Named prepared statements (off for PGlite, whose single session is shared). */
  readonly prepare?: boolean
  /** Called with the text of every query sent (tests count queries with it). */
  readonly onQuery?: (query: string) => void
}

export interface PgClientService {
  /** The pool itself. Prefer `run`, which joins the current transaction. */
  readonly pool: Sql
  /** Runs `query` on the current transaction's connection, or on the pool outside one. */
  readonly run: <A>(operation: string, query: (sql: Sql) => Promise<A>) => Effect.Effect<A, StoreUnavailable>
  /**
   * Runs a write that nothing after it reads back (an audit INSERT). Inside a transaction it
   * is sent together with the COMMIT, in one round trip, and the transaction commits only if it
   * succeeds (otherwise the unit of work fails and nothing is committed); outside one it runs
   * at once.
   */
  readonly runAtCommit: (operation: string, query: (sql: Sql) => Promise<unknown>) => Effect.Effect<void, StoreUnavailable>
  /**
   * Runs `effect` in one transaction. A failure of `effect` (typed error, defect or
   * interruption) rolls back and is re-raised unchanged; nested calls join the outer one.
   */
  readonly transactionally: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | StoreUnavailable, R>
}

export class PgClient extends Context.Tag("@clinical-api/storage-adapter/PgClient")<PgClient, PgClientService>() {}

interface DeferredWrite {
  readonly operation: string
  readonly query: (sql: Sql) => Promise<unknown>
}

interface CurrentTransaction {
  readonly pool: Sql
  readonly connection: postgres.ReservedSql
  /** The `runAtCommit` writes of this transaction, in order. */
  readonly atCommit: Array<DeferredWrite>
}

const currentTransaction = FiberRef.unsafeMake<Option.Option<CurrentTransaction>>(Option.none())

const unavailable = (operation: string) => (cause: unknown) => new StoreUnavailable({ operation, cause })

export const makePgClient = (options: PgClientOptions): Effect.Effect<PgClientService, never, Scope.Scope> =>
  Effect.gen(function* () {
    const url = Redacted.isRedacted(options.url) ? Redacted.value(options.url) : options.url
    const onQuery = options.onQuery
    const pool = yield* Effect.acquireRelease(
      Effect.sync(() =>
        postgres(url, {
          max: options.maxConnections ?? 10,
          connect_timeout: options.connectTimeoutSeconds ?? 10,
          prepare: options.prepare ?? true,
          onnotice: () => {},
          ...(onQuery === undefined ? {} : { debug: (_connection: number, query: string) => onQuery(query) })
        })
      ),
      (sql) => Effect.promise(() => sql.end({ timeout: 5 }))
    )

    const connectionFor = Effect.map(FiberRef.get(currentTransaction), (current) =>
      Option.isSome(current) && current.value.pool === pool ? current.value.connection : pool
    )

    const run = <A>(operation: string, query: (sql: Sql) => Promise<A>): Effect.Effect<A, StoreUnavailable> =>
      Effect.flatMap(connectionFor, (sql) => Effect.tryPromise({ try: () => query(sql), catch: unavailable(operation) }))

    const runAtCommit = (operation: string, query: (sql: Sql) => Promise<unknown>): Effect.Effect<void, StoreUnavailable> =>
      Effect.flatMap(FiberRef.get(currentTransaction), (current) => {
        if (Option.isSome(current) && current.value.pool === pool) {
          current.value.atCommit.push({ operation, query })
          return Effect.void
        }
        return Effect.asVoid(run(operation, query))
      })

    /**
     * The deferred writes and COMMIT, sent at once (postgres.js writes the statements of one
     * tick in one packet). A failed write aborts the transaction, so the COMMIT that follows
     * it only rolls back: the first failure is the unit of work's failure.
     */
    const commit = (connection: postgres.ReservedSql, atCommit: ReadonlyArray<DeferredWrite>) =>
      Effect.flatMap(
        Effect.promise(() => {
          // A postgres.js query is sent in the order it is first awaited or executed, not
          // built: each write is started (`then`) before the COMMIT is, so none can follow it.
          const writes = atCommit.map((write) => write.query(connection).then((value) => value))
          return Promise.allSettled([...writes, connection`COMMIT`.execute()])
        }),
        (settled) => {
          const failed = settled.findIndex((outcome) => outcome.status === "rejected")
          const outcome = settled[failed]
          if (outcome === undefined || outcome.status !== "rejected") return Effect.void
          return Effect.fail(unavailable(atCommit[failed]?.operation ?? "transaction.commit")(outcome.reason))
        }
      )

    const transactionally = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | StoreUnavailable, R> =>
      Effect.flatMap(FiberRef.get(currentTransaction), (current) =>
        Option.isSome(current) && current.value.pool === pool
          ? effect
          : Effect.acquireUseRelease(
              Effect.tryPromise({ try: () => pool.reserve(), catch: unavailable("transaction.begin") }),
              (connection) =>
                Effect.gen(function* () {
                  // BEGIN is sent now but not awaited: it leaves in one packet with the first
                  // statement of `effect`, and its outcome is checked before the commit.
                  const begun = connection`BEGIN`.execute()
                  begun.catch(() => undefined)
                  const atCommit: Array<DeferredWrite> = []
                  const result = yield* Effect.locally(effect, currentTransaction, Option.some({ pool, connection, atCommit }))
                  yield* Effect.tryPromise({ try: () => begun, catch: unavailable("transaction.begin") })
                  yield* commit(connection, atCommit)
                  return result
                }),
              (connection, exit) =>
                Effect.promise(async () => {
                  if (exit._tag === "Failure") {
                    // A failed COMMIT or a dropped connection leaves nothing to roll back: ignore its error.
                    await connection`ROLLBACK`.catch(() => undefined)
                  }
                  connection.release()
                })
            )
      )

    return { pool, run, runAtCommit, transactionally }
  })

export const PgClientLayer = (options: PgClientOptions): Layer.Layer<PgClient> =>
  Layer.scoped(PgClient, makePgClient(options))
