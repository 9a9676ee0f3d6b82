import { describe, expect, it } from "@effect/vitest"
import { Cause, Clock, Effect, Exit, Layer, Option, Redacted, Ref } from "effect"
import {
  AccessPolicy,
  AccessPolicyLive,
  type Caller,
  ApiKeyId,
  computeApiKeyDigest,
  DocumentId,
  EncounterId,
  MemoryStore,
  MemoryStoreLayer,
  type OperationId,
  OrganizationId,
  PatientId,
  PublicApi,
  PublicApiConfig,
  type PublicApiError,
  PublicApiLive,
  type PublicRequest,
  RequestId,
  type StoredDocument,
  type StoredEncounter
} from "../src/index.js"

const digestKey = Redacted.make("domain-test-digest-key")
const fullKey = "ce_test_Riverside0full0access0key0000116X8fx"
const riverside = OrganizationId.make("org_riverside")
const lakeside = OrganizationId.make("org_lakeside")
const at = (iso: string) => new Date(iso)

const encounter = (
  id: string,
  organizationId: OrganizationId,
  dataClass: StoredEncounter["dataClass"],
  createdAt: string
): StoredEncounter => ({
  encounterId: EncounterId.make(id),
  organizationId,
  dataClass,
  createdAt: at(createdAt),
  updatedAt: at(createdAt),
  dateOfService: null,
  status: "signed",
  patient: { patient_id: PatientId.make(`pat_${id}`), first_name: "Ada", last_name: "Moreno", date_of_birth: "1961-03-14" },
  documents: []
})

const document = (
  id: string,
  encounterId: string,
  schemaType: StoredDocument["schemaType"],
  recording: StoredDocument["recording"] = null
): StoredDocument => ({
  documentId: DocumentId.make(id),
  encounterId: EncounterId.make(encounterId),
  schemaType,
  title: id,
  status: null,
  workflowVariant: schemaType === "ambient_transcript" ? "ambient" : null,
  audioDurationSeconds: null,
  createdAt: at("2026-05-01T09:00:00.000Z"),
  updatedAt: at("2026-05-01T09:00:00.000Z"),
  contentMarkdown: schemaType === "document" ? "## Plan\nRest." : null,
  recording
})

const dataSet = {
  organizations: [
    { organizationId: riverside, name: "Riverside", approved: true, enabledRoutes: ["listPublicEncounters", "getPublicEncounter", "getPublicDocument", "getPublicDocumentTranscript", "getPublicDocumentAudio"] as const },
    { organizationId: lakeside, name: "Lakeside", approved: true, enabledRoutes: ["listPublicEncounters"] as const }
  ],
  apiKeys: [{
    digest: computeApiKeyDigest(digestKey, fullKey),
    record: {
      apiKeyId: ApiKeyId.make("key_full"),
      organizationId: riverside,
      kind: "organization" as const,
      scopes: ["encounters:read", "patients:read", "documents:read", "recordings:read"] as const,
      state: "active" as const,
      expiresAt: null,
      label: "full"
    }
  }],
  encounters: [
    encounter("enc_1", riverside, "clinical", "2026-05-01T09:00:00.000Z"),
    encounter("enc_2", riverside, "clinical", "2026-05-02T09:00:00.000Z"),
    encounter("enc_demo", riverside, "demo", "2026-05-03T09:00:00.000Z"),
    encounter("enc_other", lakeside, "clinical", "2026-05-04T09:00:00.000Z")
  ],
  documents: [
    document("doc_note", "enc_1", "document"),
    document("doc_audio", "enc_1", "ambient_transcript", { storageKey: "rec/doc_audio", contentType: "audio/wav" }),
    document("doc_gone", "enc_1", "ambient_transcript", { storageKey: "rec/doc_gone", contentType: "audio/wav" }),
    document("doc_bill", "enc_1", "billing"),
    document("doc_other_enc", "enc_2", "document")
  ],
  transcripts: [{
    documentId: DocumentId.make("doc_audio"),
    transcript: { provider: "asr", audio_duration_seconds: 1, turns: [{ speaker: "clinician", text: "Hello", start: 0, end: 0.5 }] }
  }],
  audioObjects: ["rec/doc_audio"]
}

