import { createHmac } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Option, Redacted } from "effect"
import { TestClock } from "effect/testing"
import { AccessCacheLayer } from "../../src/access/access-cache.js"
import { AccessPolicy, AccessPolicyLive } from "../../src/access/access-policy.js"
import { PublicApiConfig } from "../../src/config.js"
import { ApiKeyId, OrganizationId } from "../../src/ids.js"
import { ApiKeyStore, OrganizationStore, StoreUnavailable } from "../../src/ports.js"
import type { ApiKeyRecord, OrganizationRecord } from "../../src/records.js"
import type { OperationId } from "../../src/routes.js"

const TOKEN = "ce_live_0123456789abcdefghijABCDEFGHIJ3mpbCX"
const OTHER_TOKEN = "ce_test_Zz0Zz0Zz0Zz0Zz0Zz0Zz0Zz0Zz0Zz04QJMyA"
const DIGEST_KEY = "test-digest-key"
const digestOf = (token: string) => createHmac("sha256", DIGEST_KEY).update(token).digest("hex")
const ORG = OrganizationId.make("org-1")
const OPERATIONS: ReadonlyArray<OperationId> = [
  "listPublicEncounters",
  "getPublicEncounter",
  "getPublicDocument",
  "getPublicDocumentTranscript",
  "getPublicDocumentAudio"
]

/** Stores whose contents the test changes between requests, counting every call. */
const mutableStores = () => {
  const state = {
    key: {
      apiKeyId: ApiKeyId.make("key-1"),
      organizationId: ORG,
      kind: "organization",
      scopes: ["encounters:read", "patients:read", "documents:read", "recordings:read"],
      state: "active",
      expiresAt: null,
      label: null
    } as ApiKeyRecord,
    organization: { organizationId: ORG, name: "Org One", approved: true, enabledRoutes: OPERATIONS } as OrganizationRecord,
    down: false,
    /** How long a key lookup takes: it reads the key when it starts, as a database snapshot would. */
    keyLookupMillis: 0,
    keyCalls: 0,
    organizationCalls: 0
  }
  const unavailable = (operation: string) => Effect.fail(new StoreUnavailable({ operation, cause: new Error("down") }))
  const layer = Layer.mergeAll(
    Layer.succeed(ApiKeyStore, {
      findByDigest: (digest) =>
        Effect.suspend(() => {
          state.keyCalls++
          if (state.down) return unavailable("findByDigest")
          const found = digest === digestOf(TOKEN) ? Option.some(state.key) : Option.none()
          return state.keyLookupMillis === 0 ? Effect.succeed(found) : Effect.as(Effect.sleep(state.keyLookupMillis), found)
        })
    }),
    Layer.succeed(OrganizationStore, {
      findById: (organizationId) =>
        Effect.suspend(() => {
          state.organizationCalls++
          if (state.down) return unavailable("findById")
          return Effect.succeed(organizationId === ORG ? Option.some(state.organization) : Option.none())
        })
    })
  )
  return { state, layer }
}

const policyWithCache = (stores: Layer.Layer<ApiKeyStore | OrganizationStore>, seconds: number) =>
  AccessPolicyLive.pipe(
    Layer.provide(AccessCacheLayer({ timeToLive: `${seconds} seconds`, capacity: 100 })),
    Layer.provide(stores),
    Layer.provide(Layer.succeed(PublicApiConfig, {
      environment: "sandbox",
      apiKeysEnabled: true,
      apiKeyDigestKey: Option.some(Redacted.make(DIGEST_KEY)),
      audioUrlTtlSeconds: 300
    }))
  )

const outcome = (token: string, operation: OperationId = "getPublicEncounter") =>
  AccessPolicy.pipe(
    Effect.flatMap((policy) => policy.authorize(`Bearer ${token}`, operation)),
    Effect.match({ onFailure: (error) => error.reasonCode, onSuccess: () => "allowed" })
  )

