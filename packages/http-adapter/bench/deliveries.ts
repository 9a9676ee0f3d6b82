/**
 * Webhook deliveries per second to a loopback receiver (the partner receiver kit with its
 * in-memory idempotency store), with 1 and 4 concurrent workers, on a fresh PostgreSQL database
 * (DATABASE_URL's server, or the local one; created and dropped here). Part of `pnpm bench`; writes
 * bench/webhook-deliveries.json.
 */
import { writeFileSync } from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { makeIdempotencyStoreMemory, makeWebhookRequestHandler, runDeliveryPass } from "@clinical-api/webhook-adapter"
import { Effect, Layer } from "effect"
import { serverDatabases } from "@clinical-api/storage-adapter/testing"
import { activeSubscription, publishOne, webhookStackOn } from "../test/cli-webhooks-support.js"

const adminUrl = process.env["DATABASE_URL"]?.trim() || "postgres://postgres@127.0.0.1:5432/postgres"
const events = Number(process.env["BENCH_WEBHOOK_EVENTS"] ?? 1000)
const workerCounts = [1, 4]

const main = async () => {
  let handler: http.RequestListener = (_request, response) => response.writeHead(503).end()
  let handled = 0
  const receiver = http.createServer((request, response) => handler(request, response))
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
  const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/webhooks`

  const results: Array<{ workers: number; events: number; seconds: number; deliveriesPerSecond: number }> = []
  try {
    const program = Effect.gen(function*() {
      const { organizationId, secret } = yield* activeSubscription(receiverUrl)
      handler = makeWebhookRequestHandler({
        secrets: [secret],
        store: makeIdempotencyStoreMemory(),
        handle: () => Effect.sync(() => void handled++)
      })
      for (const workers of workerCounts) {
        yield* Effect.forEach(Array.from({ length: events }), () => publishOne(organizationId), { concurrency: 8, discard: true })
        const before = handled
        const started = performance.now()
        const pass = yield* runDeliveryPass({ runtime: "enabled", environment: "sandbox", concurrency: workers })
        const seconds = (performance.now() - started) / 1000
        if (pass.succeeded !== events || handled - before !== events) {
          throw new Error(`expected ${events} deliveries, got ${pass.succeeded} succeeded and ${handled - before} handled`)
        }
        results.push({ workers, events, seconds: Number(seconds.toFixed(2)), deliveriesPerSecond: Math.round(events / seconds) })
      }
    })
    // A fresh database on the server, dropped when the scope closes.
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const database = yield* serverDatabases(adminUrl).fresh
      const context = yield* Layer.build(webhookStackOn(database.url, 8))
      yield* Effect.provide(program, context)
    })))
  } finally {
    receiver.close()
  }
  const report = { at: new Date().toISOString(), receiver: "loopback, receiver kit, in-memory idempotency store", results }
  writeFileSync(new URL("./webhook-deliveries.json", import.meta.url), `${JSON.stringify(report, null, 2)}\n`)
  for (const result of results) {
    console.log(`webhook deliveries, ${result.workers} worker(s): ${result.deliveriesPerSecond}/s (${result.events} in ${result.seconds} s)`)
  }
}

await main()