const TestLayer = Layer.mergeAll(PublicApiLive, AccessPolicyLive).pipe(
  Layer.provideMerge(MemoryStoreLayer(dataSet)),
  Layer.provide(Layer.succeed(PublicApiConfig, {
    environment: "sandbox",
    apiKeysEnabled: true,
    apiKeyDigestKey: Option.some(digestKey),
    audioUrlTtlSeconds: 300
  }))
)

const request = (query: ReadonlyArray<readonly [string, string]> = []): PublicRequest => ({
  requestId: RequestId.make("req_test"),
  callerRequestId: "caller-test",
  query
})

/** The caller the access policy makes of the full-access key (or of no header, with null) for `operation`. */
const callerFor = (operation: OperationId, authorization: string | null = `Bearer ${fullKey}`) =>
  Effect.flatMap(AccessPolicy, (policy) => policy.authorize(authorization ?? undefined, operation))

const encounterPath = { encounterId: "enc_1" }
const documentPath = { encounterId: "enc_1", documentId: "doc_audio" }

/** Every use case, run for `caller` on a readable resource. */
const useCases = (api: PublicApi["Service"], caller: Caller) => ({
  listPublicEncounters: api.listPublicEncounters(caller, request()),
  getPublicEncounter: api.getPublicEncounter(caller, request(), encounterPath),
  getPublicDocument: api.getPublicDocument(caller, request(), documentPath),
  getPublicDocumentTranscript: api.getPublicDocumentTranscript(caller, request(), documentPath),
  getPublicDocumentAudio: api.getPublicDocumentAudio(caller, request(), documentPath)
})

const reasonOf = <A>(exit: Exit.Exit<A, PublicApiError>): string =>
  Exit.isSuccess(exit)
    ? "success"
    : Option.match(Cause.findErrorOption(exit.cause), {
      onNone: () => `defect: ${Cause.pretty(exit.cause)}`,
      onSome: (error) => error.reasonCode
    })

