import { Config, Context, Effect, Layer, Option, Redacted, Schema, SchemaIssue } from "effect"
import { EMBEDDED_MAX_CONNECTIONS, startEmbeddedPostgres } from "../embedded/embedded-postgres.js"
import { isRuntimeRoleName, RUNTIME_ROLE_DEFAULT } from "../migrations/runtime-role.js"
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

const nonEmptyUrl = (name: string) =>
  Config.option(Config.Redacted(name)).pipe(
    Config.map(Option.filter((url) => Redacted.value(url).trim() !== ""))
  )

/**
 * `DATABASE_OWNER_URL`: the owner of the schema (migrations, fixtures, the command line), when
 * `DATABASE_URL` is the runtime role the service and the webhook worker connect as. Unset,
 * `DATABASE_URL` is both (one role, like the embedded database).
 */
export const ownerUrlConfig = nonEmptyUrl("DATABASE_OWNER_URL")

/**
 * The role the migrations grant the runtime privileges to (runtime-role.ts): `DATABASE_RUNTIME_ROLE`,
 * or `clinical_api_runtime` when `DATABASE_OWNER_URL` is set; none with one role and no name.
 */
export const runtimeRoleConfig: Config.Config<string | undefined> = Config.all({
  role: Config.option(Config.String("DATABASE_RUNTIME_ROLE")),
  ownerUrl: ownerUrlConfig
}).pipe(
  Config.mapEffect(({ ownerUrl, role }) => {
    const named = Option.map(role, (name) => name.trim()).pipe(Option.filter((name) => name !== ""))
    if (Option.isSome(named) && !isRuntimeRoleName(named.value)) {
      return Effect.fail(invalidConfig(
        `DATABASE_RUNTIME_ROLE must be a plain role name (a letter or _, then letters, digits or _; at most 63), got ${JSON.stringify(named.value)}`
      ))
    }
    return Effect.succeed(Option.isSome(named) ? named.value : Option.isSome(ownerUrl) ? RUNTIME_ROLE_DEFAULT : undefined)
  })
)

const locationFromConfig = (role: "runtime" | "owner") =>
  Effect.gen(function* () {
    const databaseUrl = yield* nonEmptyUrl("DATABASE_URL")
    const ownerUrl = role === "owner" ? yield* ownerUrlConfig : Option.none<Redacted.Redacted<string>>()
    const url = Option.orElse(ownerUrl, () => databaseUrl)
    if (Option.isSome(url)) {
      const maxConnections = yield* Config.Int("DATABASE_POOL_MAX").pipe(Config.withDefault(10))
      return { url: url.value, embedded: false, maxConnections }
    }
    const dataDir = yield* Config.option(Config.NonEmptyString("PGLITE_DATA_DIR"))
    const embedded = yield* startEmbeddedPostgres({ dataDir: Option.getOrUndefined(dataDir) })
    return { url: Redacted.make(embedded.url), embedded: true, maxConnections: EMBEDDED_MAX_CONNECTIONS }
  })

/** The service's database: `DATABASE_URL` (the runtime role where there are two), or the embedded PGlite. */
export const DatabaseLocationFromConfig = Layer.effect(DatabaseLocation, locationFromConfig("runtime"))

/** The owner's database: `DATABASE_OWNER_URL`, else as `DatabaseLocationFromConfig`. */
export const OwnerDatabaseLocationFromConfig = Layer.effect(DatabaseLocation, locationFromConfig("owner"))

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

export const clientOptions = (location: DatabaseLocationService): PgClientOptions => ({
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

/** `OperatorPgClient` on the owner's database (`DATABASE_OWNER_URL`, else `DATABASE_URL` or the embedded one). */
export const PgClientFromConfig = OperatorPgClient.pipe(Layer.provideMerge(OwnerDatabaseLocationFromConfig))

/** `OperatorPgClient` as the runtime role (`DATABASE_URL`): the webhook worker's. */
export const RuntimePgClientFromConfig = OperatorPgClient.pipe(Layer.provideMerge(DatabaseLocationFromConfig))
