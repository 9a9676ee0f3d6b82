import { readFileSync } from "node:fs"
import postgres from "postgres"

/** Encounters of the generated organization the sync tests read. */
export const GENERATED_ENCOUNTERS = 25_000

interface FixtureKey {
  readonly token: string
  readonly organization_id: string
  readonly kind: string
  readonly state: string
  readonly scopes: ReadonlyArray<string>
  readonly expires_at: string | null
}

const exampleFixture = JSON.parse(
  readFileSync(new URL("../../../storage-adapter/fixtures/example.fixture.json", import.meta.url), "utf8")
) as { readonly api_keys: ReadonlyArray<FixtureKey> }

const keyWhere = (description: string, matches: (key: FixtureKey) => boolean): string => {
  const key = exampleFixture.api_keys.find(matches)
  if (key === undefined) throw new Error(`the example fixture has no ${description}`)
  return key.token
}

const allScopes = (key: FixtureKey) => key.scopes.includes("recordings:read")
const usable = (key: FixtureKey) => key.kind === "organization" && key.state === "active" && key.expires_at === null

/** The example fixture's keys, found by what they are rather than by their text. */
export const exampleKeys = {
  riversideFull: keyWhere("full riverside key", (key) => key.organization_id === "org_riverside" && usable(key) && allScopes(key)),
  riversideNoRecordings: keyWhere(
    "riverside key without recordings:read",
    (key) => key.organization_id === "org_riverside" && usable(key) && !allScopes(key)
  ),
  riversideRevoked: keyWhere("revoked key", (key) => key.state === "revoked"),
  riversideExpired: keyWhere("expired key", (key) => key.expires_at !== null && Date.parse(key.expires_at) < Date.now()),
  riversideUser: keyWhere("user key", (key) => key.kind === "user"),
  lakesideFull: keyWhere("lakeside key", (key) => key.organization_id === "org_lakeside" && usable(key)),
  pendingOrganization: keyWhere("key of the unapproved organization", (key) => key.organization_id === "org_pending")
}

export interface ClientTestService {
  readonly baseUrl: string
  /** The organization of `GENERATED_ENCOUNTERS` generated encounters, and a full-access key of it. */
  readonly generated: { readonly organizationId: string; readonly token: string }
  /** Runs statements on the service's database. */
  readonly query: <A>(statement: (sql: postgres.Sql) => Promise<A>) => Promise<A>
  /**
   * Another service, on a database of its own that then stops taking connections, so that
   * key verification cannot run (503 `digest_key_unavailable`).
   */
  readonly startWithoutDatabase: () => Promise<{ readonly baseUrl: string; readonly close: () => Promise<void> }>
  readonly close: () => Promise<void>
}

interface ExternalService {
  readonly baseUrl: string
  readonly databaseUrl: string
  readonly organizationId: string
  readonly token: string
  /** A second service and its database. */
  readonly unavailableBaseUrl: string
  readonly unavailableDatabaseUrl: string
}

/**
 * While the http-adapter's harness is being ported: a service started outside the test
 * (CLIENT_SDK_DEV_SERVICE, JSON of `ExternalService`) with the example fixture and a generated
 * organization loaded.
 */
export const startClientTestService = async (): Promise<ClientTestService> => {
  const setting = process.env["CLIENT_SDK_DEV_SERVICE"]
  if (setting === undefined) throw new Error("CLIENT_SDK_DEV_SERVICE is not set")
  const external = JSON.parse(setting) as ExternalService
  const sql = postgres(external.databaseUrl, { max: 2, onnotice: () => {} })
  return {
    baseUrl: external.baseUrl,
    generated: { organizationId: external.organizationId, token: external.token },
    query: (statement) => statement(sql),
    startWithoutDatabase: async () => {
      const name = new URL(external.unavailableDatabaseUrl).pathname.slice(1)
      await sql.unsafe(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`)
      await sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ${name}`
      return {
        baseUrl: external.unavailableBaseUrl,
        close: async () => void (await sql.unsafe(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`))
      }
    },
    close: () => sql.end({ timeout: 5 })
  }
}
