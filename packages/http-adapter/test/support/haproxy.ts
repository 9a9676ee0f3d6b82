import { spawn, spawnSync } from "node:child_process"
import { once } from "node:events"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { get } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { freePort } from "./free-port.js"

/** Whether `haproxy` (Debian's package) is on PATH. */
export const haproxyInstalled = spawnSync("haproxy", ["-v"]).status === 0

/**
 * The sample configuration of docs/operations.md ("A load balancer"), listening on `port` of
 * loopback and balancing over `backendUrls`: the sample's `replicaN` servers (and their
 * last-resort backups) get the Nth address.
 */
export const haproxyConfiguration = (port: number, backendUrls: ReadonlyArray<string>): string => {
  const operations = readFileSync(new URL("../../../../docs/operations.md", import.meta.url), "utf8")
  const sample = /```haproxy\n([\s\S]*?)```/.exec(operations)?.[1]
  if (sample === undefined) throw new Error("docs/operations.md has no haproxy block")
  const replicas = new Set([...sample.matchAll(/^\s*server replica(\d+)/gm)].map((match) => match[1]))
  if (replicas.size !== backendUrls.length) throw new Error(`the sample names ${replicas.size} replicas, ${backendUrls.length} given`)
  return sample
    .replace(/^(\s*bind )\S+/m, `$1127.0.0.1:${port}`)
    .replace(/^(\s*server replica(\d+)\S* )\S+/gm, (_line, head: string, replica: string) =>
      `${head}${new URL(backendUrls[Number(replica) - 1] ?? "").host}`)
}

const answersHealthz = (baseUrl: string): Promise<boolean> =>
  new Promise((resolve) => {
    const probe = get(`${baseUrl}/healthz`, { agent: false, timeout: 1000 }, (answer) => {
      answer.resume()
      resolve(answer.statusCode !== undefined)
    })
    probe.once("timeout", () => probe.destroy())
    probe.once("error", () => resolve(false))
  })

export interface RunningHaproxy {
  readonly baseUrl: string
  /** SIGTERM, then its temporary folder removed. */
  readonly stop: () => Promise<void>
}

/** HAProxy in the foreground with the sample configuration, once it answers on its port. */
export const startHaproxy = async (backendUrls: ReadonlyArray<string>): Promise<RunningHaproxy> => {
  const folder = mkdtempSync(join(tmpdir(), "haproxy-"))
  const port = await freePort()
  const configFile = join(folder, "haproxy.cfg")
  writeFileSync(configFile, haproxyConfiguration(port, backendUrls))
  const child = spawn("haproxy", ["-db", "-f", configFile], { stdio: ["ignore", "ignore", "pipe"] })
  let stderr = ""
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
  const exited = once(child, "exit")
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
    await exited
    rmSync(folder, { recursive: true, force: true })
  }
  const baseUrl = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 10_000
  while (!(await answersHealthz(baseUrl))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop()
      throw new Error(`haproxy did not start:\n${stderr}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return { baseUrl, stop }
}
