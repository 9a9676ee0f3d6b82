import { Clock, Context, Effect, FiberRef, Layer, Option, Schema } from "effect"
import { AccessPolicy, type Caller } from "./access/access-policy.js"
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

/** What the domain needs of an HTTP request: nothing of the transport, all of the input. */
export interface PublicRequest {
  readonly requestId: RequestId
  /** The raw `Authorization` header, as received. */
  readonly authorization: string | undefined
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
 * The caller of the request the current fiber serves, once authenticated (`null` before).
 * Adapters read it after a use case ran (success or failure) to log the organization; the
 * rules never do. A plain value, not an Option: setting a FiberRef compares the old value with
 * the new through `Equal`, and an Option of a plain object is hashed for that by a random
 * number kept in a WeakMap, an entry per request for the collector to sweep.
 */
export const currentCaller: FiberRef.FiberRef<Caller | null> = FiberRef.unsafeMake<Caller | null>(null)

/**
 * A use case of the public API. Alone it answers the response; given `answer`, it answers what
 * `answer` makes of the response (a server's JSON text of it), made inside the read's unit of
 * work, before the unit waits for its commit. A group commit holds every member until its last
 * one is done, and the objects a member still holds through that wait (its rows, its
 * response) are what V8's scavenges copy and then promote to the old generation; its text is
 * one string. `answer` only computes: nothing leaves before the
 * commit, and a defect in it fails the unit of work, which then records nothing.
 */
export type PublicUseCase<Args extends ReadonlyArray<unknown>, A> = <B = A>(
  ...args: [...Args, answer?: (response: A) => B]
) => Effect.Effect<B, PublicApiError>

/**
 * The five operations of the contract, each in the full order of checks: authentication,
 * route, approval, scopes, query, lookup, the route's own checks; then the disclosure events
 * are recorded in the same unit of work as the read, so nothing is answered unrecorded.
 */
export class PublicApi extends Context.Tag("@clinical-api/domain/PublicApi")<
  PublicApi,
  {
    readonly listPublicEncounters: PublicUseCase<[request: PublicRequest], PublicEncounterListResponse>
    readonly getPublicEncounter: PublicUseCase<[request: PublicRequest, path: EncounterPath], PublicEncounterDetailResponse>
    readonly getPublicDocument: PublicUseCase<[request: PublicRequest, path: DocumentPath], PublicDocumentDetailResponse>
    readonly getPublicDocumentTranscript: PublicUseCase<
      [request: PublicRequest, path: DocumentPath],
      PublicDocumentTranscriptResponse
    >
    readonly getPublicDocumentAudio: PublicUseCase<[request: PublicRequest, path: DocumentPath], PublicDocumentAudioResponse>
  }
>() {}

const storeUnavailable = (cause: StoreUnavailable): PublicApiError =>
  new PublicApiError({ reasonCode: "digest_key_unavailable", field: null, detail: `store unavailable during ${cause.operation}` })

const audioStorageUnavailable = (cause: AudioStorageUnavailable): PublicApiError =>
  new PublicApiError({ reasonCode: "audio_storage_unavailable", field: null, detail: `audio storage unavailable during ${cause.operation}` })

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

export const PublicApiLive = Layer.effect(
  PublicApi,
  Effect.gen(function*() {
    const accessPolicy = yield* AccessPolicy
    const repository = yield* EncounterRepository
    const disclosures = yield* DisclosureRecorder
    const unitOfWork = yield* UnitOfWork
    const audioStorage = yield* AudioStorage
    const ids = yield* IdGenerator
    const config = yield* PublicApiConfig

    // The steps below that every use case shares are plain generator functions: a use case
    // delegates to them with `yield*`, which the Effect runtime never sees, where an
    // `Effect.fnUntraced` call is three operations of the fiber's run loop.

    function* authorize(request: PublicRequest, operation: OperationId) {
      const caller = yield* accessPolicy.authorize(request.authorization, operation)
      yield* FiberRef.set(currentCaller, caller)
      return caller
    }

    /** Authorization, then the query rules of a route that takes no query. */
    function* admit(request: PublicRequest, operation: OperationId) {
      const caller = yield* authorize(request, operation)
      yield* orRefuse(rejectQueryKeys(request.query))
      return caller
    }

    function* disclosureEvent(
      caller: Caller,
      request: PublicRequest,
      operation: OperationId,
      disclosed: { encounterId: EncounterId; documentId: DocumentId | null; patientId: PatientId | null },
      occurredAt?: Date
    ) {
      const eventId = DisclosureEventId.make(yield* ids.next("disclosure"))
      const event: DisclosureEvent = {
        eventId,
        occurredAt: occurredAt ?? new Date(yield* Clock.currentTimeMillis),
        organizationId: caller.organizationId,
        apiKeyId: caller.apiKeyId,
        operationId: operation,
        encounterId: disclosed.encounterId,
        documentId: disclosed.documentId,
        patientId: disclosed.patientId,
        requestId: request.requestId
      }
      return event
    }

    const record = (events: ReadonlyArray<DisclosureEvent>) =>
      events.length === 0 ? Effect.void : disclosures.record(events)

    /**
     * Reads and records in one unit of work, and makes the answer in it (`PublicUseCase`); any
     * store failure becomes the contract's 503.
     */
    const readAndRecord = <A, B>(
      effect: Effect.Effect<A, PublicApiError | StoreUnavailable | AudioStorageUnavailable>,
      answer: ((response: A) => B) | undefined
    ) => {
      // Without `answer`, B is A: the default of `PublicUseCase`'s type parameter.
      const answered = answer === undefined
        ? effect as unknown as Effect.Effect<B, PublicApiError | StoreUnavailable | AudioStorageUnavailable>
        : Effect.map(effect, answer)
      return unitOfWork.transactionally(answered).pipe(
        Effect.catchTags({ StoreUnavailable: (cause) => Effect.fail(storeUnavailable(cause)), AudioStorageUnavailable: (cause) => Effect.fail(audioStorageUnavailable(cause)) })
      )
    }

    function* findAccessibleEncounter(caller: Caller, rawEncounterId: string) {
      const encounterId = decodeEncounterId(rawEncounterId)
      const encounter = Option.isNone(encounterId)
        ? Option.none<StoredEncounter>()
        : yield* repository.findEncounter(encounterId.value)
      return yield* orRefuse(checkEncounterAccess(caller.organizationId, encounter))
    }

    /**
     * A document route's encounter and document (and, when asked, its transcript), read in one
     * go, then checked in the contract's order: what a refusal answers is what reading them one
     * after the other would answer. Nothing read is disclosed before every check has passed.
     */
    function* findAccessibleDocument(caller: Caller, path: DocumentPath, reads: DocumentReads) {
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
    }

    const patientIdOf = (encounter: StoredEncounterHead) => encounter.patient?.patient_id ?? null

    // On the request path: untraced, as a span costs about 12 µs per call even with no tracer
    // configured, some 4% of the CPU of a detail read.
    //
    // Each use case reads and records through a generator function made once, here, never one
    // made per request: V8 gives every new generator function a map of its own in the old
    // generation, and that map keeps the function, and all it closes over, alive through every
    // scavenge until the next full collection.
    const readPage = Effect.fnUntraced(function*(caller: Caller, request: PublicRequest, listQuery: EncounterListQuery) {
      const operation = "listPublicEncounters"
      const page = yield* repository.listForOrganization(caller.organizationId, listQuery)
      const listedAt = new Date(yield* Clock.currentTimeMillis)
      const events: Array<DisclosureEvent> = []
      for (const encounter of page.items) {
        events.push(yield* disclosureEvent(caller, request, operation, {
          encounterId: encounter.encounterId,
          documentId: null,
          patientId: patientIdOf(encounter)
        }, listedAt))
      }
      yield* record(events)
      return presentListResponse(page, listQuery)
    })

    const listPublicEncounters = Effect.fnUntraced(function*<B>(
      request: PublicRequest,
      answer?: (response: PublicEncounterListResponse) => B
    ) {
      const caller = yield* authorize(request, "listPublicEncounters")
      const listQuery = yield* orRefuse(parseListQuery(request.query))
      return yield* readAndRecord(readPage(caller, request, listQuery), answer)
    })

    const readEncounter = Effect.fnUntraced(function*(caller: Caller, request: PublicRequest, path: EncounterPath) {
      const operation = "getPublicEncounter"
      const encounter = yield* findAccessibleEncounter(caller, path.encounterId)
      yield* record([
        yield* disclosureEvent(caller, request, operation, {
          encounterId: encounter.encounterId,
          documentId: null,
          patientId: patientIdOf(encounter)
        })
      ])
      return presentDetailResponse(encounter)
    })

    const getPublicEncounter = Effect.fnUntraced(function*<B>(
      request: PublicRequest,
      path: EncounterPath,
      answer?: (response: PublicEncounterDetailResponse) => B
    ) {
      const caller = yield* admit(request, "getPublicEncounter")
      return yield* readAndRecord(readEncounter(caller, request, path), answer)
    })

    /** The disclosure of one document, recorded in the read's unit of work. */
    function* recordDocumentDisclosure(
      caller: Caller,
      request: PublicRequest,
      operation: OperationId,
      encounter: StoredEncounterHead,
      document: { readonly documentId: DocumentId }
    ) {
      const event = yield* disclosureEvent(caller, request, operation, {
        encounterId: encounter.encounterId,
        documentId: document.documentId,
        patientId: patientIdOf(encounter)
      })
      yield* record([event])
    }

    const readDocument = Effect.fnUntraced(function*(caller: Caller, request: PublicRequest, path: DocumentPath) {
      const operation = "getPublicDocument"
      const found = yield* findAccessibleDocument(caller, path, documentReads)
      const { encounter } = found
      const document = yield* orRefuse(checkDocumentDetailTarget(found.document))
      yield* recordDocumentDisclosure(caller, request, operation, encounter, document)
      return presentDocumentDetailResponse(document)
    })

    const getPublicDocument = Effect.fnUntraced(function*<B>(
      request: PublicRequest,
      path: DocumentPath,
      answer?: (response: PublicDocumentDetailResponse) => B
    ) {
      const caller = yield* admit(request, "getPublicDocument")
      return yield* readAndRecord(readDocument(caller, request, path), answer)
    })

    const readTranscript = Effect.fnUntraced(function*(caller: Caller, request: PublicRequest, path: DocumentPath) {
      const operation = "getPublicDocumentTranscript"
      const { document, encounter, finalTranscript } = yield* findAccessibleDocument(caller, path, transcriptReads)
      yield* orRefuse(checkTranscriptTarget(document))
      const transcript = yield* orRefuse(checkFinalTranscript(finalTranscript))
      yield* recordDocumentDisclosure(caller, request, operation, encounter, document)
      return presentTranscriptResponse(document, transcript)
    })

    const getPublicDocumentTranscript = Effect.fnUntraced(function*<B>(
      request: PublicRequest,
      path: DocumentPath,
      answer?: (response: PublicDocumentTranscriptResponse) => B
    ) {
      const caller = yield* admit(request, "getPublicDocumentTranscript")
      return yield* readAndRecord(readTranscript(caller, request, path), answer)
    })

    const readAudioUrl = Effect.fnUntraced(function*(caller: Caller, request: PublicRequest, path: DocumentPath) {
      const operation = "getPublicDocumentAudio"
      const { document, encounter } = yield* findAccessibleDocument(caller, path, audioUrlReads)
      const recording = yield* orRefuse(checkAudioTarget(document))
      yield* orRefuse(checkAudioObjectExists(yield* audioStorage.exists(recording)))
      const signed = yield* audioStorage.signUrl(recording, config.audioUrlTtlSeconds)
      yield* recordDocumentDisclosure(caller, request, operation, encounter, document)
      return presentAudioResponse(signed)
    })

    const getPublicDocumentAudio = Effect.fnUntraced(function*<B>(
      request: PublicRequest,
      path: DocumentPath,
      answer?: (response: PublicDocumentAudioResponse) => B
    ) {
      const caller = yield* admit(request, "getPublicDocumentAudio")
      return yield* readAndRecord(readAudioUrl(caller, request, path), answer)
    })

    return {
      listPublicEncounters,
      getPublicEncounter,
      getPublicDocument,
      getPublicDocumentTranscript,
      getPublicDocumentAudio
    }
  })
)
