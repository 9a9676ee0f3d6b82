import { createHash } from "node:crypto"
import { closeSync, fsyncSync, openSync, renameSync, writeSync } from "node:fs"
import { join } from "node:path"
import {
  checkExportedEvents,
  type ChainPosition,
  type LedgerSigner,
  type PositionedEvent,
  type Seal,
  type StoreUnavailable,
  toHex
} from "@clinical-api/domain"
import { Data, Effect } from "effect"
import { PgClient } from "../sql/pg-client.js"
import { type ArchiveRecord, archiveSignedBytes } from "./archive-records.js"
import { ARCHIVE_FORMAT, exportedEventJson, exportedSealJson, verifyExportFileAt } from "./export-file.js"
import {
  afterPosition,
  eventColumns,
  type EventRow,
  positionAtMost,
  positioned,
  sealColumns,
  type SealRow,
  toSeal
} from "./ledger-store.js"
import { type DisclosurePartition, disclosurePartitions, ensureDisclosurePartitions } from "./partitions.js"
import { sealAll } from "./sealer.js"

/** `disclosures archive` cannot go on; what was archived before it stays archived, nothing else changed. */
export class ArchiveRefused extends Data.TaggedError("ArchiveRefused")<{ readonly message: string }> {}

export interface ArchiveOptions {
  /** The first instant of a UTC month: the months before it are archived. */
  readonly before: Date
  readonly directory: string
  readonly now?: Date
  /** How long the drop waits for the partition's lock before giving up (default 10 s). */
  readonly lockTimeoutMs?: number
}

export interface ArchivedMonth {
  /** YYYY-MM */
  readonly month: string
  readonly file: string
  readonly sha256: string
  readonly events: number
  readonly seals: number
}

const monthLabel = (monthStart: Date) => monthStart.toISOString().slice(0, 7)

const startOfMonth = (at: Date) => new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1))

const refuse = (message: string) => Effect.fail(new ArchiveRefused({ message }))

/**
 * Archives every month before `before`: for each month's partition, oldest first, writes its
 * events with their seals to `disclosures-YYYY-MM.jsonl` in `directory` (through a `.partial`
 * file, synced, then renamed), verifies the file as an auditor would, and only then, in one
 * transaction, records the archive (signed) and detaches and drops the partition. A failure at
 * any point leaves the month in the database; running again redoes it.
 */
export const archiveDisclosures = (
  signer: LedgerSigner,
  options: ArchiveOptions
): Effect.Effect<ReadonlyArray<ArchivedMonth>, StoreUnavailable | ArchiveRefused, PgClient> =>
  Effect.gen(function* () {
    const now = options.now ?? new Date()
    if (options.before.getTime() !== startOfMonth(options.before).getTime()) {
      return yield* refuse("--before must be the first instant of a UTC month (YYYY-MM)")
    }
    if (options.before.getTime() > startOfMonth(now).getTime()) {
      return yield* refuse(`${monthLabel(options.before)} is later than the current month: only months that have ended are archived`)
    }
    yield* ensureDisclosurePartitions(now)
    const client = yield* PgClient
    // The sealer passes over events while a transaction it cannot place is running: seal until
    // the months to archive are sealed, for a while.
    for (let attempt = 0; ; attempt++) {
      yield* sealAll(signer)
      const [unsealed] = yield* client.run(
        "ledger.archive.unsealed",
        (sql) => sql<Array<{ count: number }>>`
          SELECT count(*)::int AS count FROM disclosure_events AS event
          WHERE event.occurred_at < ${options.before.toISOString()}::timestamptz
            AND NOT EXISTS (
              SELECT FROM disclosure_seals AS seal
              WHERE seal.sequence = (SELECT max(sequence) FROM disclosure_seals)
                AND (event.recorded_xid, event.recorded_seq) <= (seal.last_xid, seal.last_seq))`
      )
      if ((unsealed?.count ?? 0) === 0 || attempt >= 60) break
      yield* Effect.sleep("500 millis")
    }
    const [waiting] = yield* client.run(
      "ledger.archive.default",
      (sql) => sql<Array<{ count: number }>>`
        SELECT count(*)::int AS count FROM disclosure_events_default WHERE occurred_at < ${options.before.toISOString()}::timestamptz`
    )
    if ((waiting?.count ?? 0) > 0) return yield* refuse(`${waiting!.count} events before ${monthLabel(options.before)} are in the default partition`)
    const months = (yield* disclosurePartitions).filter((partition) => partition.monthEnd.getTime() <= options.before.getTime())
    const archived: Array<ArchivedMonth> = []
    for (const partition of months) {
      const exported = yield* exportMonth(signer, partition, options.directory)
      const verified = yield* Effect.promise(() => verifyExportFileAt(exported.partialPath, toHex(signer.publicKey)))
      if (verified.finding !== null) return yield* refuse(`the archive of ${monthLabel(partition.monthStart)} does not verify: ${verified.finding}`)
      if (verified.events !== exported.events) {
        return yield* refuse(`the archive of ${monthLabel(partition.monthStart)} holds ${verified.events} events, the partition ${exported.events}`)
      }
      const path = join(options.directory, exported.fileName)
      renameSync(exported.partialPath, path)
      syncDirectory(options.directory)
      yield* dropMonth(signer, partition, exported, options.lockTimeoutMs ?? 10_000)
      archived.push({ month: monthLabel(partition.monthStart), file: path, sha256: exported.sha256, events: exported.events, seals: verified.seals })
    }
    return archived
  })

