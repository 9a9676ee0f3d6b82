// Run by driver-patch.test.ts as `node --expose-gc old-generation-growth.mjs`, with DATABASE_URL
// set: how much the old generation grows per query run through postgres.js, once warm, between
// two points with no full collection in between. Prints one JSON line.
import { PerformanceObserver } from "node:perf_hooks"
import process from "node:process"
import { setImmediate } from "node:timers"
import v8 from "node:v8"
import postgres from "postgres"

const queries = 3000
const sql = postgres(process.env.DATABASE_URL, { max: 1, onnotice: () => {} })
const oldSpaceUsed = () => v8.getHeapSpaceStatistics().find((space) => space.space_name === "old_space").space_used_size
const run = async (count) => {
  for (let i = 0; i < count; i++) await sql`SELECT ${i}::int AS i, repeat('x', 200) AS filler`
}

await run(1000)
let fullCollections = 0
const observer = new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) if (entry.detail?.kind !== 1) fullCollections++
})
globalThis.gc()
observer.observe({ entryTypes: ["gc"] })
const before = oldSpaceUsed()
await run(queries)
const after = oldSpaceUsed()
await new Promise((done) => setImmediate(done))
observer.disconnect()
await sql.end()
process.stdout.write(`${JSON.stringify({ bytesPerQuery: (after - before) / queries, fullCollections })}\n`)
