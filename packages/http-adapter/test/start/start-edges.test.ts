import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { readFileSync, rmSync } from "node:fs"
import { createServer, type Server } from "node:net"
import { fileURLToPath } from "node:url"
import { sandboxFixturePath } from "@clinical-api/storage-adapter"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

/**
 * The service's process at its edges, as `pnpm start` runs it (the bundle of src/main.ts on
 * plain Node, the embedded database with the sandbox data): when its port opens, how it
 * refuses to start, and its bare address. (On a machine busy with other work a start takes a
 * minute; the time-outs allow for that.)
 */
const packageRoot = fileURLToPath(new URL("../../", import.meta.url))
const bundleFolder = `dist/start-edges-${process.pid}`
const bundle = `${bundleFolder}/main.mjs`

interface ServiceProcess {
  readonly child: ChildProcess
  readonly stdout: () => string
  readonly stderr: () => string
  readonly exit: Promise<number | null>
}

const startService = (env: Record<string, string>): ServiceProcess => {
  const inherited = { ...process.env }
  for (const name of ["DATABASE_URL", "PGLITE_DATA_DIR", "FIXTURE_FILE", "PUBLIC_API_ENVIRONMENT", "API_KEY_DIGEST_KEY", "HOST"]) {
    delete inherited[name]
  }
  const child = spawn(process.execPath, [bundle], { cwd: packageRoot, env: { ...inherited, ...env }, stdio: ["ignore", "pipe", "pipe"] })
  let stdout = ""
  let stderr = ""
  child.stdout?.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
  const exit = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)))
  return { child, stdout: () => stdout, stderr: () => stderr, exit }
}

const listenOn = (port: number): Promise<Server> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(port, "127.0.0.1", () => resolve(server))
  })

const freePort = async (): Promise<number> => {
  const server = await listenOn(0)
  const address = server.address()
  await new Promise((resolve) => server.close(resolve))
  if (address === null || typeof address === "string") throw new Error("no port")
  return address.port
}

/** The banner's rule for its sandbox key, applied to the sandbox data: an independent oracle. */
const sandboxKey = (): string => {
  const fixture = JSON.parse(readFileSync(sandboxFixturePath, "utf8")) as {
    api_keys: ReadonlyArray<{ kind: string; state: string; expires_at: string | null; scopes: ReadonlyArray<string>; token: string }>
  }
  const key = fixture.api_keys.find((candidate) =>
    candidate.kind === "organization" && candidate.state === "active" && candidate.expires_at === null && candidate.scopes.length === 4
  )
  if (key === undefined) throw new Error("the sandbox data has no full organization key")
  return key.token
}

/** stderr's non-empty lines. */
const linesOf = (text: string) => text.split("\n").filter((line) => line.trim() !== "")

beforeAll(() => {
  execFileSync(process.execPath, ["scripts/build-service.mjs", "src/main.ts", bundle], { cwd: packageRoot, stdio: "pipe" })
}, 60_000)

afterAll(() => {
  rmSync(`${packageRoot}/${bundleFolder}`, { recursive: true, force: true })
})

