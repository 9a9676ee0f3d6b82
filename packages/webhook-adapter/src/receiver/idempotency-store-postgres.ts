import { randomUUID } from "node:crypto"
import { Effect, Layer, Redacted } from "effect"
import postgres from "postgres"
import {
  DEFAULT_CLAIM_LEASE_MS,
  type IdempotencyClaim,
  IdempotencyStore,
  type IdempotencyStoreService,
  IdempotencyStoreUnavailable
} from "./idempotency-store.js"

export type PostgresSql = postgres.Sql

/** The one table of the receiver kit. */
export const RECEIVER_EVENTS_TABLE = "webhook_receiver_events"

// Advisory lock key for the schema creation: concurrent `CREATE TABLE IF NOT EXISTS` can still
// collide on the catalog, so receivers starting together take turns.
const SCHEMA_LOCK_KEY = 0x77686b72 // "whkr"

/**
 * Creates `webhook_receiver_events` if it does not exist. `claim_token` (beyond event id,
 * state and the two times) lets a failed handler release only its own claim, never one that
 * another delivery took over after the lease.
 */
export const ensureSchema = (sql: PostgresSql): Effect.Effect<void, IdempotencyStoreUnavailable> =>
  Effect.tryPromise({
    try: () =>
      sql.begin(async (tx) => {
        await tx`SELECT pg_advisory_xact_lock(${SCHEMA_LOCK_KEY})`
        await tx.unsafe(`
          CREATE TABLE IF NOT EXISTS ${RECEIVER_EVENTS_TABLE} (
            event_id text PRIMARY KEY,
            state text NOT NULL CHECK (state IN ('in_progress', 'completed')),
            claim_token text,
            claimed_at timestamptz NOT NULL,
            completed_at timestamptz,
            CHECK ((state = 'completed') = (completed_at IS NOT NULL)),
            CHECK ((state = 'in_progress') = (claim_token IS NOT NULL))
          )`)
      }),
    catch: (cause) => new IdempotencyStoreUnavailable({ operation: "ensureSchema", cause })
  })

export interface IdempotencyStorePostgresOptions {
  readonly sql: PostgresSql
  /** See `DEFAULT_CLAIM_LEASE_MS`. Measured with the database clock, shared by every receiver process. */
  readonly leaseMs?: number
}

// A row can vanish between the claim attempt and the read (its holder released it): try again.
const CLAIM_ATTEMPTS = 3

/**
 * The idempotency store on PostgreSQL. A claim is one `INSERT ... ON CONFLICT DO UPDATE ... WHERE`
 * statement: of two concurrent deliveries of one event, the second waits for the first's row
 * and finds it in progress, so the business handler runs once. The conditional update is the
 * takeover of a claim older than the lease.
 */
export const makeIdempotencyStorePostgres = (options: IdempotencyStorePostgresOptions): IdempotencyStoreService => {
  const { sql } = options
  const leaseSeconds = (options.leaseMs ?? DEFAULT_CLAIM_LEASE_MS) / 1000

  const run = <A>(operation: string, query: () => Promise<A>) =>
    Effect.tryPromise({
      try: query,
      catch: (cause) => new IdempotencyStoreUnavailable({ operation, cause })
    })

  const claimOnce = (eventId: string) =>
    Effect.gen(function* () {
      const claimToken = randomUUID()
      const taken = yield* run("claim", () =>
        sql`
          INSERT INTO webhook_receiver_events AS existing (event_id, state, claim_token, claimed_at)
          VALUES (${eventId}, 'in_progress', ${claimToken}, clock_timestamp())
          ON CONFLICT (event_id) DO UPDATE
            SET claim_token = EXCLUDED.claim_token, claimed_at = EXCLUDED.claimed_at
            WHERE existing.state = 'in_progress'
              AND existing.claimed_at <= clock_timestamp() - make_interval(secs => ${leaseSeconds}::double precision)
          RETURNING claim_token`)
      if (taken.length > 0) return { status: "new", claimToken } satisfies IdempotencyClaim
      const rows = yield* run("claim.read", () =>
        sql<Array<{ state: string }>>`SELECT state FROM webhook_receiver_events WHERE event_id = ${eventId}`)
      const state = rows[0]?.state
      if (state === "completed") return { status: "completed" } satisfies IdempotencyClaim
      if (state === "in_progress") return { status: "in_progress" } satisfies IdempotencyClaim
      return undefined
    })

  const claim = Effect.fn("IdempotencyStorePostgres.claim")(function* (eventId: string) {
    for (let attempt = 1; attempt <= CLAIM_ATTEMPTS; attempt++) {
      const result: IdempotencyClaim | undefined = yield* claimOnce(eventId)
      if (result !== undefined) return result
    }
    return yield* new IdempotencyStoreUnavailable({ operation: "claim", cause: "the claim kept changing hands" })
  })

  const complete = Effect.fn("IdempotencyStorePostgres.complete")(function* (eventId: string) {
    yield* run("complete", () =>
      sql`
        INSERT INTO webhook_receiver_events AS existing (event_id, state, claim_token, claimed_at, completed_at)
        VALUES (${eventId}, 'completed', NULL, clock_timestamp(), clock_timestamp())
        ON CONFLICT (event_id) DO UPDATE
          SET state = 'completed', claim_token = NULL,
              completed_at = COALESCE(existing.completed_at, clock_timestamp())`)
  })

  const release = Effect.fn("IdempotencyStorePostgres.release")(function* (eventId: string, claimToken: string) {
    yield* run("release", () =>
      sql`
        DELETE FROM webhook_receiver_events
        WHERE event_id = ${eventId} AND state = 'in_progress' AND claim_token = ${claimToken}`)
  })

  return { claim, complete, release }
}

/** The PostgreSQL store on a connection pool the caller owns; creates the table first unless told not to. */
export const IdempotencyStorePostgres = (
  options: IdempotencyStorePostgresOptions & { readonly ensureSchema?: boolean }
): Layer.Layer<IdempotencyStore, IdempotencyStoreUnavailable> =>
  Layer.effect(
    IdempotencyStore,
    Effect.gen(function* () {
      if (options.ensureSchema !== false) yield* ensureSchema(options.sql)
      return makeIdempotencyStorePostgres(options)
    })
  )

/** As `IdempotencyStorePostgres`, with its own pool for `url`, closed when the layer is released. */
export const IdempotencyStorePostgresFromUrl = (options: {
  readonly url: Redacted.Redacted<string> | string
  readonly leaseMs?: number
  readonly maxConnections?: number
}): Layer.Layer<IdempotencyStore, IdempotencyStoreUnavailable> =>
  Layer.unwrap(
    Effect.gen(function* () {
      const url = Redacted.isRedacted(options.url) ? Redacted.value(options.url) : options.url
      const sql = yield* Effect.acquireRelease(
        Effect.sync(() => postgres(url, { max: options.maxConnections ?? 5, onnotice: () => undefined })),
        (pool) => Effect.promise(() => pool.end({ timeout: 5 }))
      )
      return IdempotencyStorePostgres({
        sql,
        ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs })
      })
    })
  )
