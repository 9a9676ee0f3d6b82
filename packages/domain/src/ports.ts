import { Context, Data, type Effect, type Option } from "effect"
import type { DocumentId, EncounterId, OrganizationId } from "./ids.js"
import type {
  ApiKeyRecord,
  DisclosureEvent,
  EncounterListQuery,
  EncounterPage,
  OrganizationRecord,
  RecordingReference,
  StoredDocument,
  StoredEncounter,
  StoredEncounterHead
} from "./records.js"
import type { PublicFinalTranscript } from "./resources.js"

/**
 * The ports of the domain. Adapters (PostgreSQL, in-memory, object storage) implement them;
 * the domain only names them. The clock port is Effect's own `Clock` service, so tests
 * drive time with `TestClock`.
 */

/** The store that holds keys and clinical data cannot be reached (answered as 503 `digest_key_unavailable`). */
export class StoreUnavailable extends Data.TaggedError("StoreUnavailable")<{
  readonly operation: string
  readonly cause?: unknown
}> {}

/** The audio storage cannot be reached (503 `audio_storage_unavailable`). */
export class AudioStorageUnavailable extends Data.TaggedError("AudioStorageUnavailable")<{
  readonly operation: string
  readonly cause?: unknown
}> {}

/** What `findEncounterAndDocument` found; each part is none when its id names nothing. */
export interface EncounterAndDocument {
  readonly encounter: Option.Option<StoredEncounterHead>
  readonly document: Option.Option<StoredDocument>
  /** Also none when it was not asked for. Turns in chronological order. */
  readonly finalTranscript: Option.Option<PublicFinalTranscript>
}

/** What a document route reads with the document (`findEncounterAndDocument`). */
export interface DocumentReads {
  /** The document's finalized transcript too. */
  readonly withFinalTranscript: boolean
  /**
   * The route asks `AudioStorage.exists` about the document's recording next. A repository
   * whose store also holds the audio objects may read whether the object is there with the
   * document, for that storage to answer from without a second read.
   */
  readonly forAudioUrl?: boolean
}

export class EncounterRepository extends Context.Service<EncounterRepository, {
  /** Clinical encounters of one organization, `created_at` in [startAt, endAt), ordered and paged, with the exact total. */
  readonly listForOrganization: (
    organizationId: OrganizationId,
    query: EncounterListQuery
  ) => Effect.Effect<EncounterPage, StoreUnavailable>
  /** Any encounter by id, whatever its organization or data class: the policy decides. */
  readonly findEncounter: (encounterId: EncounterId) => Effect.Effect<Option.Option<StoredEncounter>, StoreUnavailable>
  /**
   * A document route's reads at once: the encounter (without its documents) and the
   * document, each by its own id whatever the other's, and with `withFinalTranscript` the
   * document's finalized transcript. The policy checks them in the contract's order.
   */
  readonly findEncounterAndDocument: (
    encounterId: EncounterId,
    documentId: DocumentId,
    reads: DocumentReads
  ) => Effect.Effect<EncounterAndDocument, StoreUnavailable>
}>()("@clinical-api/domain/EncounterRepository") {}

export class ApiKeyStore extends Context.Service<ApiKeyStore, {
  /** The key whose stored digest equals `digest` (lowercase hex HMAC-SHA256). */
  readonly findByDigest: (digest: string) => Effect.Effect<Option.Option<ApiKeyRecord>, StoreUnavailable>
}>()("@clinical-api/domain/ApiKeyStore") {}

export class OrganizationStore extends Context.Service<OrganizationStore, {
  readonly findById: (
    organizationId: OrganizationId
  ) => Effect.Effect<Option.Option<OrganizationRecord>, StoreUnavailable>
}>()("@clinical-api/domain/OrganizationStore") {}

export class DisclosureRecorder extends Context.Service<DisclosureRecorder, {
  /**
   * Records the events durably. Alone, it succeeds only once they are committed. Within a
   * `UnitOfWork` they may be written as late as its commit: the unit of work then succeeds
   * only once they are committed. Either way a caller that answers after success has
   * disclosed nothing unrecorded.
   */
  readonly record: (events: ReadonlyArray<DisclosureEvent>) => Effect.Effect<void, StoreUnavailable>
}>()("@clinical-api/domain/DisclosureRecorder") {}

export class UnitOfWork extends Context.Service<UnitOfWork, {
  /**
   * Runs `effect` in one store transaction: the reads and the disclosure they record commit
   * together or not at all, and it succeeds only once they are committed. The transaction may
   * be shared with units of work running at the same time (group commit): a unit that fails
   * leaves none of its own records, and a store failure fails every unit sharing it.
   */
  readonly transactionally: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | StoreUnavailable, R>
}>()("@clinical-api/domain/UnitOfWork") {}

export interface SignedAudioUrl {
  readonly url: string
  readonly expiresAt: Date
}

export class AudioStorage extends Context.Service<AudioStorage, {
  readonly put: (
    reference: RecordingReference,
    bytes: Uint8Array
  ) => Effect.Effect<void, AudioStorageUnavailable>
  readonly exists: (reference: RecordingReference) => Effect.Effect<boolean, AudioStorageUnavailable>
  /** A URL that serves the object until `expiresAt` and not after. */
  readonly signUrl: (
    reference: RecordingReference,
    lifetimeSeconds: number
  ) => Effect.Effect<SignedAudioUrl, AudioStorageUnavailable>
}>()("@clinical-api/domain/AudioStorage") {}

export type IdKind = "disclosure" | "request" | "api_key" | "webhook_event" | "webhook_delivery" | "webhook_subscription"

export class IdGenerator extends Context.Service<IdGenerator, {
  /** A new unique opaque id for `kind` (webhook events are `evt_...`, deliveries `dlv_...`). */
  readonly next: (kind: IdKind) => Effect.Effect<string>
}>()("@clinical-api/domain/IdGenerator") {}
