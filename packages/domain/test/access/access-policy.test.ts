import { createHmac } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option, Redacted, Result } from "effect"
import { TestClock } from "effect/testing"
import fc from "fast-check"
import {
  AccessPolicy,
  AccessPolicyLive,
  authorizeOrganization,
  type Caller,
  decideAccess,
  type AccessDecisionInput,
  evaluateKeyRecord,
  readBearerToken,
  screenToken
} from "../../src/access/access-policy.js"
import { generateApiKeyToken, type KeyEnvironment } from "../../src/access/api-key-token.js"
import { PublicApiConfig, type PublicApiSettings } from "../../src/config.js"
import { type PublicApiError, type ReasonCode } from "../../src/errors.js"
import { ApiKeyId, OrganizationId } from "../../src/ids.js"
import { ApiKeyStore, OrganizationStore, StoreUnavailable } from "../../src/ports.js"
import type { ApiKeyRecord, OrganizationRecord } from "../../src/records.js"
import type { OperationId, Scope } from "../../src/routes.js"

// ---------------------------------------------------------------------------------------------
// Fixtures written from the contract, independently of the implementation.

const LIVE_TOKEN = "ce_live_0123456789abcdefghijABCDEFGHIJ3mpbCX"
const TEST_TOKEN = "ce_test_Zz0Zz0Zz0Zz0Zz0Zz0Zz0Zz0Zz0Zz04QJMyA"
const DIGEST_KEY = "test-digest-key"

const ALL_OPERATIONS: ReadonlyArray<OperationId> = [
  "listPublicEncounters",
  "getPublicEncounter",
  "getPublicDocument",
  "getPublicDocumentTranscript",
  "getPublicDocumentAudio"
]
const ALL_SCOPES: ReadonlyArray<Scope> = ["encounters:read", "patients:read", "documents:read", "recordings:read"]

/** Contract section 4.6, copied here so the oracle does not read routes.ts. */
const SCOPES_REQUIRED: Record<OperationId, ReadonlyArray<Scope>> = {
  listPublicEncounters: ["encounters:read", "patients:read", "documents:read"],
  getPublicEncounter: ["encounters:read", "patients:read", "documents:read"],
  getPublicDocument: ["encounters:read", "documents:read"],
  getPublicDocumentTranscript: ["encounters:read", "documents:read"],
  getPublicDocumentAudio: ["encounters:read", "documents:read", "recordings:read"]
}

/** docs/behaviour.md "Order of checks, in full", sections 1 and 2. */
const CHECK_ORDER: ReadonlyArray<ReasonCode> = [
  "missing_bearer",
  "api_keys_disabled",
  "test_prefix_not_allowed",
  "malformed_token",
  "digest_key_unavailable",
  "invalid_key",
  "disabled_key",
  "revoked_key",
  "expired_key",
  "org_scope_only_required",
  "route_not_allowed",
  "organization_not_allowlisted",
  "missing_scope"
]

const ORG_1 = OrganizationId.make("org-1")
const ORG_2 = OrganizationId.make("org-2")
const KEY_1 = ApiKeyId.make("key-1")
const NOW = new Date("2026-05-01T12:00:00.000Z")

const activeKey: ApiKeyRecord = {
  apiKeyId: KEY_1,
  organizationId: ORG_1,
  kind: "organization",
  scopes: ALL_SCOPES,
  state: "active",
  expiresAt: null,
  label: null
}

const approvedOrganization: OrganizationRecord = {
  organizationId: ORG_1,
  name: "Org One",
  approved: true,
  enabledRoutes: ALL_OPERATIONS
}

const baseInput: AccessDecisionInput = {
  authorization: `Bearer ${LIVE_TOKEN}`,
  config: { environment: "production", apiKeysEnabled: true },
  digestAvailable: true,
  keyRecord: Option.some(activeKey),
  organization: Option.some(approvedOrganization),
  operation: "getPublicDocumentAudio",
  now: NOW
}

const reasonOf = <A>(result: Result.Result<A, PublicApiError>): ReasonCode | "allowed" =>
  Result.match(result, { onFailure: (error) => error.reasonCode, onSuccess: () => "allowed" as const })

const expectRefused = <A>(result: Result.Result<A, PublicApiError>, reasonCode: ReasonCode, status: number) => {
  expect(reasonOf(result)).toBe(reasonCode)
  if (Result.isFailure(result)) {
    expect(result.failure.status).toBe(status)
    expect(result.failure.field).toBeNull()
  }
}

// ---------------------------------------------------------------------------------------------

