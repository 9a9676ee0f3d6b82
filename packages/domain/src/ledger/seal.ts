import {
  canonicalEventText,
  indexSeqAt,
  FINGERPRINT_BYTES,
  INDEX_ENTRY_BYTES,
  type LedgerEvent,
  type LedgerHashing,
  type LedgerSigner,
  type LedgerVerifier,
  toHex
} from "./canonical.js"

/**
 * A position in the chain's total order: the recording transaction's id (PostgreSQL `xid8`)
 * then the recording number, both decimal. Events are sealed only once every transaction
 * below the sealer's snapshot `xmin` has ended, so nothing can later appear before a sealed
 * position (docs/ledger.md).
 */
export interface ChainPosition {
  readonly xid: string
  readonly seq: string
}

export const comparePositions = (a: ChainPosition, b: ChainPosition): number => {
  const byXid = compareDecimal(a.xid, b.xid)
  return byXid !== 0 ? byXid : compareDecimal(a.seq, b.seq)
}

const compareDecimal = (a: string, b: string): number =>
  a.length !== b.length ? a.length - b.length : a < b ? -1 : a > b ? 1 : 0

/** What a seal states; `signature` and `hash` authenticate it. */
export interface SealBody {
  /** 1, 2, 3...: a gap means a removed seal. */
  readonly sequence: number
  /** `hash` of the previous seal, 64 zeros for the first. */
  readonly previousHash: string
  /** The first and the last event it covers, in chain order. */
  readonly first: ChainPosition
  readonly last: ChainPosition
  readonly count: number
  /** SHA-256 over the SHA-256 of each event's canonical bytes, in chain order (hex). */
  readonly eventsDigest: string
  /** Per event, in chain order: recorded_seq (8 bytes big-endian) and its fingerprint (16 bytes). */
  readonly index: Uint8Array
  /** UTC, milliseconds, RFC 3339. */
  readonly sealedAt: string
  /**
   * Whether it took every event that was sealable then (not a backlog's first part): every
   * event of a later seal committed after it, so none occurred long before its `sealedAt`.
   */
  readonly complete: boolean
}

export interface Seal extends SealBody {
  /** Ed25519 over `sealSignedBytes` (hex). */
  readonly signature: string
  /** SHA-256 of `sealSignedBytes` (hex): what the next seal names. */
  readonly hash: string
}

export const GENESIS_HASH = "0".repeat(64)
const SEAL_TAG = "disclosure-seal/1"
const encoder = new TextEncoder()

/** The bytes a seal's signature and hash cover (docs/ledger.md): the index enters through its SHA-256. */
export const sealSignedBytes = (hashing: LedgerHashing, body: SealBody): Uint8Array =>
  encoder.encode(
    [
      SEAL_TAG,
      String(body.sequence),
      body.previousHash,
      body.first.xid,
      body.first.seq,
      body.last.xid,
      body.last.seq,
      String(body.count),
      body.eventsDigest,
      toHex(hashing.sha256(body.index)),
      body.sealedAt,
      body.complete ? "complete" : "partial"
    ].join("\n") + "\n"
  )

export const sealHash = (hashing: LedgerHashing, body: SealBody): string => toHex(hashing.sha256(sealSignedBytes(hashing, body)))

/** What the sealer computes from the events it seals (in chain order, at least one). */
export interface SealedEvents {
  readonly count: number
  readonly eventsDigest: string
  readonly index: Uint8Array
}

/**
 * The events digest and index of a seal of at most `capacity` events, fed in chain order in as
 * many parts as the caller likes (a sealer reads a seal's events a slice at a time and hashes each
 * slice as it arrives). Each event is hashed once: its full hash enters the events digest, its
 * first 16 bytes the index.
 */
export const startEventsDigest = (hashing: LedgerHashing, capacity: number) => {
  let index = new Uint8Array(Math.min(capacity, 512) * INDEX_ENTRY_BYTES)
  let view = new DataView(index.buffer)
  let hashes = new Uint8Array(Math.min(capacity, 512) * 32)
  let added = 0
  const grow = () => {
    const size = Math.min(capacity, 2 * (hashes.length / 32))
    const grownIndex = new Uint8Array(size * INDEX_ENTRY_BYTES)
    grownIndex.set(index)
    const grownHashes = new Uint8Array(size * 32)
    grownHashes.set(hashes)
    index = grownIndex
    view = new DataView(index.buffer)
    hashes = grownHashes
  }
  return {
    add: (event: LedgerEvent): void => {
      if (added === capacity) throw new RangeError(`an events digest of at most ${capacity} events was given more`)
      if (added * 32 === hashes.length) grow()
      const hash = hashing.sha256(canonicalEventText(event))
      hashes.set(hash, added * 32)
      view.setBigUint64(added * INDEX_ENTRY_BYTES, BigInt(event.recordedSeq))
      index.set(hash.subarray(0, FINGERPRINT_BYTES), added * INDEX_ENTRY_BYTES + 8)
      added++
    },
    finish: (): SealedEvents => {
      if (added === 0) throw new RangeError("an events digest needs at least one event")
      return {
        count: added,
        eventsDigest: toHex(hashing.sha256(hashes.subarray(0, added * 32))),
        index: index.slice(0, added * INDEX_ENTRY_BYTES)
      }
    }
  }
}

export const makeSeal = (signer: LedgerSigner, body: SealBody): Seal => {
  const signed = sealSignedBytes(signer, body)
  return { ...body, signature: toHex(signer.sign(signed)), hash: toHex(signer.sha256(signed)) }
}

/** Checks a seal's own hash and signature (not its place in the chain). */
export const sealIsAuthentic = (verifier: LedgerVerifier, seal: Seal): boolean => {
  const signed = sealSignedBytes(verifier, seal)
  if (toHex(verifier.sha256(signed)) !== seal.hash) return false
  const signature = hexBytes(seal.signature)
  return signature !== null && signature.length === 64 && verifier.verify(signed, signature)
}

const hexBytes = (hex: string): Uint8Array | null => {
  if (!/^(?:[0-9a-f]{2})*$/.test(hex)) return null
  const bytes = new Uint8Array(hex.length / 2)
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16)
  return bytes
}

/** The index entries of a seal: recorded_seq (decimal) and fingerprint (hex), in chain order. */
export const indexEntries = (index: Uint8Array): ReadonlyArray<{ readonly seq: string; readonly fingerprint: string }> => {
  const view = new DataView(index.buffer, index.byteOffset, index.byteLength)
  const entries: Array<{ seq: string; fingerprint: string }> = []
  for (let offset = 0; offset + INDEX_ENTRY_BYTES <= index.length; offset += INDEX_ENTRY_BYTES) {
    entries.push({
      seq: indexSeqAt(view, offset),
      fingerprint: toHex(index.subarray(offset + 8, offset + INDEX_ENTRY_BYTES))
    })
  }
  return entries
}

