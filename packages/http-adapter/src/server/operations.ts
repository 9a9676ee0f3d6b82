import { readdirSync } from "node:fs"
import { type ELDHistogram, monitorEventLoopDelay } from "node:perf_hooks"
import { getHeapSpaceStatistics } from "node:v8"
import { migrationChecksum, PgClient, migrations as releasedMigrations, type PgClientService } from "@clinical-api/storage-adapter"
import { Context, Duration, Effect, Layer, Option, type Scope } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"

/**
 * The operations endpoints, outside the contract and served without an API key on the same
 * listener as the API (docs/operations.md, "Health and metrics"): `GET /healthz` (the process
 * answers), `GET /readyz` (the database answers and its migrations are exactly this build's)
 * and `GET /metrics` (Prometheus text). None of them shows patient data, an organization id,
 * a key or a path id: the labels are operationIds, route templates and statuses only.
 */
export type OperationsPath = "/healthz" | "/readyz" | "/metrics"

export const operationsPaths: ReadonlyArray<OperationsPath> = ["/healthz", "/readyz", "/metrics"]

/** Upper bounds (seconds) of the request-duration histogram. */
export const DURATION_BUCKETS: ReadonlyArray<number> = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

/** A database probe must not hold a health check longer than this. */
const PROBE_TIMEOUT = Duration.seconds(2)

/** A V8 heap space's name as Prometheus's Node.js metrics label it: `new_space` is `new`. */
const heapSpaceLabel = (name: string) => name.replace(/_space$/, "")

export const WEBHOOK_DELIVERY_STATES = ["pending", "sending", "succeeded", "failed", "cancelled"] as const

/** How often the event loop's delay is sampled: a timer of this interval, and what it is late by. */
const EVENT_LOOP_SAMPLE_MS = 10

/**
 * Samples how late a 10 ms timer fires while the layer lives: the time the event loop was held
 * by synchronous work (a collection, a long parse) or waited for a core, which every request
 * waiting meanwhile adds to its latency.
 */
export const monitorEventLoop: Effect.Effect<ELDHistogram, never, Scope.Scope> = Effect.acquireRelease(
  Effect.sync(() => {
    const histogram = monitorEventLoopDelay({ resolution: EVENT_LOOP_SAMPLE_MS })
    histogram.enable()
    return histogram
  }),
  (histogram) => Effect.sync(() => histogram.disable())
)

/** Seconds a sample was late by: the histogram holds the whole time between timer callbacks, in ns. */
const lateBy = (nanoseconds: number) => Math.max(0, nanoseconds / 1e6 - EVENT_LOOP_SAMPLE_MS) / 1e3

interface Series {
  count: number
  sum: number
  readonly buckets: Array<number>
}

/** In-process counters of one server: requests by operation and status, and their latency. */
export const makeRequestMetrics = () => {
  const series = new Map<string, Series>()
  let inFlight = 0
  return {
    started: () => void inFlight++,
    finished: () => void inFlight--,
    inFlight: () => inFlight,
    /** `operation` is an operationId, a route template, or `unmatched`: a bounded set of labels. */
    observe: (operation: string, status: number, seconds: number) => {
      const key = `${operation}\u0000${status}`
      let entry = series.get(key)
      if (entry === undefined) {
        entry = { count: 0, sum: 0, buckets: DURATION_BUCKETS.map(() => 0) }
        series.set(key, entry)
      }
      entry.count++
      entry.sum += seconds
      for (let index = 0; index < DURATION_BUCKETS.length; index++) {
        if (seconds <= (DURATION_BUCKETS[index] ?? 0)) entry.buckets[index] = (entry.buckets[index] ?? 0) + 1
      }
    },
    snapshot: () =>
      [...series.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([key, value]) => {
        const [operation = "", status = ""] = key.split("\u0000")
        return { operation, status, count: value.count, sum: value.sum, buckets: [...value.buckets] }
      })
  }
}
export type RequestMetricsService = ReturnType<typeof makeRequestMetrics>