describe("readBearerToken (missing_bearer and whitespace rules)", () => {
  it.each([
    ["Bearer <token>", `Bearer ${LIVE_TOKEN}`, LIVE_TOKEN],
    ["lower-case scheme", `bearer ${LIVE_TOKEN}`, LIVE_TOKEN],
    ["upper-case scheme", `BEARER ${LIVE_TOKEN}`, LIVE_TOKEN],
    ["several spaces and a tab as separator", `Bearer  \t ${LIVE_TOKEN}`, LIVE_TOKEN],
    ["surrounding whitespace trimmed", ` \tBearer ${LIVE_TOKEN} \t`, LIVE_TOKEN],
    ["inner whitespace kept (then malformed)", "Bearer ab cd", "ab cd"],
    ["any non-empty token", "Bearer x", "x"]
  ])("accepts %s", (_, header, token) => {
    expect(readBearerToken(header)).toEqual(Result.succeed(token))
  })

  it.each([
    ["no Authorization header", undefined],
    ["an empty header", ""],
    ["whitespace only", " \t "],
    ["the scheme alone", "Bearer"],
    ["the scheme and whitespace (empty token)", "Bearer \t "],
    ["Basic scheme", `Basic ${LIVE_TOKEN}`],
    ["Token scheme", `Token ${LIVE_TOKEN}`],
    ["no separator after Bearer", `Bearer${LIVE_TOKEN}`],
    ["a bare token with no scheme", LIVE_TOKEN],
    ["a colon after the scheme", `Bearer: ${LIVE_TOKEN}`],
    ["a newline as separator", `Bearer\n${LIVE_TOKEN}`]
  ])("missing_bearer (401) for %s", (_, header) => {
    expectRefused(readBearerToken(header), "missing_bearer", 401)
  })
})

describe("screenToken", () => {
  it("api_keys_disabled (401) before any look at the token", () => {
    expectRefused(screenToken("garbage", { environment: "sandbox", apiKeysEnabled: false }), "api_keys_disabled", 401)
  })

  it("test_prefix_not_allowed (401) in production, before the malformed check", () => {
    expectRefused(screenToken(TEST_TOKEN, { environment: "production", apiKeysEnabled: true }), "test_prefix_not_allowed", 401)
    expectRefused(screenToken("ce_test_short", { environment: "production", apiKeysEnabled: true }), "test_prefix_not_allowed", 401)
  })

  it("sandbox accepts both prefixes", () => {
    expect(screenToken(TEST_TOKEN, { environment: "sandbox", apiKeysEnabled: true })).toEqual(
      Result.succeed({ token: TEST_TOKEN, environment: "test" })
    )
    expect(screenToken(LIVE_TOKEN, { environment: "sandbox", apiKeysEnabled: true })).toEqual(
      Result.succeed({ token: LIVE_TOKEN, environment: "live" })
    )
  })

  it("malformed_token (401) for a bad checksum, and for a test key in sandbox that is malformed", () => {
    expectRefused(screenToken(`${LIVE_TOKEN.slice(0, -1)}0`, { environment: "production", apiKeysEnabled: true }), "malformed_token", 401)
    expectRefused(screenToken("ce_test_short", { environment: "sandbox", apiKeysEnabled: true }), "malformed_token", 401)
  })
})

describe("evaluateKeyRecord", () => {
  it("invalid_key (401) when no key has this digest", () => {
    expectRefused(evaluateKeyRecord(Option.none(), NOW), "invalid_key", 401)
  })

  it("disabled_key (401)", () => {
    expectRefused(evaluateKeyRecord(Option.some({ ...activeKey, state: "disabled" }), NOW), "disabled_key", 401)
  })

  it("revoked_key (401)", () => {
    expectRefused(evaluateKeyRecord(Option.some({ ...activeKey, state: "revoked" }), NOW), "revoked_key", 401)
  })

  it("expired_key (401) one millisecond after expires_at", () => {
    const key = { ...activeKey, expiresAt: new Date(NOW.getTime() - 1) }
    expectRefused(evaluateKeyRecord(Option.some(key), NOW), "expired_key", 401)
  })

  it("a key is still valid at the very instant of expires_at (expired only after it)", () => {
    const key = { ...activeKey, expiresAt: NOW }
    expect(evaluateKeyRecord(Option.some(key), NOW)).toEqual(Result.succeed(key))
  })

  it("a key both revoked and expired is revoked_key (docs/behaviour.md)", () => {
    const key = { ...activeKey, state: "revoked" as const, expiresAt: new Date(0) }
    expectRefused(evaluateKeyRecord(Option.some(key), NOW), "revoked_key", 401)
  })

  it("a key both disabled and expired is disabled_key (the contract's table order)", () => {
    const key = { ...activeKey, state: "disabled" as const, expiresAt: new Date(0) }
    expectRefused(evaluateKeyRecord(Option.some(key), NOW), "disabled_key", 401)
  })
})

