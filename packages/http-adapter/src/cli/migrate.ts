import { DatabaseLocation, migrate, migrations, runtimeRoleConfig } from "@clinical-api/storage-adapter"
import { Console, Effect } from "effect"
import { Command } from "effect/cli"
import { onDatabase } from "./database.js"

const nameOf = (version: number) =>
  migrations.find((migration) => migration.version === version)?.name ?? "unknown"

export const migrateCommand = Command.make("migrate", {}, () =>
  onDatabase(
    Effect.gen(function* () {
      // The embedded database has one role.
      const { embedded } = yield* DatabaseLocation
      const report = yield* migrate(undefined, { runtimeRole: embedded ? undefined : yield* runtimeRoleConfig })
      const current = report.current.at(-1)
      if (report.applied.length === 0) {
        return yield* Console.log(`No pending migrations; the schema is at version ${current ?? "none"}.`)
      }
      for (const version of report.applied) yield* Console.log(`Applied migration ${version} (${nameOf(version)}).`)
      yield* Console.log(`The schema is at version ${current ?? "none"}.`)
    }),
    { requireCurrentSchema: false }
  )
).pipe(
  Command.withDescription(
    "Apply the pending database migrations, each once, under an advisory lock (safe while another process " +
      "migrates), and print what was applied. Refuses a database migrated by a newer build or with an edited " +
      "migration, changing nothing. With DATABASE_OWNER_URL (or DATABASE_RUNTIME_ROLE) set, the runtime role " +
      "(DATABASE_RUNTIME_ROLE, default clinical_api_runtime) is created if absent and granted what the service and " +
      "the webhook worker need, never UPDATE, DELETE or TRUNCATE of the disclosure events."
  )
)
