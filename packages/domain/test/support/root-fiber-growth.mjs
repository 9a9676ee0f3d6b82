// Run by effect-patch.test.ts as `node --expose-gc root-fiber-growth.mjs`: how much the old
// generation grows per root fiber (`Effect.runFork`), eight in flight at a time, each ending
// with a fresh 20 KB string as its value, once warm, between two points with no full collection
// in between. Prints one JSON line.
import { Effect } from "effect"
import { Buffer } from "node:buffer"
import { PerformanceObserver } from "node:perf_hooks"
import process from "node:process"
import { setImmediate } from "node:timers"
import v8 from "node:v8"

const fibers = 2000
const oldSpaceUsed = () => v8.getHeapSpaceStatistics().find((space) => space.space_name === "old_space").space_used_size
const answer = (index) =>
  Effect.zipRight(Effect.yieldNow(), Effect.sync(() => Buffer.alloc(20_000, 97 + (index % 26)).toString("latin1")))
// Each fiber that ends starts the next one from its observer, so eight are in flight until the last.
const run = (count) =>
  new Promise((done, fail) => {
    let started = 0
    let finished = 0
    const start = () => {
      Effect.runFork(answer(started++)).addObserver((exit) => {
        if (exit._tag !== "Success" || exit.value.length !== 20_000) return fail(new Error("expected the fiber's 20 KB value"))
        finished++
        if (started < count) start()
        else if (finished === count) done()
      })
    }
    for (let inFlight = 0; inFlight < 8; inFlight++) start()
  })

await run(2000)
let fullCollections = 0
const observer = new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) if (entry.detail?.kind !== 1) fullCollections++
})
globalThis.gc()
observer.observe({ entryTypes: ["gc"] })
const before = oldSpaceUsed()
await run(fibers)
const after = oldSpaceUsed()
await new Promise((done) => setImmediate(done))
observer.disconnect()
process.stdout.write(`${JSON.stringify({ bytesPerFiber: (after - before) / fibers, fullCollections })}\n`)
