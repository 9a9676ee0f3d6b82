import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import type { Caller } from "./access/access-policy.js"
import { PublicApiConfig } from "./config.js"
import { orRefuse, PublicApiError } from "./errors.js"
import { DisclosureEventId, DocumentId, EncounterId, type PatientId, type RequestId } from "./ids.js"
import { parseListQuery, type QueryPairs, rejectQueryKeys } from "./list-query.js"
import {
  checkAudioObjectExists,
  checkAudioTarget,
  checkDocumentDetailTarget,
  checkDocumentInEncounter,
  checkEncounterAccess,
  checkFinalTranscript,
  checkTranscriptTarget
} from "./lookup.js"
import {
  AudioStorage,
  type AudioStorageUnavailable,
  DisclosureRecorder,
  type DocumentReads,
  type EncounterAndDocument,
  EncounterRepository,
  IdGenerator,
  type StoreUnavailable,
  UnitOfWork
} from "./ports.js"
import {
  presentAudioResponse,
  presentDetailResponse,
  presentDocumentDetailResponse,
  presentListResponse,
  presentTranscriptResponse
} from "./present.js"
import type { DisclosureEvent, EncounterListQuery, StoredEncounter, StoredEncounterHead } from "./records.js"
import type {
  PublicDocumentAudioResponse,
  PublicDocumentDetailResponse,
  PublicDocumentTranscriptResponse,
  PublicEncounterDetailResponse,
  PublicEncounterListResponse
} from "./resources.js"
import type { OperationId } from "./routes.js"

/** What the domain needs of an HTTP request besides its caller: nothing of the transport, all of the input. */
export interface PublicRequest {
  /** The id the service made for this request; never the caller's. */
  readonly requestId: RequestId
  /** The caller's own request id (its `X-Request-Id` when valid), or null. */
  readonly callerRequestId: string | null
  /** The query as ordered key/value pairs after percent-decoding, repeated keys kept. */
  readonly query: QueryPairs
}

export interface EncounterPath {
  readonly encounterId: string
}

export interface DocumentPath extends EncounterPath {
  readonly documentId: string
}

/**
 * The five operations of the contract, each run for a caller the access policy authorized for
 * it (authentication, route, approval and scopes are already checked), then in the contract's
 * order: query, lookup, the route's own checks. The disclosure events are recorded in the same
 * unit of work as the read, so nothing is answered unrecorded.
 */
export class PublicApi extends Context.Service<PublicApi, {
  readonly listPublicEncounters: (
    caller: Caller,
    request: PublicRequest
  ) => Effect.Effect<PublicEncounterListResponse, PublicApiError>
  readonly getPublicEncounter: (
    caller: Caller,
    request: PublicRequest,
    path: EncounterPath
  ) => Effect.Effect<PublicEncounterDetailResponse, PublicApiError>
  readonly getPublicDocument: (
    caller: Caller,
    request: PublicRequest,
    path: DocumentPath
  ) => Effect.Effect<PublicDocumentDetailResponse, PublicApiError>
  readonly getPublicDocumentTranscript: (
    caller: Caller,
    request: PublicRequest,
    path: DocumentPath
  ) => Effect.Effect<PublicDocumentTranscriptResponse, PublicApiError>
  readonly getPublicDocumentAudio: (
    caller: Caller,
    request: PublicRequest,
    path: DocumentPath
  ) => Effect.Effect<PublicDocumentAudioResponse, PublicApiError>
}>()("@clinical-api/domain/PublicApi") {}

const storeUnavailable = (cause: StoreUnavailable): PublicApiError =>
  new PublicApiError({ reasonCode: "digest_key_unavailable", field: null, detail: `store unavailable during ${cause.operation}` })

const audioStorageUnavailable = (cause: AudioStorageUnavailable): PublicApiError =>
  new PublicApiError({ reasonCode: "audio_storage_unavailable", field: null, detail: `audio storage unavailable during ${cause.operation}` })

/**
 * A caller authorized for another operation is a defect of whoever called the use case: its
 * route, allowlist and scopes were checked for that other operation.
 */
const requireCallerOf = (caller: Caller, operation: OperationId): Effect.Effect<void> =>
  caller.operationId === operation
    ? Effect.void
    : Effect.die(new Error(`A caller authorized for ${caller.operationId} cannot run ${operation}`))

/**
 * Path parameters are opaque; one that is not a valid id names nothing, so it is simply not
 * found. Neither is one holding U+0000: no store can hold it (PostgreSQL text refuses NUL, so
 * asking would fail as if the store were down: a 503 for what is only a hostile id).
 */
