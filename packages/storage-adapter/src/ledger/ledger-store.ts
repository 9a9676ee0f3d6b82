import {
  ChainCheck,
  type ChainPosition,
  GENESIS_HASH,
  type LedgerEvent,
  type LedgerFinding,
  type LedgerSigner,
  type LedgerVerifier,
  makeSeal,
  type PositionedEvent,
  type Seal,
  startEventsDigest,
  type StoreUnavailable
} from "@clinical-api/domain"
import { Effect, Fiber } from "effect"
import { PgClient, type Sql } from "../sql/pg-client.js"
import { readArchives } from "./archive-records.js"

/** Any constant shared by every replica: the key of the sealer's advisory lock. */
const SEALER_LOCK_KEY = 7_306_104_509

/** The most events one seal covers (its index is 24 bytes an event). */
export const MAX_EVENTS_PER_SEAL = 20_000

/**
 * Events the sealer reads and hashes at a time (a cursor's fetch, about a millisecond of hashing):
 * the event loop turns between slices, and each slice is garbage once hashed. Read whole, a seal
 * of 20,000 events held its process's requests for up to 150 ms and its rows outlived the young
 * generation, over half of what the service promoted to the old one under list traffic.
 */
export const EVENTS_PER_DIGEST_SLICE = 500

/**
 * The columns of an event as the chain covers it, every one as text read by the verifier
 * itself (no function of the database's own, which its owner could replace, computes them).
 */
export const eventColumns = (sql: Sql) => sql`
  recorded_xid::text AS xid, recorded_seq::text AS seq, event_id,
  pg_catalog.to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS occurred_at,
  organization_id, api_key_id, operation_id, encounter_id, document_id, patient_id, request_id,
  ${sql.unsafe(CALLER_REQUEST_ID)} AS caller_request_id`

/** Migration 8's column (the caller's X-Request-Id). */
const CALLER_REQUEST_ID = "caller_request_id"

export interface EventRow {
  readonly xid: string
  readonly seq: string
  readonly event_id: string
  readonly occurred_at: string
  readonly organization_id: string
  readonly api_key_id: string
  readonly operation_id: string
  readonly encounter_id: string
  readonly document_id: string | null
  readonly patient_id: string | null
  readonly request_id: string
  readonly caller_request_id: string | null
}

export const toLedgerEvent = (row: EventRow): LedgerEvent => ({
  recordedSeq: row.seq,
  eventId: row.event_id,
  occurredAt: row.occurred_at,
  organizationId: row.organization_id,
  apiKeyId: row.api_key_id,
  operationId: row.operation_id,
  encounterId: row.encounter_id,
  documentId: row.document_id,
  patientId: row.patient_id,
  requestId: row.request_id,
  callerRequestId: row.caller_request_id
})

export const positioned = (row: EventRow): PositionedEvent => ({ position: { xid: row.xid, seq: row.seq }, event: toLedgerEvent(row) })

export const sealColumns = (sql: Sql) => sql`
  sequence::text AS sequence, previous_hash, first_xid::text AS first_xid, first_seq::text AS first_seq,
  last_xid::text AS last_xid, last_seq::text AS last_seq, event_count, events_digest, event_index, sealed_at,
  complete, signature, seal_hash`

export interface SealRow {
  readonly sequence: string
  readonly previous_hash: string
  readonly first_xid: string
  readonly first_seq: string
  readonly last_xid: string
  readonly last_seq: string
  readonly event_count: number
  readonly events_digest: string
  readonly event_index: Uint8Array
  readonly sealed_at: Date
  readonly complete: boolean
  readonly signature: string
  readonly seal_hash: string
}

export const toSeal = (row: SealRow): Seal => ({
  sequence: Number(row.sequence),
  previousHash: row.previous_hash,
  first: { xid: row.first_xid, seq: row.first_seq },
  last: { xid: row.last_xid, seq: row.last_seq },
  count: row.event_count,
  eventsDigest: row.events_digest,
  index: new Uint8Array(row.event_index),
  sealedAt: row.sealed_at.toISOString(),
  complete: row.complete,
  signature: row.signature,
  hash: row.seal_hash
})

