/**
 * `pnpm bench:reference`: the two reference servers of the performance issue, on this machine,
 * against the bench database (run `pnpm bench` once first to create it): plain `node:http` +
 * postgres.js answering an encounter read by primary key, first on its own, then with each read
 * committing its own audit row in the read's transaction. Each runs in its own process, driven
 * by autocannon on loopback (8 connections, BENCH_DURATION seconds, default 10, after 2 s of
 * warm-up), twice in alternating order. It tells how far commits bound a server on this
 * machine, which the 1.5x target of the detail routes counts on. Prints its figures; writes
 * nothing but a scratch table, dropped at the end.
 */
import { fork } from "node:child_process"
import { createServer } from "node:http"
import { fileURLToPath } from "node:url"
import autocannon from "autocannon"
import { cpuSecondsOf, openPool, postgresCpuSeconds } from "./bench-support.js"

const databaseUrl = process.env["BENCH_DATABASE_URL"] || "postgres://postgres@127.0.0.1:5432/clinical_bench"
const port = 18090
const connections = 8
const duration = Number(process.env["BENCH_DURATION"] || 10)
const auditTable = "bench_reference_audit"

type Mode = "read" | "read-and-commit"

const serve = async (mode: Mode) => {
  const { sql } = await openPool(databaseUrl, 10)
  const ids = (await sql<Array<{ encounter_id: string }>>`
    SELECT encounter_id FROM encounters TABLESAMPLE SYSTEM (1) REPEATABLE (7) LIMIT 2000`).map((row) => row.encounter_id)
  let next = 0
  createServer((_request, response) => {
    const id = ids[next++ % ids.length] ?? ""
    const read = mode === "read"
      ? sql`SELECT * FROM encounters WHERE encounter_id = ${id}`
      : sql.begin(async (transaction) => {
          const rows = await transaction`SELECT * FROM encounters WHERE encounter_id = ${id}`
          await transaction`INSERT INTO ${sql(auditTable)} (encounter_id) VALUES (${id})`
          return rows
        })
    read.then(
      (rows) => {
        const body = JSON.stringify(rows[0])
        response.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
        response.end(body)
      },
      () => {
        response.writeHead(503)
        response.end()
      }
    )
  }).listen(port, "127.0.0.1", () => process.send?.("listening"))
}

const measure = (mode: Mode) =>
  new Promise<string>((resolve, reject) => {
    const child = fork(fileURLToPath(import.meta.url), ["serve", mode], { execArgv: process.execArgv })
    child.once("error", reject)
    child.once("exit", (code) => reject(new Error(`the ${mode} server exited (${code}) before it listened`)))
    child.once("message", async () => {
      try {
        const url = `http://127.0.0.1:${port}/`
        await autocannon({ url, connections, duration: 2 })
        const [serverBefore, postgresBefore] = [cpuSecondsOf(child.pid!), postgresCpuSeconds()]
        const result = await autocannon({ url, connections, duration })
        const requests = result.requests.total
        const perRequest = (seconds: number) => (seconds * 1000 / Math.max(1, requests)).toFixed(3)
        resolve(
          `${mode.padEnd(16)} ${Math.round(requests / duration)} req/s p50 ${result.latency.p50} ms p99 ${result.latency.p99} ms` +
            ` non-2xx ${result.non2xx} | CPU ms/request server ${perRequest(cpuSecondsOf(child.pid!) - serverBefore)}` +
            ` + pg ${perRequest(postgresCpuSeconds() - postgresBefore)}`
        )
      } catch (error) {
        reject(error)
      } finally {
        child.kill()
      }
    })
  })

if (process.argv[2] === "serve") {
  await serve(process.argv[3] as Mode)
} else {
  const { sql, close } = await openPool(databaseUrl, 1)
  await sql`CREATE TABLE IF NOT EXISTS ${sql(auditTable)} (id bigserial PRIMARY KEY, encounter_id text NOT NULL, at timestamptz NOT NULL DEFAULT now())`
  try {
    for (const mode of ["read", "read-and-commit", "read-and-commit", "read"] as const) console.log(await measure(mode))
  } finally {
    await sql`DROP TABLE IF EXISTS ${sql(auditTable)}`
    await close()
  }
}
