import { describe, expect, it } from "@effect/vitest"
import { Cause, Clock, Effect, Exit, Layer, Option, Redacted, Ref } from "effect"
import {
  AccessPolicyLive,
  ApiKeyId,
  computeApiKeyDigest,
  DocumentId,
  EncounterId,
  MemoryStore,
  MemoryStoreLayer,
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

const TestLayer = PublicApiLive.pipe(
  Layer.provide(AccessPolicyLive),
  Layer.provideMerge(MemoryStoreLayer(dataSet)),
  Layer.provide(Layer.succeed(PublicApiConfig, {
    environment: "sandbox",
    apiKeysEnabled: true,
    apiKeyDigestKey: Option.some(digestKey),
    audioUrlTtlSeconds: 300
  }))
)

const request = (query: ReadonlyArray<readonly [string, string]> = [], authorization: string | null = `Bearer ${fullKey}`): PublicRequest => ({
  requestId: RequestId.make("req_test"),
  authorization: authorization ?? undefined,
  query
})

const reasonOf = <A>(exit: Exit.Exit<A, PublicApiError>): string =>
  Exit.isSuccess(exit)
    ? "success"
    : Option.match(Cause.failureOption(exit.cause), {
      onNone: () => `defect: ${Cause.pretty(exit.cause)}`,
      onSome: (error) => error.reasonCode
    })

describe("PublicApi use cases (in-memory adapters)", () => {
  it.effect("lists only the caller's clinical encounters and records one disclosure per encounter", () =>
    Effect.gen(function*() {
      const api = yield* PublicApi
      const store = yield* MemoryStore
      const page = yield* api.listPublicEncounters(request([["sort_order", "asc"]]))
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
      const demo = yield* Effect.exit(api.getPublicEncounter(request(), { encounterId: "enc_demo" }))
      const other = yield* Effect.exit(api.getPublicEncounter(request(), { encounterId: "enc_other" }))
      const wrongEncounter = yield* Effect.exit(api.getPublicDocument(request(), { encounterId: "enc_1", documentId: "doc_other_enc" }))
      const emptyId = yield* Effect.exit(api.getPublicEncounter(request(), { encounterId: "" }))
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
      const detail = yield* api.getPublicDocument(request(), { encounterId: "enc_1", documentId: "doc_note" })
      expect(detail.document).toMatchObject({ schema_type: "document", content: { format: "markdown", text: "## Plan\nRest." } })
      const transcript = yield* api.getPublicDocumentTranscript(request(), { encounterId: "enc_1", documentId: "doc_audio" })
      expect(transcript.transcript.turns).toHaveLength(1)
      const audio = yield* api.getPublicDocumentAudio(request(), { encounterId: "enc_1", documentId: "doc_audio" })
      // The URL lives exactly the configured lifetime from now (TestClock).
      expect(audio.expires_at.getTime()).toBe((yield* Clock.currentTimeMillis) + 300_000)
      const events = yield* Ref.get(store.disclosures)
      expect(events.map((event) => [event.operationId, event.documentId, event.patientId, event.requestId])).toEqual([
        ["getPublicDocument", "doc_note", "pat_enc_1", "req_test"],
        ["getPublicDocumentTranscript", "doc_audio", "pat_enc_1", "req_test"],
        ["getPublicDocumentAudio", "doc_audio", "pat_enc_1", "req_test"]
      ])
    }).pipe(Effect.provide(TestLayer)))

  it.effect("an answer is made from the same response inside the unit of work, before its commit; a refusal makes none", () =>
    Effect.gen(function*() {
      const api = yield* PublicApi
      const store = yield* MemoryStore
      const committed = () => Effect.runSync(Ref.get(store.disclosures)).length
      const answers: Array<{ readonly response: unknown; readonly committedBefore: number }> = []
      const answer = (response: unknown) => {
        answers.push({ response, committedBefore: committed() })
        return `answer ${answers.length}`
      }
      const encounterPath = { encounterId: "enc_1" }
      const documentPath = { encounterId: "enc_1", documentId: "doc_audio" }
      const answered = [
        yield* api.listPublicEncounters(request(), answer),
        yield* api.getPublicEncounter(request(), encounterPath, answer),
        yield* api.getPublicDocument(request(), documentPath, answer),
        yield* api.getPublicDocumentTranscript(request(), documentPath, answer),
        yield* api.getPublicDocumentAudio(request(), documentPath, answer)
      ]
      expect(answered).toEqual(["answer 1", "answer 2", "answer 3", "answer 4", "answer 5"])
      // Each answer saw only the events of the reads before it committed: the list's two, then one per read.
      expect(answers.map((made) => made.committedBefore)).toEqual([0, 2, 3, 4, 5])
      expect(committed()).toBe(6)
      expect(answers.map((made) => made.response)).toEqual([
        yield* api.listPublicEncounters(request()),
        yield* api.getPublicEncounter(request(), encounterPath),
        yield* api.getPublicDocument(request(), documentPath),
        yield* api.getPublicDocumentTranscript(request(), documentPath),
        yield* api.getPublicDocumentAudio(request(), documentPath)
      ])

      const refused = yield* Effect.exit(api.getPublicEncounter(request(), { encounterId: "enc_demo" }, answer))
      expect(reasonOf(refused)).toBe("demo_training_denied")
      expect(answers).toHaveLength(5)
    }).pipe(Effect.provide(TestLayer)))

  it.effect("an answer that throws fails the read as a defect and records nothing", () =>
    Effect.gen(function*() {
      const api = yield* PublicApi
      const store = yield* MemoryStore
      const exit = yield* Effect.exit(api.getPublicEncounter(request(), { encounterId: "enc_1" }, () => {
        throw new TypeError("cannot encode")
      }))
      expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
      expect(yield* Ref.get(store.disclosures)).toEqual([])
    }).pipe(Effect.provide(TestLayer)))

  it.effect("audio route: unsupported_document_type, audio_not_found, audio_storage_unavailable", () =>
    Effect.gen(function*() {
      const api = yield* PublicApi
      const store = yield* MemoryStore
      const billing = yield* Effect.exit(api.getPublicDocumentAudio(request(), { encounterId: "enc_1", documentId: "doc_bill" }))
      const gone = yield* Effect.exit(api.getPublicDocumentAudio(request(), { encounterId: "enc_1", documentId: "doc_gone" }))
      yield* Ref.update(store.faults, (faults) => ({ ...faults, audioStorage: true }))
      const unreachable = yield* Effect.exit(api.getPublicDocumentAudio(request(), { encounterId: "enc_1", documentId: "doc_audio" }))
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
      yield* Ref.update(store.faults, (faults) => ({ ...faults, disclosures: true }))
      const exit = yield* Effect.exit(api.getPublicEncounter(request(), { encounterId: "enc_1" }))
      expect(reasonOf(exit)).toBe("digest_key_unavailable")
      expect(yield* Ref.get(store.disclosures)).toEqual([])
    }).pipe(Effect.provide(TestLayer)))

  it.effect("a store fault during the key lookup gives 503 digest_key_unavailable", () =>
    Effect.gen(function*() {
      const api = yield* PublicApi
      const store = yield* MemoryStore
      yield* Ref.update(store.faults, (faults) => ({ ...faults, store: true }))
      const exit = yield* Effect.exit(api.listPublicEncounters(request()))
      expect(reasonOf(exit)).toBe("digest_key_unavailable")
    }).pipe(Effect.provide(TestLayer)))

  it.effect("the order holds across stages: a bad query is answered only after authorization", () =>
    Effect.gen(function*() {
      const api = yield* PublicApi
      const noKey = yield* Effect.exit(api.listPublicEncounters(request([["owners", "x"]], null)))
      const unsupported = yield* Effect.exit(api.getPublicEncounter(request([["limit", "1"]]), { encounterId: "enc_missing" }))
      const badLimit = yield* Effect.exit(api.listPublicEncounters(request([["limit", "0"]])))
      expect([reasonOf(noKey), reasonOf(unsupported), reasonOf(badLimit)]).toEqual([
        "missing_bearer",
        "unsupported_filter",
        "invalid_limit"
      ])
    }).pipe(Effect.provide(TestLayer)))
})
