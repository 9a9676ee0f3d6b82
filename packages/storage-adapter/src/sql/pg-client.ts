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
   * Runs `effect` in one transaction. A failure of `effect` (typed error, defect or
   * interruption) rolls back and is re-raised unchanged; nested calls join the outer one.
   */
  readonly transactionally: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | StoreUnavailable, R>
}

export class PgClient extends Context.Tag("@clinical-api/storage-adapter/PgClient")<PgClient, PgClientService>() {}

interface CurrentTransaction {
  readonly pool: Sql
  readonly connection: postgres.ReservedSql
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

    const transactionally = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | StoreUnavailable, R> =>
      Effect.flatMap(FiberRef.get(currentTransaction), (current) =>
        Option.isSome(current) && current.value.pool === pool
          ? effect
          : Effect.acquireUseRelease(
              Effect.tryPromise({ try: () => pool.reserve(), catch: unavailable("transaction.begin") }),
              (connection) =>
                Effect.gen(function* () {
                  yield* Effect.tryPromise({ try: () => connection`BEGIN`, catch: unavailable("transaction.begin") })
                  const result = yield* Effect.locally(effect, currentTransaction, Option.some({ pool, connection }))
                  yield* Effect.tryPromise({ try: () => connection`COMMIT`, catch: unavailable("transaction.commit") })
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

    return { pool, run, transactionally }
  })

export const PgClientLayer = (options: PgClientOptions): Layer.Layer<PgClient> =>
  Layer.scoped(PgClient, makePgClient(options))
