import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { PublicApiSettings } from "@clinical-api/domain"
import { randomBytes } from "node:crypto"
import { loadFixture, PgClient, PgClientLayer, type Sql } from "@clinical-api/storage-adapter"
import { embeddedDatabases, realServerDatabases } from "@clinical-api/storage-adapter/testing"
import { type Clock, ConfigProvider, Context, Effect, Exit, Layer, Option, Scope } from "effect"
import postgres from "postgres"
import { onDatabase } from "../../src/cli/database.js"
import { serviceConfig } from "../../src/config.js"
import { exampleFixtureText } from "./example-fixture.js"
import { type RunningService, startService } from "./harness.js"

export { exampleFixtureText }

/**
 * A real PostgreSQL server (own random database, dropped afterwards): DATABASE_URL, or a
 * testcontainers container where a Docker engine exists; else PGlite.
 */
export const databases = (await realServerDatabases()) ?? embeddedDatabases

/**
 * The server's clock: the real one, or frozen at an instant the test chooses (so a test can
 * stand at exactly `expires_at`, or a minute in the past, without waiting).
 */
export interface ControlledClock {
  readonly clock: Clock.Clock
  readonly freezeAt: (epochMillis: number) => void
  /** Back to the real time. */
  readonly resume: () => void
}

export const makeControlledClock = (real: Clock.Clock = Effect.runSync(Effect.clockWith(Effect.succeed))): ControlledClock => {
  let frozen: number | undefined = undefined
  const millis = () => frozen ?? real.currentTimeMillisUnsafe()
  const nanos = () => (frozen === undefined ? real.currentTimeNanosUnsafe() : BigInt(frozen) * 1_000_000n)
  const clock: Clock.Clock = {
    currentTimeMillisUnsafe: millis,
    currentTimeMillis: Effect.sync(millis),
    currentTimeNanosUnsafe: nanos,
    currentTimeNanos: Effect.sync(nanos),
    monotonicTimeNanosUnsafe: () => real.monotonicTimeNanosUnsafe(),
    monotonicTimeNanos: real.monotonicTimeNanos,
    sleep: (duration) => real.sleep(duration)
  }
  return {
    clock,
    freezeAt: (epochMillis) => void (frozen = epochMillis),
    resume: () => void (frozen = undefined)
  }
}

export interface StoredServer {
  readonly baseUrl: string
  readonly clock: ControlledClock
  /** Every request-log line written so far. */
  readonly logLines: () => ReadonlyArray<string>
  /** Runs a query on the server's database. */
  readonly query: <A>(query: (sql: Sql) => Promise<A>) => Promise<A>
  /** Every row of every table of the database, as JSON text, one entry per row. */
  readonly allRows: () => Promise<ReadonlyArray<string>>
  readonly close: () => Promise<void>
}

type FixtureServices = Effect.Services<ReturnType<typeof loadFixture>>

/** The configured storage's services of a running service (its pool, audio storage and ids). */
const storageOf = (service: RunningService) => service.context as Context.Context<FixtureServices | PgClient>

/** Loads `fixtureText` through the fixture loader on the service's own storage, with the digest key `env` configures. */
export const loadFixtureInto = async (
  service: RunningService,
  env: Readonly<Record<string, string>>,
  fixtureText: string
): Promise<void> => {
  const config = await Effect.runPromise(serviceConfig.parse(ConfigProvider.fromEnv({ env })))
  await Effect.runPromise(
    loadFixture(fixtureText, { digestKey: Option.getOrThrow(config.apiKeyDigestKey) }).pipe(Effect.provideContext(storageOf(service)))
  )
}

/** Loads `fixtureText` as the operator's command line does: on the owner's connection (DATABASE_OWNER_URL). */
const loadFixtureAsOwner = async (env: Readonly<Record<string, string>>, fixtureText: string): Promise<void> => {
  const provider = ConfigProvider.layer(ConfigProvider.fromEnv({ env }))
  const config = await Effect.runPromise(serviceConfig.parse(ConfigProvider.fromEnv({ env })))
  await Effect.runPromise(
    onDatabase(loadFixture(fixtureText, { digestKey: Option.getOrThrow(config.apiKeyDigestKey) })).pipe(Effect.provide(provider))
  )
}

