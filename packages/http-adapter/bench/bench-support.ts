/** What the bench scripts share: a raw pool on the bench database, and CPU time read from /proc. */
import { readdirSync, readFileSync } from "node:fs"
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
