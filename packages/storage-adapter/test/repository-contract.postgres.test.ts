import { describe, it } from "@effect/vitest"
import { repositoryContract } from "./support/repository-contract.js"
import { realServerDatabases } from "../src/testing/test-database.js"

/**
 * The same contract on a real PostgreSQL server, each run in its own fresh database: the
 * DATABASE_URL server, or a testcontainers container where a Docker engine exists. With
 * neither it is skipped, visibly: the contract then ran on PGlite only.
 */
const databases = await realServerDatabases()

if (databases === undefined) {
  console.warn("No DATABASE_URL and no Docker engine: the repository contract suite ran on PGlite only (real-server run skipped).")
  describe("repository contract on a PostgreSQL server", () => {
    it.skip("skipped: no DATABASE_URL and no Docker engine, the repository contract ran on PGlite only", () => {})
  })
} else {
  repositoryContract(databases)
}
