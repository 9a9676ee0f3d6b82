/**
 * `pnpm bench`: the service (its real composition, `src/main.ts`: ServiceLive from the
 * environment, bundled and run as `pnpm start` runs it) and the floor server (floor-server.ts,
 * bundled the same way, on plain Node with V8's defaults), two processes of each on the same
 * PostgreSQL database, driven in turn by autocannon on loopback, route by route. Each route is
 * measured in rounds; in every round each process is driven once, a service process and a floor
 * process in pairs whose order alternates (service then floor, floor then service, ...), so that
 * a passing disturbance of the machine (a checkpoint, a cold cache) falls on both servers alike;
 * the figures of a server are over all its rounds and processes together.
 *
 * The database (BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/clinical_bench; not
 * DATABASE_URL, which names the server the tests create their databases on) is created if
 * missing, migrated, and loaded with the generated data set if it holds none yet (BENCH_ENCOUNTERS, default 1,000,000, across 20 organizations, org_gen_001 holding 40%).
 * A fresh full-access key of org_gen_001 is issued for each run.
 *
 * Settings: BENCH_CONNECTIONS (8), BENCH_DURATION seconds per route and server (12),
 * BENCH_PROCESSES (2 of each server: fresh processes of one build differ in speed),
 * BENCH_ROUNDS (4, the duration split evenly between them and the processes), BENCH_WARMUP seconds (2, per route
 * and server, before the route's first round), BENCH_INITIAL_WARMUP seconds (4, per route and
 * server, every route once before the first is measured: a fresh process's JIT compiler is still
 * at work on its code for tens of seconds), DATABASE_POOL_MAX (10, both servers), BENCH_SERVICE_PORT (18080),
 * BENCH_FLOOR_PORT (18081; a server's k-th process listens on its port plus 2k), BENCH_ROUTES (comma-separated route keys, default all; a partial
 * run only prints its figures),
 * BENCH_CPU_PROFILE_DIR (the service writes a V8 CPU profile there when it stops),
 * BENCH_MEMORY_LIMIT_MB (1024: after the rounds, one more process of each server runs every route
 * in a memory cgroup of this size, as a container's limit would hold it; 0 leaves that out).
 * Writes bench/results.json, the results table of docs/performance.md and docs/query-plans.md
 * (each between its `<!-- bench:...:start -->` and `:end -->` markers).
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { readFileSync, writeFileSync } from "node:fs"
import { cpus } from "node:os"
import { dirname, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { isDeepStrictEqual } from "node:util"
import type { OrganizationId } from "@clinical-api/domain"
import {
  apiKeyByDigestStatement,
  defaultGenerateOptions,
  disclosureInsertStatement,
  documentSummariesStatement,
  encounterAndDocumentStatement,
  encounterByIdStatement,
  encounterPageStatement,
  generatedOrganizationId,
  generateDataSet,
  issueFullAccessKeys,
  migrate,
  organizationByIdStatement,
  type Fragment,
  PgClient,
  PgClientLayer,
  type Sql,
  textArray
} from "@clinical-api/storage-adapter"
import autocannon from "autocannon"
import { startScriptNodeFlags } from "../scripts/service-process.js"
import { cpuSecondsOf, memoryCgroup, openPool, postgresCpuSeconds } from "./bench-support.js"
import { Effect, Redacted } from "effect"

const here = dirname(fileURLToPath(import.meta.url))
const root = resolve(here, "../../..")

const number = (name: string, fallback: number) => {
  const text = process.env[name]
  const value = text === undefined || text === "" ? fallback : Number(text)
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a non-negative number`)
  return value
}

const databaseUrl = process.env["BENCH_DATABASE_URL"] || "postgres://postgres@127.0.0.1:5432/clinical_bench"
const connections = number("BENCH_CONNECTIONS", 8)
const duration = number("BENCH_DURATION", 12)
// Four rounds of two processes per server: eight turns of 1.5 s per server, not four of 3 s, as
// machines slow down for a few seconds at a time and shorter turns spread such a spell over
// both servers (docs/performance.md, "Method").
const rounds = Math.max(1, Math.floor(number("BENCH_ROUNDS", 4)))
const warmup = number("BENCH_WARMUP", 2)
const initialWarmup = number("BENCH_INITIAL_WARMUP", 4)
const poolMax = number("DATABASE_POOL_MAX", 10)
const encounterCount = number("BENCH_ENCOUNTERS", defaultGenerateOptions.encounters)
const servicePort = number("BENCH_SERVICE_PORT", 18080)
const floorPort = number("BENCH_FLOOR_PORT", 18081)
const processCount = Math.max(1, Math.floor(number("BENCH_PROCESSES", 2)))
const memoryLimitMb = number("BENCH_MEMORY_LIMIT_MB", 1024)
const digestKey = "bench-digest-key-not-for-production"
const mediaSigningKey = "bench-media-signing-key"
/** The k-th process of a server listens on its port plus 2k (the service's and the floor's interleave). */
const processBase = (port: number, k: number) => `http://127.0.0.1:${port + 2 * k}`
const bigOrganization = generatedOrganizationId(1)

const log = (line: string) => process.stderr.write(`${line}\n`)

