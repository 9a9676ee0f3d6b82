import { Effect, Layer, Option } from "effect"
import { DisclosureSealerFromConfig } from "./ledger/sealer.js"
import { migrate } from "./migrations/migrate.js"
import { OperatorStoreLive } from "./operator/operator-store.js"
import { ApiKeyStoreLive } from "./repositories/api-key-store.js"
import { DisclosureRecorderLive } from "./repositories/disclosure-recorder.js"
import { EncounterRepositoryLive } from "./repositories/encounter-repository.js"
import { IdGeneratorLive } from "./repositories/id-generator.js"
import { OrganizationStoreLive } from "./repositories/organization-store.js"
import { UnitOfWorkLive } from "./repositories/unit-of-work.js"
import { AudioStorageFromConfig } from "./s3/audio-storage-from-config.js"
import {
  clientOptions,
  DatabaseLocation,
  DatabaseLocationFromConfig,
  OperatorPgClient,
  ownerUrlConfig,
  runtimeRoleConfig,
  ServicePgClient
} from "./sql/database-layer.js"
import { makePgClient, PgClient } from "./sql/pg-client.js"

/** The domain's data ports on PostgreSQL, for a given `PgClient`. */
export const PostgresPortsLive = Layer.mergeAll(
  EncounterRepositoryLive,
  ApiKeyStoreLive,
  OrganizationStoreLive,
  DisclosureRecorderLive,
  UnitOfWorkLive
)

/**
 * Applies pending migrations when the layer is built (start-up), on a client of their own that
 * is closed afterwards: a migration may take longer than a request's statement may.
 */
export const MigrateOnStart = Layer.effectDiscard(
  Effect.gen(function* () {
    const location = yield* DatabaseLocation
    if (location.embedded) return yield* migrate().pipe(Effect.provide(OperatorPgClient))
    // With two roles the migrations run as the owner, on a connection of their own.
    const ownerUrl = yield* ownerUrlConfig
    const runtimeRole = yield* runtimeRoleConfig
    const owner = Option.match(ownerUrl, {
      onNone: () => location,
      onSome: (url) => ({ ...location, url, maxConnections: 1 })
    })
    return yield* migrate(undefined, { runtimeRole }).pipe(
      Effect.provide(Layer.effect(PgClient, makePgClient(clientOptions(owner))))
    )
  }).pipe(Effect.withSpan("migrate.onStart"))
)

/**
 * Everything the service and the operator tooling need, from configuration: the database
 * (`DATABASE_URL` or the embedded PGlite), migrated at start-up, the ports, the audio storage
 * (`AUDIO_STORAGE`: embedded or S3), ids and the operator store. The media base URL (where
 * the service serves embedded audio) comes from the composition root. Releasing it closes
 * the pool (and PGlite). Its client bounds every statement (`DATABASE_STATEMENT_TIMEOUT_MS`).
 * The disclosure sealer runs beside it (`LEDGER_KEY`, required in production; docs/ledger.md).
 */
export const StorageFromConfig = Layer.mergeAll(PostgresPortsLive, AudioStorageFromConfig, OperatorStoreLive, DisclosureSealerFromConfig).pipe(
  Layer.provideMerge(IdGeneratorLive),
  Layer.provideMerge(MigrateOnStart),
  Layer.provideMerge(ServicePgClient),
  Layer.provideMerge(DatabaseLocationFromConfig)
)
