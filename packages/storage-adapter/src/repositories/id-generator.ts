import { randomBytes } from "node:crypto"
import { IdGenerator, type IdKind } from "@clinical-api/domain"
import { Effect, Layer } from "effect"

const prefixes: { readonly [K in IdKind]: string } = {
  disclosure: "dsc_",
  request: "req_",
  api_key: "key_",
  webhook_event: "evt_",
  webhook_delivery: "dlv_",
  webhook_subscription: "whs_"
}

/**
 * Random bytes drawn 4 KiB at a time (as `crypto.randomUUID` does): one call to the CSPRNG per
 * 256 ids instead of one per id, which a list page's 50 disclosure ids made visible.
 */
const POOL_BYTES = 4096
let pool = Buffer.alloc(0)
let poolOffset = 0

const randomHex = (bytes: number): string => {
  if (poolOffset + bytes > pool.length) {
    pool = randomBytes(POOL_BYTES)
    poolOffset = 0
  }
  const hex = pool.toString("hex", poolOffset, poolOffset + bytes)
  poolOffset += bytes
  return hex
}

/**
 * Kinds whose ids lead with the time they were made: the primary key of an append-only table
 * that grows without bound. A random key puts every INSERT on a random leaf of its index, and
 * once the index outgrows the buffer cache (the benchmark's 4M disclosure events: 330 MB)
 * every insert reads and dirties a page of its own; time-ordered keys land on the same few.
 */
const timeOrdered: ReadonlySet<IdKind> = new Set(["disclosure"])

/**
 * After the kind's prefix, 32 lowercase hex digits: 128 random bits, or for time-ordered kinds
 * the milliseconds since the epoch in 12 digits (48 bits, until the year 10889) then 80 random
 * bits, as UUIDv7 does. Either way opaque to partners.
 */
export const newId = (kind: IdKind): string =>
  timeOrdered.has(kind)
    ? prefixes[kind] + Date.now().toString(16).padStart(12, "0") + randomHex(10)
    : prefixes[kind] + randomHex(16)

export const IdGeneratorLive = Layer.succeed(IdGenerator, IdGenerator.of({ next: (kind) => Effect.sync(() => newId(kind)) }))
