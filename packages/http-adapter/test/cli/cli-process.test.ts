import { ApiKeyStore, computeApiKeyDigest, parseApiKeyToken } from "@clinical-api/domain"
import { ApiKeyStoreLive } from "@clinical-api/storage-adapter"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect, Option, Redacted } from "effect"
import { type CliDatabase, freshDatabase, onTestDatabase, plain, runChild, runInProcess } from "./support/cli-harness.js"

/**
 * `pnpm cli` as operators run it: real child processes of the built CLI (scripts/cli.mjs, which
 * builds dist/cli.mjs from src/cli/main.ts when it is stale), for what only a process shows
 * (exit status, which stream gets what, the token printed once). Independent children run
 * concurrently.
 */

let database: CliDatabase

beforeAll(async () => {
  database = await freshDatabase()
}, 60_000)

afterAll(async () => {
  await database?.drop()
})

const DIGEST_KEY = "process-suite-digest-key-0123456789abcdef"

describe("pnpm cli as a child process", { timeout: 120_000 }, () => {
  it("--help exits 0 naming the command; bad arguments and the in-memory database exit 1 with one line on stderr", async () => {
    const [rootHelp, issueHelp, unknownRoute, missingOption, inMemory] = await Promise.all([
      runChild(["--help"], database.env),
      runChild(["keys", "issue", "--help"], database.env),
      runChild(["organizations", "enable-route", "org_x", "listAll"], database.env),
      runChild(["keys", "issue", "--organization", "org_x"], database.env),
      runChild(["keys", "list"], {})
    ])
    expect([rootHelp.code, issueHelp.code]).toEqual([0, 0])
    expect(plain(rootHelp.stdout)).toMatch(/organizations enable-route <ORGANIZATION_ID> <OPERATION>/)
    expect(plain(issueHelp.stdout)).toMatch(/\$ issue --organization text --scopes text/)
    expect(plain(issueHelp.stdout)).toContain("The token is printed once and never again")

    for (const [result, message] of [
      [unknownRoute, /^error: unknown route "listAll"; the routes are listPublicEncounters, /],
      [missingOption, /--scopes/],
      [inMemory, /^error: no database to operate on: set DATABASE_URL .* or PGLITE_DATA_DIR/]
    ] as const) {
      const lines = plain(result.stderr)
        .split("\n")
        .filter((line) => line.trim() !== "")
      expect({ code: result.code, lines: lines.length, stdout: result.stdout }).toEqual({ code: 1, lines: 1, stdout: "" })
      expect(lines[0]).toMatch(message)
    }
  })

  it("the built CLI writes no colour codes into a pipe, with neither NO_COLOR nor FORCE_COLOR set", async () => {
    const [rootHelp, groupHelp, refused] = await Promise.all([
      runChild(["--help"], database.env, "unset"),
      runChild(["keys", "--help"], database.env, "unset"),
      runChild(["keys", "nope"], database.env, "unset")
    ])
    expect([rootHelp.code, groupHelp.code, refused.code]).toEqual([0, 0, 1])
    expect(rootHelp.stdout).toContain("COMMANDS")
    for (const output of [rootHelp.stdout, rootHelp.stderr, groupHelp.stdout, refused.stderr]) {
      expect(output.includes("\u001b")).toBe(false)
    }
  })

  it("migrate twice (the second applies nothing), then keys issue prints a token the service's key store finds", async () => {
    const env = { ...database.env, API_KEY_DIGEST_KEY: DIGEST_KEY }
    const first = await runChild(["migrate"], env)
    expect({ code: first.code, stderr: first.stderr }).toEqual({ code: 0, stderr: "" })
    expect(first.stdout).toMatch(/^Applied migration 1 \(initial_schema\)\.$/m)
    const second = await runChild(["migrate"], env)
    expect(second.code).toBe(0)
    expect(second.stdout).toMatch(/^No pending migrations; the schema is at version \d+\.\n$/)

    // The organization through the in-process program (a child each would only add seconds).
    expect((await runInProcess(["organizations", "create", "--id", "org_proc", "--name", "Process"], env)).code).toBe(0)

    const issued = await runChild(
      ["keys", "issue", "--organization", "org_proc", "--scopes", "encounters:read", "--environment", "live"],
      env
    )
    expect(issued.code).toBe(0)
    // stdout holds exactly the id and the token; the warning goes to stderr.
    expect(issued.stdout).toMatch(/^api_key_id: key_[0-9a-f]{32}\ntoken: ce_live_[0-9A-Za-z]{36}\n$/)
    expect(issued.stderr).toMatch(/^warning: the token is shown this once and cannot be shown again/)
    const token = /^token: (\S+)$/m.exec(issued.stdout)?.[1] ?? ""
    const apiKeyId = /^api_key_id: (\S+)$/m.exec(issued.stdout)?.[1] ?? ""
    expect(parseApiKeyToken(token)).toMatchObject({ environment: "live" })

    const found = await onTestDatabase(
      database.env,
      ApiKeyStore.use((store) => store.findByDigest(computeApiKeyDigest(Redacted.make(DIGEST_KEY), token))).pipe(
        Effect.provide(ApiKeyStoreLive)
      )
    )
    expect(Option.map(found, (key) => [key.apiKeyId, key.organizationId, key.state])).toEqual(
      Option.some([apiKeyId, "org_proc", "active"])
    )
  })
})