describe("the service's start and its edges", () => {
  let service: ServiceProcess | undefined

  afterAll(async () => {
    if (service !== undefined && service.child.exitCode === null) {
      service.child.kill("SIGTERM")
      await service.exit
    }
  })

  it("the port opens only once every route answers: the first request that connects, with the sandbox key, is 200", async () => {
    const port = await freePort()
    const token = sandboxKey()
    service = startService({ PORT: String(port) })
    const running = service
    const deadline = Date.now() + 170_000
    let firstStatus: number | undefined
    while (firstStatus === undefined) {
      if (running.child.exitCode !== null || Date.now() > deadline) {
        throw new Error(`the service never answered:\n${running.stderr()}\n${running.stdout()}`)
      }
      firstStatus = await fetch(`http://127.0.0.1:${port}/external/v1/encounters?limit=1`, {
        headers: { authorization: `Bearer ${token}` }
      }).then(async (response) => (await response.arrayBuffer(), response.status), () => undefined)
      if (firstStatus === undefined) await new Promise((resolve) => setTimeout(resolve, 10))
    }
    expect(firstStatus).toBe(200)
    while (!running.stderr().includes("Try it:")) await new Promise((resolve) => setTimeout(resolve, 10))
    expect(/Sandbox key: +(\S+)/.exec(running.stderr())?.[1]).toBe(token)
  }, 180_000)

  it("GET / redirects to the docs page (302, Location: /docs); other methods on / are 405; other unknown paths stay 404", async () => {
    if (service === undefined) throw new Error("the service did not start")
    const baseUrl = /listening on (\S+)/.exec(service.stderr())?.[1] ?? ""
    for (const method of ["GET", "HEAD"]) {
      const root = await fetch(`${baseUrl}/`, { method, redirect: "manual" })
      expect({ status: root.status, location: root.headers.get("location") }).toEqual({ status: 302, location: "/docs" })
    }
    const followed = await fetch(`${baseUrl}/`)
    expect({ status: followed.status, url: followed.url }).toEqual({ status: 200, url: `${baseUrl}/docs` })
    const posted = await fetch(`${baseUrl}/`, { method: "POST" })
    expect({ status: posted.status, allow: posted.headers.get("allow") }).toEqual({ status: 405, allow: "GET" })
    for (const path of ["//", "/index.html", "/docs/"]) {
      const other = await fetch(`${baseUrl}${path}`, { redirect: "manual" })
      expect(other.status).toBe(404)
      expect(((await other.json()) as { reason_code: string }).reason_code).toBe("route_not_found")
    }
  })

  it("a busy port: one line on stderr naming the port, exit status 1", async () => {
    const holder = await listenOn(0)
    const address = holder.address()
    if (address === null || typeof address === "string") throw new Error("no port")
    try {
      const refused = startService({ PORT: String(address.port) })
      expect(await refused.exit).toBe(1)
      const lines = linesOf(refused.stderr())
      expect(lines).toHaveLength(1)
      expect(lines[0]).toBe(
        `The service cannot start: 127.0.0.1 port ${address.port} is already in use; stop the process holding it or set PORT to a free port`
      )
    } finally {
      await new Promise((resolve) => holder.close(resolve))
    }
  }, 180_000)

  it("seeding the embedded database is start-up work: a statement time-out far below what it takes (100 ms) does not stop the start", async () => {
    const seeded = startService({ PORT: "0", DATABASE_STATEMENT_TIMEOUT_MS: "100" })
    try {
      const deadline = Date.now() + 170_000
      while (!seeded.stderr().includes("Try it:")) {
        if (seeded.child.exitCode !== null || Date.now() > deadline) {
          throw new Error(`the service did not start:\n${seeded.stderr()}\n${seeded.stdout()}`)
        }
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      expect(seeded.stdout()).toContain("\"message\":\"fixture loaded\"")
    } finally {
      seeded.child.kill("SIGTERM")
      await seeded.exit
    }
  }, 180_000)

  it("a bad configuration: one line on stderr naming the variable, exit status 1, before anything listens", async () => {
    const [badPort, production] = [
      startService({ PORT: "eighty" }),
      startService({ PUBLIC_API_ENVIRONMENT: "production", PORT: "0" })
    ]
    expect([await badPort.exit, await production.exit]).toEqual([1, 1])
    expect(linesOf(badPort.stderr())).toEqual([
      "The service cannot start: invalid configuration: PORT must be an integer from 0 to 65535, got \"eighty\""
    ])
    expect(linesOf(production.stderr())).toEqual([
      "The service cannot start: invalid configuration: API_KEY_DIGEST_KEY is required in production (at least 32 characters)"
    ])
    expect([badPort.stdout(), production.stdout()]).toEqual(["", ""])
  }, 60_000)
})
