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
import { HttpServer } from "@effect/platform"
import { ConfigProvider, Context, Deferred, Effect, Exit, Layer, Option, Scope } from "effect"
import { serviceConfig } from "../../src/config.js"
import { HttpApiRoutesLive, makeHttpServerLayer, makeRequestLogCollector } from "../../src/index.js"
import { databases, exampleFixtureText } from "./stored-server.js"
import { startTcpProxy, type TcpProxy } from "./tcp-proxy.js"

/**
 * The real service stack (as `startStoredServer`) whose pool reaches its fresh database
 * through a `TcpProxy`, so a test can take PostgreSQL away while the service serves and give
 * it back. `query` reaches the database directly, around the proxy.
 */
/** `url` with its host and port replaced by the loopback proxy's. */
const throughProxy = (url: string, proxyPort: number): string => {
  const parsed = new URL(url)
  parsed.hostname = "127.0.0.1"
  parsed.port = String(proxyPort)
  return parsed.toString()
}

export interface ProxiedServer {
  readonly baseUrl: string
  readonly proxy: TcpProxy
  readonly logLines: () => ReadonlyArray<string>
  readonly query: <A>(query: (sql: Sql) => Promise<A>) => Promise<A>
  readonly close: () => Promise<void>
}

export const startProxiedServer = async (
  environment: ReadonlyArray<readonly [string, string]> = [],
  fixtureText: string = exampleFixtureText
): Promise<ProxiedServer> => {
  const provider = ConfigProvider.fromMap(new Map([["API_KEY_DIGEST_KEY", "faults-suite-digest-key"], ...environment]))
  const config = await Effect.runPromise(Effect.withConfigProvider(serviceConfig, provider))
  const scope = Effect.runSync(Scope.make())
  const database = await Effect.runPromise(Scope.extend(databases.fresh, scope))
  const direct = new URL(database.url)
  const proxy = await startTcpProxy(direct.hostname, Number(direct.port))
  const proxiedUrl = throughProxy(database.url, proxy.port)
  // The direct client is for the test's own queries; on PGlite's single session the test reuses the service's pool.
  const directClient = database.separateClients
    ? Option.some(await Effect.runPromise(Scope.extend(makePgClient({ url: database.url, maxConnections: 1 }), scope)))
    : Option.none()

  const baseUrl = Effect.runSync(Deferred.make<string>())
  const log = makeRequestLogCollector()
  const pool = Layer.scoped(PgClient, makePgClient({ url: proxiedUrl, ...database.clientOptions, connectTimeoutSeconds: 2 }))
  const storage = Layer.mergeAll(PostgresPortsLive, AudioStorageFromConfig).pipe(
    Layer.provide(MediaBaseUrlFromConfig(Deferred.await(baseUrl))),
    Layer.provide(Layer.setConfigProvider(provider)),
    Layer.provideMerge(IdGeneratorLive),
    Layer.provideMerge(Layer.effectDiscard(migrate())),
    Layer.provideMerge(pool)
  )
  const settings = Layer.succeed(PublicApiConfig, {
    environment: config.environment,
    apiKeysEnabled: config.apiKeysEnabled,
    apiKeyDigestKey: config.apiKeyDigestKey,
    audioUrlTtlSeconds: config.audioUrlTtlSeconds
  })
  const layer = makeHttpServerLayer({ port: 0, host: "127.0.0.1" }).pipe(
    Layer.provide(HttpApiRoutesLive),
    Layer.provide(log.layer),
    Layer.provide(PublicApiLive.pipe(Layer.provide(AccessPolicyLive), Layer.provide(settings))),
    Layer.provideMerge(storage)
  )
  const context = await Effect.runPromise(Layer.buildWithScope(layer, scope))
  const address = Context.get(context, HttpServer.HttpServer).address
  if (address._tag !== "TcpAddress") throw new Error("expected a TCP address")
  const url = `http://127.0.0.1:${address.port}`
  Effect.runSync(Deferred.succeed(baseUrl, url))
  await Effect.runPromise(Effect.provide(loadFixture(fixtureText, { digestKey: Option.getOrThrow(config.apiKeyDigestKey) }), context))

  const client = Option.getOrElse(directClient, () => Context.get(context, PgClient))
  return {
    baseUrl: url,
    proxy,
    logLines: log.lines,
    query: (statement) => Effect.runPromise(client.run("test.query", statement)),
    close: async () => {
      proxy.restore()
      await Effect.runPromise(Scope.close(scope, Exit.void))
      await proxy.close()
    }
  }
}
