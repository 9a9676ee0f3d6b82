import {
  AccessCacheLayer,
  AccessPolicyLive,
  type ApiKeyStore,
  type AudioStorage,
  type DisclosureRecorder,
  type EncounterRepository,
  type IdGenerator,
  type OrganizationStore,
  PublicApi,
  PublicApiConfig,
  PublicApiLive,
  type PublicApiSettings,
  type UnitOfWork
} from "@clinical-api/domain"
import {
  invalidConfig,
  ledgerRewriteRights,
  loadFixture,
  MediaBaseUrlFromConfig,
  OperatorStore,
  readFixtureFile,
  sandboxFixturePath,
  StorageFromConfig,
  withoutStatementTimeout
} from "@clinical-api/storage-adapter"
import { Console, Context, Deferred, Effect, Layer, Option, Redacted } from "effect"
import { HttpServer } from "effect/http"
import { type ServiceConfig, serviceConfig } from "./config.js"
import { baseUrlOf, makeHttpServerLayer } from "./server/http-server.js"
import { type RequestLogSink, RequestLogSinkStdout } from "./server/request-log.js"

/** What the start-up banner shows a newcomer: where the service is and one key to try it with. */
export interface StartupInfo {
  readonly baseUrl: string
  readonly database: "embedded" | "postgresql"
  /** The data set loaded at start (embedded mode), if any. */
  readonly fixture: Option.Option<{ readonly path: string; readonly sampleToken: Option.Option<string> }>
}

export class Startup extends Context.Service<Startup, StartupInfo>()("@clinical-api/http-adapter/Startup") {}

/** The domain's ports the use cases and the access policy run over. */
export type DomainPorts =
  | EncounterRepository
  | ApiKeyStore
  | OrganizationStore
  | DisclosureRecorder
  | UnitOfWork
  | AudioStorage
  | IdGenerator

const usesEmbeddedDatabase = (config: ServiceConfig) =>
  Option.isNone(config.databaseUrl) || Redacted.value(config.databaseUrl.value).trim() === ""

/** The first active, organization-scoped key of a fixture with every scope: the banner's sandbox key. */
const sampleTokenOf = (fixtureText: string): Option.Option<string> => {
  const parsed: unknown = JSON.parse(fixtureText)
  if (typeof parsed !== "object" || parsed === null || !("api_keys" in parsed) || !Array.isArray(parsed.api_keys)) {
    return Option.none()
  }
  const keys = parsed.api_keys as ReadonlyArray<Record<string, unknown>>
  const usable = keys.find((key) =>
    key["kind"] === "organization" && key["state"] === "active" && key["expires_at"] === null &&
    Array.isArray(key["scopes"]) && key["scopes"].length === 4
  )
  return Option.fromNullishOr(typeof usable?.["token"] === "string" ? usable["token"] : undefined)
}

/**
 * Production serves only on a role PostgreSQL refuses any UPDATE, DELETE or TRUNCATE of the
 * disclosure events (and that does not own them): the runtime role of docs/operations.md. The
 * refusal is a configuration error, reported in one line like the others.
 */
const refuseRewritableLedger = Layer.effectDiscard(
  Effect.gen(function*() {
    const { rights, role } = yield* ledgerRewriteRights
    if (rights.length > 0) {
      return yield* Effect.fail(invalidConfig(
        `in production DATABASE_URL must connect as a role that cannot change the disclosure ledger, but ${role} has ` +
          `${rights.join(", ")} on disclosure_events: connect DATABASE_URL as the runtime role and DATABASE_OWNER_URL ` +
          `as the owner (docs/operations.md, "Two database roles")`
      ))
    }
  })
)

/**
 * Embedded mode starts with a data set: FIXTURE_FILE, or the sandbox data. It is loaded only
 * into an empty store, so a PGLITE_DATA_DIR that already holds data is served as it is. It is
 * start-up work, not a request: DATABASE_STATEMENT_TIMEOUT_MS does not bound its statements.
 */
const seedEmbeddedStore = (config: ServiceConfig) =>
  Effect.gen(function*() {
    const path = Option.getOrElse(config.fixtureFile, () => sandboxFixturePath)
    const text = yield* readFixtureFile(path)
    const operator = yield* OperatorStore
    const existing = yield* operator.listOrganizations()
    if (existing.length === 0) {
      const digestKey = Option.getOrThrow(config.apiKeyDigestKey)
      const report = yield* loadFixture(text, { digestKey })
      yield* Effect.logInfo("fixture loaded").pipe(Effect.annotateLogs({ path, ...report }))
    }
    return { path, sampleToken: sampleTokenOf(text) }
  }).pipe(withoutStatementTimeout)

/**
 * What a test may put in place of a production part; everything else (the configuration
 * reading, the access cache, the access policy, the use cases, the HTTP server) is the
 * production one.
 */
