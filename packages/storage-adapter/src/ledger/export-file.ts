import { createReadStream } from "node:fs"
import {
  checkExportedEvents,
  type LedgerEvent,
  type LedgerFinding,
  type LedgerVerifier,
  type Seal,
  type StoreUnavailable,
  toHex
} from "@clinical-api/domain"
import { Effect } from "effect"
import { type PgClient } from "../sql/pg-client.js"
import { ledgerVerifierFromPublicKey } from "./ledger-crypto.js"
import { type LedgerVerification, verifyLedger } from "./ledger-store.js"

/**
 * The sealed export (docs/ledger.md): JSON Lines, a header, then each seal that covers an
 * exported event followed by those events, then a trailer. Every line is exactly
 * `JSON.stringify` of its object, so the offline verifier can refuse any byte that differs.
 */
export const SEALED_EXPORT_FORMAT = "clinical-api/disclosure-ledger-export/1"

export interface SealedExportQuery {
  readonly organizationId: string
  readonly from: Date | null
  readonly to: Date | null
}

export const exportedSealJson = (seal: Seal) => ({
  sequence: seal.sequence,
  previous_hash: seal.previousHash,
  first: { xid: seal.first.xid, seq: seal.first.seq },
  last: { xid: seal.last.xid, seq: seal.last.seq },
  count: seal.count,
  events_digest: seal.eventsDigest,
  index: Buffer.from(seal.index).toString("base64"),
  sealed_at: seal.sealedAt,
  complete: seal.complete,
  signature: seal.signature,
  hash: seal.hash
})

export const exportedEventJson = (event: LedgerEvent) => ({
  recorded_seq: event.recordedSeq,
  event_id: event.eventId,
  occurred_at: event.occurredAt,
  organization_id: event.organizationId,
  api_key_id: event.apiKeyId,
  operation_id: event.operationId,
  encounter_id: event.encounterId,
  document_id: event.documentId,
  patient_id: event.patientId,
  request_id: event.requestId,
  caller_request_id: event.callerRequestId
})

const inRange = (query: SealedExportQuery) => (event: LedgerEvent) => {
  if (event.organizationId !== query.organizationId) return false
  const at = Date.parse(event.occurredAt.slice(0, 23) + "Z")
  return (query.from === null || at >= query.from.getTime()) && (query.to === null || at < query.to.getTime())
}

/**
 * Writes the sealed export of one organization's events in [from, to) through `write`, while
 * verifying the chain it reads (an export of a broken chain stops at the finding, which is
 * returned). Only sealed events are exported: `unsealed` says how many were newer.
 */
export const writeSealedExport = (
  verifier: LedgerVerifier,
  query: SealedExportQuery,
  write: (lines: ReadonlyArray<string>) => Effect.Effect<void>
): Effect.Effect<LedgerVerification & { readonly exported: number }, StoreUnavailable, PgClient> =>
  Effect.gen(function* () {
    const selected = inRange(query)
    let exported = 0
    let sealsWritten = 0
    yield* write([
      JSON.stringify({
        format: SEALED_EXPORT_FORMAT,
        public_key: toHex(verifier.publicKey),
        organization_id: query.organizationId,
        from: query.from?.toISOString() ?? null,
        to: query.to?.toISOString() ?? null
      })
    ])
    const verification = yield* verifyLedger(verifier, {
      onSealed: (seal, events) => {
        const chosen = events.filter(({ event }) => selected(event))
        if (chosen.length === 0) return Effect.void
        exported += chosen.length
        sealsWritten++
        return write([
          JSON.stringify({ seal: exportedSealJson(seal) }),
          ...chosen.map(({ event }) => JSON.stringify({ event: exportedEventJson(event) }))
        ])
      }
    })
    if (verification.finding === null) yield* write([JSON.stringify({ end: { seals: sealsWritten, events: exported } })])
    return { ...verification, exported }
  })

export interface ExportFileVerification {
  readonly finding: string | null
  readonly events: number
  readonly seals: number
  readonly publicKey: string | null
}

type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }

const hasKeys = (value: Json, keys: ReadonlyArray<string>): value is { readonly [key: string]: Json } =>
  typeof value === "object" && value !== null && !Array.isArray(value) &&
  Object.keys(value).length === keys.length && keys.every((key) => Object.hasOwn(value, key))

const isString = (value: Json | undefined): value is string => typeof value === "string"
const isNullableString = (value: Json | undefined): value is string | null => value === null || typeof value === "string"
const isPosition = (value: Json | undefined): value is { xid: string; seq: string } =>
  value !== undefined && hasKeys(value, ["xid", "seq"]) && /^\d+$/.test(String(value["xid"])) && /^\d+$/.test(String(value["seq"])) &&
  isString(value["xid"]) && isString(value["seq"])

const sealKeys = ["sequence", "previous_hash", "first", "last", "count", "events_digest", "index", "sealed_at", "complete", "signature", "hash"]
const eventKeys = ["recorded_seq", "event_id", "occurred_at", "organization_id", "api_key_id", "operation_id", "encounter_id", "document_id", "patient_id", "request_id", "caller_request_id"]