/** The counters of one server, kept by the exchange and shown by `/metrics`. */
export class RequestMetrics extends Context.Service<RequestMetrics, RequestMetricsService>()(
  "@clinical-api/http-adapter/RequestMetrics"
) {}

export const RequestMetricsLive: Layer.Layer<RequestMetrics> = Layer.sync(RequestMetrics, makeRequestMetrics)

/**
 * Whether the server is draining for a shutdown. `/readyz` then answers 503 `draining`, so that a
 * load balancer checking it stops sending new requests while those in flight are answered.
 */
export class ServerDraining extends Context.Service<ServerDraining, { readonly isDraining: () => boolean }>()(
  "@clinical-api/http-adapter/ServerDraining"
) {}

export type ReadinessReport =
  | { readonly status: "draining" }
  | { readonly status: "ready"; readonly database: "reachable" | "none"; readonly migrations: "current" | "none" }
  | {
    readonly status: "not_ready"
    readonly database: "reachable" | "unreachable"
    readonly migrations: "current" | "pending" | "unknown_version" | "changed" | "unknown"
  }

/** Readiness: the database answers within the probe timeout and holds exactly the released migrations. */
export const checkReadiness = (client: Option.Option<PgClientService>): Effect.Effect<ReadinessReport> =>
  Option.match(client, {
    onNone: () => Effect.succeed<ReadinessReport>({ status: "ready", database: "none", migrations: "none" }),
    onSome: (pg) =>
      pg.run("readiness.migrations", (sql) => sql<Array<{ version: number; checksum: string }>>`
        SELECT version, checksum FROM schema_migrations`).pipe(
        Effect.timeoutOrElse({ duration: PROBE_TIMEOUT, orElse: () => Effect.fail("timeout" as const) }),
        Effect.map((rows): ReadinessReport => {
          const applied = new Map(rows.map((row) => [row.version, row.checksum]))
          const known = new Map(releasedMigrations.map((migration) => [migration.version, migrationChecksum(migration)]))
          if ([...applied.keys()].some((version) => !known.has(version))) {
            return { status: "not_ready", database: "reachable", migrations: "unknown_version" }
          }
          if ([...known.entries()].some(([version, checksum]) => applied.has(version) && applied.get(version) !== checksum)) {
            return { status: "not_ready", database: "reachable", migrations: "changed" }
          }
          if ([...known.keys()].some((version) => !applied.has(version))) {
            return { status: "not_ready", database: "reachable", migrations: "pending" }
          }
          return { status: "ready", database: "reachable", migrations: "current" }
        }),
        Effect.catch(() => Effect.succeed<ReadinessReport>({ status: "not_ready", database: "unreachable", migrations: "unknown" }))
      )
  })

interface DatabaseGauges {
  readonly poolMax: number
  readonly connectionsByState: ReadonlyArray<{ readonly state: string; readonly count: number }>
  readonly deliveriesByState: ReadonlyMap<string, number>
}

const readDatabaseGauges = (pg: PgClientService): Effect.Effect<Option.Option<DatabaseGauges>> =>
  Effect.all([
    pg.run("metrics.connections", (sql) => sql<Array<{ state: string | null; count: number }>>`
      SELECT state, count(*)::int AS count FROM pg_stat_activity
      WHERE datname = current_database() AND backend_type = 'client backend' GROUP BY state`),
    pg.run("metrics.webhook_deliveries", (sql) => sql<Array<{ state: string; count: number }>>`
      SELECT state, count(*)::int AS count FROM webhook_deliveries GROUP BY state`)
  ]).pipe(
    Effect.timeoutOrElse({ duration: PROBE_TIMEOUT, orElse: () => Effect.fail("timeout" as const) }),
    Effect.map(([connections, deliveries]) =>
      Option.some({
        poolMax: pg.maxConnections,
        connectionsByState: connections.map((row) => ({ state: row.state ?? "unknown", count: row.count })),
        deliveriesByState: new Map(deliveries.map((row) => [row.state, row.count]))
      })
    ),
    Effect.catch(() => Effect.succeed(Option.none<DatabaseGauges>()))
  )

