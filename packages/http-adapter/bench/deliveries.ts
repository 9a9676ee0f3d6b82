/**
 * Webhook deliveries per second to a loopback receiver (the partner receiver kit with its
 * in-memory idempotency store, in this process) with 1, 2, 4 and 8 workers, each a
 * `pnpm cli webhooks worker` process with its default settings (WEBHOOK_WORKER_CONCURRENCY),
 * on a fresh PostgreSQL database (DATABASE_URL's server, or the local one; created and dropped
 * here). For each count the workers first deliver a warm-up batch, untimed: a fresh worker
 * process and its fresh PostgreSQL backends spend their first thousand deliveries or so compiling
 * and filling caches, which would otherwise weigh on 8 workers eight times as much as on one.
 * Then the measured events are published and held back (their subscription disabled); the clock
 * runs from releasing them to the last one handled by the receiver. Also reports the CPU time
 * per delivery of the workers, the receiver and the database's backends (from /proc), the
 * machine's busy cores over the round (from /proc/stat) and PostgreSQL's transactions per
 * delivery (claims, records and polls; `pg_stat_database`). An untimed round with the first
 * worker count comes first: on tables that have never held a round's rows, PostgreSQL spent
 * about 2.5 times the CPU per delivery, which weighed on whichever count ran first. Part of
 * `pnpm bench`; writes bench/webhook-deliveries.json.
 *
 * A second series has the receiver answer each delivery after BENCH_WEBHOOK_RECEIVER_DELAY_MS
 * (default 100; 0 skips it), as a partner's endpoint across a network does: the workers then wait
 * on the receiver rather than on the machine's cores, which shows whether they scale.
 *
 * BENCH_WEBHOOK_EVENTS (default 20000), BENCH_WEBHOOK_WARMUP_EVENTS (default 2000 per worker),
 * BENCH_WEBHOOK_WORKERS (default 1,2,4,8), BENCH_WEBHOOK_DELAYED_EVENTS (default 5000).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { readFileSync, writeFileSync } from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { availableParallelism } from "node:os"
import { fileURLToPath } from "node:url"
import type { OrganizationId } from "@clinical-api/domain"
import { PgClient } from "@clinical-api/storage-adapter"
import { serverDatabases } from "@clinical-api/storage-adapter/testing"
import { makeIdempotencyStoreMemory, makeWebhookRequestHandler } from "@clinical-api/webhook-adapter"
import { Duration, Effect, Layer } from "effect"
import { activeSubscription, publishOne, webhookStackOn } from "../test/cli-webhooks-support.js"

const adminUrl = process.env["DATABASE_URL"]?.trim() || "postgres://postgres@127.0.0.1:5432/postgres"
const events = Number(process.env["BENCH_WEBHOOK_EVENTS"] ?? 20_000)
const warmUpEventsPerWorker = Number(process.env["BENCH_WEBHOOK_WARMUP_EVENTS"] ?? 2000)
const workerCounts = (process.env["BENCH_WEBHOOK_WORKERS"] ?? "1,2,4,8").split(",").map(Number)
const receiverDelayMs = Number(process.env["BENCH_WEBHOOK_RECEIVER_DELAY_MS"] ?? 100)
const delayedEvents = Number(process.env["BENCH_WEBHOOK_DELAYED_EVENTS"] ?? 5000)
const delayedWarmUpEventsPerWorker = Math.ceil(warmUpEventsPerWorker / 4)

/** One curve: the receiver answers each delivery after `receiverDelayMs`. */
interface Series {
  readonly receiverDelayMs: number
  readonly events: number
  readonly warmUpEventsPerWorker: number
}
const workspaceRoot = fileURLToPath(new URL("../../../", import.meta.url))
const cliEntry = "packages/http-adapter/scripts/cli.mjs"

interface Result {
  readonly receiverDelayMs: number
  readonly workers: number
  readonly events: number
  readonly seconds: number
  readonly deliveriesPerSecond: number
  /** Requests the receiver got beyond one per event (at least once allows them). */
  readonly duplicates: number
  /** CPU time per delivery, in ms, of the worker processes, the receiver and the database's backends. */
  readonly cpuMsPerDelivery: { readonly workers: number; readonly receiver: number; readonly postgres: number }
  /** The machine's cores busy on average over the round, by any process. */
  readonly busyCores: number
  /** PostgreSQL's committed transactions on the database per delivery: claims, records, polls. */
  readonly transactionsPerDelivery: number
}

/** CPU seconds (user + system) a process has used so far, from /proc; 0 where there is no /proc. */
const cpuSecondsOf = (pid: number | undefined): number => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? []
    // utime and stime are fields 14 and 15 of stat(5), in clock ticks (100 per second on Linux).
    return (Number(fields[11]) + Number(fields[12])) / 100
  } catch {
    return 0
  }
}

