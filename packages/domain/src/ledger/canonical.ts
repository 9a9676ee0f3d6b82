/**
 * The disclosure ledger's byte formats (docs/ledger.md). Everything here is pure: hashing and
 * signing come through `LedgerCrypto`, so the domain needs no platform crypto (the adapter
 * gives SHA-256 and Ed25519 from node:crypto; a browser verifier could give WebCrypto's).
 */

/** SHA-256 and Ed25519 as the ledger needs them, synchronous (a verifier hashes every event). */
export interface LedgerHashing {
  /** A string is hashed as its UTF-8 bytes (saves the verifier an encoding per event). */
  readonly sha256: (data: Uint8Array | string) => Uint8Array
}

export interface LedgerVerifier extends LedgerHashing {
  /** The Ed25519 public key (32 bytes) seals are checked against. */
  readonly publicKey: Uint8Array
  readonly verify: (message: Uint8Array, signature: Uint8Array) => boolean
}

export interface LedgerSigner extends LedgerVerifier {
  readonly sign: (message: Uint8Array) => Uint8Array
}

/**
 * One disclosure event as the chain covers it: every stored field as text, exactly as stored.
 * `recordedSeq` is the decimal recording number, `occurredAt` the instant in UTC with
 * microseconds (`2026-05-01T09:00:00.000000Z`, PostgreSQL's precision).
 */
export interface LedgerEvent {
  readonly recordedSeq: string
  readonly eventId: string
  readonly occurredAt: string
  readonly organizationId: string
  readonly apiKeyId: string
  readonly operationId: string
  readonly encounterId: string
  readonly documentId: string | null
  readonly patientId: string | null
  readonly requestId: string
  readonly callerRequestId: string | null
}

/** The fields in canonical order (docs/ledger.md): the order never changes within a format version. */
export const ledgerEventFields = [
  "recordedSeq",
  "eventId",
  "occurredAt",
  "organizationId",
  "apiKeyId",
  "operationId",
  "encounterId",
  "documentId",
  "patientId",
  "requestId",
  "callerRequestId"
] as const satisfies ReadonlyArray<keyof LedgerEvent>

const EVENT_TAG = "disclosure-event/1"
const encoder = new TextEncoder()

/**
 * The canonical text of an event: the tag, then each field in `ledgerEventFields` order as
 * `<length in UTF-16 code units>:<text>` or `-` for null, each followed by a line feed. The
 * lengths make it unambiguous whatever the fields contain; its UTF-8 bytes are what is hashed.
 */
export const canonicalEventText = (event: LedgerEvent): string => {
  let text = EVENT_TAG + "\n"
  for (const field of ledgerEventFields) {
    const value = event[field]
    text += value === null ? "-\n" : `${value.length}:${value}\n`
  }
  return text
}

export const canonicalEventBytes = (event: LedgerEvent): Uint8Array => encoder.encode(canonicalEventText(event))

/** Bytes of one index entry: the recording number (8 bytes, big-endian) and the event's fingerprint. */
export const FINGERPRINT_BYTES = 16
export const INDEX_ENTRY_BYTES = 8 + FINGERPRINT_BYTES

/** The first 16 bytes of SHA-256 of the canonical bytes. */
export const eventFingerprint = (hashing: LedgerHashing, event: LedgerEvent): Uint8Array =>
  hashing.sha256(canonicalEventText(event)).subarray(0, FINGERPRINT_BYTES)

/** The recording number of an index entry at `offset`, as decimal text (no BigInt below 2^53). */
export const indexSeqAt = (view: DataView, offset: number): string => {
  const high = view.getUint32(offset)
  return high < 0x200000 ? String(high * 0x1_0000_0000 + view.getUint32(offset + 4)) : view.getBigUint64(offset).toString()
}

export const toHex = (bytes: Uint8Array): string => {
  let hex = ""
  for (const byte of bytes) hex += byte.toString(16).padStart(2, "0")
  return hex
}

export const fromHex = (hex: string): Uint8Array | null => {
  if (!/^(?:[0-9a-f]{2})*$/.test(hex)) return null
  const bytes = new Uint8Array(hex.length / 2)
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16)
  return bytes
}

export const concatBytes = (parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  let length = 0
  for (const part of parts) length += part.length
  const out = new Uint8Array(length)
  let offset = 0
  for (const part of parts) {
    out.set(part, offset)
    offset += part.length
  }
  return out
}
