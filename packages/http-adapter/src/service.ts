import { AccessCacheLayer, AccessPolicyLive, PublicApiConfig, PublicApiLive } from "@clinical-api/domain"
import {
  loadFixture,
  MediaBaseUrlFromConfig,
  OperatorStore,
  readFixtureFile,
  sandboxFixturePath,
  StorageFromConfig
} from "@clinical-api/storage-adapter"
import { HttpServer } from "@effect/platform"
import { Console, Context, Deferred, Effect, Layer, Option, Redacted } from "effect"
import { type ServiceConfig, serviceConfig } from "./config.js"
import { HttpApiRoutesLive, makeHttpServerLayer } from "./server/app.js"
import { RequestLogSinkStdout } from "./server/request-log.js"

/** What the start-up banner shows a newcomer: where the service is and one key to try it with. */
export interface StartupInfo {
  readonly baseUrl: string
  readonly database: "embedded" | "postgresql"
  /** The data set loaded at start (embedded mode), if any. */
  readonly fixture: Option.Option<{ readonly path: string; readonly sampleToken: Option.Option<string> }>
}

export class Startup extends Context.Tag("@clinical-api/http-adapter/Startup")<Startup, StartupInfo>() {}

const usesEmbeddedDatabase = (config: ServiceConfig) =>
  Option.isNone(config.databaseUrl) || Redacted.value(config.databaseUrl.value).trim() === ""

/** The URL a client on this machine reaches the server at (a wildcard bind is reached on loopback). */
const baseUrlOf = (address: HttpServer.Address): string => {
  if (address._tag !== "TcpAddress") return `unix:${address.path}`
  const host = address.hostname === "0.0.0.0" || address.hostname === "::" ? "127.0.0.1" : address.hostname
  return `http://${host.includes(":") ? `[${host}]` : host}:${address.port}`
}

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
  return Option.fromNullable(typeof usable?.["token"] === "string" ? usable["token"] : undefined)
}

/**
 * Embedded mode starts with a data set: FIXTURE_FILE, or the sandbox data. It is loaded only
 * into an empty store, so a PGLITE_DATA_DIR that already holds data is served as it is.
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
  })

const publicApiSettings = (config: ServiceConfig) =>
  Layer.succeed(PublicApiConfig, {
    environment: config.environment,
    apiKeysEnabled: config.apiKeysEnabled,
    apiKeyDigestKey: config.apiKeyDigestKey,
    audioUrlTtlSeconds: config.audioUrlTtlSeconds
  })

/**
 * The whole service from configuration: storage (migrated at start, seeded in embedded mode),
 * the domain's use cases and the HTTP server. Building it starts serving; releasing it drains
 * in-flight requests, then closes the pool (and the embedded database).
 */
export const ServiceLive: Layer.Layer<Startup | HttpServer.HttpServer, unknown> = Layer.unwrapEffect(
  Effect.gen(function*() {
    const config = yield* serviceConfig
    const embedded = usesEmbeddedDatabase(config)
    // Embedded audio is served by this very server: its URL is known once it listens (PORT=0 too).
    const listeningAt = yield* Deferred.make<string>()
    const storage = StorageFromConfig.pipe(Layer.provide(MediaBaseUrlFromConfig(Deferred.await(listeningAt))))
    const seeded = Layer.effect(
      Startup,
      Effect.gen(function*() {
        const fixture = embedded ? Option.some(yield* seedEmbeddedStore(config)) : Option.none()
        const { address } = yield* HttpServer.HttpServer
        yield* Deferred.succeed(listeningAt, baseUrlOf(address))
        return { baseUrl: baseUrlOf(address), database: embedded ? "embedded" as const : "postgresql" as const, fixture }
      })
    )
    const http = makeHttpServerLayer({ port: config.port, host: config.host }).pipe(
      Layer.provide(HttpApiRoutesLive),
      Layer.provide(RequestLogSinkStdout),
      Layer.provide(PublicApiLive.pipe(
        Layer.provide(AccessPolicyLive),
        Layer.provide(AccessCacheLayer({ timeToLive: `${config.accessCacheSeconds} seconds`, capacity: 10_000 }))
      ))
    )
    return seeded.pipe(
      Layer.provideMerge(http),
      Layer.provide(publicApiSettings(config)),
      Layer.provideMerge(storage)
    )
  })
)

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