const syncDirectory = (directory: string) => {
  const fd = openSync(directory, "r")
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

interface ExportedMonth {
  readonly fileName: string
  readonly partialPath: string
  readonly sha256: string
  readonly events: number
  readonly firstSeal: number | null
  readonly lastSeal: number | null
  readonly sharedEvents: Uint8Array
}

const EVENTS_PER_PAGE = 10_000
const SEALS_PER_PAGE = 20

/**
 * Writes one month's file in one read-only snapshot, its events in chain order under the seals
 * that cover them, checking each seal and its events as it goes. Memory holds one page of
 * events and one page of seals, whatever the month's size.
 */
const exportMonth = (
  signer: LedgerSigner,
  partition: DisclosurePartition,
  directory: string
): Effect.Effect<ExportedMonth, StoreUnavailable | ArchiveRefused, PgClient> =>
  Effect.flatMap(PgClient, (client) =>
    client.transactionally(
      Effect.gen(function* () {
        yield* client.run("ledger.archive.isolation", (sql) => sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`)
        const month = monthLabel(partition.monthStart)
        const table = `"${partition.name}"`
        const [head] = yield* client.run(
          "ledger.archive.head",
          (sql) => sql<Array<SealRow>>`SELECT ${sealColumns(sql)} FROM disclosure_seals ORDER BY disclosure_seals.sequence DESC LIMIT 1`
        )
        const last = head === undefined ? null : toSeal(head).last
        const [counts] = yield* client.run(
          "ledger.archive.count",
          (sql) => sql<Array<{ total: number; unsealed: number }>>`
            SELECT count(*)::int AS total,
                   count(*) FILTER (WHERE ${last === null ? sql`true` : afterPosition(sql, last)})::int AS unsealed
            FROM ${sql.unsafe(table)}`
        )
        const total = counts?.total ?? 0
        if ((counts?.unsealed ?? 0) > 0) {
          return yield* refuse(`${counts!.unsealed} events of ${month} are not sealed yet: run the archive again once they are (within seconds)`)
        }
        const fileName = `disclosures-${month}.jsonl`
        const partialPath = join(directory, `${fileName}.partial`)
        const fd = openSync(partialPath, "w")
        const hash = createHash("sha256")
        const write = (lines: ReadonlyArray<string>) => {
          const text = lines.join("\n") + "\n"
          hash.update(text, "utf8")
          writeSync(fd, text)
        }
        const shared: Array<readonly [number, string]> = []
        let firstSeal: number | null = null
        let lastSeal: number | null = null
        let written = 0
        let sealsWritten = 0
        const body: Effect.Effect<void, StoreUnavailable | ArchiveRefused> = Effect.gen(function* () {
          write([
            JSON.stringify({
              format: ARCHIVE_FORMAT,
              public_key: toHex(signer.publicKey),
              month,
              from: partition.monthStart.toISOString(),
              to: partition.monthEnd.toISOString()
            })
          ])
          let buffered: Array<PositionedEvent> = []
          let cursor: ChainPosition | null = null
          let exhausted = total === 0
          const fill = Effect.gen(function* () {
            const rows = yield* client.run(
              "ledger.archive.events",
              (sql) => sql<Array<EventRow>>`
                SELECT ${eventColumns(sql)} FROM ${sql.unsafe(table)} WHERE ${afterPosition(sql, cursor)}
                ORDER BY recorded_xid, recorded_seq LIMIT ${EVENTS_PER_PAGE}`
            )
            if (rows.length < EVENTS_PER_PAGE) exhausted = true
            const lastRow = rows.at(-1)
            if (lastRow !== undefined) cursor = { xid: lastRow.xid, seq: lastRow.seq }
            for (const row of rows) buffered.push(positioned(row))
          })
          if (!exhausted) yield* fill
          const first = buffered[0]
          if (first === undefined) return
          // The seal covering the month's first event: the first whose last position is not before it.
          const [start] = yield* client.run(
            "ledger.archive.firstSeal",
            (sql) => sql<Array<{ sequence: string }>>`
              SELECT sequence::text AS sequence FROM disclosure_seals
              WHERE (last_xid, last_seq) >= (${first.position.xid}::xid8, ${first.position.seq}::bigint)
              ORDER BY sequence LIMIT 1`
          )
          if (start === undefined) return yield* refuse(`the events of ${month} are under no seal`)
          let afterSequence = Number(start.sequence) - 1
          const gaps: Array<number> = []
          for (;;) {
            const sealRows = yield* client.run(
              "ledger.archive.seals",
              (sql) => sql<Array<SealRow>>`
                SELECT ${sealColumns(sql)} FROM disclosure_seals WHERE sequence > ${afterSequence}
                ORDER BY disclosure_seals.sequence LIMIT ${SEALS_PER_PAGE}`
            )
            if (sealRows.length === 0) return yield* refuse(`${buffered.length} events of ${month} are under no seal`)
            for (const row of sealRows) {
              const seal: Seal = toSeal(row)
              afterSequence = seal.sequence
              const events: Array<PositionedEvent> = []
              for (;;) {
                let i = 0
                while (i < buffered.length && positionAtMost(buffered[i]!.position, seal.last)) i++
                for (let j = 0; j < i; j++) events.push(buffered[j]!)
                const consumedAll = i === buffered.length
                buffered = consumedAll ? [] : buffered.slice(i)
                if (!consumedAll || exhausted) break
                yield* fill
              }
              if (events.length === 0) {
                gaps.push(seal.sequence)
                continue
              }
              const finding = checkExportedEvents(signer, seal, events.map(({ event }) => event))
              if (finding !== null) return yield* refuse(`the ledger does not verify (run disclosures verify): ${finding.message}`)
              for (const gap of gaps) shared.push([gap, "0"])
              gaps.length = 0
              if (events.length < seal.count) for (const { event } of events) shared.push([seal.sequence, event.recordedSeq])
              firstSeal ??= seal.sequence
              lastSeal = seal.sequence
              written += events.length
              sealsWritten++
              write([JSON.stringify({ seal: exportedSealJson(seal) }), ...events.map(({ event }) => JSON.stringify({ event: exportedEventJson(event) }))])
              if (buffered.length === 0 && exhausted) return
            }
          }
        })
        yield* body.pipe(
          Effect.andThen(Effect.sync(() => {
            write([JSON.stringify({ end: { seals: sealsWritten, events: written } })])
            fsyncSync(fd)
          })),
          Effect.ensuring(Effect.sync(() => closeSync(fd)))
        )
        if (written !== total) return yield* refuse(`${month}: ${written} of its ${total} events were written`)
        const sharedEvents = new Uint8Array(shared.length * 16)
        const view = new DataView(sharedEvents.buffer)
        shared.forEach(([sequence, seq], i) => {
          view.setBigUint64(i * 16, BigInt(sequence))
          view.setBigUint64(i * 16 + 8, BigInt(seq))
        })
        const touched = { first: firstSeal as number | null, last: lastSeal as number | null }
        return { fileName, partialPath, sha256: hash.digest("hex"), events: total, firstSeal: touched.first, lastSeal: touched.last, sharedEvents }
      })
    ))

/**
 * Records the archive and detaches and drops the month's partition, in one transaction: the
 * partition still holds exactly the events written (none came late), else nothing changes.
 */
const dropMonth = (
  signer: LedgerSigner,
  partition: DisclosurePartition,
  exported: ExportedMonth,
  lockTimeoutMs: number
): Effect.Effect<void, StoreUnavailable | ArchiveRefused, PgClient> =>
  Effect.flatMap(PgClient, (client) =>
    client.transactionally(
      Effect.gen(function* () {
        const table = `"${partition.name}"`
        yield* client.run("ledger.archive.lockTimeout", (sql) => sql.unsafe(`SET LOCAL lock_timeout = ${Math.max(1, Math.round(lockTimeoutMs))}`))
        yield* client.run("ledger.archive.detach", (sql) => sql.unsafe(`ALTER TABLE disclosure_events DETACH PARTITION ${table}`))
        const [count] = yield* client.run("ledger.archive.recount", (sql) => sql<Array<{ count: number }>>`SELECT count(*)::int AS count FROM ${sql.unsafe(table)}`)
        if (count?.count !== exported.events) {
          return yield* refuse(`${monthLabel(partition.monthStart)} gained events while it was archived: run the archive again`)
        }
        const record: ArchiveRecord = {
          monthStart: partition.monthStart.toISOString(),
          fileName: exported.fileName,
          fileSha256: exported.sha256,
          eventCount: exported.events,
          firstSeal: exported.firstSeal,
          lastSeal: exported.lastSeal,
          sharedEvents: exported.sharedEvents,
          archivedAt: new Date().toISOString()
        }
        const signature = toHex(signer.sign(archiveSignedBytes(signer, record)))
        yield* client.run(
          "ledger.archive.record",
          (sql) => sql`
            INSERT INTO disclosure_archives (month_start, file_name, file_sha256, event_count, first_seal, last_seal, shared_events, archived_at, signature)
            VALUES (${record.monthStart}::timestamptz, ${record.fileName}, ${record.fileSha256}, ${record.eventCount}, ${record.firstSeal},
                    ${record.lastSeal}, ${Buffer.from(record.sharedEvents)}, ${record.archivedAt}::timestamptz, ${signature})`
        )
        yield* client.run("ledger.archive.drop", (sql) => sql.unsafe(`DROP TABLE ${table}`))
      })
    ))

