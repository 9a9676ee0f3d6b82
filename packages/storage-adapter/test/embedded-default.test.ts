import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type OrganizationId, OrganizationStore } from "@clinical-api/domain"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Option } from "effect"
import { MediaBaseUrlLayer, OperatorStore, PgClient, StorageFromConfig } from "../src/index.js"

const withConfig = (entries: Record<string, string>) => ConfigProvider.layer(ConfigProvider.fromEnv({ env: entries }))

describe("embedded default (no DATABASE_URL): PGlite through postgres.js", () => {
  it.live(
    "PGLITE_DATA_DIR persists across restarts; the layer migrates at start-up and closes cleanly",
    () => {
      const dataDir = mkdtempSync(join(tmpdir(), "clinical-api-pglite-"))
      const storage = StorageFromConfig.pipe(
        Layer.provide(MediaBaseUrlLayer("http://127.0.0.1:8080")),
        Layer.provide(withConfig({ PGLITE_DATA_DIR: dataDir }))
      )
      return Effect.gen(function* () {
        yield* Effect.gen(function* () {
          const operator = yield* OperatorStore
          yield* operator.createOrganization({ organizationId: "org_persisted" as OrganizationId, name: "Persisted" })
          // The same postgres.js path as a server: the embedded database answers as PostgreSQL.
          const client = yield* PgClient
          const version = yield* client.run("test.version", (sql) => sql<Array<{ version: string }>>`SELECT version()`)
          expect(version[0]?.version).toContain("PGlite")
        }).pipe(Effect.provide(storage))

        // A second start on the same directory: the data is there and migrations are not re-applied.
        const found = yield* Effect.flatMap(OrganizationStore, (store) =>
          store.findById("org_persisted" as OrganizationId)
        ).pipe(Effect.provide(storage))
        expect(Option.map(found, (organization) => organization.name)).toEqual(Option.some("Persisted"))
      }).pipe(Effect.ensuring(Effect.sync(() => rmSync(dataDir, { recursive: true, force: true }))))
    },
    60_000
  )
})
