import { canonicalEventText, FINGERPRINT_BYTES, indexSeqAt, INDEX_ENTRY_BYTES, type LedgerEvent, type LedgerVerifier, toHex } from "./canonical.js"
import { type ChainPosition, comparePositions, GENESIS_HASH, type Seal, sealIsAuthentic } from "./seal.js"

/** The first thing found wrong, named so that an operator can find it. */
export interface LedgerFinding {
  readonly kind:
    | "seal_changed"
    | "seal_removed"
    | "seal_inserted"
    | "event_changed"
    | "event_removed"
    | "event_inserted"
    | "event_reordered"
    | "archive_changed"
  readonly sealSequence: number | null
  readonly eventId: string | null
  readonly recordedSeq: string | null
  readonly message: string
}

/**
 * Which events of a seal `disclosures archive` took out of the database (docs/ledger.md): all
 * of them, or those whose recorded_seq is in the set. They must be absent; the others present.
 */
export type ArchivedEvents = "all" | ReadonlySet<string>

export interface PositionedEvent {
  readonly position: ChainPosition
  readonly event: LedgerEvent
}

/**
 * How long before the previous seal an event of the next may have occurred: a read's events
 * commit within its 10 s deadline, clocks of replicas differ a little. An older one was
 * inserted after the fact.
 */
export const INSERTION_SLACK_MS = 60_000

const YEAR_10000_MS = 253_402_300_800_000
const CANONICAL_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/

const instantMs = (rfc3339: string): number => Date.parse(rfc3339.length > 24 ? rfc3339.slice(0, 23) + "Z" : rfc3339)

const finding = (
  kind: LedgerFinding["kind"],
  sealSequence: number | null,
  event: LedgerEvent | null,
  recordedSeq: string | null,
  message: string
): LedgerFinding => ({ kind, sealSequence, eventId: event?.eventId ?? null, recordedSeq: event?.recordedSeq ?? recordedSeq, message })

/**
 * Walks the chain seal by seal: `seal` with the events the database holds between the previous
 * seal's last position (exclusive) and this seal's last (inclusive), in chain order; then
 * `unsealed` with the events after the newest seal. The first finding stops the walk.
 */
export class ChainCheck {
  private previous: Seal | null = null
  /** The newest complete seal before the one being checked: later events cannot predate it. */
  private lastComplete: Seal | null = null
  /** Events whose seal checked out. */
  verified = 0
  /** Of those, the ones `counted` accepts. */
  counted = 0
  seals = 0
  /** Sealed events that were archived (checked in their archive files, not here). */
  archived = 0

  constructor(
    private readonly verifier: LedgerVerifier,
    private readonly counts: (event: LedgerEvent) => boolean = () => true
  ) {}

  get head(): Seal | null {
    return this.previous
  }

  seal(seal: Seal, events: ReadonlyArray<PositionedEvent>, archived: ArchivedEvents | null = null): LedgerFinding | null {
    const expectedSequence = (this.previous?.sequence ?? 0) + 1
    if (!sealIsAuthentic(this.verifier, seal)) {
      return finding("seal_changed", seal.sequence, null, null, `seal ${seal.sequence} was changed: its signature or hash does not match`)
    }
    if (seal.sequence > expectedSequence) {
      return finding("seal_removed", expectedSequence, null, null, `seal ${expectedSequence} was removed (the next seal is ${seal.sequence})`)
    }
    if (seal.sequence < expectedSequence || seal.previousHash !== (this.previous?.hash ?? GENESIS_HASH)) {
      return finding("seal_inserted", seal.sequence, null, null, `seal ${seal.sequence} does not follow seal ${expectedSequence - 1} (inserted or replaced)`)
    }
    const index = archived === null ? seal.index : withoutArchived(seal.index, archived)
    const problem = this.events(seal, index, events)
    if (problem !== null) return problem
    this.archived += (seal.index.length - index.length) / INDEX_ENTRY_BYTES
    this.previous = seal
    if (seal.complete) this.lastComplete = seal
    this.seals++
    this.verified += events.length
    for (const { event } of events) if (this.counts(event)) this.counted++
    return null
  }

  /** Events after the newest seal: not yet verified, but none may claim a time before it. */
  unsealed(events: ReadonlyArray<PositionedEvent>): LedgerFinding | null {
    for (const { event } of events) {
      const late = this.insertedLate(event)
      if (late !== null) return late
    }
    return null
  }

