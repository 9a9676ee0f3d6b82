import { readFileSync } from "node:fs"
import { generateDataSet, loadFixture, makePgClient, PgClient, type Sql } from "@clinical-api/storage-adapter"
import { realServerDatabases } from "@clinical-api/storage-adapter/testing"
import { type Context, Effect, Exit, Option, Redacted, Scope } from "effect"
import { type RunningService, startService } from "../../../http-adapter/test/support/harness.js"

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

const exampleFixtureText = readFileSync(
  new URL("../../../storage-adapter/fixtures/example.fixture.json", import.meta.url),
  "utf8"
)
const exampleFixture = JSON.parse(exampleFixtureText) as { readonly api_keys: ReadonlyArray<FixtureKey> }

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
  /** Runs statements on the service's database (on a client of the test's own). */
  readonly query: <A>(statement: (sql: Sql) => Promise<A>) => Promise<A>
  /**
   * A second service on the same database with no API-key digest key (a setting no
   * configuration produces): key verification cannot run, 503 `digest_key_unavailable`.
   */
  readonly startWithoutDigestKey: () => Promise<{ readonly baseUrl: string; readonly close: () => Promise<void> }>
  readonly close: () => Promise<void>
}

const DIGEST_KEY = "client-sdk-suite-digest-key-of-at-least-32-chars"

type StorageServices = Effect.Services<ReturnType<typeof loadFixture>>

/**
 * The service as `pnpm start` builds it (the http-adapter harness's `startService`, i.e.
 * `makeService`), on a fresh PostgreSQL database (DATABASE_URL, dropped afterwards), with the
 * example fixture and one organization of `GENERATED_ENCOUNTERS` encounters from the
 * storage-adapter's generator (no demo or training data, so every one is listed).
 */
export const startClientTestService = async (): Promise<ClientTestService> => {
  const databases = await realServerDatabases()
  if (databases === undefined) throw new Error("the client's server tests need PostgreSQL: set DATABASE_URL")
  const scope = Effect.runSync(Scope.make())
  const closeScope = () => Effect.runPromise(Scope.close(scope, Exit.void))
  const started: Array<RunningService> = []
  try {
    const database = await Effect.runPromise(Scope.provide(databases.fresh, scope))
    const env = {
      DATABASE_URL: database.url,
      DATABASE_POOL_MAX: String(database.clientOptions.maxConnections ?? 4),
      API_KEY_DIGEST_KEY: DIGEST_KEY
    }
    const service = await startService(env)
    started.push(service)
    const run = <A, E>(effect: Effect.Effect<A, E, StorageServices>): Promise<A> =>
      Effect.runPromise(Effect.provideContext(effect, service.context as Context.Context<StorageServices>))
    const digestKey = Redacted.make(DIGEST_KEY)
    await run(loadFixture(exampleFixtureText, { digestKey }))
    // The generator's statements take seconds: a client of its own, without the bound the
    // service puts on each statement of a request (as the CLI's generate command does).
    const testClient = await Effect.runPromise(Scope.provide(makePgClient({ url: database.url, maxConnections: 2 }), scope))
    const onTestClient = <A, E>(effect: Effect.Effect<A, E, PgClient>): Promise<A> =>
      Effect.runPromise(Effect.provideService(effect, PgClient, testClient))
    const report = await onTestClient(generateDataSet({
      organizations: 1,
      encounters: GENERATED_ENCOUNTERS,
      seed: 36,
      bigOrganizationShare: 1,
      demoShare: 0,
      trainingShare: 0,
      transcriptShare: 0.1,
      recordingShare: 0.8,
      digestKey,
      environment: "test"
    }))
    const organization = report.organizations[0]
    if (organization === undefined) throw new Error("the generator made no organization")
    return {
      baseUrl: service.baseUrl,
      generated: { organizationId: organization.organizationId, token: organization.token },
      query: (statement) => onTestClient(testClient.run("client-test.query", statement)),
      startWithoutDigestKey: async () => {
        const unavailable = await startService(env, {
          overrides: { settings: (settings) => ({ ...settings, apiKeyDigestKey: Option.none() }) }
        })
        return { baseUrl: unavailable.baseUrl, close: unavailable.close }
      },
      close: async () => {
        await service.close()
        await closeScope()
      }
    }
  } catch (error) {
    for (const service of started) await service.close()
    await closeScope()
    throw error
  }
}