/** CREATE DATABASE when it does not exist, through the server's `postgres` database. */
const ensureDatabase = async () => {
  const url = new URL(databaseUrl)
  const name = decodeURIComponent(url.pathname.slice(1))
  url.pathname = "/postgres"
  const admin = await openPool(url.toString(), 1)
  try {
    const found = await admin.sql`SELECT 1 FROM pg_database WHERE datname = ${name}`
    if (found.length === 0) {
      log(`creating database ${name}`)
      await admin.sql.unsafe(`CREATE DATABASE "${name.replaceAll("\"", "\"\"")}"`)
    }
  } finally {
    await admin.close()
  }
}

/** Migrates, generates the data set when absent, and issues this run's key. */
const prepareData = () =>
  Effect.gen(function*() {
    yield* migrate()
    const client = yield* PgClient
    const present = yield* client.run("bench.present", (sql) =>
      sql`SELECT 1 FROM organizations WHERE organization_id = ${bigOrganization}`)
    if (present.length === 0) {
      log(`generating ${encounterCount} encounters (once; later runs reuse them)`)
      const report = yield* generateDataSet({
        ...defaultGenerateOptions,
        encounters: encounterCount,
        digestKey: Redacted.make(digestKey),
        environment: "test",
        onProgress: log
      })
      log(`generated in ${report.seconds.toFixed(1)} s`)
    }
    const [key] = yield* issueFullAccessKeys([bigOrganization], Redacted.make(digestKey), "test", "bench")
    if (key === undefined) return yield* Effect.die(new Error("no key issued"))
    return key.token
  }).pipe(Effect.provide(PgClientLayer({ url: databaseUrl, maxConnections: 2 })))

interface Samples {
  readonly encounters: ReadonlyArray<string>
  readonly documents: ReadonlyArray<readonly [string, string]>
  readonly transcripts: ReadonlyArray<readonly [string, string]>
  readonly recordings: ReadonlyArray<readonly [string, string]>
  readonly counts: Record<string, number>
}

/** Random clinical targets of the big organization, so that requests spread over the tables. */
const sample = async (sql: Sql): Promise<Samples> => {
  const encounters = await sql<Array<{ encounter_id: string }>>`
    SELECT encounter_id FROM encounters TABLESAMPLE SYSTEM (2) REPEATABLE (7)
    WHERE organization_id = ${bigOrganization} AND data_class = 'clinical' LIMIT 2000`
  const pairs = (rows: ReadonlyArray<{ encounter_id: string; document_id: string }>) =>
    rows.map((row) => [row.encounter_id, row.document_id] as const)
  const documents = await sql<Array<{ encounter_id: string; document_id: string }>>`
    SELECT d.encounter_id, d.document_id FROM documents d
    WHERE d.encounter_id = ANY(${textArray(sql, encounters.map((row) => row.encounter_id))})
      AND d.schema_type IN ('document', 'ambient_transcript')`
  const transcripts = await sql<Array<{ encounter_id: string; document_id: string }>>`
    SELECT d.encounter_id, d.document_id FROM transcripts t TABLESAMPLE SYSTEM (20) REPEATABLE (7)
    JOIN documents d USING (document_id) JOIN encounters e USING (encounter_id)
    WHERE e.organization_id = ${bigOrganization} AND e.data_class = 'clinical' LIMIT 1000`
  const recordings = await sql<Array<{ encounter_id: string; document_id: string }>>`
    SELECT d.encounter_id, d.document_id FROM recordings r TABLESAMPLE SYSTEM (20) REPEATABLE (7)
    JOIN documents d USING (document_id) JOIN encounters e USING (encounter_id)
    WHERE e.organization_id = ${bigOrganization} AND e.data_class = 'clinical' LIMIT 1000`
  const [counts] = await sql<Array<Record<string, number>>>`
    SELECT (SELECT count(*)::int FROM encounters) AS encounters,
           (SELECT count(*)::int FROM encounters WHERE organization_id = ${bigOrganization}) AS big_organization_encounters,
           (SELECT count(*)::int FROM documents) AS documents,
           (SELECT count(*)::int FROM transcript_turns) AS transcript_turns,
           (SELECT count(*)::int FROM recordings) AS recordings,
           (SELECT count(*)::int FROM disclosure_events) AS disclosure_events_before`
  return {
    encounters: encounters.map((row) => row.encounter_id),
    documents: pairs(documents),
    transcripts: pairs(transcripts),
    recordings: pairs(recordings),
    counts: counts ?? {}
  }
}

const offsetRange = { startAt: "2024-01-01T00:00:00.000Z", endAt: "2025-01-01T00:00:00.000Z" }

interface BenchRoute {
  readonly key: string
  readonly label: string
  readonly detail: boolean
  readonly paths: ReadonlyArray<string>
}