describe("PublicApi use cases (in-memory adapters)", () => {
  it.effect("lists only the caller's clinical encounters and records one disclosure per encounter", () =>
    Effect.gen(function*() {
      const api = yield* PublicApi
      const store = yield* MemoryStore
      const page = yield* api.listPublicEncounters(yield* callerFor("listPublicEncounters"), request([["sort_order", "asc"]]))
      expect(page.items.map((item) => item.encounter_id)).toEqual(["enc_1", "enc_2"])
      expect(page.total).toBe(2)
      const events = yield* Ref.get(store.disclosures)
      expect(events.map((event) => [event.operationId, event.encounterId, event.patientId])).toEqual([
        ["listPublicEncounters", "enc_1", "pat_enc_1"],
        ["listPublicEncounters", "enc_2", "pat_enc_2"]
      ])
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a refused read (demo_training_denied, cross_organization_denied, document_not_found) records nothing", () =>
    Effect.gen(function*() {
      const api = yield* PublicApi
      const store = yield* MemoryStore
      const encounterCaller = yield* callerFor("getPublicEncounter")
      const documentCaller = yield* callerFor("getPublicDocument")
      const demo = yield* Effect.exit(api.getPublicEncounter(encounterCaller, request(), { encounterId: "enc_demo" }))
      const other = yield* Effect.exit(api.getPublicEncounter(encounterCaller, request(), { encounterId: "enc_other" }))
      const wrongEncounter = yield* Effect.exit(api.getPublicDocument(documentCaller, request(), { encounterId: "enc_1", documentId: "doc_other_enc" }))
      const emptyId = yield* Effect.exit(api.getPublicEncounter(encounterCaller, request(), { encounterId: "" }))
      expect([reasonOf(demo), reasonOf(other), reasonOf(wrongEncounter), reasonOf(emptyId)]).toEqual([
        "demo_training_denied",
        "cross_organization_denied",
        "document_not_found",
        "encounter_not_found"
      ])
      expect(yield* Ref.get(store.disclosures)).toEqual([])
    }).pipe(Effect.provide(TestLayer)))

  it.effect("document, transcript and audio reads each record one event with document and patient", () =>
    Effect.gen(function*() {
      const api = yield* PublicApi
      const store = yield* MemoryStore
      const detail = yield* api.getPublicDocument(yield* callerFor("getPublicDocument"), request(), { encounterId: "enc_1", documentId: "doc_note" })
      expect(detail.document).toMatchObject({ schema_type: "document", content: { format: "markdown", text: "## Plan\nRest." } })
      const transcript = yield* api.getPublicDocumentTranscript(yield* callerFor("getPublicDocumentTranscript"), request(), { encounterId: "enc_1", documentId: "doc_audio" })
      expect(transcript.transcript.turns).toHaveLength(1)
      const audio = yield* api.getPublicDocumentAudio(yield* callerFor("getPublicDocumentAudio"), request(), { encounterId: "enc_1", documentId: "doc_audio" })
      // The URL lives exactly the configured lifetime from now (TestClock).
      expect(audio.expires_at.getTime()).toBe((yield* Clock.currentTimeMillis) + 300_000)
      const events = yield* Ref.get(store.disclosures)
      expect(events.map((event) => [event.operationId, event.documentId, event.patientId, event.requestId, event.callerRequestId])).toEqual([
        ["getPublicDocument", "doc_note", "pat_enc_1", "req_test", "caller-test"],
        ["getPublicDocumentTranscript", "doc_audio", "pat_enc_1", "req_test", "caller-test"],
        ["getPublicDocumentAudio", "doc_audio", "pat_enc_1", "req_test", "caller-test"]
      ])
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a use case returns its response once the disclosure of it is committed; a refusal commits none", () =>
    Effect.gen(function*() {
      const api = yield* PublicApi
      const store = yield* MemoryStore
      const committed = Effect.map(Ref.get(store.disclosures), (events) => events.length)
      const operations: ReadonlyArray<OperationId> = [
        "listPublicEncounters",
        "getPublicEncounter",
        "getPublicDocument",
        "getPublicDocumentTranscript",
        "getPublicDocumentAudio"
      ]
      const responses: Array<unknown> = []
      const committedAfter: Array<number> = []
      for (const operation of operations) {
        responses.push(yield* useCases(api, yield* callerFor(operation))[operation])
        committedAfter.push(yield* committed)
      }
      // The list's two events, then one per read, each committed by the time its response is returned.
      expect(committedAfter).toEqual([2, 3, 4, 5, 6])
      expect(responses).toEqual([
        { items: expect.any(Array), limit: 50, offset: 0, total: 2 },
        { encounter: expect.objectContaining({ encounter_id: "enc_1", organization_id: "org_riverside" }) },
        { document: expect.objectContaining({ document_id: "doc_audio", schema_type: "ambient_transcript" }) },
        {
          document_id: "doc_audio",
          encounter_id: "enc_1",
          transcript: { provider: "asr", audio_duration_seconds: 1, turns: [{ speaker: "clinician", text: "Hello", start: 0, end: 0.5 }] }
        },
        { audio_url: expect.stringContaining("rec%2Fdoc_audio"), expires_at: expect.any(Date) }
      ])

      const refused = yield* Effect.exit(api.getPublicEncounter(yield* callerFor("getPublicEncounter"), request(), { encounterId: "enc_demo" }))
      expect(reasonOf(refused)).toBe("demo_training_denied")
      expect(yield* committed).toBe(6)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a use case given a caller authorized for another operation dies and records nothing", () =>
    Effect.gen(function*() {
      const api = yield* PublicApi
      const store = yield* MemoryStore
      // Each caller has every scope and route, but was authorized for one operation only.
      const listCaller = yield* callerFor("listPublicEncounters")
      const documentCaller = yield* callerFor("getPublicDocument")
      const exits: ReadonlyArray<Exit.Exit<unknown, PublicApiError>> = [
        yield* Effect.exit(useCases(api, listCaller).getPublicEncounter),
        yield* Effect.exit(useCases(api, listCaller).getPublicDocument),
        yield* Effect.exit(useCases(api, listCaller).getPublicDocumentTranscript),
        yield* Effect.exit(useCases(api, listCaller).getPublicDocumentAudio),
        yield* Effect.exit(useCases(api, documentCaller).listPublicEncounters),
        yield* Effect.exit(useCases(api, documentCaller).getPublicDocumentAudio)
      ]
      for (const exit of exits) expect(Exit.isFailure(exit) && Cause.hasDies(exit.cause) && !Cause.hasFails(exit.cause)).toBe(true)
      expect(yield* Ref.get(store.disclosures)).toEqual([])
    }).pipe(Effect.provide(TestLayer)))

  it.effect("audio route: unsupported_document_type, audio_not_found, audio_storage_unavailable", () =>
    Effect.gen(function*() {
      const api = yield* PublicApi
      const store = yield* MemoryStore
      const caller = yield* callerFor("getPublicDocumentAudio")
      const billing = yield* Effect.exit(api.getPublicDocumentAudio(caller, request(), { encounterId: "enc_1", documentId: "doc_bill" }))
      const gone = yield* Effect.exit(api.getPublicDocumentAudio(caller, request(), { encounterId: "enc_1", documentId: "doc_gone" }))
      yield* Ref.update(store.faults, (faults) => ({ ...faults, audioStorage: true }))
      const unreachable = yield* Effect.exit(api.getPublicDocumentAudio(caller, request(), { encounterId: "enc_1", documentId: "doc_audio" }))
      expect([reasonOf(billing), reasonOf(gone), reasonOf(unreachable)]).toEqual([
        "unsupported_document_type",
        "audio_not_found",
        "audio_storage_unavailable"
      ])
      expect(yield* Ref.get(store.disclosures)).toEqual([])
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a disclosure that cannot be written gives 503 digest_key_unavailable and no data", () =>
    Effect.gen(function*() {
      const api = yield* PublicApi
      const store = yield* MemoryStore
      const caller = yield* callerFor("getPublicEncounter")
      yield* Ref.update(store.faults, (faults) => ({ ...faults, disclosures: true }))
      const exit = yield* Effect.exit(api.getPublicEncounter(caller, request(), { encounterId: "enc_1" }))
      expect(reasonOf(exit)).toBe("digest_key_unavailable")
      expect(yield* Ref.get(store.disclosures)).toEqual([])
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a store fault during the key lookup gives 503 digest_key_unavailable", () =>
    Effect.gen(function*() {
      const store = yield* MemoryStore
      yield* Ref.update(store.faults, (faults) => ({ ...faults, store: true }))
      const exit = yield* Effect.exit(callerFor("listPublicEncounters"))
      expect(reasonOf(exit)).toBe("digest_key_unavailable")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("the order holds across stages: a bad query is answered only after authorization", () =>
    Effect.gen(function*() {
      const api = yield* PublicApi
      const noKey = yield* Effect.exit(Effect.flatMap(
        callerFor("listPublicEncounters", null),
        (caller) => api.listPublicEncounters(caller, request([["owners", "x"]]))
      ))
      const unsupported = yield* Effect.exit(
        api.getPublicEncounter(yield* callerFor("getPublicEncounter"), request([["limit", "1"]]), { encounterId: "enc_missing" })
      )
      const badLimit = yield* Effect.exit(api.listPublicEncounters(yield* callerFor("listPublicEncounters"), request([["limit", "0"]])))
      expect([reasonOf(noKey), reasonOf(unsupported), reasonOf(badLimit)]).toEqual([
        "missing_bearer",
        "unsupported_filter",
        "invalid_limit"
      ])
    }).pipe(Effect.provide(TestLayer)))
})
