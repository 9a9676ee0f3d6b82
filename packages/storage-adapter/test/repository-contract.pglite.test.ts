import { repositoryContract } from "./support/repository-contract.js"
import { embeddedDatabases } from "../src/testing/test-database.js"

repositoryContract(embeddedDatabases)