describe("AccessCacheLayer (key and organization lookups, 5 s)", () => {
  it.effect("a revoked key, an unapproved organization and a disabled route take effect once the time to live has passed, not before (the last millisecond still answers from the cache)", () => {
    const { state, layer } = mutableStores()
    return Effect.gen(function*() {
      expect(yield* outcome(TOKEN)).toBe("allowed")
      state.key = { ...state.key, state: "revoked" }
      yield* TestClock.adjust("5000 millis")
      // The documented bound: within it the cached record still answers, to its last
      // millisecond, and being asked then does not give it a new lifetime.
      expect(yield* outcome(TOKEN)).toBe("allowed")
      yield* TestClock.adjust("1 millis")
      expect(yield* outcome(TOKEN)).toBe("revoked_key")
      expect(state.keyCalls).toBe(2)

      state.key = { ...state.key, state: "active" }
      yield* TestClock.adjust("5001 millis")
      expect(yield* outcome(TOKEN)).toBe("allowed")
      state.organization = { ...state.organization, approved: false }
      yield* TestClock.adjust("5001 millis")
      expect(yield* outcome(TOKEN)).toBe("organization_not_allowlisted")

      state.organization = { ...state.organization, approved: true, enabledRoutes: ["listPublicEncounters"] }
      yield* TestClock.adjust("5001 millis")
      expect(yield* outcome(TOKEN)).toBe("route_not_allowed")
      expect(yield* outcome(TOKEN, "listPublicEncounters")).toBe("allowed")
    }).pipe(Effect.provide(policyWithCache(layer, 5)))
  })

  it.effect("the bound runs from when the lookup started, not from when it answered: a slow lookup does not lengthen it", () => {
    const { state, layer } = mutableStores()
    return Effect.gen(function*() {
      state.keyLookupMillis = 1000
      const first = yield* Effect.forkChild(outcome(TOKEN))
      yield* TestClock.adjust("1000 millis")
      expect(yield* Fiber.join(first)).toBe("allowed")
      state.keyLookupMillis = 0
      state.key = { ...state.key, state: "revoked" }
      // 5001 ms after the lookup read the key, 4001 ms after it answered.
      yield* TestClock.adjust("4001 millis")
      expect(yield* outcome(TOKEN)).toBe("revoked_key")
    }).pipe(Effect.provide(policyWithCache(layer, 5)))
  })

  it.effect("within the time to live, one store call serves every request of the key", () => {
    const { state, layer } = mutableStores()
    return Effect.gen(function*() {
      for (let index = 0; index < 20; index++) expect(yield* outcome(TOKEN)).toBe("allowed")
      expect({ keys: state.keyCalls, organizations: state.organizationCalls }).toEqual({ keys: 1, organizations: 1 })
      yield* TestClock.adjust("5001 millis")
      expect(yield* outcome(TOKEN)).toBe("allowed")
      expect({ keys: state.keyCalls, organizations: state.organizationCalls }).toEqual({ keys: 2, organizations: 2 })
    }).pipe(Effect.provide(policyWithCache(layer, 5)))
  })

  it.effect("an unknown digest is asked every time, so a key issued a moment ago works at once", () => {
    const { state, layer } = mutableStores()
    return Effect.gen(function*() {
      for (let index = 0; index < 5; index++) expect(yield* outcome(OTHER_TOKEN)).toBe("invalid_key")
      expect(state.keyCalls).toBe(5)
    }).pipe(Effect.provide(policyWithCache(layer, 5)))
  })

  it.effect("a store failure is not kept: 503 while the store is down, allowed as soon as it is back", () => {
    const { state, layer } = mutableStores()
    return Effect.gen(function*() {
      state.down = true
      expect(yield* outcome(TOKEN)).toBe("digest_key_unavailable")
      state.down = false
      expect(yield* outcome(TOKEN)).toBe("allowed")
    }).pipe(Effect.provide(policyWithCache(layer, 5)))
  })

  it.effect("a time to live of zero caches nothing: every change is seen by the next request", () => {
    const { state, layer } = mutableStores()
    return Effect.gen(function*() {
      expect(yield* outcome(TOKEN)).toBe("allowed")
      state.key = { ...state.key, state: "disabled" }
      expect(yield* outcome(TOKEN)).toBe("disabled_key")
      expect(state.keyCalls).toBe(2)
    }).pipe(Effect.provide(policyWithCache(layer, 0)))
  })
})