/**
 * The service as `pnpm start` builds it (`makeService`), configured by `environment` through a
 * test `ConfigProvider`, on a fresh database: storage from configuration (the fresh PostgreSQL
 * database as DATABASE_URL, or the embedded PGlite), the audio storage chosen by `environment`
 * (AUDIO_STORAGE, S3_*, MEDIA_SIGNING_KEY), the access cache, the use cases and the HTTP
 * server on an ephemeral loopback port, whose address becomes the media base URL. The fixture
 * is loaded through the fixture loader, on the service's own pool.
 */
/**
 * A LOGIN role of a random name for the service to connect as, dropped when `scope` closes
 * (before the database: its privileges there are dropped first): the runtime role of the
 * two-role setup.
 */
const makeRuntimeRole = (ownerUrl: string, scope: Scope.Scope) =>
  Effect.runPromise(Scope.provide(
    Effect.acquireRelease(
      Effect.promise(async () => {
        const name = `clinical_api_runtime_test_${randomBytes(6).toString("hex")}`
        const admin = postgres(ownerUrl, { max: 1, onnotice: () => {} })
        await admin.unsafe(`CREATE ROLE ${name} LOGIN`)
        await admin.end({ timeout: 5 })
        const url = new URL(ownerUrl)
        url.username = name
        url.password = ""
        return { name, url: url.toString() }
      }),
      ({ name }) =>
        Effect.promise(async () => {
          const admin = postgres(ownerUrl, { max: 1, onnotice: () => {} })
          await admin.unsafe(`DROP OWNED BY ${name}`).catch(() => undefined)
          await admin.unsafe(`DROP ROLE IF EXISTS ${name}`).catch(() => undefined)
          await admin.end({ timeout: 5 })
        })
    ),
    scope
  ))

export interface StoredServerOptions {
  /**
   * Two database roles (a real server only): the service migrates as the owner
   * (DATABASE_OWNER_URL, the fresh database's) and serves as a new LOGIN runtime role
   * (DATABASE_URL, DATABASE_RUNTIME_ROLE); the fixture is loaded and `query` runs as the owner.
   */
  readonly runtimeRole?: boolean
}

