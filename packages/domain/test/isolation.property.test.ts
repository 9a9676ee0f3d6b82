import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { Cause, Effect, Exit, Layer, ManagedRuntime, Option, Redacted, Ref } from "effect"
import {
  AccessPolicy,
  AccessPolicyLive,
  type Caller,
  type DisclosureEvent,
  MemoryStore,
  MemoryStoreLayer,
  type OperationId,
  PublicApi,
  PublicApiConfig,
  PublicApiError,
  PublicApiLive,
  type PublicRequest,
  RequestId
} from "../src/index.js"
import {
  dataSetArb,
  expectedDisclosures,
  expectedOutcome,
  type ModelDataSet,
  requestArb,
  resolveRequest,
  type ResolvedRequest,
  successViolations,
  toMemoryDataSet
} from "./support/isolation-model.js"

/**
 * Isolation, as a property of the use cases over the in-memory adapters: for generated data
 * sets (three organizations, clinical, demo and training encounters, every document kind,
 * keys of every kind, scope set, state and expiry, route allowlists, both environments) and
 * generated requests to all five routes (ids of every organization, unknown ids, list
 * queries valid and not), each answer is exactly the error the oracle computes in the
 * documented order of checks, or a success that holds only the caller organization's
 * clinical data, field by field within the contract, with one disclosure event per disclosed
 * encounter, all of the caller's organization. Refusals record nothing.
 */
const DATA_SETS = 500
const REQUESTS_PER_DATA_SET = 12
const digestKey = Redacted.make("isolation-property-digest-key")

const invoke = (api: PublicApi["Service"], caller: Caller, request: ResolvedRequest, publicRequest: PublicRequest) => {
  const path = { encounterId: request.encounterId, documentId: request.documentId }
  const operation: OperationId = request.operation
  switch (operation) {
    case "listPublicEncounters":
      return Effect.map(api.listPublicEncounters(caller, publicRequest), (body): unknown => body)
    case "getPublicEncounter":
      return Effect.map(api.getPublicEncounter(caller, publicRequest, path), (body): unknown => body)
    case "getPublicDocument":
      return Effect.map(api.getPublicDocument(caller, publicRequest, path), (body): unknown => body)
    case "getPublicDocumentTranscript":
      return Effect.map(api.getPublicDocumentTranscript(caller, publicRequest, path), (body): unknown => body)
    case "getPublicDocumentAudio":
      return Effect.map(api.getPublicDocumentAudio(caller, publicRequest, path), (body): unknown => body)
  }
}

/** What a server does with a request: authorization for the operation, then its use case. */
const serve = (request: ResolvedRequest, publicRequest: PublicRequest) =>
  Effect.gen(function*() {
    const caller = yield* (yield* AccessPolicy).authorize(request.authorization, request.operation)
    return yield* invoke(yield* PublicApi, caller, request, publicRequest)
  })

const runtimeFor = (model: ModelDataSet) =>
  ManagedRuntime.make(
    Layer.mergeAll(PublicApiLive, AccessPolicyLive).pipe(
      Layer.provideMerge(MemoryStoreLayer(toMemoryDataSet(model, digestKey))),
      Layer.provide(Layer.succeed(PublicApiConfig, {
        environment: model.environment,
        apiKeysEnabled: model.apiKeysEnabled,
        apiKeyDigestKey: Option.some(digestKey),
        audioUrlTtlSeconds: 300
      }))
    )
  )

describe("isolation property (in-memory adapters)", () => {
  it("every answer is the oracle's refusal in the documented order, or only the caller organization's clinical data within the contract's fields", async () => {
    const outcomes = new Map<string, number>()
    let cases = 0
    let requestNumber = 0

    await fc.assert(
      fc.asyncProperty(dataSetArb, fc.array(requestArb, { minLength: REQUESTS_PER_DATA_SET, maxLength: REQUESTS_PER_DATA_SET }), async (model, specs) => {
        const runtime = runtimeFor(model)
        try {
          for (const spec of specs) {
            const request = resolveRequest(model, spec)
            const requestId = RequestId.make(`req_isolation_${++requestNumber}`)
            const { events, exit } = await runtime.runPromise(Effect.gen(function*() {
              const store = yield* MemoryStore
              const before = (yield* Ref.get(store.disclosures)).length
              const exit = yield* Effect.exit(serve(request, { requestId, callerRequestId: null, query: request.query }))
              const events: ReadonlyArray<DisclosureEvent> = (yield* Ref.get(store.disclosures)).slice(before)
              return { exit, events }
            }))
            const expected = expectedOutcome(model, request, Date.now())
            const label = expected.kind === "error" ? expected.reasonCode : `200 ${request.operation}`
            outcomes.set(label, (outcomes.get(label) ?? 0) + 1)
            cases++
            const context = `${JSON.stringify(request)} in ${JSON.stringify(model)}`

            if (Exit.isFailure(exit)) {
              const failure = Cause.findErrorOption(exit.cause)
              expect(Option.isSome(failure) && failure.value instanceof PublicApiError, `a defect, not a refusal: ${Cause.pretty(exit.cause)}`).toBe(true)
              const error = Option.getOrThrow(failure)
              expect({ reasonCode: error.reasonCode, field: error.field }, context).toEqual(
                expected.kind === "error" ? { reasonCode: expected.reasonCode, field: expected.field } : { reasonCode: "(a success)", field: null }
              )
              expect(events, "a refused request records no disclosure").toEqual([])
            } else {
              expect(successViolations(model, expected, request.operation, exit.value), context).toEqual([])
              expect(events.length, `disclosure events of ${context}`).toBe(expectedDisclosures(expected))
              if (expected.kind !== "error") {
                for (const event of events) {
                  expect(event.organizationId).toBe(expected.organizationId)
                  expect(event.requestId).toBe(requestId)
                  expect(event.operationId).toBe(request.operation)
                }
              }
            }
          }
        } finally {
          await runtime.dispose()
        }
      }),
      { numRuns: DATA_SETS }
    )

    expect(cases).toBe(DATA_SETS * REQUESTS_PER_DATA_SET)
    // The generators must reach every branch of the order of checks and every route's success.
    const reached = [...outcomes.keys()]
    for (const outcome of [
      "missing_bearer", "api_keys_disabled", "test_prefix_not_allowed", "malformed_token", "invalid_key", "disabled_key",
      "revoked_key", "expired_key", "org_scope_only_required", "route_not_allowed", "organization_not_allowlisted",
      "missing_scope", "unsupported_filter", "invalid_limit", "invalid_offset", "invalid_sort", "invalid_query",
      "encounter_not_found", "cross_organization_denied", "demo_training_denied", "document_not_found",
      "unsupported_document_type", "transcript_not_found", "audio_not_available_for_document", "audio_not_found",
      "200 listPublicEncounters", "200 getPublicEncounter", "200 getPublicDocument", "200 getPublicDocumentTranscript",
      "200 getPublicDocumentAudio"
    ]) expect(reached, `no generated case reached ${outcome}`).toContain(outcome)
    console.info(`isolation (in-memory): ${cases} cases over ${DATA_SETS} data sets`, Object.fromEntries([...outcomes].sort()))
  }, 120_000)
})
