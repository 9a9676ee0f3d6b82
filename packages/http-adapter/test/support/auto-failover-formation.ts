import { type ChildProcess, execFile, spawn, spawnSync } from "node:child_process"
import { chownSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import postgres from "postgres"
import { postgresBinDir } from "./disposable-cluster.js"
import { freePort } from "./free-port.js"

/** Whether `pg_autoctl` (Debian's postgresql-NN-auto-failover) is on PATH. */
export const pgAutoctlInstalled = spawnSync("pg_autoctl", ["--version"]).status === 0

export interface FormationNode {
  readonly name: string
  readonly port: number
  readonly state: string
  readonly assigned: string
}

/**
 * A pg_auto_failover formation of the test's own in a temporary folder: a monitor, and two
 * Postgres nodes on free loopback ports (the first becomes the primary, the second its
 * synchronous standby), each under `pg_autoctl ... --run`, which restarts its Postgres and
 * carries out the monitor's orders. pg_autoctl refuses to run as root: as root it runs as the
 * `postgres` user, as disposable-cluster.ts does. `remove` stops everything and deletes the folder
 * (copying pg_autoctl's logs to `FORMATION_LOGS_DIR` first, when set).
 */
export interface AutoFailoverFormation {
  readonly nodePorts: ReadonlyArray<number>
  /** `postgres://postgres@127.0.0.1:p1,127.0.0.1:p2/postgres?target_session_attrs=read-write&connect_timeout=2` */
  readonly url: string
  readonly nodes: () => Promise<ReadonlyArray<FormationNode>>
  /**
   * Resolves once one node is primary and the other secondary, both as assigned, and the
   * primary's commits wait for the standby (it streams, synchronous).
   */
  readonly settled: (timeoutMs?: number) => Promise<{ readonly primary: FormationNode; readonly secondary: FormationNode }>
  /**
   * Resolves once a node other than `lostName` is primary on its own (`wait_primary` as
   * assigned: its standby is gone) and takes writes.
   */
  readonly promotedWithout: (lostName: string, timeoutMs?: number) => Promise<{ readonly primary: FormationNode }>
  /** `pg_autoctl perform failover`: waits until the standby is the new primary. */
  readonly performFailover: () => Promise<void>
  /** The pid of the postmaster of the node on `port` (its postmaster.pid). */
  readonly postmasterPid: (port: number) => number
  /**
   * The loss of the node's machine: its `pg_autoctl` (with its sub-processes) and its Postgres
   * (postmaster and backends) SIGKILLed together, so that nothing restarts it. Its exit is then
   * not counted by `exitedEarly`.
   */
  readonly killNode: (port: number) => void
  /** `ALTER SYSTEM SET` each setting on the monitor, then reloads its configuration. */
  readonly configureMonitor: (settings: Readonly<Record<string, string>>) => Promise<void>
  /** The monitor's latest events (`pg_autoctl show events`), to explain a failure. */
  readonly events: () => Promise<string>
  /** `pg_autoctl` processes that exited before `remove` (none should). */
  readonly exitedEarly: () => ReadonlyArray<string>
  readonly remove: () => Promise<void>
}

const run = promisify(execFile)

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** `root` and every process below it (parents from /proc/<pid>/stat), parents first. */
const processTree = (root: number): Array<number> => {
  const parentOf = new Map<number, number>()
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8")
      // "pid (command) state ppid ...", where the command may hold spaces and parentheses.
      parentOf.set(Number(entry), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]))
    } catch {
      // the process exited meanwhile
    }
  }
  const tree = [root]
  for (let index = 0; index < tree.length; index++) {
    for (const [pid, parent] of parentOf) if (parent === tree[index]) tree.push(pid)
  }
  return tree
}

