import { readFileSync } from "node:fs"
import { createRequire } from "node:module"

/**
 * The example fixture (`clinical-encounter-fixture/v1`, docs/fixture-format.md): one file,
 * `packages/storage-adapter/fixtures/example.fixture.json`, found through the storage
 * adapter's package exports as the sandbox data set is.
 */
export const exampleFixturePath: string = createRequire(import.meta.url).resolve(
  "@clinical-api/storage-adapter/fixtures/example.fixture.json"
)

/** The example fixture's text, as partners get it. */
export const exampleFixtureText: string = readFileSync(exampleFixturePath, "utf8")
