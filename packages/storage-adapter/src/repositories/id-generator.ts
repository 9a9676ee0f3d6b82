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

/** 128 random bits in lowercase hex after the kind's prefix; opaque to partners. */
export const newId = (kind: IdKind): string => {
  if (poolOffset + 16 > pool.length) {
    pool = randomBytes(POOL_BYTES)
    poolOffset = 0
  }
  const id = prefixes[kind] + pool.toString("hex", poolOffset, poolOffset + 16)
  poolOffset += 16
  return id
}

export const IdGeneratorLive = Layer.succeed(IdGenerator, IdGenerator.of({ next: (kind) => Effect.sync(() => newId(kind)) }))