const storableId = <A>(decode: (input: unknown) => Option.Option<A>) => (raw: string): Option.Option<A> =>
  raw.includes("\u0000") ? Option.none() : decode(raw)
const decodeEncounterId = storableId(Schema.decodeUnknownOption(EncounterId))
const decodeDocumentId = storableId(Schema.decodeUnknownOption(DocumentId))

const nothingFound: EncounterAndDocument = { encounter: Option.none(), document: Option.none(), finalTranscript: Option.none() }

const documentReads: DocumentReads = { withFinalTranscript: false, forAudioUrl: false }
const transcriptReads: DocumentReads = { withFinalTranscript: true, forAudioUrl: false }
const audioUrlReads: DocumentReads = { withFinalTranscript: false, forAudioUrl: true }

const patientIdOf = (encounter: StoredEncounterHead) => encounter.patient?.patient_id ?? null

export const PublicApiLive: Layer.Layer<
  PublicApi,
  never,
  EncounterRepository | DisclosureRecorder | UnitOfWork | AudioStorage | IdGenerator | PublicApiConfig
> = Layer.effect(
  PublicApi,
  Effect.gen(function*() {
    const repository = yield* EncounterRepository
    const disclosures = yield* DisclosureRecorder
    const unitOfWork = yield* UnitOfWork
    const audioStorage = yield* AudioStorage
    const ids = yield* IdGenerator
    const config = yield* PublicApiConfig

    const disclosureEvent = Effect.fnUntraced(function*(
      caller: Caller,
      request: PublicRequest,
      disclosed: { encounterId: EncounterId; documentId: DocumentId | null; patientId: PatientId | null },
      occurredAt?: Date
    ) {
      const eventId = DisclosureEventId.make(yield* ids.next("disclosure"))
      const event: DisclosureEvent = {
        eventId,
        occurredAt: occurredAt ?? new Date(yield* Clock.currentTimeMillis),
        organizationId: caller.organizationId,
        apiKeyId: caller.apiKeyId,
        operationId: caller.operationId,
        encounterId: disclosed.encounterId,
        documentId: disclosed.documentId,
        patientId: disclosed.patientId,
        requestId: request.requestId,
        callerRequestId: request.callerRequestId
      }
      return event
    })

    const record = (events: ReadonlyArray<DisclosureEvent>) =>
      events.length === 0 ? Effect.void : disclosures.record(events)

    /** Reads and records in one unit of work; any store failure becomes the contract's 503. */
    const readAndRecord = <A>(effect: Effect.Effect<A, PublicApiError | StoreUnavailable | AudioStorageUnavailable>) =>
      unitOfWork.transactionally(effect).pipe(
        Effect.catchTags({
          StoreUnavailable: (cause) => Effect.fail(storeUnavailable(cause)),
          AudioStorageUnavailable: (cause) => Effect.fail(audioStorageUnavailable(cause))
        })
      )

    const findAccessibleEncounter = Effect.fnUntraced(function*(caller: Caller, rawEncounterId: string) {
      const encounterId = decodeEncounterId(rawEncounterId)
      const encounter = Option.isNone(encounterId)
        ? Option.none<StoredEncounter>()
        : yield* repository.findEncounter(encounterId.value)
      return yield* orRefuse(checkEncounterAccess(caller.organizationId, encounter))
    })

    /**
     * A document route's encounter and document (and, when asked, its transcript), read in one
     * go, then checked in the contract's order: what a refusal answers is what reading them one
     * after the other would answer. Nothing read is disclosed before every check has passed.
     */
    const findAccessibleDocument = Effect.fnUntraced(function*(caller: Caller, path: DocumentPath, reads: DocumentReads) {
      const encounterId = decodeEncounterId(path.encounterId)
      const documentId = decodeDocumentId(path.documentId)
      const found: EncounterAndDocument = Option.isNone(encounterId)
        ? nothingFound
        : Option.isNone(documentId)
        ? { ...nothingFound, encounter: yield* repository.findEncounter(encounterId.value) }
        : yield* repository.findEncounterAndDocument(encounterId.value, documentId.value, reads)
      const encounter = yield* orRefuse(checkEncounterAccess(caller.organizationId, found.encounter))
      const document = yield* orRefuse(checkDocumentInEncounter(encounter, found.document))
      return { encounter, document, finalTranscript: found.finalTranscript }
    })

    /** The disclosure of one document, recorded in the read's unit of work. */
    const recordDocumentDisclosure = Effect.fnUntraced(function*(
      caller: Caller,
      request: PublicRequest,
      encounter: StoredEncounterHead,
      document: { readonly documentId: DocumentId }
    ) {
      const event = yield* disclosureEvent(caller, request, {
        encounterId: encounter.encounterId,
        documentId: document.documentId,
        patientId: patientIdOf(encounter)
      })
      yield* record([event])
    })

    const readPage = Effect.fnUntraced(function*(caller: Caller, request: PublicRequest, listQuery: EncounterListQuery) {
      const page = yield* repository.listForOrganization(caller.organizationId, listQuery)
      const listedAt = new Date(yield* Clock.currentTimeMillis)
      const events: Array<DisclosureEvent> = []
      for (const encounter of page.items) {
        events.push(
          yield* disclosureEvent(caller, request, {
            encounterId: encounter.encounterId,
            documentId: null,
            patientId: patientIdOf(encounter)
          }, listedAt)
        )
      }
      yield* record(events)
      return presentListResponse(page, listQuery)
    })

    const listPublicEncounters = Effect.fnUntraced(function*(caller: Caller, request: PublicRequest) {
      yield* requireCallerOf(caller, "listPublicEncounters")
      const listQuery = yield* orRefuse(parseListQuery(request.query))
      return yield* readAndRecord(readPage(caller, request, listQuery))
    })

    const readEncounter = Effect.fnUntraced(function*(caller: Caller, request: PublicRequest, path: EncounterPath) {
      const encounter = yield* findAccessibleEncounter(caller, path.encounterId)
      yield* record([
        yield* disclosureEvent(caller, request, {
          encounterId: encounter.encounterId,
          documentId: null,
          patientId: patientIdOf(encounter)
        })
      ])
      return presentDetailResponse(encounter)
    })

    const getPublicEncounter = Effect.fnUntraced(function*(caller: Caller, request: PublicRequest, path: EncounterPath) {
      yield* requireCallerOf(caller, "getPublicEncounter")
      yield* orRefuse(rejectQueryKeys(request.query))
      return yield* readAndRecord(readEncounter(caller, request, path))
    })

    const readDocument = Effect.fnUntraced(function*(caller: Caller, request: PublicRequest, path: DocumentPath) {
      const { document: found, encounter } = yield* findAccessibleDocument(caller, path, documentReads)
      const document = yield* orRefuse(checkDocumentDetailTarget(found))
      yield* recordDocumentDisclosure(caller, request, encounter, document)
      return presentDocumentDetailResponse(document)
    })

    const getPublicDocument = Effect.fnUntraced(function*(caller: Caller, request: PublicRequest, path: DocumentPath) {
      yield* requireCallerOf(caller, "getPublicDocument")
      yield* orRefuse(rejectQueryKeys(request.query))
      return yield* readAndRecord(readDocument(caller, request, path))
    })

    const readTranscript = Effect.fnUntraced(function*(caller: Caller, request: PublicRequest, path: DocumentPath) {
      const { document, encounter, finalTranscript } = yield* findAccessibleDocument(caller, path, transcriptReads)
      yield* orRefuse(checkTranscriptTarget(document))
      const transcript = yield* orRefuse(checkFinalTranscript(finalTranscript))
      yield* recordDocumentDisclosure(caller, request, encounter, document)
      return presentTranscriptResponse(document, transcript)
    })

    const getPublicDocumentTranscript = Effect.fnUntraced(function*(caller: Caller, request: PublicRequest, path: DocumentPath) {
      yield* requireCallerOf(caller, "getPublicDocumentTranscript")
      yield* orRefuse(rejectQueryKeys(request.query))
      return yield* readAndRecord(readTranscript(caller, request, path))
    })

    const readAudioUrl = Effect.fnUntraced(function*(caller: Caller, request: PublicRequest, path: DocumentPath) {
      const { document, encounter } = yield* findAccessibleDocument(caller, path, audioUrlReads)
      const recording = yield* orRefuse(checkAudioTarget(document))
      yield* orRefuse(checkAudioObjectExists(yield* audioStorage.exists(recording)))
      const signed = yield* audioStorage.signUrl(recording, config.audioUrlTtlSeconds)
      yield* recordDocumentDisclosure(caller, request, encounter, document)
      return presentAudioResponse(signed)
    })

    const getPublicDocumentAudio = Effect.fnUntraced(function*(caller: Caller, request: PublicRequest, path: DocumentPath) {
      yield* requireCallerOf(caller, "getPublicDocumentAudio")
      yield* orRefuse(rejectQueryKeys(request.query))
      return yield* readAndRecord(readAudioUrl(caller, request, path))
    })

    return PublicApi.of({
      listPublicEncounters,
      getPublicEncounter,
      getPublicDocument,
      getPublicDocumentTranscript,
      getPublicDocumentAudio
    })
  })
)