const routesOf = (samples: Samples): ReadonlyArray<BenchRoute> => {
  const documentPath = ([encounter, document]: readonly [string, string]) =>
    `/external/v1/encounters/${encounter}/documents/${document}`
  return [
    { key: "list", label: "list, first page", detail: false, paths: ["/external/v1/encounters"] },
    {
      key: "list-offset",
      label: "list, offset 10,000, date range",
      detail: false,
      paths: [`/external/v1/encounters?offset=10000&start_at=${offsetRange.startAt}&end_at=${offsetRange.endAt}`]
    },
    { key: "list-100", label: "list, limit 100", detail: false, paths: ["/external/v1/encounters?limit=100"] },
    {
      key: "encounter",
      label: "encounter detail",
      detail: true,
      paths: samples.encounters.map((id) => `/external/v1/encounters/${id}`)
    },
    { key: "document", label: "document", detail: true, paths: samples.documents.map(documentPath) },
    {
      key: "transcript",
      label: "transcript",
      detail: true,
      paths: samples.transcripts.map((pair) => `${documentPath(pair)}/transcript`)
    },
    {
      key: "audio",
      label: "audio URL",
      detail: true,
      paths: samples.recordings.map((pair) => `${documentPath(pair)}/audio`)
    }
  ]
}

const startProcess = (
  name: string,
  script: string,
  env: Record<string, string>,
  nodeFlags: ReadonlyArray<string> = [],
  cgroupProcs?: string
): ChildProcess => {
  // The service's build runs on plain Node, as `pnpm start` runs it; TypeScript goes through tsx.
  const loader = script.endsWith(".ts") ? ["--import", "tsx"] : []
  const command = [process.execPath, ...nodeFlags, ...loader, script]
  // Into its memory cgroup before Node starts: Node sizes its heap to the memory it sees then.
  const [file, ...args] = cgroupProcs === undefined ? command : ["/bin/sh", "-c", "echo $$ > \"$0\" && exec \"$@\"", cgroupProcs, ...command]
  const child = spawn(file!, args, {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ["ignore", "ignore", "pipe"]
  })
  let tail = ""
  child.stderr?.on("data", (chunk: Buffer) => {
    tail = (tail + chunk.toString("utf8")).slice(-4000)
  })
  child.on("exit", (code, signal) => {
    if (code !== 0 && signal === null) log(`${name} exited with ${code}:\n${tail}`)
  })
  return child
}

const waitUntilUp = async (url: string, token: string) => {
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    try {
      const response = await fetch(url, { headers: { authorization: `Bearer ${token}` } })
      if (response.ok) return
    } catch {
      // not listening yet
    }
    await new Promise((done) => setTimeout(done, 250))
  }
  throw new Error(`${url} did not answer within 60 s`)
}

const get = async (base: string, path: string, token: string) => {
  const response = await fetch(base + path, { headers: { authorization: `Bearer ${token}` } })
  return { status: response.status, body: (await response.json()) as unknown }
}

/** The signed audio URL differs by its signature time; everything else must be equal. */
const comparable = (body: unknown): unknown =>
  typeof body === "object" && body !== null && "audio_url" in body
    ? { ...body, audio_url: String(body.audio_url).replace(/\/media\/.*$/, "/media/…"), expires_at: "…" }
    : body

const checkSameAnswers = async (routes: ReadonlyArray<BenchRoute>, token: string, serviceAt: string, floorAt: string) => {
  for (const route of routes) {
    const path = route.paths[0]
    if (path === undefined) throw new Error(`no sample for ${route.label}`)
    const service = await get(serviceAt, path, token)
    const floor = await get(floorAt, path, token)
    if (service.status !== 200) throw new Error(`service answered ${service.status} on ${path}: ${JSON.stringify(service.body)}`)
    if (!isDeepStrictEqual(comparable(service.body), comparable(floor.body))) {
      throw new Error(`the floor's answer differs from the service's on ${path}:\n${JSON.stringify(service.body).slice(0, 800)}\n${JSON.stringify(floor.body).slice(0, 800)}`)
    }
  }
  log(`the floor at ${floorAt} answers exactly as the service at ${serviceAt} does on every route`)
}

interface Figures {
  readonly requestsPerSecond: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly requests: number
  readonly non2xx: number
  readonly errors: number
  /** CPU time per request of the server process and of PostgreSQL, in ms (where the 2 cores went). */
  readonly serverCpuMsPerRequest?: number
  readonly postgresCpuMsPerRequest?: number
  /** The service's only: the longest and the p99 of the times its event loop was held (over its processes). */
  readonly eventLoopMaxMs?: number
  readonly eventLoopP99Ms?: number
}

interface Drive {
  readonly requests: number
  readonly non2xx: number
  readonly errors: number
  /** Every response's latency in ms, for percentiles over several rounds. */
  readonly latencies: ReadonlyArray<number>
}

const drive = (base: string, route: BenchRoute, token: string, seconds: number): Promise<Drive> => {
  let next = 0
  const latencies: Array<number> = []
  return new Promise((done, fail) => {
    const instance = autocannon(
      {
        url: base,
        connections,
        duration: seconds,
        headers: { authorization: `Bearer ${token}` },
        requests: [{
          setupRequest: (request) => {
            const path = route.paths[next++ % route.paths.length] ?? "/"
            return { ...request, path }
          }
        }]
      },
      (error, result) => {
        if (error !== null && error !== undefined) return fail(error)
        done({ requests: result.requests.total, non2xx: result.non2xx, errors: result.errors + result.timeouts, latencies })
      }
    )
    instance.on("response", (_client: unknown, _status: number, _bytes: number, responseTime: number) => {
      latencies.push(responseTime)
    })
  })
}

