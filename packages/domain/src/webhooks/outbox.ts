import { Clock, Context, Effect, Layer } from "effect"
import { type DocumentId, type EncounterId, type OrganizationId, WebhookEventId } from "../ids.js"
import { IdGenerator, type StoreUnavailable } from "../ports.js"
import type { TranscriptReadyEvent } from "./event.js"

export interface PublishTranscriptReadyInput {
  /** The id the event gets if it is new; ignored when the (encounter, document) event already exists. */
  readonly eventId: WebhookEventId
  readonly organizationId: OrganizationId
  readonly encounterId: EncounterId
  readonly documentId: DocumentId
  readonly occurredAt: Date
}

export interface PublishTranscriptReadyResult {
  /** The stored event: the new one, or the one published earlier for this encounter and document. */
  readonly event: TranscriptReadyEvent
  /** False when the event already existed: nothing was written. */
  readonly created: boolean
  /** Deliveries created by this call (0 when `created` is false). */
  readonly deliveries: number
}

/**
 * The transactional outbox of webhook events (port; the storage adapter implements it).
 *
 * `publishTranscriptReady`, in ONE transaction:
 * - stores the event, unique per (encounter, document): publishing the same pair again returns
 *   the stored event with `created: false` and writes nothing, so a transcript is announced once
 *   whatever the number of callers or retries;
 * - stores its exact body bytes (`serializeWebhookEvent`), which every attempt sends unchanged;
 * - creates one `pending` delivery (a `dlv_...` id from IdGenerator, next attempt now, attempt
 *   count 0) per subscription of the organization that is `active` at that moment, subscribed
 *   to `recording.transcript_ready`. Disabled subscriptions get none, so with the default
 *   (no subscription activated) an event is recorded and nothing is ever sent.
 *
 * Whether deliveries are actually sent is the delivery worker's switch, not the outbox's.
 */
export class WebhookOutbox extends Context.Service<WebhookOutbox, {
  readonly publishTranscriptReady: (
    input: PublishTranscriptReadyInput
  ) => Effect.Effect<PublishTranscriptReadyResult, StoreUnavailable>
}>()("@clinical-api/domain/WebhookOutbox") {}

export interface TranscriptReadyNotice {
  readonly organizationId: OrganizationId
  readonly encounterId: EncounterId
  readonly documentId: DocumentId
  /** When the transcript became ready; the current clock time when omitted. */
  readonly occurredAt?: Date
}

/**
 * What the services that finalize transcripts call once a transcript is ready. It names the
 * event (`evt_...` from IdGenerator) and hands it to the outbox; it never sends anything itself.
 */
export class TranscriptReadyPublisher extends Context.Service<TranscriptReadyPublisher, {
  readonly publish: (notice: TranscriptReadyNotice) => Effect.Effect<PublishTranscriptReadyResult, StoreUnavailable>
}>()("@clinical-api/domain/TranscriptReadyPublisher") {
  static readonly Live = Layer.effect(
    TranscriptReadyPublisher,
    Effect.gen(function* () {
      const outbox = yield* WebhookOutbox
      const ids = yield* IdGenerator
      const publish = Effect.fn("TranscriptReadyPublisher.publish")(function* (notice: TranscriptReadyNotice) {
        const occurredAt = notice.occurredAt ?? new Date(yield* Clock.currentTimeMillis)
        const eventId = WebhookEventId.make(yield* ids.next("webhook_event"))
        yield* Effect.annotateCurrentSpan({ encounterId: notice.encounterId, documentId: notice.documentId })
        return yield* outbox.publishTranscriptReady({
          eventId,
          organizationId: notice.organizationId,
          encounterId: notice.encounterId,
          documentId: notice.documentId,
          occurredAt
        })
      })
      return { publish }
    })
  )
}
