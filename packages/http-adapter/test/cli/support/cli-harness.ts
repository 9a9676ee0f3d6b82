import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { format, stripVTControlCharacters } from "node:util"
import { makePgClient, PgClient, PgClientFromConfig } from "@clinical-api/storage-adapter"
import { NodeServices } from "@effect/platform-node"
import { ConfigProvider, Console, Effect, Exit } from "effect"
import { cliProgram } from "../../../src/cli/program.js"
import { exampleFixturePath } from "../../support/example-fixture.js"

/**
 * The CLI under test, on a fresh database per test file: a database with a random name on
 * the server of `DATABASE_URL` (dropped afterwards) or, without `DATABASE_URL`, an embedded
 * PGlite in a temporary `PGLITE_DATA_DIR`. Commands run either as real child processes
 * (`node scripts/cli.mjs`, what `pnpm cli` runs: the built CLI) or in-process through the same
 * `cliProgram` with a captured console: a child costs about a second of start-up, so the suites use
 * children for what only a process shows (exit status, streams, main.ts) and run the bulk of
 * the scenarios in-process.
 */

export const WORKSPACE_ROOT = fileURLToPath(new URL("../../../../../", import.meta.url))
/** What `pnpm cli` runs: the CLI's bundle, built first when it is missing or stale. */
export const CLI_ENTRY = "packages/http-adapter/scripts/cli.mjs"
export const EXAMPLE_FIXTURE = exampleFixturePath

export interface CliResult {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

export interface CliDatabase {
  readonly label: string
  /** The environment that selects this database (and nothing else). */
  readonly env: Readonly<Record<string, string>>
  readonly drop: () => Promise<void>
}

export const freshDatabase = async (): Promise<CliDatabase> => {
  const adminUrl = process.env["DATABASE_URL"]
  if (adminUrl === undefined || adminUrl.trim() === "") {
    const dataDir = await mkdtemp(join(tmpdir(), "clinical-api-cli-"))
    return {
      label: "embedded PGlite (PGLITE_DATA_DIR; no DATABASE_URL)",
      env: { PGLITE_DATA_DIR: dataDir },
      drop: () => rm(dataDir, { recursive: true, force: true })
    }
  }
  const name = `clinical_api_cli_${randomBytes(6).toString("hex")}`
  const admin = (statement: string) =>
    Effect.runPromise(
      Effect.scoped(
        Effect.flatMap(makePgClient({ url: adminUrl, maxConnections: 1 }), (client) =>
          client.run("test.admin", (sql) => sql.unsafe(statement))
        )
      )
    )
  await admin(`CREATE DATABASE ${name}`)
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return {
    label: "PostgreSQL server (DATABASE_URL)",
    env: { DATABASE_URL: url.toString() },
    drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).then(() => undefined)
  }
}

/**
 * The environment of a child: this process's, without any database selection but `env`'s;
 * NO_COLOR set unless `colorSettings` is "unset" (then neither NO_COLOR nor FORCE_COLOR is set).
 */
const childEnvironment = (env: Readonly<Record<string, string>>, colorSettings: "no-color" | "unset") => {
  const inherited = { ...process.env }
  for (const name of ["DATABASE_URL", "PGLITE_DATA_DIR", "API_KEY_DIGEST_KEY", "PUBLIC_API_ENVIRONMENT", "FIXTURE_FILE", "NO_COLOR", "FORCE_COLOR"]) {
    delete inherited[name]
  }
  return { ...inherited, ...(colorSettings === "no-color" ? { NO_COLOR: "1" } : {}), ...env }
}

/** Runs `pnpm cli <args>` as a child process (without pnpm's own banner). */
export const runChild = (
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string>>,
  colorSettings: "no-color" | "unset" = "no-color"
): Promise<CliResult> =>
  new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [CLI_ENTRY, ...args], {
      cwd: WORKSPACE_ROOT,
      env: childEnvironment(env, colorSettings),
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
    child.on("error", reject)
    child.on("close", (code) => resolvePromise({ code: code ?? -1, stdout, stderr }))
  })

const capturingConsole = (stdout: Array<string>, stderr: Array<string>): Console.Console => {
  const write = (into: Array<string>) => (...args: ReadonlyArray<unknown>) => {
    into.push(`${format(...args)}\n`)
  }
  const toOut = write(stdout)
  const toErr = write(stderr)
  return { ...globalThis.console, log: toOut, info: toOut, error: toErr, warn: toErr }
}

/** `env` as the whole configuration, read as the process environment is read. */
const configuredBy = (env: Readonly<Record<string, string>>) =>
  Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env: { ...env } }))

/** Runs the same program as `pnpm cli <args>` in this process, with `env` as its whole configuration. */
export const runInProcess = async (
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string>>
): Promise<CliResult> => {
  const stdout: Array<string> = []
  const stderr: Array<string> = []
  const exit = await Effect.runPromiseExit(
    cliProgram(["node", CLI_ENTRY, ...args]).pipe(
      Effect.provide(NodeServices.layer),
      Effect.provideService(Console.Console, capturingConsole(stdout, stderr)),
      configuredBy(env)
    )
  )
  return { code: Exit.isSuccess(exit) ? 0 : 1, stdout: stdout.join(""), stderr: stderr.join("") }
}

/** Runs `effect` with a client on the database `env` selects (closed afterwards). */
export const onTestDatabase = <A, E>(
  env: Readonly<Record<string, string>>,
  effect: Effect.Effect<A, E, PgClient>
): Promise<A> =>
  Effect.runPromise(
    Effect.provide(effect, PgClientFromConfig).pipe(configuredBy(env))
  )

/** Row counts of the tables a fixture fills. */
export const tableCounts = (env: Readonly<Record<string, string>>) =>
  onTestDatabase(
    env,
    PgClient.use((client) =>
      client.run(
        "test.counts",
        (sql) => sql<Array<Record<string, string>>>`
          SELECT (SELECT count(*) FROM organizations) AS organizations,
                 (SELECT count(*) FROM api_keys) AS api_keys,
                 (SELECT count(*) FROM patients) AS patients,
                 (SELECT count(*) FROM encounters) AS encounters,
                 (SELECT count(*) FROM documents) AS documents,
                 (SELECT count(*) FROM recordings) AS recordings`
      )
    ).pipe(Effect.map((rows) => Object.fromEntries(Object.entries(rows[0] ?? {}).map(([k, v]) => [k, Number(v)]))))
  )

/** Without colour codes, whatever the terminal. */
export const plain = (text: string) => stripVTControlCharacters(text)

export const jsonLines = (text: string): Array<Record<string, unknown>> =>
  text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as Record<string, unknown>)

