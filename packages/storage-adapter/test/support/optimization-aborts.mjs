// Run by driver-patch.test.ts as `node --trace-opt optimization-aborts.mjs`, with DATABASE_URL
// set: eight workers run prepared queries through postgres.js, 20,000 to warm up (counted, not
// timed: a loaded machine takes longer to get there), then for 3 s more; the line "measuring"
// marks the end of the warm-up. V8 prints every optimization it starts, finishes and aborts; the
// test counts the aborts after the mark.
import process from "node:process"
import { setTimeout } from "node:timers"
import postgres from "postgres"

const warmUpQueries = 20_000
const measureMs = 3000
const sql = postgres(process.env.DATABASE_URL, { max: 8, onnotice: () => {} })
let stop = false
let queries = 0
const worker = async () => {
  while (!stop) {
    const rows = await sql`SELECT ${queries++}::int AS i, 'x' AS filler`
    if (rows.length !== 1) throw new Error("expected one row")
  }
}
const workers = Array.from({ length: 8 }, worker)
while (queries < warmUpQueries) await new Promise((done) => setTimeout(done, 50))
process.stdout.write("measuring\n")
await new Promise((done) => setTimeout(done, measureMs))
stop = true
await Promise.all(workers)
await sql.end()
process.stdout.write(`queries ${queries}\n`)