export const createAutoFailoverFormation = async (): Promise<AutoFailoverFormation> => {
  const binDir = postgresBinDir()
  if (binDir === undefined) throw new Error("no PostgreSQL server binaries on this machine")
  const folder = mkdtempSync(join(tmpdir(), "clinical-api-formation-"))
  const asRoot = process.getuid?.() === 0
  if (asRoot) {
    const { stdout: user } = await run("id", ["-u", "postgres"])
    const { stdout: group } = await run("id", ["-g", "postgres"])
    chownSync(folder, Number(user.trim()), Number(group.trim()))
  }
  // pg_autoctl keeps its configuration and state under XDG folders: in the test's own folder.
  const environment = [
    `HOME=${folder}`,
    `XDG_CONFIG_HOME=${join(folder, "config")}`,
    `XDG_DATA_HOME=${join(folder, "share")}`,
    `XDG_RUNTIME_DIR=${join(folder, "run")}`,
    `PATH=${binDir}:${process.env["PATH"] ?? "/usr/bin:/bin"}`,
    "PG_AUTOCTL_DEBUG=0"
  ]
  const command = (args: ReadonlyArray<string>): [string, Array<string>] =>
    asRoot
      ? ["runuser", ["-u", "postgres", "--", "env", ...environment, "pg_autoctl", ...args]]
      : ["env", [...environment, "pg_autoctl", ...args]]
  const autoctl = async (args: ReadonlyArray<string>) => {
    const [file, argv] = command(args)
    return (await run(file, argv, { cwd: folder, timeout: 120_000 })).stdout
  }
  const services: Array<{ readonly name: string; readonly child: ChildProcess; readonly exited: Promise<void> }> = []
  let removing = false
  const killed = new Set<string>()
  const exitedEarly: Array<string> = []
  const startService = (name: string, args: ReadonlyArray<string>) => {
    const [file, argv] = command(args)
    const log = openSync(join(folder, `${name}.log`), "a")
    const child = spawn(file, argv, { cwd: folder, stdio: ["ignore", log, log] })
    const exited = new Promise<void>((resolve) =>
      child.once("exit", (code, signal) => {
        if (!removing && !killed.has(name)) exitedEarly.push(`${name} (${code ?? signal})`)
        resolve()
      }))
    services.push({ name, child, exited })
  }
  const common = ["--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl", "--pgctl", join(binDir, "pg_ctl")]
  const [monitorPort = 0, ...nodePorts] = await Promise.all([freePort(), freePort(), freePort()])
  const monitorData = join(folder, "monitor")
  const nodeData = nodePorts.map((_, index) => join(folder, `node${index + 1}`))
  const monitorUrl = `postgres://autoctl_node@127.0.0.1:${monitorPort}/pg_auto_failover`

  const nodes = async (): Promise<ReadonlyArray<FormationNode>> => {
    const text = await autoctl(["show", "state", "--pgdata", monitorData, "--json"])
    const rows = JSON.parse(text) as ReadonlyArray<Record<string, unknown>>
    return rows.map((row) => ({
      name: String(row["nodename"]),
      port: Number(row["nodeport"]),
      state: String(row["current_group_state"]),
      assigned: String(row["assigned_group_state"])
    }))
  }
  const replicatesSynchronously = async (port: number) => {
    const sql = postgres(`postgres://postgres@127.0.0.1:${port}/postgres`, { max: 1, connect_timeout: 2, onnotice: () => {} })
    try {
      const [row] = await sql<Array<{ synchronous: boolean }>>`
        SELECT current_setting('synchronous_standby_names') <> '' AND EXISTS (
          SELECT 1 FROM pg_stat_replication WHERE state = 'streaming' AND sync_state IN ('sync', 'quorum')) AS synchronous`
      return row?.synchronous === true
    } catch {
      return false
    } finally {
      await sql.end({ timeout: 2 })
    }
  }
  const settled = async (timeoutMs = 90_000) => {
    const deadline = Date.now() + timeoutMs
    let last: ReadonlyArray<FormationNode> = []
    while (Date.now() < deadline) {
      last = await nodes().catch(() => [])
      const primary = last.find((node) => node.state === "primary" && node.assigned === "primary")
      const secondary = last.find((node) => node.state === "secondary" && node.assigned === "secondary")
      if (primary !== undefined && secondary !== undefined && last.length === 2 && (await replicatesSynchronously(primary.port))) {
        return { primary, secondary }
      }
      await pause(250)
    }
    throw new Error(`the formation did not settle within ${timeoutMs} ms: ${JSON.stringify(last)}`)
  }
  const writable = async (port: number) => {
    const sql = postgres(`postgres://postgres@127.0.0.1:${port}/postgres`, { max: 1, connect_timeout: 2, onnotice: () => {} })
    try {
      const [row] = await sql<Array<{ writable: boolean }>>`
        SELECT NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off' AS writable`
      return row?.writable === true
    } catch {
      return false
    } finally {
      await sql.end({ timeout: 2 })
    }
  }
  const promotedWithout = async (lostName: string, timeoutMs = 60_000) => {
    const deadline = Date.now() + timeoutMs
    let last: ReadonlyArray<FormationNode> = []
    while (Date.now() < deadline) {
      last = await nodes().catch(() => [])
      const primary = last.find((node) =>
        node.name !== lostName && node.state === "wait_primary" && node.assigned === "wait_primary")
      if (primary !== undefined && (await writable(primary.port))) return { primary }
      await pause(250)
    }
    throw new Error(`no node took over from ${lostName} within ${timeoutMs} ms: ${JSON.stringify(last)}`)
  }
  const postmasterPid = (port: number) => {
    const data = nodeData[nodePorts.indexOf(port)]
    if (data === undefined) throw new Error(`no node on port ${port}`)
    return Number(readFileSync(join(data, "postmaster.pid"), "utf8").split("\n")[0])
  }
  const killNode = (port: number) => {
    const name = `node${nodePorts.indexOf(port) + 1}`
    const service = services.find((candidate) => candidate.name === name)
    if (service?.child.pid === undefined) throw new Error(`no pg_autoctl running for the node on port ${port}`)
    const pids = new Set([...processTree(service.child.pid), ...processTree(postmasterPid(port))])
    killed.add(name)
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // already gone
      }
    }
  }
  const configureMonitor = async (settings: Readonly<Record<string, string>>) => {
    const sql = postgres(`postgres://postgres@127.0.0.1:${monitorPort}/postgres`, { max: 1, onnotice: () => {} })
    try {
      for (const [name, value] of Object.entries(settings)) await sql.unsafe(`ALTER SYSTEM SET ${name} = '${value}'`)
      await sql`SELECT pg_reload_conf()`
    } finally {
      await sql.end({ timeout: 5 })
    }
  }
  const remove = async () => {
    removing = true
    for (const data of [...nodeData, monitorData]) {
      if (existsSync(join(data, "postgresql.conf"))) await autoctl(["stop", "--pgdata", data]).catch(() => undefined)
    }
    const stopped = Promise.all(services.map((service) => service.exited))
    const gaveUp = await Promise.race([stopped.then(() => false), pause(30_000).then(() => true)])
    if (gaveUp) {
      for (const service of services) service.child.kill("SIGKILL")
      for (const data of [...nodeData, monitorData]) {
        const [file, argv] = asRoot
          ? ["runuser", ["-u", "postgres", "--", join(binDir, "pg_ctl"), "-D", data, "-m", "immediate", "stop"]] as const
          : [join(binDir, "pg_ctl"), ["-D", data, "-m", "immediate", "stop"]] as const
        await run(file, [...argv]).catch(() => undefined)
      }
    }
    const keepLogsIn = process.env["FORMATION_LOGS_DIR"]
    if (keepLogsIn !== undefined && keepLogsIn !== "") {
      for (const service of services) copyFileSync(join(folder, `${service.name}.log`), join(keepLogsIn, `${service.name}.log`))
    }
    rmSync(folder, { recursive: true, force: true })
  }

  try {
    for (const name of ["config", "share", "run"]) mkdirSync(join(folder, name), { mode: 0o700 })
    if (asRoot) {
      const { stdout: user } = await run("id", ["-u", "postgres"])
      const { stdout: group } = await run("id", ["-g", "postgres"])
      for (const name of ["config", "share", "run"]) chownSync(join(folder, name), Number(user.trim()), Number(group.trim()))
    }
    await autoctl(["create", "monitor", "--pgdata", monitorData, "--pgport", String(monitorPort), ...common])
    startService("monitor", ["run", "--pgdata", monitorData])
    for (const [index, port] of nodePorts.entries()) {
      startService(`node${index + 1}`, [
        "create", "postgres", "--pgdata", nodeData[index] ?? "", "--pgport", String(port), "--name", `node${index + 1}`,
        "--monitor", monitorUrl, "--run", ...common
      ])
      // The first node registers as the primary before the second joins as its standby.
      const deadline = Date.now() + 90_000
      while ((await nodes().catch(() => [])).length < index + 1 && Date.now() < deadline) await pause(250)
    }
    await settled()
  } catch (error) {
    await remove()
    throw error
  }

  return {
    nodePorts,
    url: `postgres://postgres@${nodePorts.map((port) => `127.0.0.1:${port}`).join(",")}/postgres?target_session_attrs=read-write&connect_timeout=2`,
    nodes,
    settled,
    promotedWithout,
    performFailover: async () => {
      await autoctl(["perform", "failover", "--pgdata", monitorData])
    },
    postmasterPid,
    killNode,
    configureMonitor,
    events: () => autoctl(["show", "events", "--pgdata", monitorData, "--count", "40"]).catch((error: unknown) => String(error)),
    exitedEarly: () => exitedEarly,
    remove
  }
}
