import { StoreUnavailable } from "@clinical-api/domain"
import { Context, Effect, Exit, FiberRef, Layer, Redacted, type Scope } from "effect"
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
  /** Group transactions in flight at once, each on a connection of its own (default: half the pool, at least 1). */
  readonly maxGroups?: number
  /** Units of work one group transaction holds at most (default 64). */
  readonly maxGroupSize?: number
}

export interface PgClientService {
  /** The pool itself. Prefer `run`, which joins the current transaction. */
  readonly pool: Sql
  /** Runs `query` on the current transaction's connection, or on the pool outside one. */
  readonly run: <A>(operation: string, query: (sql: Sql) => Promise<A>) => Effect.Effect<A, StoreUnavailable>
  /**
   * Appends rows that nothing after it reads back (audit rows) with `statement`. Inside a
   * transaction they are written at its COMMIT, in the same round trip, and the transaction
   * commits only if they are (otherwise it fails and nothing is committed); all rows given with
   * the same `statement` in one transaction, a group's included, are written by one call of
   * it. Outside a transaction they are written at once.
   */
  readonly appendAtCommit: <R>(
    operation: string,
    statement: RowsStatement<R>,
    rows: ReadonlyArray<R>
  ) => Effect.Effect<void, StoreUnavailable>
  /**
   * Runs `effect` in one transaction. A failure of `effect` (typed error, defect or
   * interruption) rolls back and is re-raised unchanged; nested calls join the outer one.
   */
  readonly transactionally: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | StoreUnavailable, R>
  /**
   * Runs `effect` as one member of a group transaction (group commit): the units of work that
   * arrive together share one transaction and one COMMIT, and each succeeds only once that
   * COMMIT has succeeded, with its `appendAtCommit` writes in it. A member that fails (typed
   * error, defect or interruption) contributes none of its `appendAtCommit` writes, and is
   * re-raised unchanged. For units that write only through `appendAtCommit`: a write sent with
   * `run` would commit with the others even if its own unit failed. A store failure (a
   * statement, a write or the COMMIT) fails every member of the group: nothing of it commits.
   * Nested calls, and calls within `transactionally`, join the outer transaction.
   */
  readonly groupTransactionally: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | StoreUnavailable, R>
}

export class PgClient extends Context.Tag("@clinical-api/storage-adapter/PgClient")<PgClient, PgClientService>() {}

/** A statement that writes rows (see `appendAtCommit`). */
export type RowsStatement<R> = (sql: Sql, rows: ReadonlyArray<R>) => Promise<unknown>

interface DeferredWrite {
  readonly operation: string
  readonly statement: RowsStatement<unknown>
  readonly rows: ReadonlyArray<unknown>
}

interface CurrentTransaction {
  readonly pool: Sql
  readonly connection: postgres.ReservedSql
  /** The `appendAtCommit` writes of this transaction, in order. */
  readonly atCommit: Array<DeferredWrite>
}

/** Not an Option: see `currentCaller` in the domain (an Option of an object costs a WeakMap entry per set). */
const currentTransaction = FiberRef.unsafeMake<CurrentTransaction | null>(null)

const unavailable = (operation: string) => (cause: unknown) => new StoreUnavailable({ operation, cause })

/**
 * Sends the deferred writes and COMMIT at once (postgres.js writes the statements of one tick
 * in one packet) and resolves with the first failure, if any. A failed write aborts the
 * transaction, so the COMMIT that follows it only rolls back: the first failure is the
 * transaction's failure.
 */
const commitWith = async (
  connection: postgres.ReservedSql,
  atCommit: ReadonlyArray<DeferredWrite>
): Promise<StoreUnavailable | undefined> => {
  const merged = new Map<RowsStatement<unknown>, { readonly operation: string; readonly rows: Array<unknown> }>()
  for (const write of atCommit) {
    const entry = merged.get(write.statement)
    if (entry === undefined) merged.set(write.statement, { operation: write.operation, rows: [...write.rows] })
    else for (const row of write.rows) entry.rows.push(row)
  }
  const operations = [...merged.values()].map((entry) => entry.operation)
  // A postgres.js query is sent in the order it is first awaited or executed, not built: each
  // write is started (`then`) before the COMMIT is, so none can follow it.
  const writes = [...merged].map(([statement, entry]) => statement(connection, entry.rows).then((value) => value))
  const settled = await Promise.allSettled([...writes, connection`COMMIT`.execute()])
  const failed = settled.findIndex((outcome) => outcome.status === "rejected")
  const outcome = settled[failed]
  if (outcome === undefined || outcome.status !== "rejected") return undefined
  return unavailable(operations[failed] ?? "transaction.commit")(outcome.reason)
}

