import { randomBytes } from "node:crypto"
import {
  checkActivation,
  type DocumentId,
  type EncounterId,
  generateSigningSecret,
  IdGenerator,
  INITIAL_WEBHOOK_READINESS,
  makeEndpointTestEvent,
  OrganizationId,
  serializeWebhookEvent,
  type StoreUnavailable,
  WebhookDeliveryId,
  type WebhookDeliveryState,
  WebhookEventId,
  type WebhookReadiness,
  type WebhookReadinessItem,
  WebhookSubscriptionId
} from "@clinical-api/domain"
import { Clock, Context, Data, Effect, Layer, Schema } from "effect"
import { UnknownOrganization } from "../operator/operator-store.js"
import { decodeRows } from "../sql/decode.js"
import { PgClient } from "../sql/pg-client.js"
import {
  AttemptRow,
  DeliveryRow,
  deliveryColumns,
  RevisionRow,
  SubscriptionRow,
  subscriptionColumns,
  toSubscription,
  type WebhookSubscriptionRecord
} from "./rows.js"

/**
 * The operator side of webhooks (the `webhooks` command group calls these): subscriptions,
 * their readiness, activation and revocation, signing secrets, and the deliveries with their
 * attempts. Every change is one transaction; a refused call changes nothing.
 */

export class UnknownSubscription extends Data.TaggedError("UnknownSubscription")<{ readonly subscriptionId: string }> {
  override get message() {
    return `No webhook subscription "${this.subscriptionId}".`
  }
}

export class ActivationRefused extends Data.TaggedError("ActivationRefused")<{
  readonly subscriptionId: string
  readonly missing: ReadonlyArray<WebhookReadinessItem>
}> {
  override get message() {
    return `Subscription "${this.subscriptionId}" cannot be activated: readiness not confirmed for ${this.missing.join(", ")}.`
  }
}

export class ReadinessChangeRefused extends Data.TaggedError("ReadinessChangeRefused")<{
  readonly subscriptionId: string
  readonly item: WebhookReadinessItem
}> {
  override get message() {
    return `Subscription "${this.subscriptionId}" is active: unconfirming ${this.item} would leave it active without readiness; revoke readiness instead (\`webhooks readiness revoke\`).`
  }
}

export class UnknownDelivery extends Data.TaggedError("UnknownDelivery")<{ readonly deliveryId: string }> {
  override get message() {
    return `No webhook delivery "${this.deliveryId}".`
  }
}

export class RedeliveryRefused extends Data.TaggedError("RedeliveryRefused")<{
  readonly deliveryId: string
  readonly why: string
}> {
  override get message() {
    return `Delivery "${this.deliveryId}" cannot be redelivered: ${this.why}.`
  }
}

export class UnknownTranscript extends Data.TaggedError("UnknownTranscript")<{
  readonly encounterId: string
  readonly documentId: string
  readonly why: string
}> {
  override get message() {
    return `No ready transcript for encounter "${this.encounterId}", document "${this.documentId}": ${this.why}.`
  }
}

export interface WebhookRevision {
  readonly revision: number
  readonly change: string
  readonly state: WebhookSubscriptionRecord["state"]
  readonly readiness: WebhookReadiness
  readonly changedBy: string | null
  readonly reason: string | null
  readonly createdAt: Date
}

export interface WebhookDeliveryRecord {
  readonly deliveryId: WebhookDeliveryId
  readonly eventId: WebhookEventId
  readonly eventType: string
  readonly subscriptionId: WebhookSubscriptionId
  readonly state: WebhookDeliveryState
  readonly attemptCount: number
  readonly maxAttempts: number
  readonly nextAttemptAt: Date
  readonly leaseOwner: string | null
  readonly leaseExpiresAt: Date | null
  readonly lastAttemptAt: Date | null
  readonly lastResponseStatus: number | null
  readonly lastErrorClass: string | null
  readonly failureReason: string | null
  readonly createdAt: Date
  readonly updatedAt: Date
}