  /** The earliest time an event after `lastComplete` may claim, as `YYYY-MM-DDTHH:MM:SS.mmm` (kept per seal). */
  private earliestFor: Seal | null = null
  private earliest = ""

  private insertedLate(event: LedgerEvent): LedgerFinding | null {
    const previous = this.lastComplete
    if (previous === null) return null
    if (this.earliestFor !== previous) {
      this.earliestFor = previous
      const ms = instantMs(previous.sealedAt) - INSERTION_SLACK_MS
      this.earliest = Number.isFinite(ms) && ms >= 0 && ms < YEAR_10000_MS ? new Date(ms).toISOString().slice(0, 23) : ""
    }
    // Both in one fixed format, text order is time order: no date parsed per event.
    const early = this.earliest !== "" && CANONICAL_INSTANT.test(event.occurredAt)
      ? event.occurredAt.slice(0, 23) < this.earliest
      : instantMs(event.occurredAt) < instantMs(previous.sealedAt) - INSERTION_SLACK_MS
    if (early) {
      return finding(
        "event_inserted",
        (this.previous?.sequence ?? 0) + 1,
        event,
        null,
        `event ${event.eventId} (recorded_seq ${event.recordedSeq}) was inserted after the fact: it claims ${event.occurredAt}, before seal ${previous.sequence} (sealed at ${previous.sealedAt})`
      )
    }
    return null
  }

  /** The events against the seal's index, or (after an archive) against the entries left of it. */
  private events(seal: Seal, index: Uint8Array, events: ReadonlyArray<PositionedEvent>): LedgerFinding | null {
    const entries = index.length / INDEX_ENTRY_BYTES
    const view = new DataView(index.buffer, index.byteOffset, index.byteLength)
    const hashes = new Uint8Array(events.length * 32)
    let mismatchAt = -1
    for (let i = 0; i < events.length; i++) {
      const { event } = events[i]!
      const hash = this.verifier.sha256(canonicalEventText(event))
      hashes.set(hash, i * 32)
      if (mismatchAt === -1 && (i >= entries || !sameEntry(view, index, i, event.recordedSeq, hash))) mismatchAt = i
    }
    if (mismatchAt === -1 && events.length < entries) mismatchAt = events.length
    if (mismatchAt !== -1) return this.explain({ ...seal, index }, events, mismatchAt)
    // Archived events left the database: the digest and the first and last positions cover them.
    if (index.length === seal.index.length) {
      if (events.length !== seal.count || toHex(this.verifier.sha256(hashes)) !== seal.eventsDigest) {
        return finding("seal_changed", seal.sequence, null, null, `seal ${seal.sequence} does not match its events (count or digest)`)
      }
      const first = events[0]
      const last = events.at(-1)
      if (first === undefined || last === undefined || comparePositions(first.position, seal.first) !== 0 || comparePositions(last.position, seal.last) !== 0) {
        return finding(
          "event_inserted",
          seal.sequence,
          first?.event ?? null,
          null,
          `seal ${seal.sequence}'s first or last event moved (an event was inserted before its first)`
        )
      }
    }
    for (const { event } of events) {
      const late = this.insertedLate(event)
      if (late !== null) return late
    }
    return null
  }

  /** Names the first event at or after `at` that differs from what was sealed. */
  private explain(seal: Seal, events: ReadonlyArray<PositionedEvent>, at: number): LedgerFinding {
    const view = new DataView(seal.index.buffer, seal.index.byteOffset, seal.index.byteLength)
    const entries = seal.index.length / INDEX_ENTRY_BYTES
    const sealedSeqs = new Set<string>()
    for (let i = 0; i < entries; i++) sealedSeqs.add(indexSeqAt(view, i * INDEX_ENTRY_BYTES))
    const storedSeqs = new Set(events.map(({ event }) => event.recordedSeq))
    const stored = events[at]?.event ?? null
    const sealedSeq = at < entries ? indexSeqAt(view, at * INDEX_ENTRY_BYTES) : null
    const where = `in seal ${seal.sequence}`
    if (sealedSeq !== null && !storedSeqs.has(sealedSeq)) {
      const after = at > 0 ? `, after event ${events[at - 1]!.event.eventId}` : ""
      return finding("event_removed", seal.sequence, null, sealedSeq, `event recorded_seq ${sealedSeq} ${where} was removed${after}`)
    }
    if (stored !== null && !sealedSeqs.has(stored.recordedSeq)) {
      return finding(
        "event_inserted",
        seal.sequence,
        stored,
        null,
        `event ${stored.eventId} (recorded_seq ${stored.recordedSeq}) ${where} was inserted after the fact`
      )
    }
    if (stored !== null && stored.recordedSeq === sealedSeq) {
      return finding("event_changed", seal.sequence, stored, null, `event ${stored.eventId} (recorded_seq ${stored.recordedSeq}) ${where} was changed`)
    }
    return finding(
      "event_reordered",
      seal.sequence,
      stored,
      sealedSeq,
      `event ${stored?.eventId ?? "?"} (recorded_seq ${stored?.recordedSeq ?? "?"}) ${where} is out of its sealed order (recorded_seq ${sealedSeq} was sealed there)`
    )
  }
}

