/**
 * Disclosure events one PostgreSQL primary records per second through the service's own write
 * path: units of work (`groupTransactionally`) that record k events each with the
 * `DisclosureRecorder`, the INSERT sent with the COMMIT, units arriving together sharing one
 * transaction, as a replica's reads do. No read runs in the units: this is the ledger's write
 * capacity alone. On a fresh database of the DATABASE_URL server (created, migrated, dropped).
 * Prints, per batch size: events/s, units/s, CPU ms of the database's backends and of this
 * process per 1,000 events, the bytes the table (its partitions) and indexes grow by per event, and how fast
 * one sealer (the service's background sealer, one at a time across replicas) then seals what
 * was recorded. Used by docs/operations.md, "Scaling out".
 *
 * BENCH_LEDGER_SECONDS (5 per batch size), BENCH_LEDGER_UNITS (32 units in flight),
 * BENCH_LEDGER_POOL (10, DATABASE_POOL_MAX's default), BENCH_LEDGER_BATCHES (1,50,100).
 */
import { availableParallelism, cpus } from "node:os"
import { type DisclosureEvent, type DisclosureEventId, type OperationId } from "@clinical-api/domain"
import {
  ensureDisclosurePartitions,
  ledgerSignerFromSecret,
  makeDisclosureRecorder,
  makePgClient,
  newId,
  PgClient,
  SANDBOX_LEDGER_KEY,
  sealAll
} from "@clinical-api/storage-adapter"
import { Effect, Exit, Scope } from "effect"
import { createFreshDatabase, runCli } from "../scripts/service-process.js"
import { cpuSecondsOf } from "./bench-support.js"

const adminUrl = process.env["DATABASE_URL"]?.trim() || "postgres://postgres@127.0.0.1:5432/postgres"
const seconds = Number(process.env["BENCH_LEDGER_SECONDS"] ?? 5)
const unitsInFlight = Number(process.env["BENCH_LEDGER_UNITS"] ?? 32)
const poolSize = Number(process.env["BENCH_LEDGER_POOL"] ?? 10)
const batches = (process.env["BENCH_LEDGER_BATCHES"] ?? "1,50,100").split(",").map(Number)

const eventsOf = (count: number): ReadonlyArray<DisclosureEvent> => {
  const requestId = newId("request")
  const occurredAt = new Date()
  return Array.from({ length: count }, (_, index) => ({
    eventId: newId("disclosure") as DisclosureEventId,
    occurredAt,
    organizationId: "org_bench",
    apiKeyId: "key_bench",
    operationId: (count === 1 ? "getPublicEncounter" : "listPublicEncounters") as OperationId,
    encounterId: `enc_bench_${index}`,
    documentId: null,
    patientId: `pat_bench_${index}`,
    requestId,
    callerRequestId: null
  } as DisclosureEvent))
}

const main = async () => {
  const database = await createFreshDatabase(adminUrl)
  try {
    const migrated = await runCli(["migrate"], { DATABASE_URL: database.url })
    if (migrated.code !== 0) throw new Error(`migrate failed:\n${migrated.stderr}`)
    const scope = Effect.runSync(Scope.make())
    const client = await Effect.runPromise(Scope.provide(makePgClient({ url: database.url, maxConnections: poolSize }), scope))
    const recorder = await Effect.runPromise(Effect.provideService(makeDisclosureRecorder, PgClient, client))
    // This month's partition, as the service's sealer makes it at start.
    await Effect.runPromise(Effect.provideService(ensureDisclosurePartitions(), PgClient, client))
    const run = async (batch: number, durationMs: number) => {
      let units = 0
      const deadline = Date.now() + durationMs
      const loop = async () => {
        while (Date.now() < deadline) {
          await Effect.runPromise(client.groupTransactionally(recorder.record(eventsOf(batch))))
          units++
        }
      }
      await Promise.all(Array.from({ length: unitsInFlight }, loop))
      return units
    }
    const backendPids = () =>
      database.query((sql) => sql<Array<{ pid: number }>>`
        SELECT pid FROM pg_stat_activity WHERE datname = ${database.name} AND pid <> pg_backend_pid()`)
    const tableBytes = () =>
      database.query((sql) => sql<Array<{ bytes: string }>>`
        SELECT coalesce(sum(pg_total_relation_size(relid)), 0)::text AS bytes FROM pg_partition_tree('disclosure_events')`)
        .then((rows) => Number(rows[0]?.bytes ?? 0))
    const sealedEvents = () =>
      database.query((sql) => sql<Array<{ count: string }>>`SELECT coalesce(sum(event_count), 0)::text AS count FROM disclosure_seals`)
        .then((rows) => Number(rows[0]?.count ?? 0))
    console.log(`${cpus()[0]?.model ?? "cpu"} x ${availableParallelism()}, Node ${process.version}; ${unitsInFlight} units in flight, pool ${poolSize}, ${seconds} s per batch size`)
    console.log(
      "| events per unit | events/s | units/s | PostgreSQL backends CPU ms per 1,000 events | bench process CPU ms per 1,000 events | " +
        "table + index bytes per event | events sealed/s, one sealer |"
    )
    console.log("|---:|---:|---:|---:|---:|---:|---:|")
    const signer = ledgerSignerFromSecret(SANDBOX_LEDGER_KEY)
    const seal = () => Effect.runPromise(Effect.provideService(sealAll(signer), PgClient, client))
    for (const batch of batches) {
      await run(batch, 1000) // warm-up: every pool connection open, statements prepared
      const pids = (await backendPids()).map((row) => row.pid)
      const backendCpu = () => pids.reduce((total, pid) => total + cpuSecondsOf(pid), 0)
      const bytesBefore = await tableBytes()
      const cpuBefore = backendCpu()
      const ownBefore = process.cpuUsage()
      const started = performance.now()
      const units = await run(batch, seconds * 1000)
      const elapsed = (performance.now() - started) / 1000
      const own = process.cpuUsage(ownBefore)
      const events = units * batch
      const perThousand = (cpuSeconds: number) => ((cpuSeconds * 1000) / events * 1000).toFixed(1)
      const backendCpuSeconds = backendCpu() - cpuBefore
      const bytesPerEvent = ((await tableBytes()) - bytesBefore) / events
      // Everything recorded so far (the warm-ups too) is sealed; the rate counts what was sealed.
      const sealedBefore = await sealedEvents()
      const sealStarted = performance.now()
      await seal()
      const sealedPerSecond = ((await sealedEvents()) - sealedBefore) / ((performance.now() - sealStarted) / 1000)
      console.log(
        `| ${batch} | ${Math.round(events / elapsed)} | ${Math.round(units / elapsed)} | ${perThousand(backendCpuSeconds)} | ` +
          `${perThousand((own.user + own.system) / 1e6)} | ${Math.round(bytesPerEvent)} | ${Math.round(sealedPerSecond)} |`
      )
    }
    await Effect.runPromise(Scope.close(scope, Exit.void))
  } finally {
    await database.drop()
  }
}

await main()
