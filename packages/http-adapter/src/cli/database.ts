import { type AudioStorage, type IdGenerator, type PublicApiEnvironment, StoreUnavailable } from "@clinical-api/domain"
import {
  type DatabaseLocation,
  type EmbeddedAudioObjects,
  AudioStorageFromConfig,
  MediaBaseUrlLayer,
  IdGeneratorLive,
  migrations,
  type OperatorStore,
  OperatorStoreLive,
  PgClient,
  PgClientFromConfig,
  RuntimePgClientFromConfig
} from "@clinical-api/storage-adapter"
import { Config, Console, Effect, Layer, Option, Redacted, Schedule } from "effect"
import { loadServiceConfig, SANDBOX_DIGEST_KEY } from "../config.js"
import { type CliFailure, describeFailure, refuse } from "./failure.js"

/**
 * Where the commands operate, from the same configuration as the service: `DATABASE_URL`
 * selects a PostgreSQL server, otherwise the embedded PGlite in `PGLITE_DATA_DIR`. Without
 * either the service would run on an in-memory PGlite, which a command cannot reach (it is
 * inside the service's process) and which would vanish when the command exits: the commands
 * refuse to run rather than report changes that nobody will ever see.
 */
export const DATABASE_HELP =
  "Database: DATABASE_URL selects a PostgreSQL server, and the commands connect as DATABASE_OWNER_URL when it is set " +
  "(the schema's owner; the webhook worker connects as DATABASE_URL, the runtime role); otherwise the embedded PGlite stored in PGLITE_DATA_DIR " +
  "(stop a service using that directory first: PGlite serves one process). With neither set the command refuses " +
  "to run: the in-memory embedded database would vanish when it exits, with every change."

export type DatabaseTarget =
  | { readonly _tag: "Server" }
  | { readonly _tag: "EmbeddedDirectory"; readonly dataDir: string }
  | { readonly _tag: "EmbeddedInMemory" }

export const databaseTarget: Effect.Effect<DatabaseTarget, Config.ConfigError> = Effect.gen(function* () {
  for (const name of ["DATABASE_URL", "DATABASE_OWNER_URL"]) {
    const databaseUrl = yield* Config.option(Config.Redacted(name))
    if (Option.isSome(databaseUrl) && Redacted.value(databaseUrl.value).trim() !== "") return { _tag: "Server" } as const
  }
  const dataDir = yield* Config.option(Config.NonEmptyString("PGLITE_DATA_DIR"))
  return Option.isSome(dataDir)
    ? ({ _tag: "EmbeddedDirectory", dataDir: dataDir.value } as const)
    : ({ _tag: "EmbeddedInMemory" } as const)
})

const requirePersistentDatabase = Effect.flatMap(databaseTarget, (target) =>
  target._tag === "EmbeddedInMemory"
    ? Effect.fail(
        refuse(
          "no database to operate on: set DATABASE_URL to a PostgreSQL server, or PGLITE_DATA_DIR to the embedded " +
            "database's data directory (the in-memory embedded database would vanish when this command exits)"
        )
      )
    : Effect.void
)

/** The runtime role's connection is `DATABASE_URL`: with only the owner's, the worker would run on nothing. */
const requireRuntimeUrl = Effect.gen(function* () {
  const [databaseUrl, ownerUrl] = yield* Effect.all([
    Config.option(Config.String("DATABASE_URL")),
    Config.option(Config.String("DATABASE_OWNER_URL"))
  ])
  const set = (url: Option.Option<string>) => Option.isSome(url) && url.value.trim() !== ""
  if (set(ownerUrl) && !set(databaseUrl)) {
    return yield* refuse("DATABASE_OWNER_URL is set but DATABASE_URL is not: the webhook worker connects as the runtime role (DATABASE_URL)")
  }
})

/** Refuses to work on a schema this build did not migrate: run `migrate` first. */
const requireCurrentSchema = Effect.gen(function* () {
  const client = yield* PgClient
  const ledger = yield* client.run(
    "cli.schemaLedger",
    (sql) => sql<Array<{ present: boolean }>>`SELECT to_regclass('schema_migrations') IS NOT NULL AS present`
  )
  const rows = ledger[0]?.present === true
    ? yield* client.run(
        "cli.schemaVersions",
        (sql) => sql<Array<{ version: number }>>`SELECT version FROM schema_migrations`
      )
    : []
  const applied = new Set(rows.map((row) => row.version))
  const known = new Set(migrations.map((migration) => migration.version))
  const newer = [...applied].filter((version) => !known.has(version))
  if (newer.length > 0) {
    return yield* refuse(
      `the database has migration ${newer.join(", ")}, which this build does not know (a newer build migrated it)`
    )
  }
  const pending = migrations.filter((migration) => !applied.has(migration.version)).map((migration) => migration.version)
  if (pending.length > 0) {
    return yield* refuse(
      `the database schema is not current (pending migration ${pending.join(", ")}): run \`pnpm cli migrate\` first`
    )
  }
})