/**
 * The `fraction` percentile of `sorted` (nearest rank), to a tenth of a ms: to the whole ms, as
 * autocannon prints it, 9.6 ms would read 10 and fail "under 10 ms", and 10.4 would pass as 10.
 */
const percentile = (sorted: ReadonlyArray<number>, fraction: number): number =>
  sorted.length === 0 ? 0 : round(sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)] ?? 0)

/** Resident set of a process, in MB, from /proc (VmRSS now, VmHWM its peak since start). */
const memoryOf = (pid: number) => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8")
  const field = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)?.[1] ?? "0") / 1024
  return { rssMb: field("VmRSS"), peakMb: field("VmHWM") }
}

/** V8's committed new and old space of a service process, in MB, from its `/metrics`. */
const heapSpacesOf = async (base: string) => {
  const text = await (await fetch(`${base}/metrics`)).text()
  const space = (name: string) =>
    Number(new RegExp(`^nodejs_heap_space_size_total_bytes\\{space="${name}"\\} (\\d+)$`, "m").exec(text)?.[1] ?? "0") / 1048576
  return { newMb: space("new"), oldMb: space("old") }
}

/**
 * How long a service process's event loop was held past its 10 ms sampling timer since the
 * previous read of its `/metrics` (which starts the figures afresh), in ms.
 */
const eventLoopDelayOf = async (base: string) => {
  const text = await (await fetch(`${base}/metrics`)).text()
  const delay = (name: string) =>
    1000 * Number(new RegExp(`^nodejs_eventloop_delay_${name}_seconds (\\S+)$`, "m").exec(text)?.[1] ?? "NaN")
  return { maxMs: delay("max"), p99Ms: delay("p99") }
}

/** EXPLAIN (ANALYZE, BUFFERS) of every statement of the routes, in a transaction rolled back. */
const explainAll = async (sql: Sql, samples: Samples, tokenDigest: string) => {
  const plans: Array<{ name: string; plan: string }> = []
  const rollback = new Error("rollback")
  const [encounter] = samples.encounters
  const [document] = samples.documents
  const [transcript] = samples.transcripts
  const [recording] = samples.recordings
  const organization = bigOrganization as OrganizationId
  const listQuery = { limit: 50, offset: 0, sortOrder: "desc" as const, startAt: null, endAt: null }
  await sql.begin(async (tx) => {
    const txSql = tx as unknown as Sql
    const explain = async (name: string, statement: Fragment) => {
      const rows = await txSql<Array<{ "QUERY PLAN": string }>>`EXPLAIN (ANALYZE, BUFFERS) ${statement}`
      plans.push({ name, plan: rows.map((row) => row["QUERY PLAN"]).join("\n") })
    }
    await explain("key lookup by digest", apiKeyByDigestStatement(txSql, tokenDigest))
    await explain("organization", organizationByIdStatement(txSql, organization))
    await explain("list, first page (page + exact total)", encounterPageStatement(txSql, organization, listQuery))
    await explain(
      "list, offset 10,000, date range",
      encounterPageStatement(txSql, organization, {
        ...listQuery,
        offset: 10_000,
        startAt: new Date(offsetRange.startAt),
        endAt: new Date(offsetRange.endAt)
      })
    )
    await explain("list, limit 100", encounterPageStatement(txSql, organization, { ...listQuery, limit: 100 }))
    await explain("documents of a page (50 encounters)", documentSummariesStatement(txSql, samples.encounters.slice(0, 50)))
    if (encounter !== undefined) await explain("encounter by id, with its patient and documents", encounterByIdStatement(txSql, encounter))
    if (document !== undefined) {
      await explain(
        "document route: encounter and document by id",
        encounterAndDocumentStatement(txSql, document[0], document[1], { withFinalTranscript: false, forAudioUrl: false })
      )
    }
    if (transcript !== undefined) {
      await explain(
        "transcript route: encounter, document and final transcript",
        encounterAndDocumentStatement(txSql, transcript[0], transcript[1], { withFinalTranscript: true, forAudioUrl: false })
      )
    }
    if (recording !== undefined) {
      await explain(
        "audio URL route: encounter, document, recording and whether its object is stored",
        encounterAndDocumentStatement(txSql, recording[0], recording[1], { withFinalTranscript: false, forAudioUrl: true })
      )
    }
    const now = new Date()
    await explain(
      "disclosure insert (50 events)",
      disclosureInsertStatement(
        txSql,
        samples.encounters.slice(0, 50).map((id, index) => ({
          eventId: `dsc_explain_${index}`,
          occurredAt: now,
          organizationId: organization,
          apiKeyId: "key_explain",
          operationId: "listPublicEncounters",
          encounterId: id,
          documentId: null,
          patientId: null,
          requestId: "req_explain"
        } as unknown as Parameters<typeof disclosureInsertStatement>[1][number]))
      )
    )
    throw rollback
  }).catch((error: unknown) => {
    if (error !== rollback) throw error
  })
  return plans
}

