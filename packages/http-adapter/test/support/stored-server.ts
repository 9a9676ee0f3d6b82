import { AccessPolicyLive, PublicApiConfig, PublicApiLive } from "@clinical-api/domain"
import {
  AudioStorageFromConfig,
  IdGeneratorLive,
  loadFixture,
  makePgClient,
  MediaBaseUrlFromConfig,
  migrate,
  PgClient,
  PostgresPortsLive,
  type Sql
} from "@clinical-api/storage-adapter"
import { embeddedDatabases, realServerDatabases } from "@clinical-api/storage-adapter/testing"
import { HttpServer } from "@effect/platform"
import { Clock, ConfigProvider, Context, Deferred, Effect, Exit, Layer, Option, Scope } from "effect"
import { serviceConfig } from "../../src/config.js"
import { HttpApiRoutesLive, makeHttpServerLayer, makeRequestLogCollector } from "../../src/index.js"
import { exampleFixtureText } from "./example-fixture.js"

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

export const makeControlledClock = (): ControlledClock => {
  const real = Clock.make()
  let frozen: number | undefined = undefined
  const millis = () => frozen ?? real.unsafeCurrentTimeMillis()
  const nanos = () => (frozen === undefined ? real.unsafeCurrentTimeNanos() : BigInt(frozen) * 1_000_000n)
  const clock: Clock.Clock = {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: millis,
    currentTimeMillis: Effect.sync(millis),
    unsafeCurrentTimeNanos: nanos,
    currentTimeNanos: Effect.sync(nanos),
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

/**
 * The real service stack on a fresh database: PostgreSQL storage (DATABASE_URL or PGlite),
 * the audio storage chosen by `environment` (AUDIO_STORAGE, S3_*, MEDIA_SIGNING_KEY), the
 * domain's use cases with the service's own configuration reading (AUDIO_URL_TTL_SECONDS...),
 * and the HTTP server on an ephemeral loopback port, whose address becomes the media base
 * URL once it listens. The example fixture is loaded through the fixture loader.
 */
export const startStoredServer = async (
  environment: ReadonlyArray<readonly [string, string]>,
  fixtureText: string = exampleFixtureText,
  /** Settings no configuration can produce (e.g. no digest key at all), for the 503 paths. */
  overrideSettings: Partial<Context.Tag.Service<PublicApiConfig>> = {}
): Promise<StoredServer> => {
  const provider = ConfigProvider.fromMap(new Map([["API_KEY_DIGEST_KEY", "media-suite-digest-key"], ...environment]))
  const config = await Effect.runPromise(Effect.withConfigProvider(serviceConfig, provider))
  const clock = makeControlledClock()
  const baseUrl = Effect.runSync(Deferred.make<string>())
  const log = makeRequestLogCollector()

  const database = Layer.scoped(
    PgClient,
    Effect.flatMap(Effect.orDie(databases.fresh), (db) => makePgClient({ url: db.url, ...db.clientOptions }))
  )
  const storage = Layer.mergeAll(PostgresPortsLive, AudioStorageFromConfig).pipe(
    Layer.provide(MediaBaseUrlFromConfig(Deferred.await(baseUrl))),
    Layer.provide(Layer.setConfigProvider(provider)),
    Layer.provideMerge(IdGeneratorLive),
    Layer.provideMerge(Layer.effectDiscard(migrate())),
    Layer.provideMerge(database)
  )
  const settings = Layer.succeed(PublicApiConfig, {
    environment: config.environment,
    apiKeysEnabled: config.apiKeysEnabled,
    apiKeyDigestKey: config.apiKeyDigestKey,
    audioUrlTtlSeconds: config.audioUrlTtlSeconds,
    ...overrideSettings
  })
  const http = makeHttpServerLayer({ port: 0, host: "127.0.0.1" }).pipe(
    Layer.provide(HttpApiRoutesLive),
    Layer.provide(log.layer),
    Layer.provide(PublicApiLive.pipe(Layer.provide(AccessPolicyLive), Layer.provide(settings)))
  )
  const layer = http.pipe(Layer.provideMerge(storage), Layer.provide(Layer.setClock(clock.clock)))

  const scope = Effect.runSync(Scope.make())
  const context = await Effect.runPromise(Layer.buildWithScope(layer, scope))
  const address = Context.get(context, HttpServer.HttpServer).address
  if (address._tag !== "TcpAddress") throw new Error("expected a TCP address")
  const url = `http://127.0.0.1:${address.port}`
  Effect.runSync(Deferred.succeed(baseUrl, url))

  const run = <A, E>(effect: Effect.Effect<A, E, Layer.Layer.Success<typeof layer>>) =>
    Effect.runPromise(Effect.provide(effect, context))
  await run(loadFixture(fixtureText, { digestKey: Option.getOrThrow(config.apiKeyDigestKey) }))

  const query = <A>(statement: (sql: Sql) => Promise<A>) =>
    run(Effect.flatMap(PgClient, (client) => client.run("test.query", statement)))

  return {
    baseUrl: url,
    clock,
    logLines: log.lines,
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
    close: () => Effect.runPromise(Scope.close(scope, Exit.void))
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