/**
 * The transaction id below which every transaction of this database has ended, in this
 * transaction's snapshot: its xmax, or the oldest transaction it saw in progress, leaving out
 * those seen running in another database of the cluster (their long transactions must not hold
 * sealing back). One that has ended since counts: conservative, it is passed at the next seal.
 */
export const sealableBound = (sql: Sql) => sql`
  SELECT LEAST(pg_catalog.pg_snapshot_xmax(snapshot.current), (
    SELECT running FROM pg_catalog.pg_snapshot_xip(snapshot.current) AS running
    WHERE NOT EXISTS (
      SELECT FROM pg_catalog.pg_stat_activity AS activity
      WHERE activity.backend_xid = running::xid
        AND activity.datid <> (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()))
    ORDER BY running LIMIT 1))
  FROM (SELECT pg_catalog.pg_current_snapshot() AS current) AS snapshot`

export const afterPosition = (sql: Sql, position: ChainPosition | null) =>
  position === null ? sql`true` : sql`(recorded_xid, recorded_seq) > (${position.xid}::xid8, ${position.seq}::bigint)`

/**
 * Seals the events no seal covers yet whose transactions have all ended (below the snapshot's
 * xmin), at most `MAX_EVENTS_PER_SEAL`, as the next seal of the chain. One sealer at a time
 * across replicas (a transaction-scoped advisory lock, tried, never waited for); nothing else
 * waits for it: the events are already committed. Returns the seal, or null when there was
 * nothing to seal or another replica is sealing.
 */