export const startStoredServer = async (
  environment: ReadonlyArray<readonly [string, string]>,
  fixtureText: string = exampleFixtureText,
  /** Settings no configuration can produce (e.g. no digest key at all), for the 503 paths. */
  overrideSettings: Partial<PublicApiSettings> = {},
  options: StoredServerOptions = {}
): Promise<StoredServer> => {
  const scope = Effect.runSync(Scope.make())
  // Closed before the database's scope: the role's privileges are dropped in the database, then the role.
  const rolesScope = Effect.runSync(Scope.make())
  const database = await Effect.runPromise(Scope.provide(databases.fresh, scope))
  if (options.runtimeRole === true && !database.separateClients) throw new Error("two roles need a real PostgreSQL server")
  // Production serves only on the runtime role (docs/operations.md, "Two database roles"); PGlite has one role.
  const production = environment.some(([name, value]) => name === "PUBLIC_API_ENVIRONMENT" && value === "production")
  const twoRoles = options.runtimeRole === true || (production && database.separateClients)
  const runtimeRole = twoRoles ? await makeRuntimeRole(database.url, rolesScope) : undefined
  // PGlite's single session takes no second pool: there the service starts its own embedded
  // database and loads the fixture from a file, as `pnpm start` does.
  const fixtureDirectory = database.separateClients ? undefined : mkdtempSync(join(tmpdir(), "stored-server-"))
  const fixtureFile = fixtureDirectory === undefined ? undefined : join(fixtureDirectory, "fixture.json")
  if (fixtureFile !== undefined) writeFileSync(fixtureFile, fixtureText)
  const env: Record<string, string> = {
    API_KEY_DIGEST_KEY: "media-suite-digest-key",
    ...(fixtureFile === undefined
      ? { DATABASE_URL: database.url, DATABASE_POOL_MAX: String(database.clientOptions.maxConnections ?? 4) }
      : { FIXTURE_FILE: fixtureFile }),
    ...(runtimeRole === undefined
      ? {}
      : { DATABASE_OWNER_URL: database.url, DATABASE_URL: runtimeRole.url, DATABASE_RUNTIME_ROLE: runtimeRole.name }),
    ...Object.fromEntries(environment)
  }
  const clock = makeControlledClock()
  const service = await startService(env, {
    clock: clock.clock,
    overrides: { settings: (settings) => ({ ...settings, ...overrideSettings }) }
  })
  if (runtimeRole !== undefined) await loadFixtureAsOwner(env, fixtureText)
  else if (fixtureFile === undefined) await loadFixtureInto(service, env, fixtureText)

  const queryContext = runtimeRole === undefined
    ? storageOf(service)
    : Context.make(PgClient, Context.get(
      await Effect.runPromise(Layer.buildWithScope(PgClientLayer({ url: database.url, maxConnections: 2 }), scope)),
      PgClient
    ))
  const query = <A>(statement: (sql: Sql) => Promise<A>) =>
    Effect.runPromise(Effect.flatMap(Effect.service(PgClient), (client) => client.run("test.query", statement)).pipe(
      Effect.provideContext(queryContext)
    ))

  return {
    baseUrl: service.baseUrl,
    clock,
    logLines: service.logLines,
    query,
    allRows: async () => {
      const tables = await query((sql) =>
        sql<Array<{ table_name: string }>>`
          SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`
      )
      const rows: Array<string> = []
      for (const { table_name } of tables) {
        const found = await query((sql) => sql<Array<{ row: string }>>`SELECT row_to_json(t)::text AS row FROM ${sql(table_name)} t`)
        rows.push(...found.map((entry) => `${table_name}: ${entry.row}`))
      }
      return rows
    },
    close: async () => {
      await service.close()
      await Effect.runPromise(Scope.close(rolesScope, Exit.void))
      await Effect.runPromise(Scope.close(scope, Exit.void))
      if (fixtureDirectory !== undefined) rmSync(fixtureDirectory, { recursive: true, force: true })
    }
  }
}

/** The one active key of the example fixture with every scope on every route. */
export const riversideFullToken = (fixtureText: string = exampleFixtureText): string => {
  const parsed = JSON.parse(fixtureText) as {
    readonly api_keys: ReadonlyArray<{
      readonly token: string
      readonly kind: string
      readonly state: string
      readonly scopes: ReadonlyArray<string>
      readonly organization_id: string
      readonly expires_at: string | null
    }>
  }
  const key = parsed.api_keys.find((candidate) =>
    candidate.kind === "organization" && candidate.organization_id === "org_riverside" && candidate.state === "active" && candidate.expires_at === null &&
    candidate.scopes.includes("recordings:read")
  )
  if (key === undefined) throw new Error("no full riverside key in the fixture")
  return key.token
}

/** The recording bytes of a document of the fixture. */
export const recordingBytes = (documentId: string, fixtureText: string = exampleFixtureText): Buffer => {
  const parsed = JSON.parse(fixtureText) as {
    readonly encounters: ReadonlyArray<{
      readonly documents: ReadonlyArray<{
        readonly document_id: string
        readonly recording?: { readonly data_base64?: string } | null
      }>
    }>
  }
  for (const encounter of parsed.encounters) {
    for (const document of encounter.documents) {
      const data = document.recording?.data_base64
      if (document.document_id === documentId && data !== undefined) return Buffer.from(data, "base64")
    }
  }
  throw new Error(`no recording bytes for ${documentId}`)
}