/** Clock ticks the machine's cores have been busy and in all, from /proc/stat; zeros where there is none. */
const machineTicks = (): { readonly busy: number; readonly total: number } => {
  try {
    const fields = readFileSync("/proc/stat", "utf8").split("\n")[0]?.trim().split(/\s+/).slice(1).map(Number) ?? []
    const total = fields.slice(0, 8).reduce((sum, value) => sum + value, 0)
    // After the label: user, nice, system, idle, iowait, irq, softirq, steal.
    return { busy: total - (fields[3] ?? 0) - (fields[4] ?? 0), total }
  } catch {
    return { busy: 0, total: 0 }
  }
}

const spawnWorker = (databaseUrl: string) => {
  const env: Record<string, string | undefined> = { ...process.env }
  for (const name of ["PGLITE_DATA_DIR", "DATABASE_OWNER_URL", "PUBLIC_API_ENVIRONMENT"]) delete env[name]
  const child = spawn(process.execPath, [cliEntry, "webhooks", "worker"], {
    cwd: workspaceRoot,
    env: { ...env, DATABASE_URL: databaseUrl, WEBHOOK_RUNTIME: "enabled", WEBHOOK_POLL_INTERVAL_MS: "20", NO_COLOR: "1" },
    // Each attempt's JSON line is read and dropped, as a log collector would.
    stdio: ["ignore", "pipe", "pipe"]
  })
  child.stdout?.resume()
  let stderr = ""
  const ready = new Promise<void>((resolve, reject) => {
    child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk
      if (stderr.includes("worker running")) resolve()
    })
    child.on("exit", (code) => reject(new Error(`worker exited (${code}) before it was ready: ${stderr}`)))
  })
  const exited = new Promise<void>((resolve) => child.on("close", () => resolve()))
  return { child, ready, exited }
}

const stopAll = async (workers: ReadonlyArray<{ child: ChildProcess; exited: Promise<void> }>) => {
  for (const worker of workers) worker.child.kill("SIGTERM")
  await Promise.all(workers.map((worker) => worker.exited))
}

