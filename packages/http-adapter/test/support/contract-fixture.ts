import { apiKeyChecksum, type OperationId, operationIds } from "@clinical-api/domain"
import { exampleFixtureText } from "./example-fixture.js"
import type { FixtureDocument, FixtureEncounter } from "./fixture-data-set.js"

/** A well-formed token (prefix, 30 base62 characters, CRC-32 checksum) from a readable seed. */
export const makeToken = (environment: "live" | "test", seed: string): string => {
  const random = seed.replace(/[^0-9A-Za-z]/g, "0").padEnd(30, "0").slice(0, 30)
  return `ce_${environment}_${random}${apiKeyChecksum(random)}`
}

const base = JSON.parse(exampleFixtureText) as FixtureDocument
const tokenOf = (label: string) => {
  const key = base.api_keys.find((candidate) => candidate.label === label)
  if (key === undefined) throw new Error(`no key ${label} in the example fixture`)
  return key.token
}

/** Ids that must round-trip through a percent-encoded path segment unchanged. */
export const ODD_ENCOUNTER_ID = "enc/odd id %2F;?#+&=é☃"
export const ODD_DOCUMENT_ID = "doc/☃ 100% ;x?y#z"
export const LONG_ENCOUNTER_ID = `enc_${"x".repeat(300)}`

const all = ["encounters:read", "patients:read", "documents:read", "recordings:read"] as const

export const tokens = {
  riversideFull: tokenOf("riverside full access"),
  riversideNoRecordings: tokenOf("riverside without recordings"),
  riversideRevoked: tokenOf("riverside revoked"),
  riversideExpired: tokenOf("riverside expired"),
  lakesideFull: tokenOf("lakeside full access"),
  userKey: tokenOf("user key"),
  pendingOrg: tokenOf("pending org"),
  riversideDisabled: makeToken("test", "Riverside0disabled0key"),
  riversideDocumentsOnly: makeToken("test", "Riverside0documents0only0key"),
  serviceKey: makeToken("test", "Riverside0service0key"),
  noRoutesOrg: makeToken("test", "Noroutes0org0key"),
  riversideLive: makeToken("live", "Riverside0live0key"),
  /** Well-formed but stored nowhere. */
  unknown: makeToken("test", "Unknown0key0never0stored")
} as const

const paging: ReadonlyArray<FixtureEncounter> = Array.from({ length: 14 }, (_, index) => ({
  encounter_id: `enc_page_${String(index).padStart(2, "0")}`,
  organization_id: "org_riverside",
  // Pairs share a created_at, so the encounter_id tie-breaker decides their order.
  created_at: new Date(Date.UTC(2026, 3, 1 + Math.floor(index / 2), 8)).toISOString(),
  updated_at: new Date(Date.UTC(2026, 3, 20)).toISOString(),
  data_class: "clinical",
  documents: []
}))

const oddEncounter: FixtureEncounter = {
  encounter_id: ODD_ENCOUNTER_ID,
  organization_id: "org_riverside",
  created_at: "2026-03-01T08:00:00.000Z",
  updated_at: "2026-03-01T08:00:00.000Z",
  data_class: "clinical",
  documents: [{
    document_id: ODD_DOCUMENT_ID,
    schema_type: "document",
    title: "Odd ids",
    created_at: "2026-03-01T08:00:00.000Z",
    updated_at: "2026-03-01T08:00:00.000Z",
    content_markdown: "odd"
  }]
}

const longEncounter: FixtureEncounter = {
  encounter_id: LONG_ENCOUNTER_ID,
  organization_id: "org_riverside",
  created_at: "2026-03-02T08:00:00.000Z",
  updated_at: "2026-03-02T08:00:00.000Z",
  data_class: "clinical",
  documents: []
}

const key = (token: string, label: string, extra: Partial<FixtureDocument["api_keys"][number]> = {}) => ({
  label,
  token,
  organization_id: "org_riverside",
  kind: "organization" as const,
  scopes: all,
  state: "active" as const,
  expires_at: null,
  ...extra
})

/** The example fixture plus what the suite needs to reach every reason code and to page. */
export const contractFixture: FixtureDocument = {
  ...base,
  organizations: [
    ...base.organizations,
    { organization_id: "org_noroutes", name: "No routes", approved: true, enabled_routes: [] as Array<OperationId> }
  ],
  api_keys: [
    ...base.api_keys,
    key(tokens.riversideDisabled, "riverside disabled", { state: "disabled" }),
    key(tokens.riversideDocumentsOnly, "riverside documents only", { scopes: ["encounters:read", "documents:read"] }),
    key(tokens.serviceKey, "service key", { kind: "service" }),
    key(tokens.noRoutesOrg, "no routes org", { organization_id: "org_noroutes" }),
    key(tokens.riversideLive, "riverside live")
  ],
  encounters: [...base.encounters, ...paging, oddEncounter, longEncounter]
}

/** Every token of the data set: none may ever appear in a log line. */
export const allTokens: ReadonlyArray<string> = contractFixture.api_keys.map((apiKey) => apiKey.token).concat(tokens.unknown)

export { operationIds }
