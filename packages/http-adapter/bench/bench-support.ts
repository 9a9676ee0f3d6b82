/** What the bench scripts share: a raw pool on the bench database, and CPU time read from /proc. */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs"
import { makePgClient } from "@clinical-api/storage-adapter"
import { Effect, Exit, Scope } from "effect"

/** A raw postgres.js pool (the storage adapter's, with prepared statements), closed with its scope. */
export const openPool = async (url: string, maxConnections: number) => {
  const scope = Effect.runSync(Scope.make())
  const client = await Effect.runPromise(Scope.provide(makePgClient({ url, maxConnections }), scope))
  return { sql: client.currentPool(), close: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}

/** CPU seconds (user + system) of a process, from /proc/{pid}/stat (in clock ticks of 1/100 s). */
export const cpuSecondsOf = (pid: number | string): number => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /, "").split(" ")
    return (Number(fields[11]) + Number(fields[12])) / 100
  } catch {
    return 0 // the process ended between the listing and the read
  }
}

/** CPU seconds of every PostgreSQL server process on this machine (the database's share of the work). */
export const postgresCpuSeconds = (): number =>
  readdirSync("/proc").filter((entry) => /^\d+$/.test(entry)).reduce((total, pid) => {
    try {
      return readFileSync(`/proc/${pid}/comm`, "utf8").trim() === "postgres" ? total + cpuSecondsOf(pid) : total
    } catch {
      return total
    }
  }, 0)

/**
 * A memory cgroup of `limitMb` for the processes written into `procs`, as a container's memory
 * limit is: cgroup v2 (`memory.max`) or v1 (`memory.limit_in_bytes`). Undefined where this
 * process may not make one (not root, no memory controller, a v2 tree without it delegated).
 */
export const memoryCgroup = (name: string, limitMb: number): { readonly procs: string; readonly remove: () => void } | undefined => {
  const limit = String(limitMb * 1024 * 1024)
  const candidates = [
    { folder: `/sys/fs/cgroup/${name}`, limitFile: "memory.max", when: "/sys/fs/cgroup/cgroup.controllers" },
    { folder: `/sys/fs/cgroup/memory/${name}`, limitFile: "memory.limit_in_bytes", when: "/sys/fs/cgroup/memory/memory.limit_in_bytes" }
  ]
  for (const { folder, limitFile, when } of candidates) {
    if (!existsSync(when)) continue
    try {
      mkdirSync(folder, { recursive: true })
      writeFileSync(`${folder}/${limitFile}`, limit)
      return {
        procs: `${folder}/cgroup.procs`,
        remove: () => {
          try {
            rmdirSync(folder)
          } catch {
            // a process of it has not exited yet; the empty group is harmless
          }
        }
      }
    } catch {
      try {
        rmdirSync(folder)
      } catch {
        // it was never made
      }
    }
  }
  return undefined
}