/** The index entries of the events not archived, in order. */
const withoutArchived = (index: Uint8Array, archived: ArchivedEvents): Uint8Array => {
  if (archived === "all") return new Uint8Array(0)
  const view = new DataView(index.buffer, index.byteOffset, index.byteLength)
  const kept = new Uint8Array(index.length)
  let length = 0
  for (let offset = 0; offset < index.length; offset += INDEX_ENTRY_BYTES) {
    if (archived.has(indexSeqAt(view, offset))) continue
    kept.set(index.subarray(offset, offset + INDEX_ENTRY_BYTES), length)
    length += INDEX_ENTRY_BYTES
  }
  return kept.subarray(0, length)
}

const sameEntry = (view: DataView, index: Uint8Array, i: number, recordedSeq: string, hash: Uint8Array): boolean => {
  const offset = i * INDEX_ENTRY_BYTES
  if (indexSeqAt(view, offset) !== recordedSeq) return false
  for (let b = 0; b < FINGERPRINT_BYTES; b++) if (index[offset + 8 + b] !== hash[b]) return false
  return true
}

/**
 * Checks events of one seal that an export carries, some of its events or all: the seal is
 * authentic, each event's fingerprint is the one sealed for its recorded_seq, and they come in
 * the sealed order. When all of them are there the events digest is checked too.
 */
export const checkExportedEvents = (
  verifier: LedgerVerifier,
  seal: Seal,
  events: ReadonlyArray<LedgerEvent>
): LedgerFinding | null => {
  if (!sealIsAuthentic(verifier, seal)) {
    return finding("seal_changed", seal.sequence, null, null, `seal ${seal.sequence} was changed: its signature or hash does not match`)
  }
  const entries = seal.index.length / INDEX_ENTRY_BYTES
  if (entries !== seal.count) return finding("seal_changed", seal.sequence, null, null, `seal ${seal.sequence}'s index does not match its count`)
  const view = new DataView(seal.index.buffer, seal.index.byteOffset, seal.index.byteLength)
  const positions = new Map<string, number>()
  for (let i = 0; i < entries; i++) positions.set(indexSeqAt(view, i * INDEX_ENTRY_BYTES), i)
  const hashes = new Uint8Array(events.length * 32)
  let previous = -1
  for (let i = 0; i < events.length; i++) {
    const event = events[i]!
    const at = positions.get(event.recordedSeq)
    if (at === undefined) {
      return finding("event_inserted", seal.sequence, event, null, `event ${event.eventId} (recorded_seq ${event.recordedSeq}) is not in seal ${seal.sequence}`)
    }
    if (at <= previous) {
      return finding("event_reordered", seal.sequence, event, null, `event ${event.eventId} (recorded_seq ${event.recordedSeq}) is out of seal ${seal.sequence}'s order`)
    }
    previous = at
    const hash = verifier.sha256(canonicalEventText(event))
    hashes.set(hash, i * 32)
    if (!sameEntry(view, seal.index, at, event.recordedSeq, hash)) {
      return finding("event_changed", seal.sequence, event, null, `event ${event.eventId} (recorded_seq ${event.recordedSeq}) in seal ${seal.sequence} was changed`)
    }
  }
  if (events.length === entries && toHex(verifier.sha256(hashes)) !== seal.eventsDigest) {
    return finding("seal_changed", seal.sequence, null, null, `seal ${seal.sequence} does not match its events (digest)`)
  }
  return null
}
