import { defineContractSuite } from "./contract/contract-suite.js"
import { postgresHarness } from "./support/postgres-harness.js"

defineContractSuite(postgresHarness)
