import { type ChildProcess, execFile, spawn } from "node:child_process"
import { existsSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { makePgClient, type Sql } from "@clinical-api/storage-adapter"
import { serverDatabases } from "@clinical-api/storage-adapter/testing"
import { Effect, Exit, Scope } from "effect"

/**
 * The service and its operator CLI as real child processes (`pnpm start` and `pnpm cli`
 * without pnpm in between, so the child's pid is the service's own), and fresh databases on a
 * PostgreSQL server. Used by the soak (`pnpm soak`) and by the process-level tests.
 */
export const repositoryRoot = fileURLToPath(new URL("../../../", import.meta.url))
const packageRoot = fileURLToPath(new URL("../", import.meta.url))
const buildScript = fileURLToPath(new URL("./build-service.mjs", import.meta.url))
const cliScript = fileURLToPath(new URL("./cli.mjs", import.meta.url))

const isRunning = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** Bundles of processes that are gone: a test worker that is killed never runs its exit handler. */
const removeOrphanedBundles = () => {
  for (const entry of readdirSync(`${packageRoot}dist`, { withFileTypes: true })) {
    const owner = /^service-process\.(\d+)$/.exec(entry.name)?.[1]
    if (entry.isDirectory() && owner !== undefined && !isRunning(Number(owner))) {
      rmSync(`${packageRoot}dist/${entry.name}`, { recursive: true, force: true })
    }
  }
}

/**
 * The service's bundle as `pnpm start` builds it (scripts/build-service.mjs), built once per
 * process that starts services, in a folder of its own (test files run in parallel, and bundles
 * built at once must not write each other's chunks) and removed when the process exits. The
 * sources under the tsx loader would not be what ships, and the loader's worker thread alone
 * held about 90 MB of RSS.
 */
let serviceBundle: Promise<string> | undefined
const builtService = (): Promise<string> => {
  serviceBundle ??= (async () => {
    if (existsSync(`${packageRoot}dist`)) removeOrphanedBundles()
    const folder = `dist/service-process.${process.pid}`
    await promisify(execFile)(process.execPath, [buildScript, "src/main.ts", `${folder}/main.mjs`], { cwd: packageRoot })
    process.once("exit", () => rmSync(`${packageRoot}${folder}`, { recursive: true, force: true }))
    return `${packageRoot}${folder}/main.mjs`
  })()
  return serviceBundle
}
export const sandboxFixtureFile = fileURLToPath(new URL("../../storage-adapter/fixtures/sandbox.fixture.json", import.meta.url))

/**
 * The Node flags of the `start` script's service command (none: it runs plain `node`), so that
 * every service started here (tests, soak, bench) runs as `pnpm start` runs it.
 */
export const startScriptNodeFlags = (): ReadonlyArray<string> => {
  const manifest = JSON.parse(readFileSync(`${repositoryRoot}package.json`, "utf8")) as { scripts: Record<string, string> }
  const serviceCommand = (manifest.scripts["start"] ?? "").split("&&").at(-1) ?? ""
  return serviceCommand.trim().split(/\s+/).filter((word) => word.startsWith("--"))
}

/** Environment of a child: this process's, minus every setting the service reads, plus `env`. */
const childEnvironment = (env: Readonly<Record<string, string>>): NodeJS.ProcessEnv => {
  const base: NodeJS.ProcessEnv = { ...process.env }
  for (const name of [
    "PORT", "HOST", "DATABASE_URL", "DATABASE_POOL_MAX", "DATABASE_STATEMENT_TIMEOUT_MS", "PGLITE_DATA_DIR", "FIXTURE_FILE", "PUBLIC_API_ENVIRONMENT",
    "API_KEY_DIGEST_KEY", "API_KEYS_ENABLED", "AUDIO_URL_TTL_SECONDS", "AUDIO_STORAGE", "MEDIA_BASE_URL", "MEDIA_SIGNING_KEY"
  ]) delete base[name]
  return { ...base, ...env }
}

export interface FreshDatabase {
  readonly url: string
  readonly name: string
  /** Client connections to this database right now (pg_stat_activity, the admin connection excluded). */
  readonly connectionCount: () => Promise<number>
  /** Runs a query on the database itself (one extra connection, opened on first use). */
  readonly query: <A>(statement: (sql: Sql) => Promise<A>) => Promise<A>
  readonly drop: () => Promise<void>
}

/** A new empty database on the server `adminUrl` names; `drop` removes it (connections forced out). */
export const createFreshDatabase = async (adminUrl: string): Promise<FreshDatabase> => {
  const scope = Effect.runSync(Scope.make())
  const database = await Effect.runPromise(Scope.provide(serverDatabases(adminUrl).fresh, scope))
  const admin = await Effect.runPromise(Scope.provide(makePgClient({ url: adminUrl, maxConnections: 1 }), scope))
  const name = new URL(database.url).pathname.slice(1)
  let own: Promise<Effect.Success<ReturnType<typeof makePgClient>>> | undefined
  return {
    url: database.url,
    name,
    connectionCount: () =>
      Effect.runPromise(admin.run("soak.connections", (sql) => sql<Array<{ count: number }>>`
        SELECT count(*)::int AS count FROM pg_stat_activity WHERE datname = ${name} AND pid <> pg_backend_pid()`))
        .then((rows) => rows[0]?.count ?? 0),
    query: async (statement) => {
      own ??= Effect.runPromise(Scope.provide(makePgClient({ url: database.url, maxConnections: 1 }), scope))
      const client = await own
      return Effect.runPromise(client.run("test.query", statement))
    },
    drop: () => Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

export interface CliResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** `pnpm -s cli <args>` with `env` (scripts/cli.mjs: the CLI's bundle, rebuilt when stale). */
export const runCli = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>>): Promise<CliResult> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cliScript, ...args], {
      cwd: repositoryRoot,
      env: childEnvironment(env),
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
    child.once("error", reject)
    child.once("exit", (code) => resolve({ code, stdout, stderr }))
  })

/** Migrates the database and loads a fixture into it through the operator CLI, as an operator would. */
export const loadFixtureWithCli = async (env: Readonly<Record<string, string>>, fixtureFile = sandboxFixtureFile) => {
  for (const args of [["migrate"], ["fixtures", "load", fixtureFile]]) {
    const result = await runCli(args, env)
    if (result.code !== 0) throw new Error(`pnpm cli ${args.join(" ")} failed (${result.code}):\n${result.stderr}${result.stdout}`)
  }
}

export interface ServiceProcess {
  readonly child: ChildProcess
  readonly pid: number
  readonly baseUrl: string
  /** Request-log lines written on stdout so far. */
  readonly logLineCount: () => number
  /** Everything written on stderr so far. */
  readonly stderr: () => string
  /** SIGTERM, then the exit code (SIGKILL after `graceMs`). */
  readonly stop: (graceMs?: number) => Promise<number | null>
}

export interface ExitedProcess {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/**
 * Starts `pnpm start` (the service's main module) with `env` (PORT defaults to 0) and resolves
 * once the banner names its URL; rejects with its output if it exits first or is not up
 * within `startTimeoutMs`.
 */
export const startServiceProcess = async (
  env: Readonly<Record<string, string>>,
  startTimeoutMs = 60_000
): Promise<ServiceProcess> => {
  const bundle = await builtService()
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...startScriptNodeFlags(), bundle], {
      cwd: repositoryRoot,
      env: childEnvironment({ PORT: "0", ...env }),
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stderr = ""
    let logLines = 0
    let settled = false
    const exited = new Promise<number | null>((done) => child.once("exit", (code) => done(code)))
    child.stdout.on("data", (chunk: Buffer) => {
      for (const byte of chunk) if (byte === 0x0a) logLines++
    })
    const timer = setTimeout(() => {
      if (settled) return
      settled = true
      child.kill("SIGKILL")
      reject(new Error(`the service did not start within ${startTimeoutMs} ms:\n${stderr}`))
    }, startTimeoutMs)
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8")
      const match = /listening on (http:\/\/[^\s]+)/.exec(stderr)
      if (match?.[1] !== undefined && !settled && child.pid !== undefined) {
        settled = true
        clearTimeout(timer)
        const pid = child.pid
        resolve({
          child,
          pid,
          baseUrl: match[1],
          logLineCount: () => logLines,
          stderr: () => stderr,
          stop: async (graceMs = 15_000) => {
            if (child.exitCode !== null || child.signalCode !== null) return child.exitCode
            child.kill("SIGTERM")
            const killer = setTimeout(() => child.kill("SIGKILL"), graceMs)
            const code = await exited
            clearTimeout(killer)
            return code
          }
        })
      }
    })
    child.once("exit", (code) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      reject(new Error(`the service exited (${code}) before it listened:\n${stderr}`))
    })
  })
}