describe("authorizeOrganization", () => {
  const org = Option.some(approvedOrganization)

  it.each([["user"], ["service"]] as const)("org_scope_only_required (403) for a %s key", (kind) => {
    expectRefused(authorizeOrganization({ ...activeKey, kind }, org, "getPublicEncounter"), "org_scope_only_required", 403)
  })

  it("org_scope_only_required (403) for an organization key bound to no organization", () => {
    expectRefused(
      authorizeOrganization({ ...activeKey, organizationId: null }, org, "getPublicEncounter"),
      "org_scope_only_required",
      403
    )
  })

  it("route_not_allowed (403) when the route is not enabled for the organization", () => {
    const organization = Option.some({ ...approvedOrganization, enabledRoutes: ["listPublicEncounters"] as const })
    expectRefused(authorizeOrganization(activeKey, organization, "getPublicEncounter"), "route_not_allowed", 403)
    expect(Result.isSuccess(authorizeOrganization(activeKey, organization, "listPublicEncounters"))).toBe(true)
  })

  it("route_not_allowed (403) when the organization record is missing, or is another organization's", () => {
    expectRefused(authorizeOrganization(activeKey, Option.none(), "getPublicEncounter"), "route_not_allowed", 403)
    const other = Option.some({ ...approvedOrganization, organizationId: ORG_2 })
    expectRefused(authorizeOrganization(activeKey, other, "getPublicEncounter"), "route_not_allowed", 403)
  })

  it("organization_not_allowlisted (403) when the route is enabled but the organization is not approved", () => {
    const organization = Option.some({ ...approvedOrganization, approved: false })
    expectRefused(authorizeOrganization(activeKey, organization, "getPublicEncounter"), "organization_not_allowlisted", 403)
  })

  it("route_not_allowed comes before organization_not_allowlisted", () => {
    const organization = Option.some({ ...approvedOrganization, approved: false, enabledRoutes: [] })
    expectRefused(authorizeOrganization(activeKey, organization, "getPublicEncounter"), "route_not_allowed", 403)
  })

  it("missing_scope (403): the audio route needs recordings:read, the document route does not", () => {
    const key = { ...activeKey, scopes: ["encounters:read", "documents:read", "patients:read"] as const }
    expectRefused(authorizeOrganization(key, org, "getPublicDocumentAudio"), "missing_scope", 403)
    expect(Result.isSuccess(authorizeOrganization(key, org, "getPublicDocument"))).toBe(true)
  })

  it.each(ALL_OPERATIONS.map((operation) => [operation]))("missing_scope (403) on %s for each required scope left out", (operation) => {
    for (const left of SCOPES_REQUIRED[operation]) {
      const key = { ...activeKey, scopes: ALL_SCOPES.filter((scope) => scope !== left) }
      expectRefused(authorizeOrganization(key, org, operation), "missing_scope", 403)
    }
    const exact = { ...activeKey, scopes: SCOPES_REQUIRED[operation] }
    expect(Result.isSuccess(authorizeOrganization(exact, org, operation))).toBe(true)
  })

  it("an authorized caller carries the key's organization, id and scopes, and the operation it was authorized for", () => {
    expect(authorizeOrganization(activeKey, org, "listPublicEncounters")).toEqual(
      Result.succeed<Caller>({ organizationId: ORG_1, apiKeyId: KEY_1, scopes: ALL_SCOPES, operationId: "listPublicEncounters" })
    )
  })
})