export interface ServiceOverrides {
  /** In place of the configured storage (PostgreSQL or the embedded PGlite): the domain's ports, built. */
  readonly storage?: Layer.Layer<DomainPorts> | undefined
  /** In place of standard output. */
  readonly requestLog?: Layer.Layer<RequestLogSink> | undefined
  /** Over the configured use-case settings: what no configuration produces (no digest key at all). */
  readonly settings?: ((configured: PublicApiSettings) => PublicApiSettings) | undefined
  /** Around the use cases (a delay, a defect), for the server's own guarantees. */
  readonly publicApi?: ((api: PublicApi["Service"]) => PublicApi["Service"]) | undefined
}

/**
 * The whole service from configuration (the `ConfigProvider` in the context): storage
 * (migrated at start, seeded in embedded mode), the access cache and policy, the domain's
 * use cases and the HTTP server. Building it starts serving; releasing it drains requests in
 * flight, then closes the pool (and the embedded database). The configured storage's services
 * are in the built context too (the operator's tools and the tests reach the same pool).
 */
export const makeService = (overrides: ServiceOverrides = {}): Layer.Layer<Startup | HttpServer.HttpServer, unknown> =>
  Layer.unwrap(
    Effect.gen(function*() {
      const config = yield* serviceConfig
      // Embedded audio is served by this very server: its URL is known once it listens (PORT=0 too).
      const listeningAt = yield* Deferred.make<string>()
      const settings: PublicApiSettings = {
        environment: config.environment,
        apiKeysEnabled: config.apiKeysEnabled,
        apiKeyDigestKey: config.apiKeyDigestKey,
        audioUrlTtlSeconds: config.audioUrlTtlSeconds
      }
      const useCases = overrides.publicApi === undefined
        ? PublicApiLive
        : Layer.effect(PublicApi, Effect.map(Effect.service(PublicApi), overrides.publicApi)).pipe(Layer.provide(PublicApiLive))
      const domain = Layer.mergeAll(
        useCases,
        AccessPolicyLive.pipe(
          Layer.provide(AccessCacheLayer({ timeToLive: `${config.accessCacheSeconds} seconds`, capacity: 10_000 }))
        )
      ).pipe(Layer.provide(Layer.succeed(PublicApiConfig, overrides.settings?.(settings) ?? settings)))
      // The docs page fills in the loaded data set's sample key (the banner's) for "Test Request".
      const http = (fixture: StartupInfo["fixture"]) =>
        makeHttpServerLayer({
          port: config.port,
          host: config.host,
          publication: {
            publicBaseUrl: config.publicBaseUrl,
            environment: config.environment,
            sandboxKey: Option.flatMap(fixture, ({ sampleToken }) => sampleToken)
          }
        }).pipe(
          Layer.provide(overrides.requestLog ?? RequestLogSinkStdout),
          Layer.provide(domain)
        )
      // The data set is loaded before the server layer is built, so the port opens only once
      // every route answers as it will (migrations applied, sandbox keys present, cache built).
      const startup = <E, R>(database: StartupInfo["database"], fixture: Effect.Effect<StartupInfo["fixture"], E, R>) =>
        Layer.unwrap(Effect.map(fixture, (loaded) =>
          Layer.effect(
            Startup,
            Effect.gen(function*() {
              const { address } = yield* HttpServer.HttpServer
              yield* Deferred.succeed(listeningAt, baseUrlOf(address))
              return { baseUrl: baseUrlOf(address), database, fixture: loaded }
            })
          ).pipe(Layer.provideMerge(http(loaded)))))
      if (overrides.storage !== undefined) {
        return startup("embedded", Effect.succeed(Option.none())).pipe(Layer.provide(overrides.storage))
      }
      const embedded = usesEmbeddedDatabase(config)
      const configured = StorageFromConfig.pipe(Layer.provide(MediaBaseUrlFromConfig(Deferred.await(listeningAt))))
      const storage = config.environment === "production" && !embedded
        ? refuseRewritableLedger.pipe(Layer.provideMerge(configured))
        : configured
      return startup(
        embedded ? "embedded" : "postgresql",
        embedded ? Effect.map(seedEmbeddedStore(config), Option.some) : Effect.succeed(Option.none())
      ).pipe(Layer.provideMerge(storage))
    })
  )

/** The service `pnpm start` runs, configured from the environment. */
export const ServiceLive = makeService()

/** The newcomer's banner: the URL, the docs, a sandbox key and a ready curl line. */
export const printBanner = (info: StartupInfo) =>
  Effect.gen(function*() {
    const lines = [
      `Clinical Encounter Public API listening on ${info.baseUrl} (${info.database} database)`,
      `  API docs:     ${info.baseUrl}/docs`,
      `  OpenAPI:      ${info.baseUrl}/openapi.json`
    ]
    const token = Option.flatMap(info.fixture, (fixture) => fixture.sampleToken)
    if (Option.isSome(info.fixture)) lines.push(`  Data set:     ${info.fixture.value.path}`)
    if (Option.isSome(token)) {
      lines.push(
        `  Sandbox key:  ${token.value}`,
        `  Try it:       curl -s -H 'Authorization: Bearer ${token.value}' '${info.baseUrl}/external/v1/encounters?limit=2'`
      )
    }
    yield* Console.error(lines.join("\n"))
  })
