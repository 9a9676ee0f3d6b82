import { makePgClient, type Sql } from "@clinical-api/storage-adapter"
import { Effect, Exit, Scope } from "effect"
import { startService } from "./harness.js"
import { databases, exampleFixtureText, loadFixtureInto } from "./stored-server.js"
import { startTcpProxy, type TcpProxy } from "./tcp-proxy.js"

/**
 * The service (as `startStoredServer`) whose pool reaches its fresh database through a
 * `TcpProxy` (its DATABASE_URL is the proxy's), so a test can take PostgreSQL away while the
 * service serves and give it back. `query` reaches the database directly, around the proxy.
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
  const scope = Effect.runSync(Scope.make())
  const database = await Effect.runPromise(Scope.provide(databases.fresh, scope))
  if (!database.separateClients) throw new Error("the proxied server needs a PostgreSQL server (DATABASE_URL)")
  const direct = new URL(database.url)
  const proxy = await startTcpProxy(direct.hostname, Number(direct.port))
  // The test's own client, around the proxy.
  const client = await Effect.runPromise(Scope.provide(makePgClient({ url: database.url, maxConnections: 1 }), scope))
  const env = {
    API_KEY_DIGEST_KEY: "faults-suite-digest-key",
    DATABASE_URL: throughProxy(database.url, proxy.port),
    DATABASE_POOL_MAX: String(database.clientOptions.maxConnections ?? 4),
    ...Object.fromEntries(environment)
  }
  const service = await startService(env)
  await loadFixtureInto(service, env, fixtureText)
  return {
    baseUrl: service.baseUrl,
    proxy,
    logLines: service.logLines,
    query: (statement) => Effect.runPromise(client.run("test.query", statement)),
    close: async () => {
      proxy.restore()
      await service.close()
      await Effect.runPromise(Scope.close(scope, Exit.void))
      await proxy.close()
    }
  }
}
