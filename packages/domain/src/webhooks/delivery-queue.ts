import { Context, type Effect, type Redacted } from "effect"
import type { WebhookDeliveryId, WebhookEventId, WebhookSubscriptionId } from "../ids.js"
import type { StoreUnavailable } from "../ports.js"
import type { DeliveryOutcome, DeliveryStep, NetworkErrorClass, WebhookDeliveryState } from "./retry.js"

/**
 * docs/webhooks.md: runtime status `planned_not_generally_available` (the default)
 * sends no delivery at all; `enabled` is the configuration switch for sandbox and testing.
 */
export const WEBHOOK_RUNTIME_STATUSES = ["planned_not_generally_available", "enabled"] as const
export type WebhookRuntimeStatus = (typeof WEBHOOK_RUNTIME_STATUSES)[number]
export const DEFAULT_WEBHOOK_RUNTIME: WebhookRuntimeStatus = "planned_not_generally_available"

/**
 * What an attempt record says besides an HTTP status: a network error class of contract 6.3,
 * `address_refused` (the endpoint resolved to an address the environment forbids, checked at
 * send time after DNS resolution) or `lease_expired` (the worker holding the lease vanished
 * mid-attempt and the delivery was taken again).
 */
export type DeliveryAttemptErrorClass = NetworkErrorClass | "address_refused" | "lease_expired"

/** A delivery a worker has leased: everything one attempt needs. */
export interface LeasedDelivery {
  readonly deliveryId: WebhookDeliveryId
  readonly eventId: WebhookEventId
  readonly subscriptionId: WebhookSubscriptionId
  readonly endpointUrl: string
  /** The event's stored body bytes, sent unchanged on every attempt. */
  readonly rawBody: Uint8Array
  /** The newest signing secret of the subscription at lease time (the sender signs with the newest). */
  readonly signingSecret: Redacted.Redacted<string>
  /** This attempt's number, from 1; unique per delivery (it also fences the lease). */
  readonly attemptNumber: number
  /** The position in the retry schedule: `attemptNumber` minus the attempts before a manual redelivery. */
  readonly scheduleAttemptNumber: number
  /** 8 for events, 1 for `webhook.endpoint_test` (a check is tried once). */
  readonly maxAttempts: number
  readonly leaseOwner: string
  readonly leaseExpiresAt: Date
  /** True when the delivery was a stale `sending` one whose earlier lease had expired. */
  readonly reclaimedStale: boolean
}

/** The end of one attempt, as the worker saw it. Never the response body. */
export interface DeliveryAttemptResult {
  readonly outcome: DeliveryOutcome
  /** Set when the attempt never left because the endpoint's address was refused. */
  readonly errorClass?: DeliveryAttemptErrorClass
  readonly finishedAt: Date
  readonly durationMs: number
}

/**
 * - `Written`: the attempt and the delivery's new state are committed.
 * - `LeaseLost`: the delivery is no longer `sending` under this lease (revocation cancelled it,
 *   or the lease expired and another worker took it): the attempt is recorded, the state is not
 *   touched, so a cancellation is never overwritten by the result of an in-flight send.
 */
export type RecordAttemptResult =
  | { readonly _tag: "Written"; readonly state: WebhookDeliveryState }
  | { readonly _tag: "LeaseLost" }

/** One finished attempt of a leased delivery and the step that follows it. */
export interface AttemptToRecord {
  readonly delivery: LeasedDelivery
  readonly result: DeliveryAttemptResult
  readonly step: DeliveryStep
}

export interface LeaseRequest {
  readonly workerId: string
  readonly now: Date
  readonly limit: number
  /** 60 s in production (docs/webhooks.md); shorter in tests. */
  readonly leaseMs: number
  /** Only this delivery (operator `send-test`); any due delivery when omitted. */
  readonly deliveryId?: WebhookDeliveryId
}

/**
 * The delivery worker's port to the outbox's deliveries (the storage adapter implements it with
 * `FOR UPDATE SKIP LOCKED`, so workers in several processes never lease one delivery twice).
 */
export class WebhookDeliveryQueue extends Context.Service<WebhookDeliveryQueue, {
  /**
   * Leases up to `limit` deliveries due at `now`: `pending` ones whose next attempt is due and
   * stale `sending` ones whose lease expired, of active subscriptions (endpoint tests also of
   * disabled ones). Each becomes `sending`, leased to `workerId` until `now + leaseMs`, with a
   * new attempt record opened. A stale one that already used its last attempt is failed instead.
   */
  readonly lease: (request: LeaseRequest) => Effect.Effect<ReadonlyArray<LeasedDelivery>, StoreUnavailable>
  /**
   * Records the results of attempts (a worker settles a batch at once), in one transaction:
   * every attempt is recorded, and each delivery's `step` (`succeeded`, back to `pending` at the
   * retry time, or `failed`) is applied only if its lease is still this one and it is still
   * `sending`. The results are in the order of `attempts`.
   */
  readonly recordAttempts: (
    attempts: ReadonlyArray<AttemptToRecord>
  ) => Effect.Effect<ReadonlyArray<RecordAttemptResult>, StoreUnavailable>
}>()("@clinical-api/domain/WebhookDeliveryQueue") {}
