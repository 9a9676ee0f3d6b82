import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

/**
 * The newcomer's path, scripted: a fresh copy of the repository (what git tracks, as it is in
 * the working tree, without node_modules), `pnpm install`, `pnpm start` on the embedded
 * default, then the `curl` line the banner prints. The install is offline from pnpm's store,
 * which the repository's own install has filled.
 */
const repositoryRoot = fileURLToPath(new URL("../../../../", import.meta.url))

const copyRepository = (target: string) => {
  const files = execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
    cwd: repositoryRoot,
    encoding: "utf8"
  }).split("\0").filter((file) => file !== "" && existsSync(join(repositoryRoot, file)))
  for (const file of files) {
    mkdirSync(dirname(join(target, file)), { recursive: true })
    cpSync(join(repositoryRoot, file), join(target, file))
  }
}

interface RunningService {
  readonly child: ChildProcess
  readonly banner: Promise<string>
  readonly exit: Promise<number | null>
  readonly stdout: () => string
}

const startService = (cwd: string, env: Record<string, string>): RunningService => {
  const child = spawn("pnpm", ["-s", "start"], {
    cwd,
    env: { ...process.env, ...env, DATABASE_URL: "", PGLITE_DATA_DIR: "" },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true
  })
  let stderr = ""
  let stdout = ""
  child.stdout?.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
  const banner = new Promise<string>((resolve, reject) => {
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8")
      if (stderr.includes("Try it:") && stderr.endsWith("\n")) resolve(stderr)
    })
    child.once("exit", (code) => reject(new Error(`service exited (${code}) before it was ready:\n${stderr}\n${stdout}`)))
  })
  // "close", not "exit": pnpm may exit before the service, which shares its stdout.
  const exit = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)))
  return { child, banner, exit, stdout: () => stdout }
}

const curlLineOf = (banner: string) => {
  const line = banner.split("\n").find((candidate) => candidate.includes("Try it:"))
  if (line === undefined) throw new Error(`no curl line in:\n${banner}`)
  return line.slice(line.indexOf("curl"))
}

describe("a newcomer's first start", () => {
  let workdir = ""
  let service: RunningService | undefined

  beforeAll(() => {
    workdir = mkdtempSync(join(tmpdir(), "clinical-api-newcomer-"))
    copyRepository(workdir)
    execFileSync("pnpm", ["install", "--frozen-lockfile", "--offline"], {
      cwd: workdir,
      env: { ...process.env, CI: "true" },
      stdio: "pipe"
    })
  }, 240_000)

  afterAll(async () => {
    if (service?.child.exitCode === null && service.child.pid !== undefined) {
      process.kill(-service.child.pid, "SIGKILL")
    }
    rmSync(workdir, { recursive: true, force: true })
  })

  it("pnpm start prints the URL, the docs, a sandbox key and a curl line that answers 200", async () => {
    service = startService(workdir, { PORT: "0" })
    const banner = await service.banner
    expect(banner).toMatch(/listening on http:\/\/127\.0\.0\.1:\d+ \(embedded database\)/)
    expect(banner).toMatch(/API docs: +http:\/\/127\.0\.0\.1:\d+\/docs/)
    expect(banner).toMatch(/Sandbox key: +ce_test_[0-9A-Za-z]{36}/)

    const curl = curlLineOf(banner)
    const status = execFileSync("sh", ["-c", `${curl} -o /dev/null -w '%{http_code}'`], { encoding: "utf8" })
    expect(status).toBe("200")
    const body = JSON.parse(execFileSync("sh", ["-c", curl], { encoding: "utf8" })) as { items: unknown[]; total: number }
    expect(body.items).toHaveLength(2)
    expect(body.total).toBeGreaterThan(100)

    const docsUrl = /API docs: +(\S+)/.exec(banner)?.[1] ?? ""
    expect((await fetch(docsUrl)).status).toBe(200)
  }, 120_000)

  it("SIGTERM, even repeated, drains the requests in flight, then the process exits", async () => {
    if (service === undefined) throw new Error("the service did not start")
    const banner = await service.banner
    const baseUrl = /listening on (\S+)/.exec(banner)?.[1] ?? ""
    const token = /Sandbox key: +(\S+)/.exec(banner)?.[1] ?? ""
    const answeredBefore = () => service?.stdout().split("\n").filter((line) => line.includes("\"http_request\"")).length ?? 0
    const before = answeredBefore()
    // Eight large pages on the embedded database's single connection take a while to answer
    // one after the other. SIGTERM goes out once the first of them is answered: by then all
    // eight connections are accepted and their requests received (a connection still in the
    // kernel's backlog is not in flight, and a shutdown may refuse it).
    const inFlight = Array.from({ length: 8 }, () =>
      fetch(`${baseUrl}/external/v1/encounters?limit=100`, { headers: { authorization: `Bearer ${token}` } })
        // The body is read to its end: a body left unread keeps the client's parser paused, and
        // Node 24's fetch then fails an internal assertion when the drained server closes the socket.
        .then(async (response) => (await response.arrayBuffer(), response.status)))
    const deadline = Date.now() + 30_000
    while (answeredBefore() === before && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5))
    const answeredAtSignal = answeredBefore() - before
    // To the whole process group, as Ctrl-C in a terminal does, and then again, as a supervisor
    // may: the repeated signal must not cut the drain short.
    const group = -(service.child.pid ?? 0)
    process.kill(group, "SIGTERM")
    await new Promise((resolve) => setTimeout(resolve, 50))
    process.kill(group, "SIGTERM")
    const statuses = await Promise.all(inFlight)
    expect(statuses).toEqual(Array(8).fill(200))
    // The signal came while most of the batch was still waiting for the database.
    expect(answeredAtSignal).toBeLessThan(8)
    const code = await service.exit
    expect(code === 0 || code === 143 || code === null).toBe(true)
    // Every request that was answered is in the log: nothing was cut off mid-way.
    const requestLines = service.stdout().split("\n").filter((line) => line.includes("\"http_request\""))
    expect(requestLines.length).toBeGreaterThanOrEqual(8)
  }, 60_000)
})