export interface WebhookAttemptRecord {
  readonly attemptNumber: number
  readonly workerId: string
  readonly startedAt: Date
  readonly finishedAt: Date | null
  readonly durationMs: number | null
  readonly responseStatus: number | null
  readonly errorClass: string | null
}

export interface CreatedSubscription {
  readonly subscription: WebhookSubscriptionRecord
  /** Shown once; the sender signs with it. */
  readonly secret: string
}

export interface RevokedReadiness {
  readonly subscription: WebhookSubscriptionRecord
  /** Deliveries cancelled in the same transaction, by the state they were in. */
  readonly cancelled: { readonly pending: number; readonly sending: number; readonly staleSending: number }
}

export interface WebhookOperatorStoreService {
  readonly createSubscription: (input: {
    readonly organizationId: OrganizationId
    readonly endpointUrl: string
    readonly createdBy?: string | null
  }) => Effect.Effect<CreatedSubscription, UnknownOrganization | StoreUnavailable>
  readonly listSubscriptions: (filter?: {
    readonly organizationId?: OrganizationId
  }) => Effect.Effect<ReadonlyArray<WebhookSubscriptionRecord>, StoreUnavailable>
  readonly getSubscription: (
    subscriptionId: WebhookSubscriptionId
  ) => Effect.Effect<
    { readonly subscription: WebhookSubscriptionRecord; readonly revisions: ReadonlyArray<WebhookRevision> },
    UnknownSubscription | StoreUnavailable
  >
  /** Confirms an item, or (`confirmed: false`) returns it to its initial status; a new revision either way. */
  readonly setReadiness: (input: {
    readonly subscriptionId: WebhookSubscriptionId
    readonly item: WebhookReadinessItem
    readonly confirmed: boolean
    readonly by?: string | null
  }) => Effect.Effect<WebhookSubscriptionRecord, UnknownSubscription | ReadinessChangeRefused | StoreUnavailable>
  /** Refused naming the missing items unless all are confirmed; readiness, provenance and the active revision in one transaction. */
  readonly activate: (input: {
    readonly subscriptionId: WebhookSubscriptionId
    readonly by: string
    readonly reason: string
  }) => Effect.Effect<WebhookSubscriptionRecord, UnknownSubscription | ActivationRefused | StoreUnavailable>
  /**
   * Disables the subscription (a new revision whose readiness is back to the initial record)
   * and cancels its pending, sending and stale sending deliveries, in one transaction.
   */
  readonly revokeReadiness: (input: {
    readonly subscriptionId: WebhookSubscriptionId
    readonly by: string
    readonly reason: string
  }) => Effect.Effect<RevokedReadiness, UnknownSubscription | StoreUnavailable>
  /** A new newest secret; the older ones stay stored (receivers may still accept them) but the sender uses the newest. */
  readonly rotateSecret: (subscriptionId: WebhookSubscriptionId) => Effect.Effect<string, UnknownSubscription | StoreUnavailable>
  readonly listDeliveries: (filter?: {
    readonly subscriptionId?: WebhookSubscriptionId
    readonly state?: WebhookDeliveryState
    readonly limit?: number
  }) => Effect.Effect<ReadonlyArray<WebhookDeliveryRecord>, StoreUnavailable>
  readonly showDelivery: (
    deliveryId: WebhookDeliveryId
  ) => Effect.Effect<
    { readonly delivery: WebhookDeliveryRecord; readonly attempts: ReadonlyArray<WebhookAttemptRecord> },
    UnknownDelivery | StoreUnavailable
  >
  /**
   * A `failed` delivery back to `pending`, due now. Its attempt count is kept (attempt numbers
   * stay unique, the history whole) and its retry schedule restarts from the first delay.
   * Refused for any other state and when the subscription is no longer active.
   */
  readonly redeliver: (
    deliveryId: WebhookDeliveryId
  ) => Effect.Effect<WebhookDeliveryRecord, UnknownDelivery | UnknownSubscription | RedeliveryRefused | StoreUnavailable>
  /** A `webhook.endpoint_test` event and its single-attempt delivery (any subscription state). */
  readonly createEndpointTest: (
    subscriptionId: WebhookSubscriptionId
  ) => Effect.Effect<{ readonly eventId: WebhookEventId; readonly deliveryId: WebhookDeliveryId }, UnknownSubscription | StoreUnavailable>
  /** The organization of a transcript that is ready: the document belongs to the encounter and has a final transcript. */
  readonly findTranscriptOrganization: (
    encounterId: EncounterId,
    documentId: DocumentId
  ) => Effect.Effect<OrganizationId, UnknownTranscript | StoreUnavailable>
}