/** Where `pnpm bench` writes its figures: each file's block between its bench markers. */
const outputs = [
  { path: resolve(root, "docs/performance.md"), marker: "results" },
  { path: resolve(root, "docs/query-plans.md"), marker: "plans" }
] as const

/** The text of `path` with what stands between its `<!-- bench:MARKER:start -->` and `:end -->` markers replaced. */
const replaceBetween = (path: string, marker: string, content: string): string => {
  const text = readFileSync(path, "utf8")
  const start = `<!-- bench:${marker}:start -->`
  const end = `<!-- bench:${marker}:end -->`
  const from = text.indexOf(start)
  const to = text.indexOf(end)
  if (from === -1 || to === -1 || to < from) throw new Error(`${path} has no ${start} ... ${end} block`)
  return `${text.slice(0, from + start.length)}\n${content}\n${text.slice(to)}`
}

const round = (value: number, digits = 1) => Math.round(value * 10 ** digits) / 10 ** digits

interface LimitedRun {
  readonly limitMb: number
  readonly servicePeakMb: number
  readonly floorPeakMb: number
  readonly serviceNewSpaceMb: number
  readonly routes: ReadonlyArray<{ readonly route: string; readonly serviceRequestsPerSecond: number; readonly floorRequestsPerSecond: number; readonly ratio: number }>
}

/**
 * One more process of each server, each in a memory cgroup of BENCH_MEMORY_LIMIT_MB as a
 * container's limit holds a replica, every route driven in turn: the RSS a process reaches when
 * Node sizes its heap to a limit instead of to the machine's memory, and the ratios it keeps.
 * Undefined where no cgroup can be made (or BENCH_MEMORY_LIMIT_MB is 0).
 */
const measureUnderMemoryLimit = async (
  routes: ReadonlyArray<BenchRoute>,
  token: string,
  shared: Record<string, string>
): Promise<LimitedRun | undefined> => {
  if (memoryLimitMb <= 0) return undefined
  const serviceGroup = memoryCgroup(`clinical-bench-service-${process.pid}`, memoryLimitMb)
  const floorGroup = memoryCgroup(`clinical-bench-floor-${process.pid}`, memoryLimitMb)
  if (serviceGroup === undefined || floorGroup === undefined) {
    serviceGroup?.remove()
    floorGroup?.remove()
    log("no memory cgroup could be made here (it takes root and a memory controller): the run under a memory limit is left out")
    return undefined
  }
  const serviceBase = processBase(servicePort, processCount)
  const floorBase = processBase(floorPort, processCount)
  const service = startProcess(
    "service (memory limit)",
    "packages/http-adapter/dist/main.mjs",
    { ...shared, PORT: String(servicePort + 2 * processCount), MEDIA_BASE_URL: serviceBase },
    startScriptNodeFlags(),
    serviceGroup.procs
  )
  const floor = startProcess(
    "floor (memory limit)",
    "packages/http-adapter/dist/floor.mjs",
    { ...shared, PORT: String(floorPort + 2 * processCount), MEDIA_BASE_URL: serviceBase },
    [],
    floorGroup.procs
  )
  try {
    await waitUntilUp(`${serviceBase}/external/v1/encounters?limit=1`, token)
    await waitUntilUp(`${floorBase}/external/v1/encounters?limit=1`, token)
    const servers = [["service", serviceBase], ["floor", floorBase]] as const
    // Each process is driven as long as one of the rounds' processes is, for a peak of the same load.
    for (const route of routes) for (const [, base] of servers) await drive(base, route, token, initialWarmup)
    const slice = duration / rounds / processCount
    const figures: Array<LimitedRun["routes"][number]> = []
    for (const route of routes) {
      for (const [, base] of servers) await drive(base, route, token, warmup)
      const requests = { service: 0, floor: 0 }
      for (let turn = 0; turn < rounds; turn++) {
        for (const [name, base] of turn % 2 === 0 ? servers : [...servers].reverse()) {
          requests[name] += (await drive(base, route, token, slice)).requests
        }
      }
      figures.push({
        route: route.key,
        serviceRequestsPerSecond: round(requests.service / (slice * rounds)),
        floorRequestsPerSecond: round(requests.floor / (slice * rounds)),
        ratio: requests.floor === 0 ? 0 : round(requests.service / requests.floor, 3)
      })
    }
    const spaces = await heapSpacesOf(serviceBase)
    return {
      limitMb: memoryLimitMb,
      servicePeakMb: round(service.pid === undefined ? 0 : memoryOf(service.pid).peakMb),
      floorPeakMb: round(floor.pid === undefined ? 0 : memoryOf(floor.pid).peakMb),
      serviceNewSpaceMb: round(spaces.newMb),
      routes: figures
    }
  } finally {
    for (const child of [service, floor]) {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((done) => child.once("exit", done))
        child.kill("SIGTERM")
        await exited
      }
    }
    serviceGroup.remove()
    floorGroup.remove()
  }
}

