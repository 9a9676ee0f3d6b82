import { StoreUnavailable } from "@clinical-api/domain"
import { Context, Data, Effect, Exit, type Fiber, Layer, Redacted, type Scope } from "effect"
import postgres from "postgres"
import { parse as parseArrayText } from "postgres-array"

/**
 * One postgres.js pool and the transaction the current fiber runs in, if any. Every
 * repository reaches the database through `run`, so inside `transactionally` all of them use
 * the transaction's connection (the reference below, as @effect/sql does) and every driver or
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
  /** How long opening one connection may take (default: the URL's `connect_timeout`, else 10). */
  readonly connectTimeoutSeconds?: number
  /** Named prepared statements (off for PGlite, whose single session is shared). */
  readonly prepare?: boolean
  /** Called with the text of every query sent (tests count queries with it). */
  readonly onQuery?: (query: string) => void
  /** Group transactions in flight at once, each on a connection of its own (default: half the pool, at least 1). */
  readonly maxGroups?: number
  /** Units of work one group transaction holds at most (default 64). */
  readonly maxGroupSize?: number
  /**
   * How long, in ms, a group's members may together keep its connection busy (default 16): a
   * group takes at most as many members as fit their recent read time into it (at least four),
   * so that heavy reads spread over several connections while light ones share one commit.
   * 0: no limit; there is none with one group at a time.
   */
  readonly groupReadBudgetMs?: number
  /**
   * The longest one statement may take, in milliseconds (default: no limit). The client gives
   * up on it then, failing with `StoreUnavailable`; with `serverStatementTimeout` the server
   * also cancels it (`statement_timeout`), so a hung statement frees its connection too.
   */
  readonly statementTimeoutMs?: number
  /** Send `statement_timeout` to the server (not to the embedded PGlite, which cannot enforce it). */
  readonly serverStatementTimeout?: boolean
}

export interface PgClientService {
  /** The pool's size. */
  readonly maxConnections: number
  /**
   * The pool statements go to now, for tools that drive postgres.js directly. It is replaced
   * after a connection fault, so read it again for each use; the service itself uses `run`.
   * With several hosts it throws until a statement has located the one to use.
   */
  readonly currentPool: () => Sql
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

export class PgClient extends Context.Service<PgClient, PgClientService>()("@clinical-api/storage-adapter/PgClient") {}

/** A statement that writes rows (see `appendAtCommit`). */
export type RowsStatement<R> = (sql: Sql, rows: ReadonlyArray<R>) => Promise<unknown>

/** The cause of a `StoreUnavailable` when a statement's connection was lost or did not answer in time. */
export class ConnectionLost extends Data.TaggedError("ConnectionLost")<{ readonly message: string }> {}

/**
 * A pool of postgres.js and what is known of its health. postgres.js 3.4.9 must never send on a
 * connection whose socket has closed: a statement sent on a reserved connection after its
 * backend went away throws from a timer callback and ends the process, and a connection that
 * closes with a write still buffered never sends again (porsager/postgres#1208, #1154). So once
 * any established connection of a pool closes, the pool is retired: nothing more is sent on it,
 * what waits on it fails at once, and the next statement opens a fresh pool. Nothing in this
 * client closes a connection by itself (no idle or lifetime limit), so every such close is a fault.
 * A pool that cannot open its first connection is retired too: its queue would only wait.
 */
interface Generation {
  readonly sql: Sql
  retired: boolean
  /** Connections that have sent a statement, by postgres.js's id: their close is a fault. */
  readonly established: Set<number>
  /** Statements waiting for their answer, failed at once when the pool is retired. */
  readonly waiting: WaitingStatements
  /** Every connection of the pool opened, before its first reservation (see `warmUp`). */
  warm: Promise<unknown> | undefined
  /** Its host accepted a connection of the session kind asked for (see `locate`). */
  located: boolean
  readonly retireSelf: () => void
}

interface Waiter {
  readonly abandon: (cause: ConnectionLost) => void
  previous: Waiter | undefined
  next: Waiter | undefined
}

/**
 * A pool's statements that wait for their answer, in a list whose links are cut as each one
 * leaves. Not a Set: a long-lived Set that adds and deletes an entry per statement kept the
 * statements, their answers and their requests alive until V8's next full collection (the hash
 * tables it rehashed out of stay in the old generation with what they held).
 */
class WaitingStatements {
  private first: Waiter | undefined