const parseSeal = (value: Json): Seal | null => {
  if (!hasKeys(value, sealKeys)) return null
  const { sequence, previous_hash, first, last, count, events_digest, index, sealed_at, complete, signature, hash } = value
  if (typeof complete !== "boolean") return null
  if (typeof sequence !== "number" || !Number.isSafeInteger(sequence) || typeof count !== "number" || !Number.isSafeInteger(count)) return null
  if (!isString(previous_hash) || !isString(events_digest) || !isString(index) || !isString(sealed_at) || !isString(signature) || !isString(hash)) return null
  if (!isPosition(first) || !isPosition(last)) return null
  const bytes = Buffer.from(index, "base64")
  if (bytes.toString("base64") !== index) return null
  return {
    sequence,
    previousHash: previous_hash,
    first: { xid: first.xid, seq: first.seq },
    last: { xid: last.xid, seq: last.seq },
    count,
    eventsDigest: events_digest,
    index: new Uint8Array(bytes),
    sealedAt: sealed_at,
    complete,
    signature,
    hash
  }
}

const parseEvent = (value: Json): LedgerEvent | null => {
  if (!hasKeys(value, eventKeys)) return null
  const v = value
  const strings = ["recorded_seq", "event_id", "occurred_at", "organization_id", "api_key_id", "operation_id", "encounter_id", "request_id"]
  if (!strings.every((key) => isString(v[key]))) return null
  if (!isNullableString(v["document_id"]) || !isNullableString(v["patient_id"]) || !isNullableString(v["caller_request_id"])) return null
  return {
    recordedSeq: v["recorded_seq"] as string,
    eventId: v["event_id"] as string,
    occurredAt: v["occurred_at"] as string,
    organizationId: v["organization_id"] as string,
    apiKeyId: v["api_key_id"] as string,
    operationId: v["operation_id"] as string,
    encounterId: v["encounter_id"] as string,
    documentId: v["document_id"] as string | null,
    patientId: v["patient_id"] as string | null,
    requestId: v["request_id"] as string,
    callerRequestId: v["caller_request_id"] as string | null
  }
}

const describe = (finding: LedgerFinding) => finding.message

/** The file `disclosures archive` writes for one month: the same lines, every organization's events of the month. */
export const ARCHIVE_FORMAT = "clinical-api/disclosure-ledger-archive/1"

/**
 * Verifies a sealed export or a month's archive offline, line by line (constant memory): every
 * line exactly as written, the header's public key (the one pinned, when given), each seal
 * authentic and linked to the one before it when they are consecutive, each event sealed
 * unchanged in its seal's order and within the header's organization (an export's) and range,
 * and the trailer's counts.
 */
export class ExportFileChecker {
  private seals = 0
  private events = 0
  private publicKey: string | null = null
  private lineNumber = 0
  private verifier: LedgerVerifier | null = null
  private header: { organizationId: string | null; from: number | null; to: number | null } | null = null
  private current: { seal: Seal; line: number; events: Array<LedgerEvent> } | null = null
  private previousSeal: Seal | null = null
  private ended = false
  private failed: ExportFileVerification | null = null

  constructor(private readonly pinnedPublicKey: string | null = null) {}

  /** Checks the next line (without its line feed); false once something was found wrong. */
  line(line: string): boolean {
    if (this.failed !== null) return false
    this.lineNumber++
    const problem = this.check(line)
    if (problem !== null) this.failed = this.failure(problem.line ?? this.lineNumber, problem.message)
    return this.failed === null
  }

  /** The outcome once every line was given. */
  finish(): ExportFileVerification {
    if (this.failed !== null) return this.failed
    if (!this.ended) return this.failure(Math.max(1, this.lineNumber), "no trailer (truncated?)")
    return { finding: null, events: this.events, seals: this.seals, publicKey: this.publicKey }
  }

  private failure(lineNumber: number, message: string): ExportFileVerification {
    return { finding: `line ${lineNumber}: ${message}`, events: this.events, seals: this.seals, publicKey: this.publicKey }
  }

  private closeSeal(): string | null {
    const current = this.current
    if (current === null || this.verifier === null) return null
    if (current.events.length === 0) return `seal ${current.seal.sequence} covers no exported event`
    const finding = checkExportedEvents(this.verifier, current.seal, current.events)
    if (finding !== null) return describe(finding)
    const previous = this.previousSeal
    if (previous !== null && current.seal.sequence <= previous.sequence) return `seal ${current.seal.sequence} is out of order`
    if (previous !== null && current.seal.sequence === previous.sequence + 1 && current.seal.previousHash !== previous.hash) {
      return `seal ${current.seal.sequence} does not follow seal ${previous.sequence}`
    }
    this.previousSeal = current.seal
    this.seals++
    this.events += current.events.length
    this.current = null
    return null
  }

