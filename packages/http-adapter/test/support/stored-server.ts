import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { PublicApiSettings } from "@clinical-api/domain"
import { loadFixture, PgClient, type Sql } from "@clinical-api/storage-adapter"
import { embeddedDatabases, realServerDatabases } from "@clinical-api/storage-adapter/testing"
import { type Clock, ConfigProvider, type Context, Effect, Exit, Option, Scope } from "effect"
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

/**
 * The service as `pnpm start` builds it (`makeService`), configured by `environment` through a
 * test `ConfigProvider`, on a fresh database: storage from configuration (the fresh PostgreSQL
 * database as DATABASE_URL, or the embedded PGlite), the audio storage chosen by `environment`
 * (AUDIO_STORAGE, S3_*, MEDIA_SIGNING_KEY), the access cache, the use cases and the HTTP
 * server on an ephemeral loopback port, whose address becomes the media base URL. The fixture
 * is loaded through the fixture loader, on the service's own pool.
 */
export const startStoredServer = async (
  environment: ReadonlyArray<readonly [string, string]>,
  fixtureText: string = exampleFixtureText,
  /** Settings no configuration can produce (e.g. no digest key at all), for the 503 paths. */
  overrideSettings: Partial<PublicApiSettings> = {}
): Promise<StoredServer> => {
  const scope = Effect.runSync(Scope.make())
  const database = await Effect.runPromise(Scope.provide(databases.fresh, scope))
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
    ...Object.fromEntries(environment)
  }
  const clock = makeControlledClock()
  const service = await startService(env, {
    clock: clock.clock,
    overrides: { settings: (settings) => ({ ...settings, ...overrideSettings }) }
  })
  if (fixtureFile === undefined) await loadFixtureInto(service, env, fixtureText)

  const query = <A>(statement: (sql: Sql) => Promise<A>) =>
    Effect.runPromise(Effect.flatMap(Effect.service(PgClient), (client) => client.run("test.query", statement)).pipe(
      Effect.provideContext(storageOf(service))
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