export const sealPending = (
  signer: LedgerSigner,
  now: () => Date = () => new Date()
): Effect.Effect<Seal | null, StoreUnavailable, PgClient> =>
  Effect.flatMap(PgClient, (client) =>
    client.transactionally(
      Effect.gen(function* () {
        // One snapshot for the transaction: its xmin bounds what is read with it.
        yield* client.run("ledger.seal.isolation", (sql) => sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`)
        const [lock] = yield* client.run(
          "ledger.seal.lock",
          (sql) => sql<Array<{ locked: boolean }>>`SELECT pg_try_advisory_xact_lock(${SEALER_LOCK_KEY}::bigint) AS locked`
        )
        if (lock?.locked !== true) return null
        const [headRow] = yield* client.run(
          "ledger.seal.head",
          (sql) => sql<Array<SealRow>>`SELECT ${sealColumns(sql)} FROM disclosure_seals ORDER BY disclosure_seals.sequence DESC LIMIT 1`
        )
        const head = headRow === undefined ? null : toSeal(headRow)
        const digest = startEventsDigest(signer, MAX_EVENTS_PER_SEAL)
        let first: ChainPosition | undefined
        let last: ChainPosition | undefined
        yield* client.run(
          "ledger.seal.events",
          (sql) =>
            sql<Array<EventRow>>`
            SELECT ${eventColumns(sql)} FROM disclosure_events
            WHERE ${afterPosition(sql, head?.last ?? null)}
              AND recorded_xid < (${sealableBound(sql)})
            ORDER BY recorded_xid, recorded_seq
            LIMIT ${MAX_EVENTS_PER_SEAL}`.cursor(EVENTS_PER_DIGEST_SLICE, (rows) => {
              for (const row of rows) digest.add(toLedgerEvent(row))
              const lastRow = rows.at(-1)
              if (lastRow !== undefined) last = { xid: lastRow.xid, seq: lastRow.seq }
              if (first === undefined && rows[0] !== undefined) first = { xid: rows[0].xid, seq: rows[0].seq }
            })
        )
        if (first === undefined || last === undefined) return null
        const sealed = digest.finish()
        const seal = makeSeal(signer, {
          sequence: (head?.sequence ?? 0) + 1,
          previousHash: head?.hash ?? GENESIS_HASH,
          first,
          last,
          count: sealed.count,
          eventsDigest: sealed.eventsDigest,
          index: sealed.index,
          sealedAt: now().toISOString(),
          complete: sealed.count < MAX_EVENTS_PER_SEAL
        })
        const inserted = yield* client.run(
          "ledger.seal.insert",
          (sql) => sql`
            INSERT INTO disclosure_seals (sequence, previous_hash, first_xid, first_seq, last_xid, last_seq,
              event_count, events_digest, event_index, sealed_at, complete, signature, seal_hash)
            VALUES (${seal.sequence}, ${seal.previousHash}, ${seal.first.xid}::xid8, ${seal.first.seq}::bigint,
              ${seal.last.xid}::xid8, ${seal.last.seq}::bigint, ${seal.count}, ${seal.eventsDigest},
              ${Buffer.from(seal.index)}, ${seal.sealedAt}::timestamptz, ${seal.complete}, ${seal.signature}, ${seal.hash})
            ON CONFLICT DO NOTHING
            RETURNING sequence`
        )
        // Another replica sealed this sequence between this snapshot and the lock: its turn, not ours.
        return inserted.length === 0 ? null : seal
      })
    ))

/** The newest seal, or null before the first. */
export const ledgerHead: Effect.Effect<Seal | null, StoreUnavailable, PgClient> = Effect.flatMap(PgClient, (client) =>
  client
    .run("ledger.head", (sql) => sql<Array<SealRow>>`SELECT ${sealColumns(sql)} FROM disclosure_seals ORDER BY disclosure_seals.sequence DESC LIMIT 1`)
    .pipe(Effect.map((rows) => (rows[0] === undefined ? null : toSeal(rows[0])))))

export interface LedgerVerification {
  readonly finding: LedgerFinding | null
  /** Events whose seals checked out. */
  readonly verified: number
  /** Of those, the ones of the organization and range asked for. */
  readonly counted: number
  readonly seals: number
  /** Sealed events that disclosures archive took out of the database (verified in its files). */
  readonly archived: number
  /** Events recorded after the newest seal (not yet verified). */
  readonly unsealed: number
  readonly head: Seal | null
}

export interface LedgerVerifyQuery {
  readonly organizationId?: string | null
  readonly from?: Date | null
  readonly to?: Date | null
  /** Events read per query (default 20,000). */
  readonly batchSize?: number
  /** Called with each seal that checked out and its events (the sealed export writes them). */
  readonly onSealed?: (seal: Seal, events: ReadonlyArray<PositionedEvent>) => Effect.Effect<void>
}

// A seal's index is up to 480 KB: a page of them is read at a time.
const SEALS_PER_PAGE = 20

/**
 * Recomputes the whole chain from the database in one read-only snapshot: seals in order, and
 * events in chain order, each page a keyset query. Stops at the first finding.
 */
export const verifyLedger = (
  verifier: LedgerVerifier,
  query: LedgerVerifyQuery = {}
): Effect.Effect<LedgerVerification, StoreUnavailable, PgClient> =>
  Effect.flatMap(PgClient, (client) => {
    // The next page of events, read by the server while this one is checked (awaited at the end).
    let prefetched: Fiber.Fiber<ReadonlyArray<EventRow>, StoreUnavailable> | null = null
    return client.transactionally(
      Effect.gen(function* () {
        yield* client.run("ledger.verify.isolation", (sql) => sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`)
        const batchSize = Math.max(1, query.batchSize ?? 20_000)
        const fromMs = query.from?.getTime() ?? null
        const toMs = query.to?.getTime() ?? null
        const organizationId = query.organizationId ?? null
        const check = new ChainCheck(verifier, (event) => {
          if (organizationId !== null && event.organizationId !== organizationId) return false
          if (fromMs === null && toMs === null) return true
          const at = Date.parse(event.occurredAt.slice(0, 23) + "Z")
          return (fromMs === null || at >= fromMs) && (toMs === null || at < toMs)
        })
        const archives = yield* readArchives(verifier)
        if (archives.forged !== null) {
          return result(check, { kind: "archive_changed", sealSequence: null, eventId: null, recordedSeq: null, message: archives.forged }, 0)
        }
        let buffered: Array<PositionedEvent> = []
        let cursor: ChainPosition | null = null
        let exhausted = false
        const page = (after: ChainPosition | null) =>
          client.run(
            "ledger.verify.events",
            (sql) => sql<Array<EventRow>>`
              SELECT ${eventColumns(sql)} FROM disclosure_events WHERE ${afterPosition(sql, after)}
              ORDER BY recorded_xid, recorded_seq LIMIT ${batchSize}`
          )
        const fill = Effect.gen(function* () {
          const rows = prefetched === null ? yield* page(cursor) : yield* Fiber.join(prefetched)
          prefetched = null
          if (rows.length < batchSize) exhausted = true
          const last = rows.at(-1)
          if (last !== undefined) cursor = { xid: last.xid, seq: last.seq }
          if (!exhausted) prefetched = yield* Effect.forkChild(page(cursor))
          for (const row of rows) buffered.push(positioned(row))
        })
        /** The buffered events up to `last` (all of them with null), reading on as needed. */
        const takeThrough = (last: ChainPosition | null) =>
          Effect.gen(function* () {
            const taken: Array<PositionedEvent> = []
            for (;;) {
              let i = 0
              while (i < buffered.length && (last === null || positionAtMost(buffered[i]!.position, last))) i++
              for (let j = 0; j < i; j++) taken.push(buffered[j]!)
              const consumedAll = i === buffered.length
              buffered = consumedAll ? [] : buffered.slice(i)
              if (!consumedAll || exhausted) return taken
              yield* fill
            }
          })
        let afterSequence = 0
        for (;;) {
          const sealRows = yield* client.run(
            "ledger.verify.seals",
            (sql) => sql<Array<SealRow>>`
              SELECT ${sealColumns(sql)} FROM disclosure_seals WHERE sequence > ${afterSequence}
              ORDER BY disclosure_seals.sequence LIMIT ${SEALS_PER_PAGE}`
          )
          for (const row of sealRows) {
            const seal = toSeal(row)
            const events = yield* takeThrough(seal.last)
            const finding = check.seal(seal, events, archives.lookup.eventsOf(seal.sequence))
            if (finding !== null) return result(check, finding, 0)
            if (query.onSealed !== undefined) yield* query.onSealed(seal, events)
            afterSequence = seal.sequence
          }
          if (sealRows.length < SEALS_PER_PAGE) break
        }
        // The events after the newest seal, page by page (a backlog is not held in memory).
        let unsealed = 0
        for (;;) {
          const page = buffered
          buffered = []
          unsealed += page.length
          const finding = check.unsealed(page)
          if (finding !== null) return result(check, finding, unsealed)
          if (exhausted) return result(check, null, unsealed)
          yield* fill
        }
      }).pipe(Effect.ensuring(Effect.suspend(() => (prefetched === null ? Effect.void : Effect.asVoid(Fiber.await(prefetched))))))
    )
  })

const result = (check: ChainCheck, finding: LedgerFinding | null, unsealed: number): LedgerVerification => ({
  finding,
  verified: check.verified,
  counted: check.counted,
  seals: check.seals,
  archived: check.archived,
  unsealed,
  head: check.head
})

export const positionAtMost = (position: ChainPosition, bound: ChainPosition): boolean => {
  if (position.xid.length !== bound.xid.length) return position.xid.length < bound.xid.length
  if (position.xid !== bound.xid) return position.xid < bound.xid
  if (position.seq.length !== bound.seq.length) return position.seq.length < bound.seq.length
  return position.seq <= bound.seq
}
