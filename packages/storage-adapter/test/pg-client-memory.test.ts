import { getHeapSpaceStatistics, setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { makePgClient } from "../src/index.js"
import { serverDatabases } from "../src/testing/test-database.js"

// A file of its own, against a server: the measure is of this process's heap, to which PGlite
// (it runs in the process) and other suites would add their own.
const databaseUrl = process.env["DATABASE_URL"]?.trim()
const server = databaseUrl === undefined || databaseUrl === "" ? undefined : databaseUrl

type Collect = (options?: { readonly type: "minor" | "major" }) => void

/** V8's collector, made callable in this test process only (the service runs with no V8 flags). */
const collector = (): Collect => {
  setFlagsFromString("--expose-gc")
  return runInNewContext("gc") as Collect
}

const oldSpaceUsed = () => getHeapSpaceStatistics().find((space) => space.space_name === "old_space")?.space_used_size ?? 0

describe("PgClient and the young generation", () => {
  if (server === undefined) {
    it.skip("skipped: no DATABASE_URL (measured against a PostgreSQL server)", () => {})
  } else {
    it.live("what a statement answered is not kept by the client once answered: young collections free it, none is promoted", () =>
      Effect.gen(function* () {
        const gc = collector()
        const database = yield* Effect.orDie(serverDatabases(server).fresh)
        const client = yield* makePgClient({ url: database.url, ...database.clientOptions, statementTimeoutMs: 10_000 })
        const oneAnswer = (n: number) =>
          client.run("test.answer", (sql) => sql<Array<{ text: string }>>`
            SELECT repeat(chr(65 + (${n}::int + i) % 26), 200) AS text FROM generate_series(1, 100) AS i`)
        yield* oneAnswer(0)
        // The client's own structures are in the old generation now, as a running service's are.
        gc({ type: "major" })
        gc({ type: "major" })
        const before = oldSpaceUsed()
        let answered = 0
        yield* Effect.forEach(Array.from({ length: 400 }, (_, n) => n), (n) =>
          Effect.map(oneAnswer(n), (rows) => {
            answered += rows.length
          }), { concurrency: 8, discard: true })
        gc({ type: "minor" })
        gc({ type: "minor" })
        const promotedMb = (oldSpaceUsed() - before) / 1e6
        expect(answered).toBe(40_000)
        // 400 answers of about 20 KB of text each went through. Kept by the tables that a Set of
        // waiting statements left behind in the old generation, 7 MB of them were promoted (0.3 now).
        expect(promotedMb).toBeLessThan(2)
      }), 60_000)
  }
})