describe("decideAccess: every 401/403/503 reason of the access checks", () => {
  const cases: ReadonlyArray<readonly [ReasonCode, number, Partial<AccessDecisionInput>]> = [
    ["missing_bearer", 401, { authorization: undefined }],
    ["api_keys_disabled", 401, { config: { environment: "sandbox", apiKeysEnabled: false } }],
    ["test_prefix_not_allowed", 401, { authorization: `Bearer ${TEST_TOKEN}` }],
    ["malformed_token", 401, { authorization: "Bearer ce_live_tooshort" }],
    ["digest_key_unavailable", 503, { digestAvailable: false }],
    ["invalid_key", 401, { keyRecord: Option.none() }],
    ["disabled_key", 401, { keyRecord: Option.some({ ...activeKey, state: "disabled" }) }],
    ["revoked_key", 401, { keyRecord: Option.some({ ...activeKey, state: "revoked" }) }],
    ["expired_key", 401, { keyRecord: Option.some({ ...activeKey, expiresAt: new Date(NOW.getTime() - 1000) }) }],
    ["org_scope_only_required", 403, { keyRecord: Option.some({ ...activeKey, kind: "user" }) }],
    ["route_not_allowed", 403, { organization: Option.some({ ...approvedOrganization, enabledRoutes: [] }) }],
    ["organization_not_allowlisted", 403, { organization: Option.some({ ...approvedOrganization, approved: false }) }],
    ["missing_scope", 403, { keyRecord: Option.some({ ...activeKey, scopes: ["encounters:read", "documents:read"] }) }]
  ]

  it("covers the full order of checks", () => {
    expect(cases.map(([code]) => code)).toEqual(CHECK_ORDER)
  })

  it.each(cases)("%s (%i)", (reasonCode, status, change) => {
    expectRefused(decideAccess({ ...baseInput, ...change }), reasonCode, status)
  })

  it("allows a valid live key in production", () => {
    expect(decideAccess(baseInput)).toEqual(
      Result.succeed<Caller>({ organizationId: ORG_1, apiKeyId: KEY_1, scopes: ALL_SCOPES, operationId: "getPublicDocumentAudio" })
    )
  })

  it("malformed_token comes before digest_key_unavailable, which comes before invalid_key", () => {
    expect(reasonOf(decideAccess({ ...baseInput, authorization: "Bearer x", digestAvailable: false }))).toBe("malformed_token")
    expect(reasonOf(decideAccess({ ...baseInput, digestAvailable: false, keyRecord: Option.none() }))).toBe(
      "digest_key_unavailable"
    )
  })
})

// ---------------------------------------------------------------------------------------------
// Property: decideAccess answers the FIRST failing check, against an oracle that lists them all.

const chance = (percent: number) => fc.integer({ min: 0, max: 99 }).map((n) => n < percent)

const weighted = <T>(...choices: ReadonlyArray<readonly [number, fc.Arbitrary<T>]>) =>
  fc.oneof(...choices.map(([weight, arbitrary]) => ({ weight, arbitrary })))

const cyclingBytes = (bytes: Uint8Array) => {
  let position = 0
  return (size: number) => Uint8Array.from({ length: size }, () => bytes[position++ % bytes.length] ?? 0)
}

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/** A token and what the contract says of it, known by construction. */
interface TokenCase {
  readonly token: string
  readonly testPrefix: boolean
  readonly wellFormed: boolean
}

const validTokens = fc
  .tuple(
    fc.constantFrom<KeyEnvironment>("live", "test"),
    fc.uint8Array({ minLength: 1, maxLength: 60 }).map((bytes) => {
      bytes[0] = (bytes[0] ?? 0) % 248
      return bytes
    })
  )
  .map(([environment, bytes]) => ({ environment, token: generateApiKeyToken(environment, cyclingBytes(bytes)) }))

const tokenCases: fc.Arbitrary<TokenCase> = weighted<TokenCase>(
  [12, validTokens.map(({ environment, token }) => ({ token, testPrefix: environment === "test", wellFormed: true }))],
  [
    3,
    // One base62 character changed after the prefix: the checksum no longer matches.
    fc.tuple(validTokens, fc.integer({ min: 8, max: 43 }), fc.constantFrom(...BASE62)).filter(
      ([{ token }, position, replacement]) => token[position] !== replacement
    ).map(([{ environment, token }, position, replacement]) => ({
      token: token.slice(0, position) + replacement + token.slice(position + 1),
      testPrefix: environment === "test",
      wellFormed: false
    }))
  ],
  [
    2,
    // Inner whitespace survives the header's trimming and makes the token malformed.
    fc.tuple(validTokens, fc.integer({ min: 9, max: 43 }), fc.constantFrom(" ", "\t")).map(
      ([{ environment, token }, position, space]) => ({
        token: token.slice(0, position) + space + token.slice(position),
        testPrefix: environment === "test",
        wellFormed: false
      })
    )
  ],
  [
    3,
    fc.constantFrom<TokenCase>(
      { token: "ce_test_", testPrefix: true, wellFormed: false },
      { token: "ce_test_not-a-key", testPrefix: true, wellFormed: false },
      { token: `${TEST_TOKEN}0`, testPrefix: true, wellFormed: false },
      { token: TEST_TOKEN.toUpperCase(), testPrefix: false, wellFormed: false },
      { token: "ce_prod_0123456789abcdefghijABCDEFGHIJ3mpbCX", testPrefix: false, wellFormed: false },
      { token: "sk_live_abc", testPrefix: false, wellFormed: false },
      { token: "x", testPrefix: false, wellFormed: false }
    )
  ]
)