export class WebhookOperatorStore extends Context.Service<WebhookOperatorStore, WebhookOperatorStoreService>()("@clinical-api/storage-adapter/WebhookOperatorStore") {}

const toDelivery = (row: DeliveryRow): WebhookDeliveryRecord => ({
  deliveryId: row.delivery_id,
  eventId: row.event_id,
  eventType: row.event_type,
  subscriptionId: row.subscription_id,
  state: row.state,
  attemptCount: row.attempt_count,
  maxAttempts: row.max_attempts,
  nextAttemptAt: row.next_attempt_at,
  leaseOwner: row.lease_owner,
  leaseExpiresAt: row.lease_expires_at,
  lastAttemptAt: row.last_attempt_at,
  lastResponseStatus: row.last_response_status,
  lastErrorClass: row.last_error_class,
  failureReason: row.failure_reason,
  createdAt: row.created_at,
  updatedAt: row.updated_at
})

const toAttempt = (row: AttemptRow): WebhookAttemptRecord => ({
  attemptNumber: row.attempt_number,
  workerId: row.worker_id,
  startedAt: row.started_at,
  finishedAt: row.finished_at,
  durationMs: row.duration_ms,
  responseStatus: row.response_status,
  errorClass: row.error_class
})

const toRevision = (row: RevisionRow): WebhookRevision => ({
  revision: row.revision,
  change: row.change,
  state: row.state,
  readiness: row.readiness,
  changedBy: row.changed_by,
  reason: row.reason,
  createdAt: row.created_at
})

type RevisionChange = "created" | "readiness_confirmed" | "readiness_unconfirmed" | "activated" | "readiness_revoked"

