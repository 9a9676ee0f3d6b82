import { describe } from "vitest"
import { defineContractSuite } from "./contract/contract-suite.js"
import { databases } from "./support/stored-server.js"
import { runtimeRoleHarness } from "./support/postgres-harness.js"

/**
 * The whole contract with the service on the runtime role (docs/operations.md, "Two database
 * roles"): migrated by the owner at start, the fixture loaded by the owner, every route served
 * by a role that may only read and insert disclosure events (production's start check too).
 */
if (databases.label.startsWith("PostgreSQL server")) defineContractSuite(runtimeRoleHarness)
else describe.skip("contract on the runtime role (needs a PostgreSQL server)", () => {})