/** How the Authorization header is written around the token; `ok` says whether it carries a bearer token. */
interface HeaderShape {
  readonly ok: boolean
  readonly build: (token: string) => string | undefined
}

const whitespace = fc.constantFrom("", " ", "\t", "  \t")
const separators = fc.constantFrom(" ", "\t", "   ", " \t ")

const headerShapes: fc.Arbitrary<HeaderShape> = weighted<HeaderShape>(
  [
    14,
    fc.tuple(fc.constantFrom("Bearer", "bearer", "BEARER", "bEaReR"), whitespace, separators, whitespace).map(
      ([scheme, leading, separator, trailing]) => ({
        ok: true,
        build: (token) => `${leading}${scheme}${separator}${token}${trailing}`
      })
    )
  ],
  [
    6,
    fc.constantFrom<HeaderShape>(
      { ok: false, build: () => undefined },
      { ok: false, build: () => "" },
      { ok: false, build: () => "Bearer" },
      { ok: false, build: () => "Bearer \t " },
      { ok: false, build: (token) => `Basic ${token}` },
      { ok: false, build: (token) => `Token ${token}` },
      { ok: false, build: (token) => `Bearer${token}` },
      { ok: false, build: (token) => token }
    )
  ]
)

interface KeyCase {
  readonly record: ApiKeyRecord
  /** Milliseconds from now to expires_at; null when the key never expires. */
  readonly expiresInMs: number | null
}

interface AccessCase {
  readonly header: HeaderShape
  readonly token: TokenCase
  readonly environment: "sandbox" | "production"
  readonly apiKeysEnabled: boolean
  readonly digestAvailable: boolean
  readonly key: Option.Option<KeyCase>
  readonly organization: Option.Option<OrganizationRecord>
  readonly operation: OperationId
  readonly now: Date
}

const keyCases = (now: Date): fc.Arbitrary<KeyCase> =>
  fc
    .record({
      apiKeyId: fc.constantFrom(KEY_1, ApiKeyId.make("key-2")),
      kind: weighted([8, fc.constant("organization" as const)], [2, fc.constantFrom("user" as const, "service" as const)]),
      organizationId: weighted([9, fc.constant(ORG_1)], [1, fc.constant(null)]),
      scopes: weighted([6, fc.constant(ALL_SCOPES)], [4, fc.subarray([...ALL_SCOPES])]),
      state: weighted([6, fc.constant("active" as const)], [4, fc.constantFrom("disabled" as const, "revoked" as const)]),
      expiresInMs: weighted<number | null>(
        [4, fc.constant(null)],
        [6, fc.constantFrom(-86_400_000, -1, 0, 1, 86_400_000)]
      ),
      label: fc.constant(null)
    })
    .map(({ expiresInMs, ...fields }) => ({
      record: { ...fields, expiresAt: expiresInMs === null ? null : new Date(now.getTime() + expiresInMs) },
      expiresInMs
    }))

const organizations: fc.Arbitrary<OrganizationRecord> = fc.record({
  organizationId: weighted([9, fc.constant(ORG_1)], [1, fc.constant(ORG_2)]),
  name: fc.constant("Org"),
  approved: chance(75),
  enabledRoutes: weighted([6, fc.constant(ALL_OPERATIONS)], [4, fc.subarray([...ALL_OPERATIONS])])
})

const accessCases: fc.Arbitrary<AccessCase> = fc
  .date({ min: new Date("2000-01-01T00:00:00.000Z"), max: new Date("2100-01-01T00:00:00.000Z"), noInvalidDate: true })
  .chain((now) =>
    fc.record({
      header: headerShapes,
      token: tokenCases,
      environment: fc.constantFrom("sandbox" as const, "production" as const),
      apiKeysEnabled: chance(80),
      digestAvailable: chance(85),
      key: weighted([8, keyCases(now).map(Option.some)], [2, fc.constant(Option.none<KeyCase>())]),
      organization: weighted([85, organizations.map(Option.some)], [15, fc.constant(Option.none<OrganizationRecord>())]),
      operation: fc.constantFrom(...ALL_OPERATIONS),
      now: fc.constant(now)
    })
  )