/** A child process that runs until stopped: `stop` sends SIGTERM (if still running) and waits for its exit. */
export interface LongRunningProcess {
  readonly child: ChildProcess
  readonly stderr: () => string
  readonly stop: () => Promise<void>
}

/**
 * The webhook delivery worker (`pnpm cli webhooks worker <args>`) as a child process, with
 * `env` (its database and the test's worker settings). Its stdout is not kept.
 */
export const startWorkerProcess = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>>): LongRunningProcess => {
  const child = spawn(process.execPath, [cliScript, "webhooks", "worker", ...args], {
    cwd: repositoryRoot,
    env: childEnvironment({ NO_COLOR: "1", ...env }),
    stdio: ["ignore", "ignore", "pipe"]
  })
  let stderr = ""
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
  const exited = new Promise<void>((resolve) => child.once("close", () => resolve()))
  return {
    child,
    stderr: () => stderr,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
      await exited
    }
  }
}

/** Runs the service's main module to its exit (for start-up refusals). */
export const runServiceToExit = async (env: Readonly<Record<string, string>>, timeoutMs = 60_000): Promise<ExitedProcess> => {
  const bundle = await builtService()
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...startScriptNodeFlags(), bundle], {
      cwd: repositoryRoot,
      env: childEnvironment({ PORT: "0", ...env }),
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`the service was still running after ${timeoutMs} ms:\n${stderr}`))
    }, timeoutMs)
    child.once("exit", (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}

/** Resident set size of a process, in bytes (Linux /proc). */
export const residentBytes = (pid: number): number => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8")
  const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(status)
  return match?.[1] === undefined ? Number.NaN : Number(match[1]) * 1024
}

/** Open sockets of a process (its file descriptors that are sockets; Linux /proc). */
export const openSocketCount = (pid: number): number => {
  let sockets = 0
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith("socket:")) sockets++
    } catch {
      // closed between the listing and the read
    }
  }
  return sockets
}
