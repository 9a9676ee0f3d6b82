import { Config, Context, Effect, Layer, Option, Redacted, Schema, SchemaIssue } from "effect"
import { EMBEDDED_MAX_CONNECTIONS, startEmbeddedPostgres } from "../embedded/embedded-postgres.js"
import { makePgClient, PgClient, type PgClientOptions } from "./pg-client.js"

/**
 * Where the database is, read when the layer is built: `DATABASE_URL` set (and not empty)
 * names a PostgreSQL server (`DATABASE_POOL_MAX` connections, default 10); otherwise the
 * embedded PGlite is started here, in memory or in `PGLITE_DATA_DIR` when that is set, and
 * stopped when the layer is released.
 */
export interface DatabaseLocationService {
  readonly url: Redacted.Redacted<string>
  readonly embedded: boolean
  readonly maxConnections: number
}

export class DatabaseLocation extends Context.Service<DatabaseLocation, DatabaseLocationService>()(
  "@clinical-api/storage-adapter/DatabaseLocation"
) {}

/** A configuration value that is present but not acceptable, with the sentence that says why. */
export const invalidConfig = (message: string): Config.ConfigError =>
  new Config.ConfigError(new Schema.SchemaError(new SchemaIssue.InvalidValue({ message })))

export const DatabaseLocationFromConfig = Layer.effect(
  DatabaseLocation,
  Effect.gen(function* () {
    const databaseUrl = yield* Config.option(Config.Redacted("DATABASE_URL"))
    if (Option.isSome(databaseUrl) && Redacted.value(databaseUrl.value).trim() !== "") {
      const maxConnections = yield* Config.Int("DATABASE_POOL_MAX").pipe(Config.withDefault(10))
      return { url: databaseUrl.value, embedded: false, maxConnections }
    }
    const dataDir = yield* Config.option(Config.NonEmptyString("PGLITE_DATA_DIR"))
    const embedded = yield* startEmbeddedPostgres({ dataDir: Option.getOrUndefined(dataDir) })
    return { url: Redacted.make(embedded.url), embedded: true, maxConnections: EMBEDDED_MAX_CONNECTIONS }
  })
)

/** The default of `DATABASE_STATEMENT_TIMEOUT_MS`: far above any statement of a request, far below its 10 s deadline. */
export const STATEMENT_TIMEOUT_DEFAULT_MS = 2000

/**
 * `DATABASE_STATEMENT_TIMEOUT_MS`: the longest one statement of a request may take. The server
 * cancels it then (`statement_timeout`; the embedded PGlite cannot) and the client stops
 * waiting, so the request is answered 503 at once instead of at its deadline.
 */
export const statementTimeoutConfig = Config.String("DATABASE_STATEMENT_TIMEOUT_MS").pipe(
  Config.withDefault(String(STATEMENT_TIMEOUT_DEFAULT_MS)),
  Config.mapEffect((text) => {
    const value = /^[1-9][0-9]*$/.test(text.trim()) ? Number(text.trim()) : Number.NaN
    return Number.isSafeInteger(value) && value >= 100 && value <= 60_000
      ? Effect.succeed(value)
      : Effect.fail(invalidConfig(
        `DATABASE_STATEMENT_TIMEOUT_MS must be an integer from 100 to 60000, got ${JSON.stringify(text)}`
      ))
  })
)

const clientOptions = (location: DatabaseLocationService): PgClientOptions => ({
  url: location.url,
  maxConnections: location.maxConnections,
  // PGlite's single session is shared, so no named statements there.
  prepare: !location.embedded
})

/** The request path's client: every statement bounded by `DATABASE_STATEMENT_TIMEOUT_MS`. */
export const ServicePgClient = Layer.effect(
  PgClient,
  Effect.gen(function* () {
    const location = yield* DatabaseLocation
    const statementTimeoutMs = yield* statementTimeoutConfig
    return yield* makePgClient({
      ...clientOptions(location),
      statementTimeoutMs,
      serverStatementTimeout: !location.embedded
    })
  })
)

/** The operator's client (migrations, fixtures, the command line): statements as long as they need. */
export const OperatorPgClient = Layer.effect(
  PgClient,
  Effect.flatMap(DatabaseLocation, (location) => makePgClient(clientOptions(location)))
)

/** `OperatorPgClient` on the configured database. */
export const PgClientFromConfig = OperatorPgClient.pipe(Layer.provideMerge(DatabaseLocationFromConfig))
