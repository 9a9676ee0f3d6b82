import { randomUUID } from "node:crypto"
import { Effect, Layer } from "effect"
import {
  DEFAULT_CLAIM_LEASE_MS,
  type IdempotencyClaim,
  IdempotencyStore,
  type IdempotencyStoreService
} from "./idempotency-store.js"

export interface IdempotencyStoreMemoryOptions {
  /** See `DEFAULT_CLAIM_LEASE_MS`. */
  readonly leaseMs?: number
  /** The clock, in epoch milliseconds; `Date.now` when omitted. */
  readonly now?: () => number
}

type Entry =
  | { readonly state: "in_progress"; readonly claimToken: string; readonly claimedAt: number }
  | { readonly state: "completed"; readonly completedAt: number }

/**
 * An idempotency store for one receiver process (tests, the example receiver). Every operation
 * runs synchronously on one map, so two concurrent deliveries can never both claim an event.
 * It forgets everything on restart: use `IdempotencyStorePostgres` for a real receiver.
 */
export const makeIdempotencyStoreMemory = (options: IdempotencyStoreMemoryOptions = {}): IdempotencyStoreService => {
  const leaseMs = options.leaseMs ?? DEFAULT_CLAIM_LEASE_MS
  const now = options.now ?? Date.now
  const entries = new Map<string, Entry>()

  const claim = Effect.fn("IdempotencyStoreMemory.claim")(function* (eventId: string) {
    return yield* Effect.sync((): IdempotencyClaim => {
      const entry = entries.get(eventId)
      const at = now()
      if (entry?.state === "completed") return { status: "completed" }
      if (entry?.state === "in_progress" && at - entry.claimedAt < leaseMs) return { status: "in_progress" }
      const claimToken = randomUUID()
      entries.set(eventId, { state: "in_progress", claimToken, claimedAt: at })
      return { status: "new", claimToken }
    })
  })

  const complete = Effect.fn("IdempotencyStoreMemory.complete")(function* (eventId: string) {
    yield* Effect.sync(() => {
      entries.set(eventId, { state: "completed", completedAt: now() })
    })
  })

  const release = Effect.fn("IdempotencyStoreMemory.release")(function* (eventId: string, claimToken: string) {
    yield* Effect.sync(() => {
      const entry = entries.get(eventId)
      if (entry?.state === "in_progress" && entry.claimToken === claimToken) entries.delete(eventId)
    })
  })

  return { claim, complete, release }
}

export const IdempotencyStoreMemory = (options: IdempotencyStoreMemoryOptions = {}): Layer.Layer<IdempotencyStore> =>
  Layer.sync(IdempotencyStore, () => makeIdempotencyStoreMemory(options))