  add(abandon: (cause: ConnectionLost) => void): Waiter {
    const waiter: Waiter = { abandon, previous: undefined, next: this.first }
    if (this.first !== undefined) this.first.previous = waiter
    this.first = waiter
    return waiter
  }

  remove(waiter: Waiter): void {
    if (waiter.previous !== undefined) waiter.previous.next = waiter.next
    else if (this.first === waiter) this.first = waiter.next
    if (waiter.next !== undefined) waiter.next.previous = waiter.previous
    waiter.previous = undefined
    waiter.next = undefined
  }

  abandonAll(cause: ConnectionLost): void {
    const abandons: Array<(cause: ConnectionLost) => void> = []
    for (let waiter = this.first; waiter !== undefined; waiter = waiter.next) abandons.push(waiter.abandon)
    for (const abandon of abandons) abandon(cause)
  }
}

interface DeferredWrite {
  readonly operation: string
  readonly statement: RowsStatement<unknown>
  readonly rows: ReadonlyArray<unknown>
}

interface CurrentTransaction {
  readonly client: object
  readonly generation: Generation
  readonly connection: postgres.ReservedSql
  /** The client's wait for each statement of it: the pool's bound, or 0 (`withoutStatementTimeout`). */
  readonly timeoutMs: number
  /** The `appendAtCommit` writes of this transaction, in order. */
  readonly atCommit: Array<DeferredWrite>
}

const CurrentTransaction = Context.Reference<CurrentTransaction | null>(
  "@clinical-api/storage-adapter/CurrentTransaction",
  { defaultValue: () => null }
)

const WithoutStatementTimeout = Context.Reference<boolean>(
  "@clinical-api/storage-adapter/WithoutStatementTimeout",
  { defaultValue: () => false }
)

/**
 * Runs `effect` with the client waiting as long as its statements and transactions take
 * (`statementTimeoutMs` is not applied; a server's own `statement_timeout` still is): for
 * start-up work such as seeding the embedded database, which is not a request.
 */
export const withoutStatementTimeout = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.provideService(effect, WithoutStatementTimeout, true)

/** PostgreSQL's oid of `text[]`. */
const TEXT_ARRAY_OID = 1009

const quoteArrayElement = (value: unknown) =>
  value === null ? "NULL" : `"${String(value).replace(/\\/g, "\\\\").replace(/"/g, "\\\"")}"`

/**
 * The array types the repositories send and read, given to postgres.js up front: with
 * `fetch_types` (its default) each fresh connection first runs a query for every array type,
 * and a connection lost during it rejects a promise nothing awaits, which can end the process.
 */
const arrayTypes = {
  textArray: {
    to: TEXT_ARRAY_OID,
    from: [TEXT_ARRAY_OID],
    serialize: (values: ReadonlyArray<unknown>) => `{${values.map(quoteArrayElement).join(",")}}`,
    parse: (text: string) => parseArrayText(text)
  }
}

/**
 * A `text[]` parameter. Use it instead of `sql.array`, which needs the array types postgres.js
 * fetches per connection (off here); cast it in SQL for other element types (`::integer[]`).
 */
export const textArray = (sql: Sql, values: ReadonlyArray<string | null>) =>
  sql.typed(values as Array<string | null>, TEXT_ARRAY_OID)

const unavailable = (operation: string) => (cause: unknown) => new StoreUnavailable({ operation, cause })

const connectionLost = new ConnectionLost({ message: "the database connection was lost" })
const unreachable = new ConnectionLost({ message: "the database could not be reached a moment ago" })

/** Reconnection delay after failed attempts, in seconds: short, so service resumes soon after the server does. */
const reconnectBackoff = (attempts: number) => Math.min(0.05 * 2 ** attempts, 0.5)

/** After a pool could not connect at all, how long statements fail at once before a new pool tries again. */
const UNREACHABLE_PAUSE_MS = 250

/** What each connection answers before the pool's first reservation; not reported to `onQuery`. */
const WARM_UP_STATEMENT = "SELECT 1 AS warm_up"

/** What a pool's first connection asks its server when the URL names several hosts or a session kind; not reported. */
const ROLE_CHECK_STATEMENT =
  "SELECT pg_catalog.pg_is_in_recovery() AS in_recovery, pg_catalog.current_setting('transaction_read_only') AS read_only"

/** SQLSTATE of a write refused by a read-only session (a standby, or a primary made read-only). */
const READ_ONLY_SQL_TRANSACTION = "25006"

/**
 * The session kinds of libpq's `target_session_attrs` that this client honours itself: the
 * service writes, so only these (or any server, when not given).
 */
type TargetSession = "any" | "read-write" | "primary"

/**
 * A connection URL split into one URL per host (`postgres://user@h1:5432,h2:5433/db` names two)
 * and the session kind asked for (`target_session_attrs`, else `PGTARGETSESSIONATTRS`), which
 * each host's URL no longer carries: postgres.js 3.4.9 would check `read-write` by
 * `default_transaction_read_only` alone, which a hot standby leaves off, and on a host that
 * fails it starts again from the first host with every new pool.
 */
export const splitHosts = (url: string): { readonly hostUrls: ReadonlyArray<string>; readonly targetSession: TargetSession } => {
  const schemeEnd = url.indexOf("://")
  if (schemeEnd < 0) return { hostUrls: [url], targetSession: "any" }
  const authorityStart = schemeEnd + 3
  const authorityLength = url.slice(authorityStart).search(/[/?]/)
  const authorityEnd = authorityLength < 0 ? url.length : authorityStart + authorityLength
  const hostsStart = url.lastIndexOf("@", authorityEnd - 1) + 1 || authorityStart
  const hostList = url.slice(Math.max(hostsStart, authorityStart), authorityEnd)
  let rest = url.slice(authorityEnd)
  const queryStart = rest.indexOf("?")
  let asked = process.env["PGTARGETSESSIONATTRS"]
  if (queryStart >= 0) {
    const query = new URLSearchParams(rest.slice(queryStart + 1))
    asked = query.get("target_session_attrs") ?? asked
    query.delete("target_session_attrs")
    const kept = query.toString()
    rest = rest.slice(0, queryStart) + (kept === "" ? "" : `?${kept}`)
  }
  if (asked !== undefined && asked !== "" && asked !== "any" && asked !== "read-write" && asked !== "primary") {
    throw new Error(`target_session_attrs=${asked} is not supported: the service needs a server that accepts writes (read-write, primary or any)`)
  }
  const head = url.slice(0, Math.max(hostsStart, authorityStart))
  return {
    hostUrls: hostList.split(",").map((host) => head + host + rest),
    targetSession: asked === "read-write" || asked === "primary" ? asked : "any"
  }
}

const connectTimeoutOf = (url: string): number | undefined => {
  const queryStart = url.indexOf("?")
  const text = queryStart < 0 ? null : new URLSearchParams(url.slice(queryStart + 1)).get("connect_timeout")
  const seconds = text === null ? Number.NaN : Number(text)
  return Number.isFinite(seconds) && seconds > 0 ? seconds : undefined
}

const isReadOnlyRefusal = (cause: unknown) =>
  typeof cause === "object" && cause !== null && (cause as { readonly code?: unknown }).code === READ_ONLY_SQL_TRANSACTION

/** How long the client waits past `statement_timeout` for the server's own cancellation. */
const SERVER_CANCEL_GRACE_MS = 1000

/** How long a retired pool's statements already on healthy connections may take before the pool is closed. */
const RETIRED_POOL_GRACE_SECONDS = 5

/** However heavy its members' reads, a group takes four: at least two (with 8 ms) lost on the first list page (decision 0004). */
const MIN_GROUP_SIZE = 4
/** The weight of a finished group in the moving average of its members' read time. */
const READ_TIME_WEIGHT = 0.2

const noop = () => {}

/**
 * Settles as `statement()` does, unless `generation` is retired first (then nothing is sent, or
 * the answer is no longer awaited) or `timeoutMs` passes (then `onTimeout` runs). A value that
 * arrives after its caller stopped waiting goes to `discard`.
 */
const guarded = <A>(
  generation: Generation,
  statement: () => Promise<A>,
  timeoutMs: number,
  onTimeout: () => void,
  discard?: (late: A) => void
): Promise<A> =>
  new Promise<A>((resolve, reject) => {
    if (generation.retired) return reject(connectionLost)
    let settled = false
    let timer: ReturnType<typeof setTimeout> | undefined
    const stopWaiting = () => {
      settled = true
      generation.waiting.remove(waiter)
      if (timer !== undefined) clearTimeout(timer)
    }
    const abandon = (cause: unknown) => {
      if (settled) return
      stopWaiting()
      reject(cause)
    }
    const waiter = generation.waiting.add(abandon)
    if (timeoutMs > 0) {
      timer = setTimeout(() => {
        abandon(new ConnectionLost({ message: `no answer within ${timeoutMs} ms` }))
        onTimeout()
      }, timeoutMs)
    }
    let pending: Promise<A>
    const stackTraceLimit = Error.stackTraceLimit
    // With a `debug` callback set, postgres.js captures a stack for every query and fragment it
    // builds, a tenth of a detail request's CPU; only its own error text would show that stack.
    Error.stackTraceLimit = 0
    try {
      pending = statement()
    } catch (cause) {
      return abandon(cause)
    } finally {
      Error.stackTraceLimit = stackTraceLimit
    }
    pending.then((value) => {
      if (settled) return discard?.(value)
      stopWaiting()
      resolve(value)
    }, (cause: unknown) => {
      abandon(cause)
      // The server no longer takes writes (a demoted primary): the next statement looks for the one that does.
      if (isReadOnlyRefusal(cause)) generation.retireSelf()
    })
  })

export const makePgClient = (options: PgClientOptions): Effect.Effect<PgClientService, never, Scope.Scope> =>
  // eslint-disable-next-line no-restricted-syntax -- made once, when the layer is built
  Effect.gen(function* () {
    const url = Redacted.isRedacted(options.url) ? Redacted.value(options.url) : options.url
    const { hostUrls, targetSession } = splitHosts(url)
    // Several hosts, or a session kind asked for: each pool opens on one host, checked first.
    const checksRole = hostUrls.length > 1 || targetSession !== "any"
    const connectTimeoutSeconds = options.connectTimeoutSeconds ?? connectTimeoutOf(url) ?? 10
    const onQuery = options.onQuery
    const maxConnections = options.maxConnections ?? 10
    const statementTimeoutMs = options.statementTimeoutMs ?? 0
    // When the server cancels a late statement itself, its error comes first and the connection
    // is kept; the client's own time-out is for a server that does not answer at all.
    const clientTimeoutMs = statementTimeoutMs > 0 && options.serverStatementTimeout === true
      ? statementTimeoutMs + SERVER_CANCEL_GRACE_MS
      : statementTimeoutMs
    const client = {}
    let current: Generation | undefined
    let closed = false
    let unreachableUntil = 0
    /** The host the last pool was located on: the next looks there first. */
    let hostCursor = 0
    let locating: Promise<Generation> | undefined

    const retire = (generation: Generation) => {
      if (generation.retired) return
      generation.retired = true
      if (current === generation) current = undefined
      generation.waiting.abandonAll(connectionLost)
      generation.sql.end({ timeout: RETIRED_POOL_GRACE_SECONDS }).catch(noop)
    }

    const openGeneration = (hostUrl: string): Generation => {
      const established = new Set<number>()
      const generation: Generation = {
        sql: postgres(hostUrl, {
          max: maxConnections,
          connect_timeout: connectTimeoutSeconds,
          prepare: options.prepare ?? true,
          idle_timeout: 0,
          max_lifetime: null,
          backoff: reconnectBackoff,
          fetch_types: false,
          types: arrayTypes,
          onnotice: noop,
          ...(statementTimeoutMs > 0 && options.serverStatementTimeout === true
            ? { connection: { statement_timeout: statementTimeoutMs } }
            : {}),
          debug: (connection: number, query: string) => {
            established.add(connection)
            if (query !== WARM_UP_STATEMENT && query !== ROLE_CHECK_STATEMENT) onQuery?.(query)
          },
          onclose: (connection: number) => {
            if (established.has(connection)) return retire(generation)
            // A pool that could not open its first connection: what waits on it fails now, and
            // for a moment statements fail at once instead of queueing for a server that is down.
            // With several hosts, `locate` tries the next one first and pauses only when none answered.
            if (established.size === 0 && !generation.retired) {
              if (!checksRole) unreachableUntil = Date.now() + UNREACHABLE_PAUSE_MS
              retire(generation)
            }
          }
        }),
        retired: false,
        established,
        waiting: new WaitingStatements(),
        warm: undefined,
        located: !checksRole,
        retireSelf: () => retire(generation)
      }
      return generation
    }

    /**
     * A pool on the first host, from the last one that served on, whose server takes the
     * session asked for: not in recovery (a standby) and, for `read-write`, not read-only. A
     * host that refuses, times out or is of the wrong kind is left for the next at once; when
     * none is, statements fail at once for a moment, as with one host.
     */
    const locate = async (): Promise<Generation> => {
      for (let tried = 0; tried < hostUrls.length && !closed; tried++) {
        const index = (hostCursor + tried) % hostUrls.length
        const candidate = openGeneration(hostUrls[index] ?? url)
        current = candidate
        const role = await guarded(
          candidate,
          () => candidate.sql.unsafe<Array<{ in_recovery: boolean; read_only: string }>>(ROLE_CHECK_STATEMENT).execute(),
          (connectTimeoutSeconds + 1) * 1000,
          noop
        ).then((rows) => rows[0], () => undefined)
        const fits = role !== undefined && !role.in_recovery && (targetSession !== "read-write" || role.read_only === "off")
        if (fits && !candidate.retired) {
          candidate.located = true
          hostCursor = index
          return candidate
        }
        retire(candidate)
      }
      unreachableUntil = Date.now() + UNREACHABLE_PAUSE_MS
      throw unreachable
    }

    /** The pool statements go to now; with several hosts, once one is located. */
    const generation = (): Generation | Promise<Generation> => {
      if (closed) throw new Error("the database client is closed")
      if (current !== undefined && !current.retired && current.located) return current
      if (Date.now() < unreachableUntil) throw unreachable
      if (!checksRole) return current = openGeneration(url)
      if (locating === undefined) {
        const search = locate()
        locating = search
        const done = () => {
          if (locating === search) locating = undefined
        }
        search.then(done, done)
      }
      return locating
    }

    const locatedGeneration = (): Promise<Generation> => {
      try {
        return Promise.resolve(generation())
      } catch (cause) {
        return Promise.reject(cause)
      }
    }

    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        closed = true
        const last = current
        current = undefined
        if (last !== undefined && !last.retired) await last.sql.end({ timeout: 5 }).catch(noop)
      })
    )

    /** A statement outside a transaction: it may only wait long for a free connection. */
    const sendOnPool = <A>(query: (sql: Sql) => Promise<A>, timeoutMs: number): Promise<A> => {
      const target = generation()
      return target instanceof Promise
        ? target.then((located) => guarded(located, () => query(located.sql), timeoutMs, noop))
        : guarded(target, () => query(target.sql), timeoutMs, noop)
    }

    /** One on a reserved connection that outlives its time-out leaves it in an unknown state: the pool goes. */
    const sendOn = <A>(transaction: CurrentTransaction, query: (sql: Sql) => Promise<A>): Promise<A> =>
      guarded(transaction.generation, () => query(transaction.connection), transaction.timeoutMs, () =>
        retire(transaction.generation))

    const timeoutOf = (fiber: Fiber.Fiber<unknown, unknown>) =>
      fiber.getRef(WithoutStatementTimeout) ? 0 : clientTimeoutMs

    const run = <A>(operation: string, query: (sql: Sql) => Promise<A>): Effect.Effect<A, StoreUnavailable> =>
      Effect.withFiber((fiber) => {
        const transaction = fiber.getRef(CurrentTransaction)
        return Effect.tryPromise({
          try: () =>
            transaction !== null && transaction.client === client
              ? sendOn(transaction, query)
              : sendOnPool(query, timeoutOf(fiber)),
          catch: unavailable(operation)
        })
      })

    const appendAtCommit = <R>(
      operation: string,
      statement: RowsStatement<R>,
      rows: ReadonlyArray<R>
    ): Effect.Effect<void, StoreUnavailable> =>
      Effect.flatMap(CurrentTransaction, (transaction) => {
        if (transaction !== null && transaction.client === client) {
          transaction.atCommit.push({ operation, statement: statement as RowsStatement<unknown>, rows })
          return Effect.void
        }
        return Effect.asVoid(run(operation, (sql) => statement(sql, rows)))
      })

    /**
     * postgres.js 3.4.9 without `fetch_types` never hands a reservation to the connection it
     * opens for it (its first ReadyForQuery reaches no queue), so the reservation waits until
     * another connection of the pool is released, forever on a pool of one. Once every
     * connection has answered a statement, a reservation takes an idle one or waits for a
     * release. A warm-up that fails is tried again by the next reservation.
     */
    const warmUp = (target: Generation): Promise<unknown> => {
      if (target.warm === undefined) {
        const warm = Promise.all(Array.from({ length: maxConnections }, () => target.sql.unsafe(WARM_UP_STATEMENT).execute()))
        warm.catch(() => {
          if (target.warm === warm) target.warm = undefined
        })
        target.warm = warm
      }
      return target.warm
    }

    /**
     * A connection reserved for a transaction of its own, with BEGIN sent: it leaves with the
     * first statement and is awaited before the commit (`begun`). The warm-up and the wait for
     * a connection share one time-out, as one wait.
     */
    const reserve = async (timeoutMs: number): Promise<ReservedTransaction> => {
      const target = await locatedGeneration()
      const connection = await guarded(target, () => warmUp(target).then(() => target.sql.reserve()), timeoutMs, noop, (late) => {
        if (!target.retired) late.release()
      })
      const transaction: ReservedTransaction = {
        client,
        generation: target,
        connection,
        timeoutMs,
        atCommit: [],
        begun: Promise.resolve()
      }
      const begun = sendOn(transaction, (sql) => sql`BEGIN`.execute())
      begun.catch(noop)
      return { ...transaction, begun }
    }

    /**
     * Sends the deferred writes and COMMIT at once (postgres.js writes the statements of one tick
     * in one packet) and resolves with the first failure, if any. A failed write aborts the
     * transaction, so the COMMIT that follows it only rolls back: the first failure is the
     * transaction's failure.
     */
    const commit = async (transaction: ReservedTransaction): Promise<StoreUnavailable | undefined> => {
      const beginFailure = await transaction.begun.then(() => undefined, unavailable("transaction.begin"))
      if (beginFailure !== undefined) return beginFailure
      const merged = new Map<RowsStatement<unknown>, { readonly operation: string; readonly rows: Array<unknown> }>()
      for (const write of transaction.atCommit) {
        const entry = merged.get(write.statement)
        if (entry === undefined) merged.set(write.statement, { operation: write.operation, rows: [...write.rows] })
        else for (const row of write.rows) entry.rows.push(row)
      }
      const operations = [...merged.values()].map((entry) => entry.operation)
      // A postgres.js query is sent in the order it is first awaited or executed, not built:
      // each write is started (`then`) before the COMMIT is, so none can follow it.
      const writes = [...merged].map(([statement, entry]) => sendOn(transaction, (sql) => statement(sql, entry.rows)))
      const settled = await Promise.allSettled([...writes, sendOn(transaction, (sql) => sql`COMMIT`.execute())])
      const failed = settled.findIndex((outcome) => outcome.status === "rejected")
      const outcome = settled[failed]
      if (outcome === undefined || outcome.status !== "rejected") return undefined
      return unavailable(operations[failed] ?? "transaction.commit")(outcome.reason)
    }

    /**
     * Rolls back after a failure and returns the connection to the pool. A connection of a
     * retired pool is left alone: nothing may be sent on it, and the pool closes it.
     */
    const release = async (transaction: ReservedTransaction, failed: boolean) => {
      if (failed) await sendOn(transaction, (sql) => sql`ROLLBACK`.execute()).catch(noop)
      if (!transaction.generation.retired) transaction.connection.release()
    }

    // The two transaction bodies are generator functions made once, here: one made per call
    // gets a V8 map of its own, which keeps the function and all it closes over alive until a
    // full collection.
    function* runOwnTransaction<A, E, R>(transaction: ReservedTransaction, effect: Effect.Effect<A, E, R>) {
      const result = yield* Effect.provideService(effect, CurrentTransaction, transaction)
      const failure = yield* Effect.promise(() => commit(transaction))
      if (failure !== undefined) return yield* failure
      return result
    }

    const transactionally = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | StoreUnavailable, R> =>
      Effect.withFiber((fiber) => {
        const current = fiber.getRef(CurrentTransaction)
        if (current !== null && current.client === client) return effect
        const timeoutMs = timeoutOf(fiber)
        return Effect.acquireUseRelease(
          Effect.tryPromise({ try: () => reserve(timeoutMs), catch: unavailable("transaction.begin") }),
          (transaction) => Effect.gen(() => runOwnTransaction(transaction, effect)),
          (transaction, exit) => Effect.promise(() => release(transaction, Exit.isFailure(exit)))
        )
      })

    const maxGroups = Math.max(1, options.maxGroups ?? Math.floor(maxConnections / 2))
    const maxGroupSize = Math.max(1, options.maxGroupSize ?? 64)
    // With one group at a time there is no other connection to spread heavy reads to.
    const groupReadBudgetMs = maxGroups > 1 ? options.groupReadBudgetMs ?? 16 : 0
    /** What one member's reads have lately kept its group's connection busy, in ms (a moving average). */
    let memberReadMs = 0
    /** The most members a group takes now: as many as fit their reads into the budget one after the other. */
    const currentGroupLimit = () =>
      groupReadBudgetMs <= 0 || memberReadMs <= 0
        ? maxGroupSize
        : Math.min(maxGroupSize, Math.max(MIN_GROUP_SIZE, Math.floor(groupReadBudgetMs / memberReadMs)))
    /** The group that new members join; it begins at the next turn of the event loop that finds a free slot. */
    let forming: TransactionGroup | undefined
    /** Groups that filled up while every slot was taken, oldest first. */
    const full: Array<TransactionGroup> = []
    let inFlight = 0

    const settleAll = (listeners: Array<() => void>) => {
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
      const begun = (outcome: ReservedTransaction | StoreUnavailable) => {
        group.begun = outcome
        group.begunAt = performance.now()
        settleAll(group.onBegun)
        if (group.left === group.size) finish(group)
      }
      reserve(clientTimeoutMs).then(begun, (cause) => begun(unavailable("transaction.begin")(cause)))
    }

    const finish = (group: TransactionGroup) => {
      if (group.finishing) return
      group.finishing = true
      const begun = group.begun
      const done = (outcome: StoreUnavailable | null) => {
        group.outcome = outcome
        inFlight--
        settleAll(group.onOutcome)
        // Something can still hold a finished group until the next full collection; let that
        // not keep its connection's objects and its writes alive too.
        group.begun = undefined
        group.writes.length = 0
        launchNext()
      }
      if (begun === undefined || begun instanceof StoreUnavailable) return done(begun ?? null)
      void (async () => {
        const transaction: ReservedTransaction = { ...begun, atCommit: group.writes }
        const failure = group.writes.length > 0 ? await commit(transaction) : undefined
        await release(transaction, failure !== undefined || group.writes.length === 0)
        done(failure ?? null)
      })()
    }

    const join = (): TransactionGroup => {
      let group = forming
      if (group === undefined) {
        const created: TransactionGroup = { size: 0, left: 0, begun: undefined, begunAt: 0, outcome: undefined, finishing: false, writes: [], onBegun: [], onOutcome: [] }
        forming = group = created
        setImmediate(() => {
          if (forming === created) launchNext()
        })
      }
      group.size++
      if (group.size >= currentGroupLimit()) {
        forming = undefined
        full.push(group)
        launchNext()
      }
      return group
    }

    const leave = (group: TransactionGroup, writes: ReadonlyArray<DeferredWrite> | undefined) => {
      group.left++
      if (writes !== undefined) group.writes.push(...writes)
      if (group.left === group.size && group.begun !== undefined) {
        const perMember = (performance.now() - group.begunAt) / group.size
        memberReadMs = memberReadMs === 0 ? perMember : memberReadMs + (perMember - memberReadMs) * READ_TIME_WEIGHT
        finish(group)
      }
    }

    const begunTransaction = (group: TransactionGroup) =>
      Effect.callback<ReservedTransaction, StoreUnavailable>((resume) => {
        const answer = () => {
          const begun = group.begun
          resume(begun === undefined || begun instanceof StoreUnavailable
            ? Effect.fail(begun ?? unavailable("transaction.begin")(undefined))
            : Effect.succeed(begun))
        }
        if (group.begun === undefined) group.onBegun.push(answer)
        else answer()
      })

    const committed = (group: TransactionGroup) =>
      Effect.callback<void, StoreUnavailable>((resume) => {
        const answer = () => resume(group.outcome instanceof StoreUnavailable ? Effect.fail(group.outcome) : Effect.void)
        if (group.outcome === undefined) group.onOutcome.push(answer)
        else answer()
      })

    function* runInGroup<A, E, R>(
      restore: <AX, EX, RX>(effect: Effect.Effect<AX, EX, RX>) => Effect.Effect<AX, EX, RX>,
      effect: Effect.Effect<A, E, R>
    ) {
      const group = join()
      const atCommit: Array<DeferredWrite> = []
      const exit = yield* Effect.exit(restore(Effect.flatMap(begunTransaction(group), (begun) =>
        Effect.provideService(effect, CurrentTransaction, { ...begun, atCommit }))))
      leave(group, Exit.isSuccess(exit) ? atCommit : undefined)
      const value = yield* exit
      // Interrupted while it waits, the member is gone but its writes still commit with the group.
      yield* restore(committed(group))
      return value
    }

    const groupTransactionally = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | StoreUnavailable, R> =>
      Effect.flatMap(CurrentTransaction, (current) =>
        current !== null && current.client === client
          ? effect
          : Effect.uninterruptibleMask((restore) => Effect.gen(() => runInGroup(restore, effect))))

    return {
      maxConnections,
      currentPool: () => {
        const target = generation()
        if (target instanceof Promise) throw new Error("no database host located yet: run a statement first")
        return target.sql
      },
      run,
      appendAtCommit,
      transactionally,
      groupTransactionally
    }
  })

/** A transaction's reserved connection, and its BEGIN, sent at once and awaited before the commit. */
interface ReservedTransaction extends CurrentTransaction {
  readonly begun: Promise<unknown>
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
  begun: ReservedTransaction | StoreUnavailable | undefined
  begunAt: number
  /** Set when the group has committed (`null`) or failed. */
  outcome: StoreUnavailable | null | undefined
  finishing: boolean
  readonly writes: Array<DeferredWrite>
  readonly onBegun: Array<() => void>
  readonly onOutcome: Array<() => void>
}

export const PgClientLayer = (options: PgClientOptions): Layer.Layer<PgClient> =>
  Layer.effect(PgClient, makePgClient(options))