const toInput = (c: AccessCase): AccessDecisionInput => ({
  authorization: c.header.build(c.token.token),
  config: { environment: c.environment, apiKeysEnabled: c.apiKeysEnabled },
  digestAvailable: c.digestAvailable,
  keyRecord: Option.map(c.key, (key) => key.record),
  organization: c.organization,
  operation: c.operation,
  now: c.now
})

/** Every check of docs/behaviour.md sections 1 and 2 that fails for this case, in the documented order. */
const failingChecks = (c: AccessCase): ReadonlyArray<ReasonCode> => {
  const failing: Array<ReasonCode> = []
  if (!c.header.ok) failing.push("missing_bearer")
  if (!c.apiKeysEnabled) failing.push("api_keys_disabled")
  if (c.environment === "production" && c.token.testPrefix) failing.push("test_prefix_not_allowed")
  if (!c.token.wellFormed) failing.push("malformed_token")
  if (!c.digestAvailable) failing.push("digest_key_unavailable")
  if (Option.isNone(c.key)) return [...failing, "invalid_key"]
  const { record, expiresInMs } = c.key.value
  if (record.state === "disabled") failing.push("disabled_key")
  if (record.state === "revoked") failing.push("revoked_key")
  if (expiresInMs !== null && expiresInMs < 0) failing.push("expired_key")
  if (record.kind !== "organization" || record.organizationId === null) failing.push("org_scope_only_required")
  const own = Option.getOrUndefined(c.organization)
  const organization = own !== undefined && own.organizationId === record.organizationId ? own : undefined
  if (organization === undefined || !organization.enabledRoutes.includes(c.operation)) failing.push("route_not_allowed")
  if (organization === undefined || !organization.approved) failing.push("organization_not_allowlisted")
  if (!SCOPES_REQUIRED[c.operation].every((scope) => record.scopes.includes(scope))) failing.push("missing_scope")
  return failing
}

type Outcome = { readonly refused: ReasonCode } | { readonly allowed: Caller }

const expectedOutcome = (c: AccessCase): Outcome => {
  const first = failingChecks(c)[0]
  if (first !== undefined) return { refused: first }
  const record = Option.getOrThrow(c.key).record
  return {
    allowed: {
      organizationId: record.organizationId ?? ORG_1,
      apiKeyId: record.apiKeyId,
      scopes: record.scopes,
      operationId: c.operation
    }
  }
}

const outcomeOf = (result: Result.Result<Caller, PublicApiError>): Outcome =>
  Result.match(result, {
    onFailure: (error) => ({ refused: error.reasonCode }),
    onSuccess: (caller) => ({ allowed: caller })
  })

describe("decideAccess property: the first failing check in the documented order", () => {
  it("agrees with the oracle, with several checks failing at once and every outcome reached", () => {
    const firstFailures = new Map<ReasonCode | "allowed", number>()
    let severalFailing = 0
    fc.assert(
      fc.property(accessCases, (c) => {
        const failing = failingChecks(c)
        if (failing.length >= 2) severalFailing++
        const expected = expectedOutcome(c)
        const key = "refused" in expected ? expected.refused : "allowed"
        firstFailures.set(key, (firstFailures.get(key) ?? 0) + 1)
        expect(outcomeOf(decideAccess(toInput(c)))).toEqual(expected)
      }),
      { numRuns: 4000 }
    )
    // The generators must exercise every rule as the first failure, and overlaps often.
    for (const code of [...CHECK_ORDER, "allowed" as const]) expect(firstFailures.get(code) ?? 0, code).toBeGreaterThan(0)
    expect(severalFailing).toBeGreaterThan(4000 / 2)
  })
})

// ---------------------------------------------------------------------------------------------
// The Effect service, over in-memory stores, the configuration and TestClock.

const hmacHex = (key: string, token: string) => createHmac("sha256", key).update(token).digest("hex")

interface StoreSetup {
  readonly keysByDigest?: ReadonlyMap<string, ApiKeyRecord>
  readonly keyStoreDown?: boolean
  readonly organizations?: ReadonlyArray<OrganizationRecord>
  readonly organizationStoreDown?: boolean
  readonly digestKey?: string | null
  readonly environment?: "sandbox" | "production"
  readonly apiKeysEnabled?: boolean
}

interface StoreCalls {
  readonly digests: Array<string>
  readonly organizationIds: Array<OrganizationId>
}

