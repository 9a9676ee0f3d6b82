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

const sealJson = (seal: Seal) => ({
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

const eventJson = (event: LedgerEvent) => ({
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
          JSON.stringify({ seal: sealJson(seal) }),
          ...chosen.map(({ event }) => JSON.stringify({ event: eventJson(event) }))
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

/**
 * Verifies a sealed export offline: every line exactly as written, the header's public key
 * (the one pinned with `publicKey`, when given), each seal authentic and linked to the one
 * before it when they are consecutive, each event sealed unchanged in its seal's order and
 * within the header's organization and range, and the trailer's counts.
 */
export const verifyExportFile = (text: string, pinnedPublicKey: string | null = null): ExportFileVerification => {
  let seals = 0
  let events = 0
  let publicKey: string | null = null
  const fail = (lineNumber: number, message: string): ExportFileVerification => ({
    finding: `line ${lineNumber}: ${message}`,
    events,
    seals,
    publicKey
  })
  if (!text.endsWith("\n")) return fail(1, "the file does not end with a line feed (truncated?)")
  const lines = text.slice(0, -1).split("\n")
  let verifier: LedgerVerifier | null = null
  let header: { organizationId: string; from: number | null; to: number | null } | null = null
  let current: { seal: Seal; line: number; events: Array<LedgerEvent> } | null = null
  let previousSeal: Seal | null = null
  let ended = false
  const closeSeal = (): string | null => {
    if (current === null || verifier === null) return null
    if (current.events.length === 0) return `seal ${current.seal.sequence} covers no exported event`
    const finding = checkExportedEvents(verifier, current.seal, current.events)
    if (finding !== null) return describe(finding)
    if (previousSeal !== null && current.seal.sequence <= previousSeal.sequence) return `seal ${current.seal.sequence} is out of order`
    if (previousSeal !== null && current.seal.sequence === previousSeal.sequence + 1 && current.seal.previousHash !== previousSeal.hash) {
      return `seal ${current.seal.sequence} does not follow seal ${previousSeal.sequence}`
    }
    previousSeal = current.seal
    seals++
    events += current.events.length
    current = null
    return null
  }
  for (let i = 0; i < lines.length; i++) {
    const lineNumber = i + 1
    const line = lines[i]!
    let value: Json
    try {
      value = JSON.parse(line) as Json
    } catch {
      return fail(lineNumber, "not JSON")
    }
    if (JSON.stringify(value) !== line) return fail(lineNumber, "not exactly as exported (changed bytes)")
    if (ended) return fail(lineNumber, "a line after the trailer")
    if (i === 0) {
      if (!hasKeys(value, ["format", "public_key", "organization_id", "from", "to"]) || value["format"] !== SEALED_EXPORT_FORMAT) {
        return fail(lineNumber, `not a sealed export header (${SEALED_EXPORT_FORMAT})`)
      }
      const key = value["public_key"]
      const organizationId = value["organization_id"]
      const from = value["from"]
      const to = value["to"]
      if (!isString(key) || !isString(organizationId) || !isNullableString(from) || !isNullableString(to)) return fail(lineNumber, "a malformed header")
      publicKey = key
      if (pinnedPublicKey !== null && pinnedPublicKey.toLowerCase() !== key) return fail(lineNumber, "the file's public key is not the pinned one")
      verifier = ledgerVerifierFromPublicKey(key)
      if (verifier === null) return fail(lineNumber, "the public key is not an Ed25519 key (64 hex digits)")
      const fromMs = from === null ? null : Date.parse(from)
      const toMs = to === null ? null : Date.parse(to)
      if (Number.isNaN(fromMs) || Number.isNaN(toMs)) return fail(lineNumber, "a malformed range")
      header = { organizationId, from: fromMs, to: toMs }
      continue
    }
    if (header === null) return fail(lineNumber, "no header")
    if (hasKeys(value, ["seal"])) {
      const problem = closeSeal()
      if (problem !== null) return fail(current === null ? lineNumber : (current as { line: number }).line, problem)
      const seal = parseSeal(value["seal"]!)
      if (seal === null) return fail(lineNumber, "a malformed seal")
      current = { seal, line: lineNumber, events: [] }
    } else if (hasKeys(value, ["event"])) {
      const event = parseEvent(value["event"]!)
      if (event === null) return fail(lineNumber, "a malformed event")
      if (current === null) return fail(lineNumber, `event ${event.eventId} is under no seal`)
      if (event.organizationId !== header.organizationId) return fail(lineNumber, `event ${event.eventId} is not of ${header.organizationId}`)
      const at = Date.parse(event.occurredAt.slice(0, 23) + "Z")
      if ((header.from !== null && at < header.from) || (header.to !== null && at >= header.to)) {
        return fail(lineNumber, `event ${event.eventId} is outside the export's range`)
      }
      current.events.push(event)
    } else if (hasKeys(value, ["end"])) {
      const sealLine: number = current === null ? lineNumber : (current as { line: number }).line
      const problem = closeSeal()
      if (problem !== null) return fail(sealLine, problem)
      const end = value["end"]!
      if (!hasKeys(end, ["seals", "events"]) || end["seals"] !== seals || end["events"] !== events) {
        return fail(lineNumber, "the trailer's counts do not match the file (lines removed?)")
      }
      ended = true
    } else {
      return fail(lineNumber, "an unknown line")
    }
  }
  if (!ended) return fail(lines.length, "no trailer (truncated?)")
  return { finding: null, events, seals, publicKey }
}