export const makeWebhookOperatorStore = Effect.gen(function* () {
  const client = yield* PgClient
  const ids = yield* IdGenerator
  const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))
  const subscriptionRows = (operation: string) => decodeRows(SubscriptionRow, operation)
  const newSecret = () => generateSigningSecret((size) => randomBytes(size))

  const insertSecret = (subscriptionId: string, secret: string, at: Date) =>
    client.run(
      "webhooks.insertSecret",
      (sql) => sql`
        INSERT INTO webhook_signing_secrets (subscription_id, secret, created_at)
        VALUES (${subscriptionId}, ${secret}, ${at})`
    )

  /** The subscription, locked for the rest of the transaction. */
  const lockSubscription = (subscriptionId: WebhookSubscriptionId) =>
    client
      .run(
        "webhooks.lockSubscription",
        (sql) => sql`
          SELECT ${sql.unsafe(subscriptionColumns)} FROM webhook_subscriptions
          WHERE subscription_id = ${subscriptionId} FOR UPDATE`
      )
      .pipe(
        Effect.flatMap(subscriptionRows("webhooks.lockSubscription")),
        Effect.flatMap((rows) =>
          rows[0] === undefined ? Effect.fail(new UnknownSubscription({ subscriptionId })) : Effect.succeed(toSubscription(rows[0]))
        )
      )

  /** Writes the subscription's new state and readiness and its revision with provenance. */
  const writeRevision = (
    current: WebhookSubscriptionRecord,
    change: RevisionChange,
    next: { readonly state: WebhookSubscriptionRecord["state"]; readonly readiness: WebhookReadiness },
    provenance: { readonly by: string | null; readonly reason: string | null },
    at: Date
  ) =>
    Effect.gen(function* () {
      const revision = current.revision + 1
      const rows = yield* client
        .run(
          "webhooks.updateSubscription",
          (sql) => sql`
            UPDATE webhook_subscriptions
            SET state = ${next.state}, readiness = ${sql.json(next.readiness)}, revision = ${revision}, updated_at = ${at}
            WHERE subscription_id = ${current.subscriptionId}
            RETURNING ${sql.unsafe(subscriptionColumns)}`
        )
        .pipe(Effect.flatMap(subscriptionRows("webhooks.updateSubscription")))
      yield* client.run(
        "webhooks.insertRevision",
        (sql) => sql`
          INSERT INTO webhook_subscription_revisions
            (subscription_id, revision, change, state, readiness, changed_by, reason, created_at)
          VALUES (${current.subscriptionId}, ${revision}, ${change}, ${next.state}, ${sql.json(next.readiness)},
                  ${provenance.by}, ${provenance.reason}, ${at})`
      )
      const row = rows[0]
      if (row === undefined) return yield* Effect.die(new Error("UPDATE ... RETURNING returned no row"))
      return toSubscription(row)
    })

  const createSubscription = Effect.fn("WebhookOperatorStore.createSubscription")(function* (input: {
    readonly organizationId: OrganizationId
    readonly endpointUrl: string
    readonly createdBy?: string | null
  }) {
    const subscriptionId = WebhookSubscriptionId.make(yield* ids.next("webhook_subscription"))
    const secret = newSecret()
    const at = yield* now
    const subscription = yield* client.transactionally(
      Effect.gen(function* () {
        const organization = yield* client.run(
          "webhooks.organization",
          (sql) => sql`SELECT 1 FROM organizations WHERE organization_id = ${input.organizationId}`
        )
        if (organization.length === 0) return yield* new UnknownOrganization({ organizationId: input.organizationId })
        const rows = yield* client
          .run(
            "webhooks.createSubscription",
            (sql) => sql`
              INSERT INTO webhook_subscriptions
                (subscription_id, organization_id, endpoint_url, state, revision, readiness, created_at, updated_at)
              VALUES (${subscriptionId}, ${input.organizationId}, ${input.endpointUrl}, 'disabled', 1,
                      ${sql.json(INITIAL_WEBHOOK_READINESS)}, ${at}, ${at})
              RETURNING ${sql.unsafe(subscriptionColumns)}`
          )
          .pipe(Effect.flatMap(subscriptionRows("webhooks.createSubscription")))
        yield* client.run(
          "webhooks.insertRevision",
          (sql) => sql`
            INSERT INTO webhook_subscription_revisions
              (subscription_id, revision, change, state, readiness, changed_by, reason, created_at)
            VALUES (${subscriptionId}, 1, 'created', 'disabled', ${sql.json(INITIAL_WEBHOOK_READINESS)},
                    ${input.createdBy ?? null}, NULL, ${at})`
        )
        yield* insertSecret(subscriptionId, secret, at)
        const row = rows[0]
        if (row === undefined) return yield* Effect.die(new Error("INSERT ... RETURNING returned no row"))
        return toSubscription(row)
      })
    )
    return { subscription, secret }
  })

  const listSubscriptions = Effect.fn("WebhookOperatorStore.listSubscriptions")(function* (
    filter: { readonly organizationId?: OrganizationId } = {}
  ) {
    const organizationId = filter.organizationId
    const rows = yield* client
      .run(
        "webhooks.listSubscriptions",
        (sql) => sql`
          SELECT ${sql.unsafe(subscriptionColumns)} FROM webhook_subscriptions
          ${organizationId === undefined ? sql`` : sql`WHERE organization_id = ${organizationId}`}
          ORDER BY organization_id, created_at, subscription_id`
      )
      .pipe(Effect.flatMap(subscriptionRows("webhooks.listSubscriptions")))
    return rows.map(toSubscription)
  })

  const getSubscription = Effect.fn("WebhookOperatorStore.getSubscription")(function* (subscriptionId: WebhookSubscriptionId) {
    const rows = yield* client
      .run(
        "webhooks.getSubscription",
        (sql) => sql`SELECT ${sql.unsafe(subscriptionColumns)} FROM webhook_subscriptions WHERE subscription_id = ${subscriptionId}`
      )
      .pipe(Effect.flatMap(subscriptionRows("webhooks.getSubscription")))
    const row = rows[0]
    if (row === undefined) return yield* new UnknownSubscription({ subscriptionId })
    const revisions = yield* client
      .run(
        "webhooks.revisions",
        (sql) => sql`
          SELECT revision, change, state, readiness, changed_by, reason, created_at
          FROM webhook_subscription_revisions WHERE subscription_id = ${subscriptionId} ORDER BY revision`
      )
      .pipe(Effect.flatMap(decodeRows(RevisionRow, "webhooks.revisions")))
    return { subscription: toSubscription(row), revisions: revisions.map(toRevision) }
  })

  const setReadiness = Effect.fn("WebhookOperatorStore.setReadiness")(function* (input: {
    readonly subscriptionId: WebhookSubscriptionId
    readonly item: WebhookReadinessItem
    readonly confirmed: boolean
    readonly by?: string | null
  }) {
    const at = yield* now
    return yield* client.transactionally(
      Effect.gen(function* () {
        const current = yield* lockSubscription(input.subscriptionId)
        if (!input.confirmed && current.state === "active") {
          return yield* new ReadinessChangeRefused({ subscriptionId: input.subscriptionId, item: input.item })
        }
        const readiness: WebhookReadiness = {
          ...current.readiness,
          [input.item]: input.confirmed ? "confirmed" : INITIAL_WEBHOOK_READINESS[input.item]
        }
        return yield* writeRevision(
          current,
          input.confirmed ? "readiness_confirmed" : "readiness_unconfirmed",
          { state: current.state, readiness },
          { by: input.by ?? null, reason: null },
          at
        )
      })
    )
  })

  const activate = Effect.fn("WebhookOperatorStore.activate")(function* (input: {
    readonly subscriptionId: WebhookSubscriptionId
    readonly by: string
    readonly reason: string
  }) {
    const at = yield* now
    return yield* client.transactionally(
      Effect.gen(function* () {
        const current = yield* lockSubscription(input.subscriptionId)
        const missing = checkActivation(current.readiness)
        if (missing.length > 0) return yield* new ActivationRefused({ subscriptionId: input.subscriptionId, missing })
        return yield* writeRevision(
          current,
          "activated",
          { state: "active", readiness: current.readiness },
          { by: input.by, reason: input.reason },
          at
        )
      })
    )
  })

  const revokeReadiness = Effect.fn("WebhookOperatorStore.revokeReadiness")(function* (input: {
    readonly subscriptionId: WebhookSubscriptionId
    readonly by: string
    readonly reason: string
  }) {
    const at = yield* now
    return yield* client.transactionally(
      Effect.gen(function* () {
        // The subscription lock serialises with publishing (which reads active subscriptions FOR SHARE),
        // so no delivery for it can be created after this cancellation commits.
        const current = yield* lockSubscription(input.subscriptionId)
        const subscription = yield* writeRevision(
          current,
          "readiness_revoked",
          { state: "disabled", readiness: INITIAL_WEBHOOK_READINESS },
          { by: input.by, reason: input.reason },
          at
        )
        // Not SKIP LOCKED: a worker's lease or result commit in progress is waited for, then cancelled.
        const cancelled = yield* client.run(
          "webhooks.cancelDeliveries",
          (sql) => sql<Array<{ previous: string; stale: boolean }>>`
            WITH cancelled AS (
              SELECT delivery_id, state AS previous, (state = 'sending' AND lease_expires_at <= ${at}) AS stale
              FROM webhook_deliveries
              WHERE subscription_id = ${input.subscriptionId} AND state IN ('pending', 'sending')
              FOR UPDATE
            )
            UPDATE webhook_deliveries d
            SET state = 'cancelled', lease_owner = NULL, lease_expires_at = NULL, updated_at = ${at}
            FROM cancelled WHERE d.delivery_id = cancelled.delivery_id
            RETURNING cancelled.previous, cancelled.stale`
        )
        return {
          subscription,
          cancelled: {
            pending: cancelled.filter((row) => row.previous === "pending").length,
            sending: cancelled.filter((row) => row.previous === "sending" && !row.stale).length,
            staleSending: cancelled.filter((row) => row.previous === "sending" && row.stale).length
          }
        }
      })
    )
  })

  const rotateSecret = Effect.fn("WebhookOperatorStore.rotateSecret")(function* (subscriptionId: WebhookSubscriptionId) {
    const secret = newSecret()
    const at = yield* now
    yield* client.transactionally(
      Effect.gen(function* () {
        yield* lockSubscription(subscriptionId)
        yield* insertSecret(subscriptionId, secret, at)
      })
    )
    return secret
  })

  const deliveryRows = (operation: string) => decodeRows(DeliveryRow, operation)

  const listDeliveries = Effect.fn("WebhookOperatorStore.listDeliveries")(function* (
    filter: { readonly subscriptionId?: WebhookSubscriptionId; readonly state?: WebhookDeliveryState; readonly limit?: number } = {}
  ) {
    const { state, subscriptionId } = filter
    const rows = yield* client
      .run(
        "webhooks.listDeliveries",
        (sql) => sql`
          SELECT ${sql.unsafe(deliveryColumns)}
          FROM webhook_deliveries d JOIN webhook_events e ON e.event_id = d.event_id
          WHERE true
          ${subscriptionId === undefined ? sql`` : sql`AND d.subscription_id = ${subscriptionId}`}
          ${state === undefined ? sql`` : sql`AND d.state = ${state}`}
          ORDER BY d.created_at DESC, d.delivery_id
          LIMIT ${filter.limit ?? 1000}`
      )
      .pipe(Effect.flatMap(deliveryRows("webhooks.listDeliveries")))
    return rows.map(toDelivery)
  })

  const findDelivery = (deliveryId: WebhookDeliveryId, lock: boolean) =>
    client
      .run(
        "webhooks.findDelivery",
        (sql) => sql`
          SELECT ${sql.unsafe(deliveryColumns)}
          FROM webhook_deliveries d JOIN webhook_events e ON e.event_id = d.event_id
          WHERE d.delivery_id = ${deliveryId}
          ${lock ? sql`FOR UPDATE OF d` : sql``}`
      )
      .pipe(
        Effect.flatMap(deliveryRows("webhooks.findDelivery")),
        Effect.flatMap((rows) =>
          rows[0] === undefined ? Effect.fail(new UnknownDelivery({ deliveryId })) : Effect.succeed(toDelivery(rows[0]))
        )
      )

  const showDelivery = Effect.fn("WebhookOperatorStore.showDelivery")(function* (deliveryId: WebhookDeliveryId) {
    const delivery = yield* findDelivery(deliveryId, false)
    const attempts = yield* client
      .run(
        "webhooks.attempts",
        (sql) => sql`
          SELECT attempt_number, worker_id, started_at, finished_at, duration_ms, response_status, error_class
          FROM webhook_delivery_attempts WHERE delivery_id = ${deliveryId} ORDER BY attempt_number`
      )
      .pipe(Effect.flatMap(decodeRows(AttemptRow, "webhooks.attempts")))
    return { delivery, attempts: attempts.map(toAttempt) }
  })

  const redeliver = Effect.fn("WebhookOperatorStore.redeliver")(function* (deliveryId: WebhookDeliveryId) {
    const at = yield* now
    return yield* client.transactionally(
      Effect.gen(function* () {
        const delivery = yield* findDelivery(deliveryId, true)
        if (delivery.state !== "failed") {
          return yield* new RedeliveryRefused({ deliveryId, why: `it is ${delivery.state}; only a failed delivery is redelivered` })
        }
        const subscription = yield* lockSubscription(delivery.subscriptionId)
        if (subscription.state !== "active" && delivery.eventType !== "webhook.endpoint_test") {
          return yield* new RedeliveryRefused({ deliveryId, why: `its subscription ${subscription.subscriptionId} is disabled` })
        }
        yield* client.run(
          "webhooks.redeliver",
          (sql) => sql`
            UPDATE webhook_deliveries
            SET state = 'pending', next_attempt_at = ${at}, schedule_offset = attempt_count, failure_reason = NULL,
                updated_at = ${at}
            WHERE delivery_id = ${deliveryId}`
        )
        return yield* findDelivery(deliveryId, false)
      })
    )
  })

  const createEndpointTest = Effect.fn("WebhookOperatorStore.createEndpointTest")(function* (
    subscriptionId: WebhookSubscriptionId
  ) {
    const eventId = WebhookEventId.make(yield* ids.next("webhook_event"))
    const deliveryId = WebhookDeliveryId.make(yield* ids.next("webhook_delivery"))
    const at = yield* now
    yield* client.transactionally(
      Effect.gen(function* () {
        const subscription = yield* lockSubscription(subscriptionId)
        const event = makeEndpointTestEvent({ id: eventId, occurredAt: at, organizationId: subscription.organizationId })
        yield* client.run(
          "webhooks.insertTestEvent",
          (sql) => sql`
            INSERT INTO webhook_events (event_id, event_type, organization_id, body, occurred_at, created_at)
            VALUES (${eventId}, ${event.type}, ${subscription.organizationId},
                    ${Buffer.from(serializeWebhookEvent(event), "utf8")}, ${at}, ${at})`
        )
        yield* client.run(
          "webhooks.insertTestDelivery",
          (sql) => sql`
            INSERT INTO webhook_deliveries
              (delivery_id, event_id, subscription_id, state, max_attempts, next_attempt_at, created_at, updated_at)
            VALUES (${deliveryId}, ${eventId}, ${subscriptionId}, 'pending', 1, ${at}, ${at}, ${at})`
        )
      })
    )
    return { eventId, deliveryId }
  })

  const findTranscriptOrganization = Effect.fn("WebhookOperatorStore.findTranscriptOrganization")(function* (
    encounterId: EncounterId,
    documentId: DocumentId
  ) {
    const rows = yield* client.run(
      "webhooks.findTranscript",
      (sql) => sql<Array<{ organization_id: string; document_encounter: string | null; has_transcript: boolean }>>`
        SELECT e.organization_id, d.encounter_id AS document_encounter,
               EXISTS (SELECT 1 FROM transcripts t WHERE t.document_id = ${documentId}) AS has_transcript
        FROM encounters e LEFT JOIN documents d ON d.document_id = ${documentId}
        WHERE e.encounter_id = ${encounterId}`
    )
    const row = rows[0]
    const refuse = (why: string) => new UnknownTranscript({ encounterId, documentId, why })
    if (row === undefined) return yield* refuse("no such encounter")
    if (row.document_encounter === null) return yield* refuse("no such document")
    if (row.document_encounter !== encounterId) return yield* refuse("the document belongs to another encounter")
    if (!row.has_transcript) return yield* refuse("the document has no final transcript")
    return Schema.decodeSync(OrganizationId)(row.organization_id)
  })

  return WebhookOperatorStore.of({
    createSubscription,
    listSubscriptions,
    getSubscription,
    setReadiness,
    activate,
    revokeReadiness,
    rotateSecret,
    listDeliveries,
    showDelivery,
    redeliver,
    createEndpointTest,
    findTranscriptOrganization
  })
})

export const WebhookOperatorStoreLive: Layer.Layer<WebhookOperatorStore, never, PgClient | IdGenerator> = Layer.effect(
  WebhookOperatorStore,
  makeWebhookOperatorStore
)