const policyLayer = (setup: StoreSetup, calls: StoreCalls = { digests: [], organizationIds: [] }) => {
  const settings: PublicApiSettings = {
    environment: setup.environment ?? "production",
    apiKeysEnabled: setup.apiKeysEnabled ?? true,
    apiKeyDigestKey:
      setup.digestKey === null ? Option.none() : Option.some(Redacted.make(setup.digestKey ?? DIGEST_KEY)),
    audioUrlTtlSeconds: 300
  }
  const keyStore = Layer.succeed(ApiKeyStore, {
    findByDigest: (digest) => {
      calls.digests.push(digest)
      return setup.keyStoreDown === true
        ? Effect.fail(new StoreUnavailable({ operation: "findByDigest", cause: new Error(`connection refused (${digest})`) }))
        : Effect.succeed(Option.fromNullishOr(setup.keysByDigest?.get(digest)))
    }
  })
  const organizationStore = Layer.succeed(OrganizationStore, {
    findById: (organizationId) => {
      calls.organizationIds.push(organizationId)
      return setup.organizationStoreDown === true
        ? Effect.fail(new StoreUnavailable({ operation: "findById", cause: new Error("pool exhausted") }))
        : Effect.succeed(
            Option.fromNullishOr(setup.organizations?.find((record) => record.organizationId === organizationId))
          )
    }
  })
  return AccessPolicyLive.pipe(
    Layer.provide(Layer.mergeAll(keyStore, organizationStore, Layer.succeed(PublicApiConfig, settings)))
  )
}

const authorize = (authorization: string | undefined, operation: OperationId) =>
  Effect.flatMap(AccessPolicy, (policy) => policy.authorize(authorization, operation))

