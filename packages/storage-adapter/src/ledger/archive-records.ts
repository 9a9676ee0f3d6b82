import { type ArchivedEvents, type LedgerVerifier, type StoreUnavailable, toHex } from "@clinical-api/domain"
import { Effect } from "effect"
import { PgClient } from "../sql/pg-client.js"

/** An archive as `disclosure_archives` holds it, signed with the ledger key. */
export interface ArchiveRecord {
  readonly monthStart: string
  readonly fileName: string
  readonly fileSha256: string
  readonly eventCount: number
  readonly firstSeal: number | null
  readonly lastSeal: number | null
  /** Pairs of 8-byte big-endian numbers: seal sequence, recorded_seq (0: the seal has none of the month's). */
  readonly sharedEvents: Uint8Array
  readonly archivedAt: string
}

const ARCHIVE_TAG = "disclosure-archive/1"
const encoder = new TextEncoder()

export const archiveSignedBytes = (signer: LedgerVerifier, record: ArchiveRecord): Uint8Array =>
  encoder.encode(
    [
      ARCHIVE_TAG,
      record.monthStart,
      record.fileName,
      record.fileSha256,
      String(record.eventCount),
      record.firstSeal === null ? "-" : String(record.firstSeal),
      record.lastSeal === null ? "-" : String(record.lastSeal),
      toHex(signer.sha256(record.sharedEvents)),
      record.archivedAt
    ].join("\n") + "\n"
  )

const monthLabel = (monthStart: Date) => monthStart.toISOString().slice(0, 7)

/**
 * What the archives took out of the database, for `verifyLedger`: per seal, its archived events.
 * Null when an archive's signature does not check out (the record was changed or forged).
 */
export interface ArchivedLookup {
  readonly eventsOf: (sealSequence: number) => ArchivedEvents | null
}

interface ArchiveRow {
  readonly archive_id: string
  readonly month_start: Date
  readonly file_name: string
  readonly file_sha256: string
  readonly event_count: string
  readonly first_seal: string | null
  readonly last_seal: string | null
  readonly shared_events: Uint8Array
  readonly archived_at: Date
  readonly signature: string
}

export const readArchives = (
  verifier: LedgerVerifier
): Effect.Effect<{ readonly lookup: ArchivedLookup; readonly forged: string | null }, StoreUnavailable, PgClient> =>
  Effect.gen(function* () {
    const client = yield* PgClient
    const [exists] = yield* client.run(
      "ledger.archives.exists",
      (sql) => sql<Array<{ present: boolean }>>`SELECT pg_catalog.to_regclass('public.disclosure_archives') IS NOT NULL AS present`
    )
    const rows = exists?.present === true
      ? yield* client.run(
        "ledger.archives.read",
        (sql) => sql<Array<ArchiveRow>>`
          SELECT archive_id::text, month_start, file_name, file_sha256, event_count::text, first_seal::text, last_seal::text,
                 shared_events, archived_at, signature
          FROM disclosure_archives ORDER BY archive_id`
      )
      : []
    const ranges: Array<{ first: number; last: number; shared: Map<number, Set<string>> }> = []
    for (const row of rows) {
      const record: ArchiveRecord = {
        monthStart: row.month_start.toISOString(),
        fileName: row.file_name,
        fileSha256: row.file_sha256,
        eventCount: Number(row.event_count),
        firstSeal: row.first_seal === null ? null : Number(row.first_seal),
        lastSeal: row.last_seal === null ? null : Number(row.last_seal),
        sharedEvents: new Uint8Array(row.shared_events),
        archivedAt: row.archived_at.toISOString()
      }
      const signature = Buffer.from(row.signature, "hex")
      if (signature.length !== 64 || !verifier.verify(archiveSignedBytes(verifier, record), signature)) {
        return { lookup: { eventsOf: () => null }, forged: `archive ${row.archive_id} (${monthLabel(row.month_start)}) was changed: its signature does not match` }
      }
      if (record.firstSeal === null || record.lastSeal === null) continue
      const shared = new Map<number, Set<string>>()
      const view = new DataView(record.sharedEvents.buffer, record.sharedEvents.byteOffset, record.sharedEvents.byteLength)
      for (let offset = 0; offset + 16 <= record.sharedEvents.length; offset += 16) {
        const sequence = Number(view.getBigUint64(offset))
        const seqs = shared.get(sequence) ?? new Set<string>()
        seqs.add(view.getBigUint64(offset + 8).toString())
        shared.set(sequence, seqs)
      }
      ranges.push({ first: record.firstSeal, last: record.lastSeal, shared })
    }
    const eventsOf = (sealSequence: number): ArchivedEvents | null => {
      let union: Set<string> | null = null
      for (const range of ranges) {
        if (sealSequence < range.first || sealSequence > range.last) continue
        const seqs = range.shared.get(sealSequence)
        if (seqs === undefined) return "all"
        union ??= new Set()
        for (const seq of seqs) union.add(seq)
      }
      return union
    }
    return { lookup: { eventsOf }, forged: null }
  })