const main = async () => {
  // Refuse at once, not after the run, when an output has lost its markers.
  for (const output of outputs) replaceBetween(output.path, output.marker, "")
  await ensureDatabase()
  const token = await Effect.runPromise(prepareData())
  const database = await openPool(databaseUrl, 2)
  const sql = database.sql
  const samples = await sample(sql)
  const only = (process.env["BENCH_ROUTES"] ?? "").split(",").filter((key) => key !== "")
  const routes = routesOf(samples).filter((route) => only.length === 0 || only.includes(route.key))
  log(`data: ${JSON.stringify(samples.counts)}`)

  const shared = {
    DATABASE_URL: databaseUrl,
    DATABASE_POOL_MAX: String(poolMax),
    API_KEY_DIGEST_KEY: digestKey,
    MEDIA_SIGNING_KEY: mediaSigningKey,
    HOST: "127.0.0.1"
  }
  const profileDir = process.env["BENCH_CPU_PROFILE_DIR"]
  // What `pnpm start` runs: the bundle of src/main.ts (scripts/build-service.mjs). The floor is
  // bundled the same way and runs on plain Node too, so that the loader's cost falls on neither.
  const build = resolve(root, "packages/http-adapter/scripts/build-service.mjs")
  execFileSync(process.execPath, [build], { stdio: "inherit" })
  execFileSync(process.execPath, [build, "bench/floor-server.ts", "dist/floor.mjs"], { stdio: "inherit" })
  // Several processes of each server, measured in turn within every round: fresh processes of
  // one build differ by up to a third in CPU per request, and a process keeps its speed for
  // life, so one process per server would make the ratio a draw of two processes.
  const services = Array.from({ length: processCount }, (_, k) =>
    startProcess(
      `service ${k + 1}`,
      "packages/http-adapter/dist/main.mjs",
      { ...shared, PORT: String(servicePort + 2 * k), MEDIA_BASE_URL: processBase(servicePort, k) },
      [
        ...startScriptNodeFlags(),
        ...(profileDir === undefined || profileDir === "" ? [] : ["--cpu-prof", `--cpu-prof-dir=${resolve(profileDir)}`])
      ]
    ))
  const floors = Array.from({ length: processCount }, (_, k) =>
    startProcess(`floor ${k + 1}`, "packages/http-adapter/dist/floor.mjs", {
      ...shared,
      PORT: String(floorPort + 2 * k),
      // The audio URL names the service that serves it; each pair compares the same answer.
      MEDIA_BASE_URL: processBase(servicePort, k)
    }))
  const results: Array<Record<string, unknown>> = []
  let peakRssMb = 0
  let floorPeakRssMb = 0
  let heapSpaces = { newMb: 0, oldMb: 0 }
  const servicePids = services.flatMap((child) => child.pid === undefined ? [] : [child.pid])
  const floorPids = floors.flatMap((child) => child.pid === undefined ? [] : [child.pid])
  try {
    for (let k = 0; k < processCount; k++) {
      await waitUntilUp(`${processBase(servicePort, k)}/external/v1/encounters?limit=1`, token)
      await waitUntilUp(`${processBase(floorPort, k)}/external/v1/encounters?limit=1`, token)
      await checkSameAnswers(routes, token, processBase(servicePort, k), processBase(floorPort, k))
    }
    const sampler = setInterval(() => {
      for (const pid of servicePids) peakRssMb = Math.max(peakRssMb, memoryOf(pid).rssMb)
      for (const pid of floorPids) floorPeakRssMb = Math.max(floorPeakRssMb, memoryOf(pid).rssMb)
    }, 200)
    try {
      // In each round every process of both servers, pair by pair, the pair's order alternating.
      const servers = Array.from({ length: processCount }, (_, k) => [
        ["service", processBase(servicePort, k), services[k]?.pid],
        ["floor", processBase(floorPort, k), floors[k]?.pid]
      ] as const)
      const inRound = (round: number) =>
        servers.flatMap((pair, k) => (round + k) % 2 === 0 ? pair : [...pair].reverse())
      if (initialWarmup > 0) {
        for (const route of routes) for (const [, base] of inRound(0)) await drive(base, route, token, initialWarmup)
      }
      for (const route of routes) {
        const totals = new Map(["service", "floor"].map((name) => [name, {
          requests: 0, non2xx: 0, errors: 0, seconds: 0, serverCpu: 0, postgresCpu: 0, latencies: new Array<number>()
        }]))
        if (warmup > 0) for (const [, base] of inRound(0)) await drive(base, route, token, warmup)
        for (let k = 0; k < processCount; k++) await eventLoopDelayOf(processBase(servicePort, k))
        for (let round = 0; round < rounds; round++) {
          for (const [name, base, pid] of inRound(round)) {
            const total = totals.get(name)!
            const serverCpuBefore = pid === undefined ? 0 : cpuSecondsOf(pid)
            const postgresCpuBefore = postgresCpuSeconds()
            const measured = await drive(base, route, token, duration / rounds / processCount)
            total.serverCpu += pid === undefined ? 0 : cpuSecondsOf(pid) - serverCpuBefore
            total.postgresCpu += postgresCpuSeconds() - postgresCpuBefore
            total.requests += measured.requests
            total.non2xx += measured.non2xx
            total.errors += measured.errors
            total.seconds += duration / rounds / processCount
            for (const latency of measured.latencies) total.latencies.push(latency)
          }
        }
        const eventLoop = { maxMs: 0, p99Ms: 0 }
        for (let k = 0; k < processCount; k++) {
          const held = await eventLoopDelayOf(processBase(servicePort, k))
          eventLoop.maxMs = Math.max(eventLoop.maxMs, held.maxMs)
          eventLoop.p99Ms = Math.max(eventLoop.p99Ms, held.p99Ms)
        }
        const figures: Record<string, Figures> = {}
        for (const [name, total] of totals) {
          const sorted = total.latencies.sort((a, b) => a - b)
          const perRequestMs = (seconds: number) => total.requests === 0 ? 0 : round((seconds * 1000) / total.requests, 3)
          figures[name] = {
            requestsPerSecond: round(total.requests / total.seconds),
            p50Ms: percentile(sorted, 0.5),
            p99Ms: percentile(sorted, 0.99),
            requests: total.requests,
            non2xx: total.non2xx,
            errors: total.errors,
            serverCpuMsPerRequest: perRequestMs(total.serverCpu),
            postgresCpuMsPerRequest: perRequestMs(total.postgresCpu),
            ...(name === "service" ? { eventLoopMaxMs: round(eventLoop.maxMs), eventLoopP99Ms: round(eventLoop.p99Ms) } : {})
          }
        }
        const s = figures["service"]
        const f = figures["floor"]
        if (s === undefined || f === undefined) continue
        const ratio = f.requestsPerSecond === 0 ? 0 : s.requestsPerSecond / f.requestsPerSecond
        log(
          `${route.label.padEnd(34)} service ${s.requestsPerSecond.toFixed(0).padStart(6)} req/s ` +
            `p50 ${s.p50Ms.toFixed(1).padStart(5)} ms p99 ${s.p99Ms.toFixed(1).padStart(5)} ms | floor ` +
            `${f.requestsPerSecond.toFixed(0).padStart(6)} req/s p50 ${f.p50Ms.toFixed(1).padStart(5)} ms ` +
            `p99 ${f.p99Ms.toFixed(1).padStart(5)} ms | ratio ${ratio.toFixed(3)} | CPU ms/request service ` +
            `${s.serverCpuMsPerRequest} + pg ${s.postgresCpuMsPerRequest}, floor ${f.serverCpuMsPerRequest} + pg ${f.postgresCpuMsPerRequest}` +
            ` | service event loop held max ${s.eventLoopMaxMs} ms, p99 ${s.eventLoopP99Ms} ms` +
            (s.non2xx + s.errors + f.non2xx + f.errors > 0
              ? ` (non-2xx/errors: service ${s.non2xx}/${s.errors}, floor ${f.non2xx}/${f.errors})`
              : "")
        )
        results.push({ route: route.key, label: route.label, detail: route.detail, service: s, floor: f, ratio: round(ratio, 3) })
      }
    } finally {
      clearInterval(sampler)
    }
    for (const pid of servicePids) peakRssMb = Math.max(peakRssMb, memoryOf(pid).peakMb)
    for (const pid of floorPids) floorPeakRssMb = Math.max(floorPeakRssMb, memoryOf(pid).peakMb)
    // V8 does not shrink its new space while allocation goes on, so at the end it is at its largest.
    for (let k = 0; k < processCount; k++) {
      const spaces = await heapSpacesOf(processBase(servicePort, k))
      heapSpaces = { newMb: Math.max(heapSpaces.newMb, spaces.newMb), oldMb: Math.max(heapSpaces.oldMb, spaces.oldMb) }
    }
  } finally {
    for (const child of [...services, ...floors]) child.kill("SIGTERM")
  }
  log(`service peak RSS: ${peakRssMb.toFixed(0)} MB (floor: ${floorPeakRssMb.toFixed(0)} MB); ` +
    `the service's V8 new space ${heapSpaces.newMb.toFixed(0)} MB and old space ${heapSpaces.oldMb.toFixed(0)} MB at the end`)
  const limited = await measureUnderMemoryLimit(routes, token, shared)
  const limitedSummary = limited === undefined ? "" :
    `Under a memory limit of ${limited.limitMb} MB (a cgroup for each process, as a container's limit; one more process of each ` +
    `server, each driven as long as a process of the rounds): the service's peak RSS ${limited.servicePeakMb.toFixed(0)} MB ` +
    `(the floor's ${limited.floorPeakMb.toFixed(0)} MB), its new space ${limited.serviceNewSpaceMb.toFixed(0)} MB at the end; ` +
    `service / floor ${limited.routes.map((figure) => `${figure.route} ${figure.ratio.toFixed(3)}`).join(", ")}.`
  if (limited !== undefined) log(limitedSummary)

  const byKey = (key: string) => results.find((result) => result.route === key)
  // Both servers are driven for the same seconds, so the ratio of their requests is the exact
  // ratio of their throughputs: a target is judged on it, never on a rounded figure (1.498 is
  // not 1.5x).
  const exactRatio = (result: Record<string, unknown>) => {
    const floorRequests = (result["floor"] as Figures).requests
    return floorRequests === 0 ? 0 : (result["service"] as Figures).requests / floorRequests
  }
  const p99Of = (key: string) => (byKey(key)?.["service"] as Figures | undefined)?.p99Ms
  const targets = {
    everyRouteAtLeast1_0xFloor: results.every((result) => exactRatio(result) >= 1.0),
    detailRoutesAtLeast1_5xFloor: results.filter((result) => result["detail"] === true).every((result) => exactRatio(result) >= 1.5),
    listOffset10000P99Under50Ms: (p99Of("list-offset") ?? Infinity) < 50,
    encounterDetailP99Under10Ms: (p99Of("encounter") ?? Infinity) < 10,
    serviceRssUnder200Mb: peakRssMb < 200,
    ...(limited === undefined ? {} : { [`serviceRssUnder200MbUnder${limited.limitMb}MbLimit`]: limited.servicePeakMb < 200 })
  }
  const digest = await sql<Array<{ digest: string }>>`SELECT digest FROM api_keys WHERE label = 'bench' ORDER BY created_at DESC LIMIT 1`
  const plans = await explainAll(sql, samples, digest[0]?.digest ?? "")
  const [version] = await sql<Array<{ server_version: string }>>`SHOW server_version`
  await database.close()

  const report = {
    at: new Date().toISOString(),
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? "unknown", node: process.version, postgres: version?.server_version },
    data: samples.counts,
    settings: { connections, durationSeconds: duration, processes: processCount, rounds, warmupSeconds: warmup, initialWarmupSeconds: initialWarmup, poolMax },
    routes: results,
    serviceRss: {
      peakMb: round(peakRssMb),
      floorPeakMb: round(floorPeakRssMb),
      newSpaceMb: round(heapSpaces.newMb),
      oldSpaceMb: round(heapSpaces.oldMb)
    },
    underMemoryLimit: limited ?? null,
    targets
  }
  if (only.length > 0) {
    log(`BENCH_ROUTES selects a part of the routes: results.json and docs/ are left as they are\n${JSON.stringify(report, null, 2)}`)
    return
  }
  writeFileSync(resolve(here, "results.json"), `${JSON.stringify(report, null, 2)}\n`)

  const table = [
    `Measured ${report.at.slice(0, 10)} on ${report.machine.cpus} × ${report.machine.cpuModel}, Node ${report.machine.node}, ` +
      `PostgreSQL ${report.machine.postgres}; ${samples.counts["encounters"]} encounters ` +
      `(${samples.counts["big_organization_encounters"]} in ${bigOrganization}, the one measured), ` +
      `${connections} connections, ${duration} s per route and server over ${processCount} processes of each in ${rounds} rounds ` +
      `(each process driven once a round, a service and a floor process in pairs of alternating order) after ${warmup} s of warm-up per process ` +
      `(and ${initialWarmup} s of every route on each server before the first), pool ${poolMax}.`,
    "",
    "| Route | Service req/s | p50 ms | p99 ms | Floor req/s | p50 ms | p99 ms | Service / floor | CPU ms per request: service + PostgreSQL | floor + PostgreSQL |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ...results.map((result) => {
      const s = result["service"] as Figures
      const f = result["floor"] as Figures
      return `| ${String(result["label"])} | ${s.requestsPerSecond.toFixed(0)} | ${s.p50Ms.toFixed(1)} | ${s.p99Ms.toFixed(1)} | ` +
        `${f.requestsPerSecond.toFixed(0)} | ${f.p50Ms.toFixed(1)} | ${f.p99Ms.toFixed(1)} | ${Number(result["ratio"]).toFixed(3)} | ` +
        `${s.serverCpuMsPerRequest?.toFixed(2)} + ${s.postgresCpuMsPerRequest?.toFixed(2)} | ` +
        `${f.serverCpuMsPerRequest?.toFixed(2)} + ${f.postgresCpuMsPerRequest?.toFixed(2)} |`
    }),
    "",
    `Service peak RSS under load: ${peakRssMb.toFixed(0)} MB (the floor's, on the same Node: ${floorPeakRssMb.toFixed(0)} MB); ` +
      `V8's new space in the service: ${heapSpaces.newMb.toFixed(0)} MB, its old space ${heapSpaces.oldMb.toFixed(0)} MB, at the end of the run. ` +
      `Longest the service's event loop was held past its 10 ms sampling timer during a route's rounds (its p99): ` +
      results.map((result) => {
        const s = result["service"] as Figures
        return `${String(result["label"])} ${s.eventLoopMaxMs?.toFixed(1)} ms (${s.eventLoopP99Ms?.toFixed(1)})`
      }).join(", ") + ".",
    ...(limited === undefined ? [] : ["", limitedSummary]),
    "",
    "| Target | Met |",
    "|---|---|",
    ...Object.entries(targets).map(([name, met]) => `| ${name} | ${met ? "yes" : "no"} |`)
  ].join("\n")
  const explained = plans.map((entry) => `${entry.name}:\n\n\`\`\`\n${entry.plan}\n\`\`\``).join("\n\n")
  const contents = { results: table, plans: explained }
  for (const output of outputs) writeFileSync(output.path, replaceBetween(output.path, output.marker, contents[output.marker]))
  log(`wrote ${resolve(here, "results.json")}, docs/performance.md's table and docs/query-plans.md`)
}

main().catch((error: unknown) => {
  log(error instanceof Error ? error.stack ?? error.message : String(error))
  process.exit(1)
})