/**
 * The operator services on the configured database (closed when the command ends): the
 * client, the operator store, ids, and the audio storage the fixture loader puts recordings
 * into (`AUDIO_STORAGE`: embedded or S3). The command line never signs URLs, so the media
 * base URL is a placeholder.
 */
const operatorServices = (client: typeof PgClientFromConfig) =>
  Layer.mergeAll(
    OperatorStoreLive,
    AudioStorageFromConfig.pipe(Layer.provide(MediaBaseUrlLayer("http://127.0.0.1")))
  ).pipe(
    Layer.provideMerge(IdGeneratorLive),
    Layer.provideMerge(client)
  )

/** The operator services as the schema's owner (`DATABASE_OWNER_URL`, else `DATABASE_URL`). */
export const OperatorServicesLive = operatorServices(PgClientFromConfig)

/** The same services as the runtime role (`DATABASE_URL`): the webhook worker's. */
export const RuntimeServicesLive = operatorServices(RuntimePgClientFromConfig)

export type OperatorServices = PgClient | OperatorStore | IdGenerator | AudioStorage | EmbeddedAudioObjects | DatabaseLocation

export interface DatabaseOptions {
  /** `migrate` itself runs on a schema that is not current; every other command refuses one. */
  readonly requireCurrentSchema?: boolean
  /** Connect as the runtime role (`DATABASE_URL`), not the owner: the webhook worker does what the service's role may. */
  readonly asRuntimeRole?: boolean
  /**
   * A long-running command (the webhook worker) waits for a database it cannot reach at its
   * start, as it rides out one that goes away later, instead of exiting: a worker started
   * during a failover or before its database is up must not need a restart.
   */
  readonly waitForDatabase?: boolean
}

/** The schema check, tried again every second while the database cannot be reached, with one line on stderr each time. */
const waitingForDatabase = <A, E, R>(check: Effect.Effect<A, E | StoreUnavailable, R>) =>
  check.pipe(
    Effect.tapError((error) =>
      error instanceof StoreUnavailable
        ? Console.error(`the database cannot be reached yet (${describeFailure(error)}); trying again in 1 s`)
        : Effect.void
    ),
    Effect.retry({ while: (error) => error instanceof StoreUnavailable, schedule: Schedule.spaced("1 second") })
  )

/**
 * Runs `effect` on the configured database: refuses an in-memory one, opens the pool, checks
 * the schema, and closes everything afterwards. A group added later (webhooks) provides its
 * own store layers inside `effect`; they find the `PgClient` here.
 */
export const onDatabase = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  options: DatabaseOptions = {}
): Effect.Effect<A, E | CliFailure | Config.ConfigError | StoreUnavailable, Exclude<R, OperatorServices>> =>
  Effect.andThen(
    options.asRuntimeRole === true ? Effect.andThen(requirePersistentDatabase, requireRuntimeUrl) : requirePersistentDatabase,
    Effect.provide(
      options.requireCurrentSchema === false
        ? effect
        : Effect.andThen(options.waitForDatabase === true ? waitingForDatabase(requireCurrentSchema) : requireCurrentSchema, effect),
      options.asRuntimeRole === true ? RuntimeServicesLive : OperatorServicesLive
    )
  )

export interface DigestKeySetting {
  readonly digestKey: Redacted.Redacted<string>
  readonly environment: PublicApiEnvironment
  /** The fixed sandbox key, made because API_KEY_DIGEST_KEY is unset. */
  readonly sandboxKey: boolean
}

/**
 * The API-key digest key, read and validated exactly as the service reads it (the whole
 * service configuration: production requires API_KEY_DIGEST_KEY, the sandbox makes the fixed
 * sandbox key without one), so keys issued or loaded here work against a service started
 * with the same environment.
 */
export const digestKeySetting: Effect.Effect<DigestKeySetting, Config.ConfigError | CliFailure> = Effect.gen(
  function* () {
    const config = yield* loadServiceConfig
    if (Option.isNone(config.apiKeyDigestKey)) {
      return yield* refuse("API_KEY_DIGEST_KEY is not set: no API key can be digested")
    }
    const digestKey = config.apiKeyDigestKey.value
    return { digestKey, environment: config.environment, sandboxKey: Redacted.value(digestKey) === SANDBOX_DIGEST_KEY }
  }
)

/** Printed after keys were digested with the sandbox key (a refusal stays one line). */
export const sandboxKeyNote = (setting: DigestKeySetting) =>
  setting.sandboxKey
    ? Console.error(
        "note: API_KEY_DIGEST_KEY is not set, so the sandbox digest key was used: these keys work only with a " +
          "sandbox service that has no API_KEY_DIGEST_KEY either"
      )
    : Effect.void
