import { Config, Effect, Layer, Option, Redacted } from "effect"
import { EMBEDDED_MAX_CONNECTIONS, startEmbeddedPostgres } from "../embedded/embedded-postgres.js"
import { makePgClient, PgClient } from "./pg-client.js"

/**
 * Database selection, read when the layer is built: `DATABASE_URL` set (and not empty) selects
 * that PostgreSQL server (`DATABASE_POOL_MAX` connections, default 10); otherwise the embedded
 * PGlite, in memory or in `PGLITE_DATA_DIR` when that is set.
 */
export const PgClientFromConfig = Layer.scoped(
  PgClient,
  Effect.gen(function* () {
    const databaseUrl = yield* Config.option(Config.redacted("DATABASE_URL"))
    if (Option.isSome(databaseUrl) && Redacted.value(databaseUrl.value).trim() !== "") {
      const maxConnections = yield* Config.integer("DATABASE_POOL_MAX").pipe(Config.withDefault(10))
      return yield* makePgClient({ url: databaseUrl.value, maxConnections })
    }
    const dataDir = yield* Config.option(Config.nonEmptyString("PGLITE_DATA_DIR"))
    const embedded = yield* startEmbeddedPostgres({ dataDir: Option.getOrUndefined(dataDir) })
    return yield* makePgClient({ url: embedded.url, maxConnections: EMBEDDED_MAX_CONNECTIONS, prepare: false })
  })
)
