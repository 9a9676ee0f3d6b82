import { defineContractSuite } from "./contract/contract-suite.js"
import { memoryHarness } from "./support/memory-harness.js"

defineContractSuite(memoryHarness)
