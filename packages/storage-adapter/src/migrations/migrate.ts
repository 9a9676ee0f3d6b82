import { createHash } from "node:crypto"
import { type StoreUnavailable } from "@clinical-api/domain"
import { Data, Effect } from "effect"
import { PgClient } from "../sql/pg-client.js"
import { type Migration, migrations as releasedMigrations } from "./migrations.js"
import { grantRuntimeRole, type RuntimeRoleRefused } from "./runtime-role.js"

/** An applied migration differs from the one this build ships: the database was migrated by another schema. */
export class MigrationMismatch extends Data.TaggedError("MigrationMismatch")<{
  readonly version: number
  readonly message: string
}> {}

export interface MigrationReport {
  /** Versions applied by this run, in order (empty when the schema was already current). */
  readonly applied: ReadonlyArray<number>
  /** Every version the database now has. */
  readonly current: ReadonlyArray<number>
}

export const migrationChecksum = (migration: Migration): string =>
  createHash("sha256").update(migration.sql, "utf8").digest("hex")

/** Any constant shared by every process of this service: the key of the migration advisory lock. */
const MIGRATION_LOCK_KEY = 7_306_104_501

/**
 * Applies the pending migrations, each once, in one transaction that first takes a
 * transaction-scoped advisory lock: a second process starting at the same time waits, then
 * finds everything applied. Refuses (and changes nothing) when an applied migration's
 * checksum changed or the database has a version this build does not know.
 */
export interface MigrateOptions {
  /**
   * The role the service connects as (two roles: runtime-role.ts): created if absent and granted
   * exactly what it needs, after the migrations, in the same transaction. None with one role.
   */
  readonly runtimeRole?: string | undefined
}

export const migrate = (
  migrations: ReadonlyArray<Migration> = releasedMigrations,
  options: MigrateOptions = {}
): Effect.Effect<MigrationReport, MigrationMismatch | RuntimeRoleRefused | StoreUnavailable, PgClient> =>
  Effect.gen(function* () {
    const client = yield* PgClient
    return yield* client.transactionally(
      Effect.gen(function* () {
        yield* client.run("migrate.lock", (sql) => sql`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY}::bigint)`)
        yield* client.run(
          "migrate.ledger",
          (sql) => sql`
            CREATE TABLE IF NOT EXISTS schema_migrations (
              version    integer PRIMARY KEY,
              name       text NOT NULL,
              checksum   text NOT NULL,
              applied_at timestamptz NOT NULL DEFAULT now()
            )`
        )
        const appliedRows = yield* client.run(
          "migrate.read",
          (sql) => sql<Array<{ version: number; checksum: string }>>`
            SELECT version, checksum FROM schema_migrations ORDER BY version`
        )
        const known = new Map(migrations.map((migration) => [migration.version, migration]))
        for (const row of appliedRows) {
          const migration = known.get(row.version)
          if (migration === undefined) {
            return yield* new MigrationMismatch({
              version: row.version,
              message: `The database has migration ${row.version}, which this build does not know (a newer build migrated it).`
            })
          }
          if (migrationChecksum(migration) !== row.checksum) {
            return yield* new MigrationMismatch({
              version: row.version,
              message: `Migration ${row.version} (${migration.name}) was applied with different content (checksum changed); released migrations must never be edited.`
            })
          }
        }
        const appliedVersions = new Set(appliedRows.map((row) => row.version))
        const pending = [...migrations]
          .sort((a, b) => a.version - b.version)
          .filter((migration) => !appliedVersions.has(migration.version))
        for (const migration of pending) {
          yield* client.run(`migrate.apply.${migration.version}`, (sql) => sql.unsafe(migration.sql).simple())
          yield* client.run(
            `migrate.record.${migration.version}`,
            (sql) => sql`
              INSERT INTO schema_migrations (version, name, checksum)
              VALUES (${migration.version}, ${migration.name}, ${migrationChecksum(migration)})`
          )
        }
        if (options.runtimeRole !== undefined) yield* grantRuntimeRole(options.runtimeRole)
        return {
          applied: pending.map((migration) => migration.version),
          current: [...appliedVersions, ...pending.map((migration) => migration.version)].sort((a, b) => a - b)
        }
      })
    )
  })
