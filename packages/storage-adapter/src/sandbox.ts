import { readFile } from "node:fs/promises"
import { createRequire } from "node:module"
import { Data, Effect } from "effect"

/**
 * The sandbox data set the embedded default starts with (see fixtures/README.md). Resolved
 * through the package's exports, not relative to this module, so that it is found from the
 * bundled service too (`pnpm start` runs a build of the service, not these sources).
 */
export const sandboxFixturePath = createRequire(import.meta.url).resolve(
  "@clinical-api/storage-adapter/fixtures/sandbox.fixture.json"
)

export class FixtureFileUnreadable extends Data.TaggedError("FixtureFileUnreadable")<{
  readonly path: string
  readonly reason: string
}> {
  override get message() {
    return `cannot read fixture file ${this.path}: ${this.reason}`
  }
}

/** Reads a fixture file as text, failing with a message that names the file. */
export const readFixtureFile = (path: string): Effect.Effect<string, FixtureFileUnreadable> =>
  Effect.tryPromise({
    try: () => readFile(path, "utf8"),
    catch: (cause) => new FixtureFileUnreadable({ path, reason: cause instanceof Error ? cause.message : String(cause) })
  })
