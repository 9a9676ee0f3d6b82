import { Context, Data, type Effect } from "effect"

/**
 * What `claim` found for an event id:
 * - `new`: nobody has processed it, or the previous claim was left in progress longer than
 *   the lease (its handler crashed or hangs) and has been taken over. The caller now holds
 *   the claim, identified by `claimToken`, and must `complete` or `release` it.
 * - `in_progress`: another delivery of the same event holds a live claim.
 * - `completed`: the business work for this event is done.
 */
export type IdempotencyClaim =
  | { readonly status: "new"; readonly claimToken: string }
  | { readonly status: "in_progress" }
  | { readonly status: "completed" }

/** The idempotency store could not be reached; the receiver answers 503 so the sender retries. */
export class IdempotencyStoreUnavailable extends Data.TaggedError("IdempotencyStoreUnavailable")<{
  readonly operation: string
  readonly cause?: unknown
}> {}

/**
 * Begin/complete bookkeeping of the receiver's business work, keyed by the event id
 * (`Service-Event-Id`, contract 6.3), never by the delivery id.
 */
export class IdempotencyStore extends Context.Service<
  IdempotencyStore,
  {
    /** Begins work on `eventId` unless it is done or in progress (see `IdempotencyClaim`). */
    readonly claim: (eventId: string) => Effect.Effect<IdempotencyClaim, IdempotencyStoreUnavailable>
    /**
     * Records the work as done. It is recorded even if the claim was taken over meanwhile: the
     * work did happen, and a later delivery must not repeat it.
     */
    readonly complete: (eventId: string) => Effect.Effect<void, IdempotencyStoreUnavailable>
    /**
     * Gives the claim up after a failed handler, so that a redelivery runs the work again. Only
     * the holder's own claim is released: one that was taken over by another delivery stays.
     */
    readonly release: (eventId: string, claimToken: string) => Effect.Effect<void, IdempotencyStoreUnavailable>
  }
>()("@clinical-api/webhook-adapter/IdempotencyStore") {}

export type IdempotencyStoreService = Context.Service.Shape<typeof IdempotencyStore>

/**
 * How long a claim may stay in progress before another delivery may take it over. Longer than
 * any real handler run; shorter than the sender's second retry (5 s + 5 min after the first
 * attempt), so the work of a crashed handler is picked up by the next redelivery after that.
 */
export const DEFAULT_CLAIM_LEASE_MS = 5 * 60 * 1000