describe("AccessPolicyLive", () => {
  const knownKey = new Map([[hmacHex(DIGEST_KEY, LIVE_TOKEN), activeKey]])

  it.effect("allows a known key, looking it up by the HMAC-SHA256 digest of the token", () =>
    Effect.gen(function* () {
      const calls: StoreCalls = { digests: [], organizationIds: [] }
      const caller = yield* authorize(`Bearer ${LIVE_TOKEN}`, "getPublicEncounter").pipe(
        Effect.provide(policyLayer({ keysByDigest: knownKey, organizations: [approvedOrganization] }, calls))
      )
      expect(caller).toEqual({ organizationId: ORG_1, apiKeyId: KEY_1, scopes: ALL_SCOPES, operationId: "getPublicEncounter" })
      expect(calls.digests).toEqual([hmacHex(DIGEST_KEY, LIVE_TOKEN)])
      expect(calls.organizationIds).toEqual([ORG_1])
    })
  )

  it.effect("does not reach the stores when screening refuses the token (malformed_token)", () =>
    Effect.gen(function* () {
      const calls: StoreCalls = { digests: [], organizationIds: [] }
      const error = yield* authorize("Bearer ce_live_nope", "getPublicEncounter").pipe(
        Effect.flip,
        Effect.provide(policyLayer({ keysByDigest: knownKey, organizations: [approvedOrganization] }, calls))
      )
      expect(error.reasonCode).toBe("malformed_token")
      expect(calls).toEqual({ digests: [], organizationIds: [] })
    })
  )

  it.effect("digest_key_unavailable (503) when no digest key is configured, after screening", () =>
    Effect.gen(function* () {
      const calls: StoreCalls = { digests: [], organizationIds: [] }
      const layer = policyLayer({ digestKey: null, keysByDigest: knownKey, organizations: [approvedOrganization] }, calls)
      const error = yield* authorize(`Bearer ${LIVE_TOKEN}`, "getPublicEncounter").pipe(Effect.flip, Effect.provide(layer))
      expect(error.reasonCode).toBe("digest_key_unavailable")
      expect(error.status).toBe(503)
      expect(calls.digests).toEqual([])
      const malformed = yield* authorize("Bearer ce_live_nope", "getPublicEncounter").pipe(Effect.flip, Effect.provide(layer))
      expect(malformed.reasonCode).toBe("malformed_token")
    })
  )

  it.effect("digest_key_unavailable (503) when the key store fails with StoreUnavailable; cause in detail, never the token", () =>
    Effect.gen(function* () {
      const error = yield* authorize(`Bearer ${LIVE_TOKEN}`, "getPublicEncounter").pipe(
        Effect.flip,
        Effect.provide(policyLayer({ keyStoreDown: true }))
      )
      expect(error.reasonCode).toBe("digest_key_unavailable")
      expect(error.status).toBe(503)
      expect(error.detail).toContain("findByDigest")
      expect(error.detail).toContain("connection refused")
      expect(error.detail).not.toContain(LIVE_TOKEN)
      expect(JSON.stringify(error.toResponse())).not.toContain("connection refused")
    })
  )

  it.effect("the token is scrubbed from detail even if a failing store echoes it", () =>
    Effect.gen(function* () {
      const echoing = AccessPolicyLive.pipe(
        Layer.provide(
          Layer.mergeAll(
            Layer.succeed(ApiKeyStore, {
              findByDigest: () =>
                Effect.fail(new StoreUnavailable({ operation: "findByDigest", cause: `bad input near ${LIVE_TOKEN}` }))
            }),
            Layer.succeed(OrganizationStore, { findById: () => Effect.succeed(Option.none()) }),
            Layer.succeed(PublicApiConfig, {
              environment: "sandbox",
              apiKeysEnabled: true,
              apiKeyDigestKey: Option.some(Redacted.make(DIGEST_KEY)),
              audioUrlTtlSeconds: 300
            })
          )
        )
      )
      const error = yield* authorize(`Bearer ${LIVE_TOKEN}`, "getPublicEncounter").pipe(Effect.flip, Effect.provide(echoing))
      expect(error.reasonCode).toBe("digest_key_unavailable")
      expect(error.detail).toContain("bad input near")
      expect(error.detail).not.toContain(LIVE_TOKEN)
    })
  )

  it.effect("digest_key_unavailable (503) when the organization store fails with StoreUnavailable", () =>
    Effect.gen(function* () {
      const error = yield* authorize(`Bearer ${LIVE_TOKEN}`, "getPublicEncounter").pipe(
        Effect.flip,
        Effect.provide(policyLayer({ keysByDigest: knownKey, organizationStoreDown: true }))
      )
      expect(error.reasonCode).toBe("digest_key_unavailable")
      expect(error.detail).toContain("pool exhausted")
    })
  )

  it.effect("org_scope_only_required without reading the organization store", () =>
    Effect.gen(function* () {
      const calls: StoreCalls = { digests: [], organizationIds: [] }
      const userKey = new Map([[hmacHex(DIGEST_KEY, LIVE_TOKEN), { ...activeKey, kind: "user" as const }]])
      const error = yield* authorize(`Bearer ${LIVE_TOKEN}`, "getPublicEncounter").pipe(
        Effect.flip,
        Effect.provide(policyLayer({ keysByDigest: userKey, organizationStoreDown: true }, calls))
      )
      expect(error.reasonCode).toBe("org_scope_only_required")
      expect(calls.organizationIds).toEqual([])
    })
  )

  it.effect("reads now from Effect's Clock: valid at expires_at, expired_key one millisecond later (TestClock)", () =>
    Effect.gen(function* () {
      const expiring = new Map([[hmacHex(DIGEST_KEY, LIVE_TOKEN), { ...activeKey, expiresAt: NOW }]])
      const layer = policyLayer({ keysByDigest: expiring, organizations: [approvedOrganization] })
      yield* TestClock.setTime(NOW.getTime())
      const caller = yield* authorize(`Bearer ${LIVE_TOKEN}`, "getPublicEncounter").pipe(Effect.provide(layer))
      expect(caller.apiKeyId).toBe(KEY_1)
      yield* TestClock.adjust("1 millis")
      const error = yield* authorize(`Bearer ${LIVE_TOKEN}`, "getPublicEncounter").pipe(Effect.flip, Effect.provide(layer))
      expect(error.reasonCode).toBe("expired_key")
    })
  )

  it("agrees with decideAccess on generated cases", () =>
    fc.assert(
      fc.asyncProperty(
        accessCases,
        fc.constantFrom("no_digest_key" as const, "key_store_down" as const),
        (c, digestOutage) =>
          Effect.gen(function* () {
            yield* TestClock.setTime(c.now.getTime())
            const keysByDigest = new Map<string, ApiKeyRecord>()
            if (Option.isSome(c.key)) keysByDigest.set(hmacHex(DIGEST_KEY, c.token.token), c.key.value.record)
            const layer = policyLayer({
              environment: c.environment,
              apiKeysEnabled: c.apiKeysEnabled,
              digestKey: !c.digestAvailable && digestOutage === "no_digest_key" ? null : DIGEST_KEY,
              keyStoreDown: !c.digestAvailable && digestOutage === "key_store_down",
              keysByDigest,
              organizations: Option.toArray(c.organization)
            })
            const result = yield* authorize(c.header.build(c.token.token), c.operation).pipe(Effect.result, Effect.provide(layer))
            expect(outcomeOf(result)).toEqual(outcomeOf(decideAccess(toInput(c))))
            expect(outcomeOf(result)).toEqual(expectedOutcome(c))
          }).pipe(Effect.provide(TestClock.layer()), Effect.runPromise)
      ),
      { numRuns: 300 }
    ))
})