const escapeLabel = (value: string) => value.replaceAll("\\", "\\\\").replaceAll("\"", "\\\"").replaceAll("\n", "\\n")

const openFileDescriptors = (): number | undefined => {
  try {
    return readdirSync("/proc/self/fd").length
  } catch {
    return undefined
  }
}

/** The Prometheus text exposition (format 0.0.4) of the metrics and the gauges read now. */
export const renderMetrics: (
  metrics: RequestMetricsService,
  database: Option.Option<PgClientService>,
  eventLoop?: ELDHistogram
) => Effect.Effect<string> =
  Effect.fnUntraced(function*(metrics: RequestMetricsService, database: Option.Option<PgClientService>, eventLoop?: ELDHistogram) {
    const gauges = yield* Option.match(database, {
      onNone: () => Effect.succeed(Option.none<DatabaseGauges>()),
      onSome: readDatabaseGauges
    })
    const lines: Array<string> = []
    const family = (name: string, type: "counter" | "gauge" | "histogram", help: string) =>
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`)

    const snapshot = metrics.snapshot()
    family("clinical_api_http_requests_total", "counter", "HTTP requests answered, by operation (operationId, route template or unmatched) and status.")
    for (const entry of snapshot) {
      lines.push(`clinical_api_http_requests_total{operation="${escapeLabel(entry.operation)}",status="${entry.status}"} ${entry.count}`)
    }
    family("clinical_api_http_request_duration_seconds", "histogram", "Time from request to response, by operation and status.")
    for (const entry of snapshot) {
      const labels = `operation="${escapeLabel(entry.operation)}",status="${entry.status}"`
      DURATION_BUCKETS.forEach((bound, index) => {
        lines.push(`clinical_api_http_request_duration_seconds_bucket{${labels},le="${bound}"} ${entry.buckets[index] ?? 0}`)
      })
      lines.push(
        `clinical_api_http_request_duration_seconds_bucket{${labels},le="+Inf"} ${entry.count}`,
        `clinical_api_http_request_duration_seconds_sum{${labels}} ${entry.sum}`,
        `clinical_api_http_request_duration_seconds_count{${labels}} ${entry.count}`
      )
    }
    family("clinical_api_http_requests_in_flight", "gauge", "Requests received and not yet answered.")
    lines.push(`clinical_api_http_requests_in_flight ${metrics.inFlight()}`)

    if (Option.isSome(database)) {
      family("clinical_api_database_up", "gauge", "1 when the database answered this scrape, else 0.")
      lines.push(`clinical_api_database_up ${Option.isSome(gauges) ? 1 : 0}`)
    }
    if (Option.isSome(gauges)) {
      family("clinical_api_db_pool_max_connections", "gauge", "Configured size of this process's connection pool.")
      lines.push(`clinical_api_db_pool_max_connections ${gauges.value.poolMax}`)
      family("clinical_api_db_connections", "gauge", "Client connections to the service's database (all replicas), by pg_stat_activity state.")
      for (const { count, state } of gauges.value.connectionsByState) {
        lines.push(`clinical_api_db_connections{state="${escapeLabel(state)}"} ${count}`)
      }
      family("clinical_api_webhook_deliveries", "gauge", "Webhook deliveries in the outbox, by state.")
      for (const state of WEBHOOK_DELIVERY_STATES) {
        lines.push(`clinical_api_webhook_deliveries{state="${state}"} ${gauges.value.deliveriesByState.get(state) ?? 0}`)
      }
    }

    const memory = process.memoryUsage()
    family("process_resident_memory_bytes", "gauge", "Resident memory of the process.")
    lines.push(`process_resident_memory_bytes ${memory.rss}`)
    family("nodejs_heap_used_bytes", "gauge", "V8 heap in use.")
    lines.push(`nodejs_heap_used_bytes ${memory.heapUsed}`)
    // Where resident memory goes: under load the new space alone can reach twice V8's semi-space size.
    const spaces = getHeapSpaceStatistics()
    family("nodejs_heap_space_size_total_bytes", "gauge", "V8 heap space committed, by space (new, old, code, large_object, ...).")
    for (const space of spaces) lines.push(`nodejs_heap_space_size_total_bytes{space="${heapSpaceLabel(space.space_name)}"} ${space.space_size}`)
    family("nodejs_heap_space_size_used_bytes", "gauge", "V8 heap space in use, by space.")
    for (const space of spaces) lines.push(`nodejs_heap_space_size_used_bytes{space="${heapSpaceLabel(space.space_name)}"} ${space.space_used_size}`)
    family("nodejs_external_memory_bytes", "gauge", "Memory of JavaScript objects held outside the V8 heap (buffers among them).")
    lines.push(`nodejs_external_memory_bytes ${memory.external}`)
    if (eventLoop !== undefined) {
      // Since the previous scrape, as prom-client's event-loop gauges are; the histogram starts afresh after each.
      const sampled = eventLoop.count > 0
      for (const [name, help, nanoseconds] of [
        ["max", "Longest", eventLoop.max],
        ["p99", "99th percentile of the times", eventLoop.percentile(99)],
        ["p50", "Median of the times", eventLoop.percentile(50)]
      ] as const) {
        family(`nodejs_eventloop_delay_${name}_seconds`, "gauge",
          `${help} the event loop was held past a ${EVENT_LOOP_SAMPLE_MS} ms timer since the previous scrape.`)
        lines.push(`nodejs_eventloop_delay_${name}_seconds ${sampled ? lateBy(nanoseconds) : 0}`)
      }
      eventLoop.reset()
    }
    const fds = openFileDescriptors()
    if (fds !== undefined) {
      family("process_open_fds", "gauge", "Open file descriptors (sockets included) of the process.")
      lines.push(`process_open_fds ${fds}`)
    }
    return `${lines.join("\n")}\n`
  })

/** The answer of one operations endpoint (GET or HEAD). */
export const serveOperations = (
  path: OperationsPath,
  metrics: RequestMetricsService,
  database: Option.Option<PgClientService>,
  isDraining: () => boolean = () => false,
  eventLoop?: ELDHistogram
): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
  switch (path) {
    case "/healthz":
      return Effect.succeed(HttpServerResponse.jsonUnsafe({ status: "ok" }))
    case "/readyz":
      return Effect.map(
        Effect.suspend(() => isDraining() ? Effect.succeed<ReadinessReport>({ status: "draining" }) : checkReadiness(database)),
        (report) =>
        HttpServerResponse.jsonUnsafe(report, { status: report.status === "ready" ? 200 : 503 }))
    case "/metrics":
      return Effect.map(renderMetrics(metrics, database, eventLoop), (text) =>
        HttpServerResponse.text(text, { contentType: "text/plain; version=0.0.4; charset=utf-8" }))
  }
}

/**
 * The operations endpoints on the platform router. They probe the database when the service
 * runs over one (`PgClient` in the context).
 */
export const OperationsRoutes: Layer.Layer<never, never, HttpRouter.HttpRouter | RequestMetrics> = HttpRouter.use((router) =>
  // eslint-disable-next-line no-restricted-syntax -- made once, when the layer is built
  Effect.gen(function*() {
    const metrics = yield* RequestMetrics
    const database = yield* Effect.serviceOption(PgClient)
    const draining = yield* Effect.serviceOption(ServerDraining)
    const isDraining = Option.match(draining, { onNone: () => () => false, onSome: (service) => service.isDraining })
    const eventLoop = yield* monitorEventLoop
    for (const path of operationsPaths) {
      yield* router.add("GET", path, serveOperations(path, metrics, database, isDraining, eventLoop))
    }
  })
)