  private check(line: string): { line?: number | undefined; message: string } | null {
    let value: Json
    try {
      value = JSON.parse(line) as Json
    } catch {
      return { message: "not JSON" }
    }
    if (JSON.stringify(value) !== line) return { message: "not exactly as exported (changed bytes)" }
    if (this.ended) return { message: "a line after the trailer" }
    if (this.lineNumber === 1) return this.readHeader(value)
    const header = this.header
    if (header === null) return { message: "no header" }
    if (hasKeys(value, ["seal"])) {
      const sealLine = this.current?.line
      const problem = this.closeSeal()
      if (problem !== null) return { line: sealLine, message: problem }
      const seal = parseSeal(value["seal"]!)
      if (seal === null) return { message: "a malformed seal" }
      this.current = { seal, line: this.lineNumber, events: [] }
    } else if (hasKeys(value, ["event"])) {
      const event = parseEvent(value["event"]!)
      if (event === null) return { message: "a malformed event" }
      if (this.current === null) return { message: `event ${event.eventId} is under no seal` }
      if (header.organizationId !== null && event.organizationId !== header.organizationId) {
        return { message: `event ${event.eventId} is not of ${header.organizationId}` }
      }
      const at = Date.parse(event.occurredAt.slice(0, 23) + "Z")
      if ((header.from !== null && at < header.from) || (header.to !== null && at >= header.to)) {
        return { message: `event ${event.eventId} is outside the ${header.organizationId === null ? "archive's month" : "export's range"}` }
      }
      this.current.events.push(event)
    } else if (hasKeys(value, ["end"])) {
      const sealLine = this.current?.line
      const problem = this.closeSeal()
      if (problem !== null) return { line: sealLine, message: problem }
      const end = value["end"]!
      if (!hasKeys(end, ["seals", "events"]) || end["seals"] !== this.seals || end["events"] !== this.events) {
        return { message: "the trailer's counts do not match the file (lines removed?)" }
      }
      this.ended = true
    } else {
      return { message: "an unknown line" }
    }
    return null
  }

  private readHeader(value: Json): { message: string } | null {
    const isExport = hasKeys(value, ["format", "public_key", "organization_id", "from", "to"]) && value["format"] === SEALED_EXPORT_FORMAT
    const isArchive = hasKeys(value, ["format", "public_key", "month", "from", "to"]) && value["format"] === ARCHIVE_FORMAT
    if (!isExport && !isArchive) return { message: `not a sealed export header (${SEALED_EXPORT_FORMAT}) nor an archive's (${ARCHIVE_FORMAT})` }
    const key = value["public_key"]
    const organizationId = isExport ? value["organization_id"] : null
    const from = value["from"]
    const to = value["to"]
    if (!isString(key) || !isNullableString(organizationId) || (isExport && organizationId === null) || !isNullableString(from) || !isNullableString(to)) {
      return { message: "a malformed header" }
    }
    if (isArchive && (!isString(value["month"]) || from === null || to === null)) return { message: "a malformed header" }
    this.publicKey = key
    if (this.pinnedPublicKey !== null && this.pinnedPublicKey.toLowerCase() !== key) return { message: "the file's public key is not the pinned one" }
    this.verifier = ledgerVerifierFromPublicKey(key)
    if (this.verifier === null) return { message: "the public key is not an Ed25519 key (64 hex digits)" }
    const fromMs = from === null ? null : Date.parse(from)
    const toMs = to === null ? null : Date.parse(to)
    if (Number.isNaN(fromMs) || Number.isNaN(toMs)) return { message: "a malformed range" }
    this.header = { organizationId, from: fromMs, to: toMs }
    return null
  }
}

/** `ExportFileChecker` over a whole text in memory. */
export const verifyExportFile = (text: string, pinnedPublicKey: string | null = null): ExportFileVerification => {
  if (!text.endsWith("\n")) return { finding: "line 1: the file does not end with a line feed (truncated?)", events: 0, seals: 0, publicKey: null }
  const checker = new ExportFileChecker(pinnedPublicKey)
  for (const line of text.slice(0, -1).split("\n")) if (!checker.line(line)) break
  return checker.finish()
}

/** `ExportFileChecker` over a file, read as a stream (constant memory, whatever its size). */
export const verifyExportFileAt = async (path: string, pinnedPublicKey: string | null = null): Promise<ExportFileVerification> => {
  const checker = new ExportFileChecker(pinnedPublicKey)
  const stream = createReadStream(path, { encoding: "utf8", highWaterMark: 1 << 20 })
  let pending = ""
  try {
    for await (const chunk of stream as AsyncIterable<string>) {
      if (chunk.length === 0) continue
      const lines = (pending + chunk).split("\n")
      pending = lines.pop()!
      for (const line of lines) {
        if (!checker.line(line)) return checker.finish()
      }
    }
  } finally {
    stream.destroy()
  }
  if (pending !== "") return { ...checker.finish(), finding: "the file does not end with a line feed (truncated?)" }
  return checker.finish()
}
