import { readFile } from "node:fs/promises"
import { fileURLToPath } from "node:url"
import { Data, Effect } from "effect"

/** The sandbox data set the embedded default starts with (see fixtures/README.md). */
export const sandboxFixturePath = fileURLToPath(new URL("../fixtures/sandbox.fixture.json", import.meta.url))

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
