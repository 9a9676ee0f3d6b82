import { Context, Effect, Layer, Option, Ref } from "effect"
import type { DocumentId, EncounterId, OrganizationId } from "../ids.js"
import {
  ApiKeyStore,
  AudioStorage,
  AudioStorageUnavailable,
  DisclosureRecorder,
  type DocumentReads,
  EncounterRepository,
  IdGenerator,
  type IdKind,
  OrganizationStore,
  StoreUnavailable,
  UnitOfWork
} from "../ports.js"
import { compareBytewise } from "../present.js"
import type {
  ApiKeyRecord,
  DisclosureEvent,
  EncounterListQuery,
  OrganizationRecord,
  RecordingReference,
  StoredDocument,
  StoredEncounter
} from "../records.js"
import type { PublicFinalTranscript } from "../resources.js"

/**
 * In-memory adapters of every data port, for domain tests and property tests. They follow the
 * same rules the PostgreSQL adapters promise (ordering, ranges, totals, all-or-nothing units of
 * work), and faults can be switched on to exercise the 503 paths.
 */
export interface MemoryDataSet {
  readonly organizations: ReadonlyArray<OrganizationRecord>
  /** Keys with the digest they are found by. */
  readonly apiKeys: ReadonlyArray<{ readonly digest: string; readonly record: ApiKeyRecord }>
  readonly encounters: ReadonlyArray<StoredEncounter>
  readonly documents: ReadonlyArray<StoredDocument>
  readonly transcripts: ReadonlyArray<{ readonly documentId: DocumentId; readonly transcript: PublicFinalTranscript }>
  /** Storage keys of the recording objects that exist. */
  readonly audioObjects: ReadonlyArray<string>
}

export interface MemoryFaults {
  readonly store: boolean
  readonly audioStorage: boolean
  readonly disclosures: boolean
}

export interface MemoryStoreHandle {
  readonly disclosures: Ref.Ref<ReadonlyArray<DisclosureEvent>>
  readonly faults: Ref.Ref<MemoryFaults>
}

export class MemoryStore extends Context.Service<MemoryStore, MemoryStoreHandle>()("@clinical-api/domain/MemoryStore") {}

const noFaults: MemoryFaults = { store: false, audioStorage: false, disclosures: false }

/** The events recorded in the unit of work the current fiber runs in, if any. */
const PendingDisclosures = Context.Reference<Array<DisclosureEvent> | null>(
  "@clinical-api/domain/MemoryStore/PendingDisclosures",
  { defaultValue: () => null }
)

const inRange = (createdAt: Date, query: EncounterListQuery) =>
  (query.startAt === null || createdAt.getTime() >= query.startAt.getTime()) &&
  (query.endAt === null || createdAt.getTime() < query.endAt.getTime())

const compareEncounters = (a: StoredEncounter, b: StoredEncounter) =>
  a.createdAt.getTime() - b.createdAt.getTime() || compareBytewise(a.encounterId, b.encounterId)

export const MemoryStoreLayer = (
  data: MemoryDataSet,
  signedUrlBase = "https://media.invalid/audio"
): Layer.Layer<
  | MemoryStore
  | EncounterRepository
  | ApiKeyStore
  | OrganizationStore
  | DisclosureRecorder
  | UnitOfWork
  | AudioStorage
  | IdGenerator
