import { execFile } from "node:child_process"
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { freePort } from "./free-port.js"

/**
 * A PostgreSQL cluster of a test's own, in a temporary folder on a free loopback port
 * (`initdb` + `pg_ctl`), that the test may stop fast or immediately and start again without
 * touching the machine's server. As root the server runs as the `postgres` user, as
 * `pg_ctlcluster` does. `remove` stops it and deletes the folder.
 */
export interface DisposableCluster {
  readonly port: number
  /** `postgres://postgres@127.0.0.1:<port>/postgres` */
  readonly adminUrl: string
  readonly start: () => Promise<void>
  readonly stop: (mode: "smart" | "fast" | "immediate") => Promise<void>
  readonly restart: () => Promise<void>
  /** Ends recovery of a cluster started as a standby (`pg_ctl promote`): it takes writes. */
  readonly promote: () => Promise<void>
  /** Stops the cluster (fast) and starts it again as a hot standby (`standby.signal`, no primary to follow). */
  readonly restartAsStandby: () => Promise<void>
  readonly remove: () => Promise<void>
}

export interface DisposableClusterOptions {
  /** Start as a hot standby with no primary to follow: it answers reads, refuses writes, until promoted. */
  readonly standby?: boolean
}

const run = promisify(execFile)

/** The server binaries: `pg_config --bindir`, or the newest Debian-packaged version. */
export const postgresBinDir = (): string | undefined => {
  const debian = "/usr/lib/postgresql"
  if (!existsSync(debian)) return undefined
  const versions = readdirSync(debian).filter((entry) => /^\d+$/.test(entry)).sort((a, b) => Number(b) - Number(a))
  const newest = versions.find((version) => existsSync(join(debian, version, "bin", "initdb")))
  return newest === undefined ? undefined : join(debian, newest, "bin")
}


export const createDisposableCluster = async (clusterOptions: DisposableClusterOptions = {}): Promise<DisposableCluster> => {
  const binDir = postgresBinDir()
  if (binDir === undefined) throw new Error("no PostgreSQL server binaries (initdb, pg_ctl) on this machine")
  const folder = mkdtempSync(join(tmpdir(), "clinical-api-cluster-"))
  const data = join(folder, "data")
  const asRoot = process.getuid?.() === 0
  if (asRoot) {
    const { stdout } = await run("id", ["-u", "postgres"])
    const { stdout: group } = await run("id", ["-g", "postgres"])
    chownSync(folder, Number(stdout.trim()), Number(group.trim()))
  }
  const tool = (name: string, args: ReadonlyArray<string>) =>
    asRoot
      ? run("runuser", ["-u", "postgres", "--", join(binDir, name), ...args], { cwd: folder })
      : run(join(binDir, name), [...args], { cwd: folder })

  await tool("initdb", ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
  const port = await freePort()
  const options = [
    `-p ${port}`,
    "-c listen_addresses=127.0.0.1",
    `-c unix_socket_directories=${folder}`,
    "-c fsync=off",
    "-c max_connections=100"
  ].join(" ")
  const start = async () => {
    await tool("pg_ctl", ["-D", data, "-o", options, "-l", join(folder, "server.log"), "-w", "-t", "60", "start"])
  }
  const stop = async (mode: "smart" | "fast" | "immediate") => {
    await tool("pg_ctl", ["-D", data, "-m", mode, "-w", "-t", "60", "stop"])
  }
  const markStandby = () => writeFileSync(join(data, "standby.signal"), "")
  if (clusterOptions.standby === true) markStandby()
  await start()
  return {
    port,
    adminUrl: `postgres://postgres@127.0.0.1:${port}/postgres`,
    start,
    stop,
    restart: async () => {
      await tool("pg_ctl", ["-D", data, "-o", options, "-l", join(folder, "server.log"), "-m", "fast", "-w", "-t", "60", "restart"])
    },
    promote: async () => {
      await tool("pg_ctl", ["-D", data, "-w", "-t", "60", "promote"])
    },
    restartAsStandby: async () => {
      await stop("fast")
      markStandby()
      await start()
    },
    remove: async () => {
      await stop("immediate").catch(() => undefined)
      rmSync(folder, { recursive: true, force: true })
    }
  }
}