/**
 * One group transaction: members join while it forms, run their effects on its connection
 * once it has begun, and leave (with their writes if they succeeded); when the last has left,
 * the group commits and tells every member the outcome.
 */
interface TransactionGroup {
  size: number
  left: number
  /** Set when the connection is reserved and BEGIN sent, or the reservation failed. */
  begun: { readonly connection: postgres.ReservedSql; readonly begin: Promise<unknown> } | StoreUnavailable | undefined
  /** Set when the group has committed (`null`) or failed. */
  outcome: StoreUnavailable | null | undefined
  finishing: boolean
  readonly writes: Array<DeferredWrite>
  readonly onBegun: Array<() => void>
  readonly onOutcome: Array<() => void>
}

export const makePgClient = (options: PgClientOptions): Effect.Effect<PgClientService, never, Scope.Scope> =>
  // eslint-disable-next-line no-restricted-syntax -- made once, when the layer is built
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
      current !== null && current.pool === pool ? current.connection : pool
    )

    const run = <A>(operation: string, query: (sql: Sql) => Promise<A>): Effect.Effect<A, StoreUnavailable> =>
      Effect.flatMap(connectionFor, (sql) => Effect.tryPromise({ try: () => query(sql), catch: unavailable(operation) }))

    const appendAtCommit = <R>(
      operation: string,
      statement: RowsStatement<R>,
      rows: ReadonlyArray<R>
    ): Effect.Effect<void, StoreUnavailable> =>
      Effect.flatMap(FiberRef.get(currentTransaction), (current) => {
        if (current !== null && current.pool === pool) {
          current.atCommit.push({ operation, statement: statement as RowsStatement<unknown>, rows })
          return Effect.void
        }
        return Effect.asVoid(run(operation, (sql) => statement(sql, rows)))
      })

    const commit = (connection: postgres.ReservedSql, atCommit: ReadonlyArray<DeferredWrite>) =>
      Effect.flatMap(Effect.promise(() => commitWith(connection, atCommit)), (failure) =>
        failure === undefined ? Effect.void : Effect.fail(failure))

    // The two transaction bodies are generator functions made once, here: one made per call
    // would get a V8 map of its own in the old generation, which keeps the function and all it
    // closes over alive through every scavenge until the next full collection.
    function* runOwnTransaction<A, E, R>(connection: postgres.ReservedSql, effect: Effect.Effect<A, E, R>) {
      // BEGIN is sent now but not awaited: it leaves in one packet with the first
      // statement of `effect`, and its outcome is checked before the commit.
      const begun = connection`BEGIN`.execute()
      begun.catch(() => undefined)
      const atCommit: Array<DeferredWrite> = []
      const result = yield* Effect.locally(effect, currentTransaction, { pool, connection, atCommit })
      yield* Effect.tryPromise({ try: () => begun, catch: unavailable("transaction.begin") })
      yield* commit(connection, atCommit)
      return result
    }

    const transactionally = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | StoreUnavailable, R> =>
      Effect.flatMap(FiberRef.get(currentTransaction), (current) =>
        current !== null && current.pool === pool
          ? effect
          : Effect.acquireUseRelease(
              Effect.tryPromise({ try: () => pool.reserve(), catch: unavailable("transaction.begin") }),
              (connection) => Effect.gen(() => runOwnTransaction(connection, effect)),
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

    const maxGroups = Math.max(1, options.maxGroups ?? Math.floor((options.maxConnections ?? 10) / 2))
    const maxGroupSize = Math.max(1, options.maxGroupSize ?? 64)
    /** The group that new members join; it begins at the next turn of the event loop that finds a free slot. */
    let forming: TransactionGroup | undefined
    /** Groups that filled up while every slot was taken, oldest first. */
    const full: Array<TransactionGroup> = []
    let inFlight = 0

    const settle = (listeners: Array<() => void>) => {
      for (const listener of listeners.splice(0)) listener()
    }

    const launchNext = () => {
      while (inFlight < maxGroups) {
        const group = full.shift() ?? forming
        if (group === undefined) return
        if (group === forming) forming = undefined
        launch(group)
      }
    }

    const launch = (group: TransactionGroup) => {
      inFlight++
      if (group.left === group.size) return finish(group)
      const begun = (outcome: NonNullable<TransactionGroup["begun"]>) => {
        group.begun = outcome
        settle(group.onBegun)
        if (group.left === group.size) finish(group)
      }
      pool.reserve().then(
        (connection) => {
          const begin = connection`BEGIN`.execute()
          begin.catch(() => undefined)
          begun({ connection, begin })
        },
        (cause) => begun(unavailable("transaction.begin")(cause))
      )
    }

    const finish = (group: TransactionGroup) => {
      if (group.finishing) return
      group.finishing = true
      const begun = group.begun
      const done = (outcome: StoreUnavailable | null) => {
        group.outcome = outcome
        inFlight--
        settle(group.onOutcome)
        // Something can still hold a finished group until the next full collection; let that not
        // keep its connection's objects and its writes alive too (docs/decisions/0004-group-commit.md).
        group.begun = undefined
        group.writes.length = 0
        launchNext()
      }
      if (begun === undefined || begun instanceof StoreUnavailable) return done(begun ?? null)
      const { begin, connection } = begun
      void (async () => {
        let failure = await begin.then(() => undefined, unavailable("transaction.begin"))
        if (failure === undefined && group.writes.length > 0) failure = await commitWith(connection, group.writes)
        if (failure !== undefined || group.writes.length === 0) await connection`ROLLBACK`.catch(() => undefined)
        connection.release()
        done(failure ?? null)
      })()
    }

    const join = (): TransactionGroup => {
      let group = forming
      if (group === undefined) {
        const created: TransactionGroup = { size: 0, left: 0, begun: undefined, outcome: undefined, finishing: false, writes: [], onBegun: [], onOutcome: [] }
        forming = group = created
        setImmediate(() => {
          if (forming === created) launchNext()
        })
      }
      group.size++
      if (group.size >= maxGroupSize) {
        forming = undefined
        full.push(group)
        launchNext()
      }
      return group
    }

    const leave = (group: TransactionGroup, writes: ReadonlyArray<DeferredWrite> | undefined) => {
      group.left++
      if (writes !== undefined) group.writes.push(...writes)
      if (group.left === group.size && group.begun !== undefined) finish(group)
    }

    const begunConnection = (group: TransactionGroup) =>
      Effect.async<postgres.ReservedSql, StoreUnavailable>((resume) => {
        const answer = () => {
          const begun = group.begun
          resume(begun === undefined || begun instanceof StoreUnavailable
            ? Effect.fail(begun ?? unavailable("transaction.begin")(undefined))
            : Effect.succeed(begun.connection))
        }
        if (group.begun === undefined) group.onBegun.push(answer)
        else answer()
      })

    const committed = (group: TransactionGroup) =>
      Effect.async<void, StoreUnavailable>((resume) => {
        const answer = () => resume(group.outcome instanceof StoreUnavailable ? Effect.fail(group.outcome) : Effect.void)
        if (group.outcome === undefined) group.onOutcome.push(answer)
        else answer()
      })

    function* runInGroup<A, E, R>(
      restore: <AX, EX, RX>(effect: Effect.Effect<AX, EX, RX>) => Effect.Effect<AX, EX, RX>,
      effect: Effect.Effect<A, E, R>,
      outer: CurrentTransaction | null
    ) {
      const group = join()
      const atCommit: Array<DeferredWrite> = []
      // What `Effect.locally` does, without its acquire-release: this region is uninterruptible
      // and the exit is caught, so the outer value is always put back.
      const exit = yield* Effect.exit(restore(Effect.flatMap(begunConnection(group), (connection) =>
        Effect.zipRight(FiberRef.set(currentTransaction, { pool, connection, atCommit }), effect))))
      yield* FiberRef.set(currentTransaction, outer)
      leave(group, Exit.isSuccess(exit) ? atCommit : undefined)
      const value = yield* exit
      // Interrupted while it waits, the member is gone but its writes still commit with the group.
      yield* restore(committed(group))
      return value
    }

    const groupTransactionally = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | StoreUnavailable, R> =>
      Effect.flatMap(FiberRef.get(currentTransaction), (current) =>
        current !== null && current.pool === pool
          ? effect
          : Effect.uninterruptibleMask((restore) => Effect.gen(() => runInGroup(restore, effect, current)))
      )

    return { pool, run, appendAtCommit, transactionally, groupTransactionally }
  })

export const PgClientLayer = (options: PgClientOptions): Layer.Layer<PgClient> =>
  Layer.scoped(PgClient, makePgClient(options))