> =>
  Layer.effectContext(
    Effect.gen(function*() {
      const disclosures = yield* Ref.make<ReadonlyArray<DisclosureEvent>>([])
      const faults = yield* Ref.make(noFaults)
      const audioObjects = yield* Ref.make(new Set(data.audioObjects))
      const counter = yield* Ref.make(0)

      const guard = (operation: string) =>
        Effect.flatMap(Ref.get(faults), (current) =>
          current.store ? Effect.fail(new StoreUnavailable({ operation })) : Effect.void)
      const guardAudio = (operation: string) =>
        Effect.flatMap(Ref.get(faults), (current) =>
          current.audioStorage ? Effect.fail(new AudioStorageUnavailable({ operation })) : Effect.void)

      const encountersById = new Map(data.encounters.map((encounter) => [encounter.encounterId, encounter]))
      const documentsById = new Map(data.documents.map((document) => [document.documentId, document]))
      const transcriptsById = new Map(data.transcripts.map(({ documentId, transcript }) => [documentId, transcript]))
      const keysByDigest = new Map(data.apiKeys.map(({ digest, record }) => [digest, record]))
      const organizationsById = new Map(data.organizations.map((organization) => [organization.organizationId, organization]))

      const repository = EncounterRepository.of({
        listForOrganization: (organizationId: OrganizationId, query: EncounterListQuery) =>
          Effect.as(guard("listForOrganization"), (() => {
            const matching = data.encounters
              .filter((encounter) =>
                encounter.organizationId === organizationId && encounter.dataClass === "clinical" &&
                inRange(encounter.createdAt, query)
              )
              .sort(compareEncounters)
            if (query.sortOrder === "desc") matching.reverse()
            return { items: matching.slice(query.offset, query.offset + query.limit), total: matching.length }
          })()),
        findEncounter: (encounterId: EncounterId) =>
          Effect.as(guard("findEncounter"), Option.fromNullishOr(encountersById.get(encounterId))),
        findEncounterAndDocument: (encounterId: EncounterId, documentId: DocumentId, options: DocumentReads) =>
          Effect.as(guard("findEncounterAndDocument"), {
            encounter: Option.fromNullishOr(encountersById.get(encounterId)),
            document: Option.fromNullishOr(documentsById.get(documentId)),
            finalTranscript: options.withFinalTranscript ? Option.fromNullishOr(transcriptsById.get(documentId)) : Option.none()
          })
      })

      const recorder = DisclosureRecorder.of({
        record: (events) =>
          Effect.gen(function*() {
            if ((yield* Ref.get(faults)).disclosures) {
              return yield* Effect.fail(new StoreUnavailable({ operation: "recordDisclosures" }))
            }
            const pending = yield* PendingDisclosures
            if (pending !== null) pending.push(...events)
            else yield* Ref.update(disclosures, (committed) => [...committed, ...events])
          })
      })

      const unitOfWork = UnitOfWork.of({
        transactionally: (effect) =>
          Effect.gen(function*() {
            const buffer: Array<DisclosureEvent> = []
            const result = yield* Effect.provideService(effect, PendingDisclosures, buffer)
            yield* Ref.update(disclosures, (committed) => [...committed, ...buffer])
            return result
          })
      })

      const audioStorage = AudioStorage.of({
        put: (reference: RecordingReference) =>
          Effect.andThen(guardAudio("put"), Ref.update(audioObjects, (keys) => new Set([...keys, reference.storageKey]))),
        exists: (reference: RecordingReference) =>
          Effect.andThen(guardAudio("exists"), Effect.map(Ref.get(audioObjects), (keys) => keys.has(reference.storageKey))),
        signUrl: (reference: RecordingReference, lifetimeSeconds: number) =>
          Effect.gen(function*() {
            yield* guardAudio("signUrl")
            const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
            const expiresAt = new Date(now + lifetimeSeconds * 1000)
            return {
              url: `${signedUrlBase}/${encodeURIComponent(reference.storageKey)}?expires=${expiresAt.getTime()}`,
              expiresAt
            }
          })
      })

      const idGenerator = IdGenerator.of({
        next: (kind: IdKind) => Effect.map(Ref.updateAndGet(counter, (n) => n + 1), (n) => `${kind}_${n}`)
      })

      const apiKeyStore = ApiKeyStore.of({
        findByDigest: (digest: string) => Effect.as(guard("findApiKeyByDigest"), Option.fromNullishOr(keysByDigest.get(digest)))
      })
      const organizationStore = OrganizationStore.of({
        findById: (organizationId: OrganizationId) =>
          Effect.as(guard("findOrganization"), Option.fromNullishOr(organizationsById.get(organizationId)))
      })

      return Context.make(MemoryStore, { disclosures, faults }).pipe(
        Context.add(EncounterRepository, repository),
        Context.add(ApiKeyStore, apiKeyStore),
        Context.add(OrganizationStore, organizationStore),
        Context.add(DisclosureRecorder, recorder),
        Context.add(UnitOfWork, unitOfWork),
        Context.add(AudioStorage, audioStorage),
        Context.add(IdGenerator, idGenerator)
      )
    })
  )
