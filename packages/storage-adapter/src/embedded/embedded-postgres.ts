import { StoreUnavailable } from "@clinical-api/domain"
import { Effect, type Scope } from "effect"

/**
 * The embedded default: PGlite in this process, served on a loopback port by
 * `PGLiteSocketServer`, so postgres.js talks to it exactly as it talks to a server and every
 * query is the one a real PostgreSQL runs.
 *
 * PGlite has a single session. pglite-socket can multiplex several sockets onto it, but it
 * interleaves their protocol messages one by one outside transactions (an unnamed statement
 * of one client can replace another's between Parse and Bind), and session state is shared.
 * So the server accepts one connection and the pool that uses it has one connection.
 */
export interface EmbeddedPostgresOptions {
  /** A data directory to persist to; in memory when absent. */
  readonly dataDir?: string | undefined
  /** 0 picks a free port. */
  readonly port?: number
}

export interface EmbeddedPostgres {
  readonly url: string
  readonly host: string
  readonly port: number
}

/** One connection at a time: the pool on top of it must have `maxConnections: 1`. */
export const EMBEDDED_MAX_CONNECTIONS = 1

export const startEmbeddedPostgres = (
  options: EmbeddedPostgresOptions = {}
): Effect.Effect<EmbeddedPostgres, StoreUnavailable, Scope.Scope> =>
  Effect.gen(function* () {
    // Loaded only when the embedded database is used: PGlite and its WebAssembly build add
    // about 50 MB to a process that serves a PostgreSQL server.
    const { PGlite, PGLiteSocketServer } = yield* Effect.tryPromise({
      try: async () => ({ ...(await import("@electric-sql/pglite")), ...(await import("@electric-sql/pglite-socket")) }),
      catch: (cause) => new StoreUnavailable({ operation: "embedded.load", cause })
    })
    const database = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () => (options.dataDir === undefined ? PGlite.create() : PGlite.create(options.dataDir)),
        catch: (cause) => new StoreUnavailable({ operation: "embedded.open", cause })
      }),
      (db) => Effect.promise(() => db.close().catch(() => undefined))
    )
    const server = new PGLiteSocketServer({
      db: database,
      host: "127.0.0.1",
      port: options.port ?? 0,
      maxConnections: EMBEDDED_MAX_CONNECTIONS
    })
    yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () => server.start(),
        catch: (cause) => new StoreUnavailable({ operation: "embedded.listen", cause })
      }),
      () => Effect.promise(() => server.stop())
    )
    // getServerConn() is "host:port" with the port the OS picked.
    const port = Number(server.getServerConn().split(":").at(-1))
    const host = "127.0.0.1"
    return { host, port, url: `postgres://postgres@${host}:${port}/postgres` }
  })