const main = async () => {
  let handled = 0
  let requests = 0
  let lastHandledAt = 0
  let answerDelayMs = 0
  const recordHandled = () => {
    handled++
    lastHandledAt = performance.now()
  }
  let handler: http.RequestListener = (_request, response) => response.writeHead(503).end()
  const receiver = http.createServer((request, response) => {
    requests++
    handler(request, response)
  })
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
  const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/webhooks`
  const allHandled = (count: number) =>
    new Promise<void>((resolve) => {
      const check = setInterval(() => {
        if (handled >= count) {
          clearInterval(check)
          resolve()
        }
      }, 5)
    })

  const results: Array<Result> = []
  await Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const database = yield* serverDatabases(adminUrl).fresh
        const context = yield* Layer.build(webhookStackOn(database.url, 8))
        const sql = <A>(query: Parameters<PgClient["Service"]["run"]>[1]) =>
          Effect.provide(PgClient.use((client) => client.run("bench.sql", query)), context) as Effect.Effect<A>
        // Two subscriptions to the same receiver: one for the warm-up batches, one for the measured ones.
        const warm = yield* Effect.provide(activeSubscription(receiverUrl), context)
        const measured = yield* Effect.provide(activeSubscription(receiverUrl), context)
        handler = makeWebhookRequestHandler({
          secrets: [warm.secret, measured.secret],
          store: makeIdempotencyStoreMemory(),
          handle: () =>
            answerDelayMs === 0 ? Effect.sync(recordHandled) : Effect.andThen(Effect.sleep(Duration.millis(answerDelayMs)), Effect.sync(recordHandled))
        })
        const publish = (organizationId: OrganizationId, count: number) =>
          Effect.provide(
            Effect.forEach(Array.from({ length: count }), () => publishOne(organizationId), { concurrency: 8, discard: true }),
            context
          )
        // A disabled subscription's deliveries are not claimed (it is disabled directly, so nothing
        // is cancelled); events are published only to an active one.
        const setState = (subscriptionId: string, state: "active" | "disabled") =>
          sql((q) => q`UPDATE webhook_subscriptions SET state = ${state} WHERE subscription_id = ${subscriptionId}`)
        const series: Array<Series> = [{ receiverDelayMs: 0, events, warmUpEventsPerWorker }]
        if (receiverDelayMs > 0) {
          series.push({ receiverDelayMs, events: delayedEvents, warmUpEventsPerWorker: delayedWarmUpEventsPerWorker })
        }
        const primingRound = workerCounts[0] ?? 1
        const rounds = series.flatMap((one, index) =>
          (index === 0 ? [primingRound, ...workerCounts] : workerCounts).map((workers, round) => ({
            ...one,
            workers,
            timed: index > 0 || round > 0
          })))
        for (const { events, receiverDelayMs, timed, warmUpEventsPerWorker, workers } of rounds) {
          answerDelayMs = receiverDelayMs
          const warmUp = warmUpEventsPerWorker * workers
          yield* publish(warm.organizationId, warmUp)
          yield* publish(measured.organizationId, events)
          yield* setState(warm.subscriptionId, "disabled")
          yield* setState(measured.subscriptionId, "disabled")
          // The dead rows of earlier rounds are vacuumed away, so every round starts alike.
          yield* sql((q) => q`VACUUM ANALYZE webhook_deliveries, webhook_delivery_attempts`)
          const pool = Array.from({ length: workers }, () => spawnWorker(database.url))
          try {
            yield* Effect.promise(() => Promise.all(pool.map((worker) => worker.ready)))
            const handledBeforeWarmUp = handled
            yield* setState(warm.subscriptionId, "active")
            yield* Effect.promise(() => allHandled(handledBeforeWarmUp + warmUp))
            // Backends a worker opens after the release start from 0.
            const backends = sql<Array<{ pid: number }>>((q) => q`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
            const backendsBefore = new Map((yield* backends).map((row) => [row.pid, cpuSecondsOf(row.pid)]))
            const cpu = (postgresPids: ReadonlyArray<number>) => ({
              workers: pool.reduce((sum, worker) => sum + cpuSecondsOf(worker.child.pid), 0),
              receiver: (process.cpuUsage().user + process.cpuUsage().system) / 1e6,
              postgres: postgresPids.reduce((sum, pid) => sum + cpuSecondsOf(pid) - (backendsBefore.get(pid) ?? 0), 0)
            })
            // Backends flush their counters when they end, so the count is read after the workers stop.
            const commits = sql<Array<{ n: string }>>((q) => q`SELECT xact_commit::text AS n FROM pg_stat_database WHERE datname = current_database()`)
            const commitsBefore = Number((yield* commits)[0]?.n)
            const handledBefore = handled
            const requestsBefore = requests
            const cpuBefore = cpu([])
            const ticksBefore = machineTicks()
            const started = performance.now()
            yield* setState(measured.subscriptionId, "active")
            yield* Effect.promise(() => allHandled(handledBefore + events))
            const seconds = (lastHandledAt - started) / 1000
            const cpuAfter = cpu((yield* backends).map((row) => row.pid))
            const ticksAfter = machineTicks()
            const busyCores = ticksAfter.total > ticksBefore.total
              ? ((ticksAfter.busy - ticksBefore.busy) / (ticksAfter.total - ticksBefore.total)) * availableParallelism()
              : 0
            const perDelivery = (key: keyof typeof cpuAfter) => Number((((cpuAfter[key] - cpuBefore[key]) * 1000) / events).toFixed(2))
            // The last results are recorded a moment after the receiver handled them.
            let pending = events
            for (let tries = 0; tries < 100 && pending > 0; tries++) {
              const rows = yield* sql<Array<{ n: number }>>((q) => q`SELECT count(*)::int AS n FROM webhook_deliveries WHERE state <> 'succeeded'`)
              pending = rows[0]?.n ?? 0
              if (pending > 0) yield* Effect.sleep("50 millis")
            }
            yield* Effect.promise(() => stopAll(pool))
            const commitsAfter = Number((yield* commits)[0]?.n)
            if (handled - handledBefore !== events || pending !== 0) {
              throw new Error(`expected ${events} events handled and every delivery succeeded, got ${handled - handledBefore} and ${pending} not succeeded`)
            }
            if (!timed) continue
            results.push({
              receiverDelayMs,
              workers,
              events,
              seconds: Number(seconds.toFixed(2)),
              deliveriesPerSecond: Math.round(events / seconds),
              duplicates: requests - requestsBefore - events,
              cpuMsPerDelivery: { workers: perDelivery("workers"), receiver: perDelivery("receiver"), postgres: perDelivery("postgres") },
              busyCores: Number(busyCores.toFixed(2)),
              transactionsPerDelivery: Number(((commitsAfter - commitsBefore) / events).toFixed(3))
            })
          } finally {
            yield* Effect.promise(() => stopAll(pool))
          }
        }
      })
    )
  ).finally(() => receiver.close())

  const report = {
    at: new Date().toISOString(),
    cores: availableParallelism(),
    receiver: "loopback, receiver kit, in-memory idempotency store (the bench process)",
    workers: "pnpm cli webhooks worker processes, default settings",
    warmUpEventsPerWorker,
    delayedSeries: receiverDelayMs > 0
      ? `the receiver answers after ${receiverDelayMs} ms; ${delayedEvents} events, ${delayedWarmUpEventsPerWorker} warm-up events per worker`
      : "none",
    primingRound: `untimed, ${workerCounts[0] ?? 1} worker(s), before the measured rounds`,
    results
  }
  writeFileSync(new URL("./webhook-deliveries.json", import.meta.url), `${JSON.stringify(report, null, 2)}\n`)
  for (const result of results) {
    console.log(
      `webhook deliveries, receiver answering after ${result.receiverDelayMs} ms, ${result.workers} worker(s): ${result.deliveriesPerSecond}/s (${result.events} in ${result.seconds} s, ` +
        `${result.duplicates} duplicates; CPU ms per delivery: workers ${result.cpuMsPerDelivery.workers}, ` +
        `receiver ${result.cpuMsPerDelivery.receiver}, PostgreSQL ${result.cpuMsPerDelivery.postgres}; ` +
        `${result.busyCores} of ${availableParallelism()} cores busy; ${result.transactionsPerDelivery} transactions per delivery)`
    )
  }
}

await main()
