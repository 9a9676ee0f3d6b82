import { readFileSync, writeFileSync } from "node:fs"
import { Agent, request as httpRequest } from "node:http"
import {
  createFreshDatabase,
  type FreshDatabase,
  loadFixtureWithCli,
  openSocketCount,
  residentBytes,
  sandboxFixtureFile,
  type ServiceProcess,
  startServiceProcess
} from "./service-process.js"

/**
 * The soak: the service as its own process (`pnpm start`) on the sandbox data, on a fresh
 * database of the DATABASE_URL server (loaded with the operator CLI) or on the embedded
 * default, and a fixed rate of mixed requests on loopback (open loop: requests are sent on
 * schedule whether or not earlier ones were answered). Every request has one expected
 * status; the service's RSS, its open sockets and (on a server) the database's connections
 * are sampled every second. The figures of the first and last thirds of the measured window
 * (after the warm-up) are compared.
 */
export interface SoakOptions {
  readonly durationSeconds: number
  readonly ratePerSecond: number
  /** Not measured: JIT, pools and caches fill up first. */
  readonly warmupSeconds: number
  readonly databaseUrl: string | undefined
  readonly log?: (line: string) => void
}

interface RequestTemplate {
  readonly name: string
  readonly method: "GET" | "POST"
  readonly path: string
  readonly token: string | null
  readonly expectedStatus: number
  readonly weight: number
}

interface FixtureShape {
  readonly api_keys: ReadonlyArray<{ readonly token: string; readonly label?: string }>
  readonly encounters: ReadonlyArray<{
    readonly encounter_id: string
    readonly organization_id: string
    readonly data_class: string
    readonly documents: ReadonlyArray<{
      readonly document_id: string
      readonly schema_type: string
      readonly transcript?: unknown
      readonly recording?: { readonly missing?: boolean } | null
    }>
  }>
}

const DIGEST_KEY = "soak-digest-key-0123456789abcdef0123456789abcdef"

const enc = encodeURIComponent

/** The mix: mostly reads that succeed, every refusal class, the operations endpoints. */
export const requestMix = (fixtureText: string): ReadonlyArray<RequestTemplate> => {
  const fixture = JSON.parse(fixtureText) as FixtureShape
  const token = (label: string) => {
    const key = fixture.api_keys.find((candidate) => candidate.label === label || candidate.label?.startsWith(`${label} (`) === true)
    if (key === undefined) throw new Error(`no key labelled ${label}`)
    return key.token
  }
  const full = token("riverside full access")
  const riverside = fixture.encounters.filter((e) => e.organization_id === "org_riverside" && e.data_class === "clinical")
  const pick = <A>(items: ReadonlyArray<A>, what: string): A => {
    const item = items[Math.floor(items.length / 2)]
    if (item === undefined) throw new Error(`the fixture has no ${what}`)
    return item
  }
  const withDocument = (predicate: (d: FixtureShape["encounters"][number]["documents"][number]) => boolean, what: string) => {
    const pairs = riverside.flatMap((e) => e.documents.filter(predicate).map((d) => ({ e: e.encounter_id, d: d.document_id })))
    return pick(pairs, what)
  }
  const encounter = pick(riverside, "riverside clinical encounter").encounter_id
  const note = withDocument((d) => d.schema_type === "document", "note")
  const transcript = withDocument((d) => d.schema_type === "ambient_transcript" && d.transcript != null, "transcript")
  const audio = withDocument((d) => d.schema_type === "ambient_transcript" && d.recording != null && d.recording.missing !== true, "recording")
  const demo = pick(fixture.encounters.filter((e) => e.organization_id === "org_riverside" && e.data_class === "demo"), "demo encounter")
  const harbor = pick(fixture.encounters.filter((e) => e.organization_id === "org_harbor" && e.data_class === "clinical"), "harbor encounter")
  const base = "/external/v1/encounters"
  return [
    { name: "list", method: "GET", path: `${base}?limit=20&offset=40&sort_order=asc`, token: full, expectedStatus: 200, weight: 14 },
    { name: "list range", method: "GET", path: `${base}?start_at=2026-03-01T00:00:00Z&end_at=2026-06-01T00:00:00Z&limit=100`, token: full, expectedStatus: 200, weight: 4 },
    { name: "encounter", method: "GET", path: `${base}/${enc(encounter)}`, token: full, expectedStatus: 200, weight: 14 },
    { name: "document", method: "GET", path: `${base}/${enc(note.e)}/documents/${enc(note.d)}`, token: full, expectedStatus: 200, weight: 10 },
    { name: "transcript", method: "GET", path: `${base}/${enc(transcript.e)}/documents/${enc(transcript.d)}/transcript`, token: full, expectedStatus: 200, weight: 8 },
    { name: "audio", method: "GET", path: `${base}/${enc(audio.e)}/documents/${enc(audio.d)}/audio`, token: full, expectedStatus: 200, weight: 6 },
    { name: "demo encounter", method: "GET", path: `${base}/${enc(demo.encounter_id)}`, token: full, expectedStatus: 403, weight: 3 },
    { name: "other organization", method: "GET", path: `${base}/${enc(harbor.encounter_id)}`, token: full, expectedStatus: 403, weight: 3 },
    { name: "unknown encounter", method: "GET", path: `${base}/enc_does_not_exist`, token: full, expectedStatus: 404, weight: 3 },
    { name: "unsupported filter", method: "GET", path: `${base}?patient_id=x`, token: full, expectedStatus: 400, weight: 2 },
    { name: "invalid limit", method: "GET", path: `${base}?limit=0`, token: full, expectedStatus: 422, weight: 2 },
    { name: "no key", method: "GET", path: base, token: null, expectedStatus: 401, weight: 2 },
    { name: "malformed key", method: "GET", path: base, token: `${full}0`, expectedStatus: 401, weight: 2 },
    { name: "revoked key", method: "GET", path: base, token: token("riverside revoked"), expectedStatus: 401, weight: 2 },
    { name: "missing scope", method: "GET", path: `${base}/${enc(audio.e)}/documents/${enc(audio.d)}/audio`, token: token("riverside without recordings:read"), expectedStatus: 403, weight: 2 },
    { name: "unknown path", method: "GET", path: "/external/v1/patients", token: full, expectedStatus: 404, weight: 1 },
    { name: "wrong method", method: "POST", path: base, token: full, expectedStatus: 405, weight: 1 },
    { name: "healthz", method: "GET", path: "/healthz", token: null, expectedStatus: 200, weight: 2 },
    { name: "readyz", method: "GET", path: "/readyz", token: null, expectedStatus: 200, weight: 1 },
    { name: "metrics", method: "GET", path: "/metrics", token: null, expectedStatus: 200, weight: 1 }
  ]
}

interface Completed {
  readonly at: number
  readonly latencyMs: number
  readonly template: string
  readonly status: number
}

export interface LostRequest {
  readonly template: string
  /** Seconds since the first request. */
  readonly atSeconds: number
  readonly error: string
  /** Sent on a kept-alive connection rather than a new one. */
  readonly reusedSocket: boolean
}

interface Sample {
  readonly at: number
  readonly rssBytes: number
  readonly openSockets: number
  readonly databaseConnections: number | null
}

const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN
const median = (values: ReadonlyArray<number>) => percentile([...values].sort((a, b) => a - b), 50)
const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits
const MiB = 1024 * 1024

export interface ThirdFigures {
  readonly requests: number
  readonly latencyMs: { readonly p50: number; readonly p95: number; readonly p99: number; readonly max: number }
  readonly rssMiB: { readonly median: number; readonly max: number }
  readonly openSockets: { readonly median: number; readonly max: number }
  readonly databaseConnections: { readonly median: number; readonly max: number } | null
}

export interface SoakReport {
  readonly startedAt: string
  readonly database: "postgresql" | "embedded"
  readonly durationSeconds: number
  readonly warmupSeconds: number
  readonly ratePerSecond: number
  readonly sent: number
  readonly answered: number
  readonly lost: number
  readonly lostRequests: ReadonlyArray<LostRequest>
  readonly unexpected: ReadonlyArray<{ readonly template: string; readonly expected: number; readonly got: number; readonly count: number }>
  readonly statusCounts: Readonly<Record<string, number>>
  readonly achievedRatePerSecond: number
  readonly serviceLogLines: number
  readonly thirds: readonly [ThirdFigures, ThirdFigures, ThirdFigures]
  readonly checks: ReadonlyArray<{ readonly name: string; readonly pass: boolean; readonly detail: string }>
  readonly passed: boolean
}

const REQUEST_TIMEOUT_MS = 10_000
/**
 * Node 20's `http.Agent` applies a server's `Keep-Alive: timeout=N` hint (it frees an idle
 * socket a second early) only when the agent has a timeout of its own; without one it keeps an
 * idle socket until the server closes it, and a request sent on it as the close crosses is reset
 * (ECONNRESET) without reaching the service. With this, the client honours the hint, as undici
 * and fetch do.
 */
const IDLE_SOCKET_TIMEOUT_MS = 60_000
const CLIENT_SOCKETS = 16
const POOL_MAX = 10
/** Keep-alive connections of the client, the pool, and a few of the process's own (listener, stdio, embedded database). */
const SOCKET_BOUND = CLIENT_SOCKETS + POOL_MAX + 6

export const runSoak = async (options: SoakOptions): Promise<SoakReport> => {
  const log = options.log ?? (() => {})
  const fixtureText = readFileSync(sandboxFixtureFile, "utf8")
  const mix = requestMix(fixtureText)
  const weighted = mix.flatMap((template) => Array.from({ length: template.weight }, () => template))

  let database: FreshDatabase | undefined
  let service: ServiceProcess | undefined
  const agent = new Agent({ keepAlive: true, maxSockets: CLIENT_SOCKETS, timeout: IDLE_SOCKET_TIMEOUT_MS })
  try {
    const env: Record<string, string> = { API_KEY_DIGEST_KEY: DIGEST_KEY }
    if (options.databaseUrl !== undefined) {
      database = await createFreshDatabase(options.databaseUrl)
      env["DATABASE_URL"] = database.url
      log(`soak: loading the sandbox data into ${database.name} with the operator CLI`)
      await loadFixtureWithCli(env)
    }
    service = await startServiceProcess(env)
    const running = service
    log(`soak: service pid ${running.pid} at ${running.baseUrl}; ${options.ratePerSecond} req/s for ${options.durationSeconds} s (+${options.warmupSeconds} s warm-up)`)
    const target = new URL(running.baseUrl)

    const begin = performance.now()
    const completed: Array<Completed> = []
    const samples: Array<Sample> = []
    let sent = 0
    const lostRequests: Array<LostRequest> = []
    const inFlight = new Set<Promise<void>>()

    const send = (template: RequestTemplate, startedAt: number): Promise<void> =>
      new Promise((resolve) => {
        let settled = false
        const settle = (error?: Error) => {
          if (settled) return
          settled = true
          if (error !== undefined) {
            const code = (error as NodeJS.ErrnoException).code
            lostRequests.push({
              template: template.name,
              atSeconds: round((startedAt - begin) / 1000, 3),
              error: code === undefined ? error.message : `${code}: ${error.message}`,
              reusedSocket: outgoing.reusedSocket
            })
          }
          resolve()
        }
        const outgoing = httpRequest({
          agent,
          host: target.hostname,
          port: target.port,
          method: template.method,
          path: template.path,
          headers: template.token === null ? {} : { authorization: `Bearer ${template.token}` },
          timeout: REQUEST_TIMEOUT_MS
        }, (incoming) => {
          incoming.on("data", () => {})
          incoming.on("end", () => {
            completed.push({ at: startedAt, latencyMs: performance.now() - startedAt, template: template.name, status: incoming.statusCode ?? 0 })
            settle()
          })
          incoming.on("error", settle)
        })
        outgoing.on("timeout", () => outgoing.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)))
        outgoing.on("error", settle)
        outgoing.end()
      })

    const sample = async () => {
      samples.push({
        at: performance.now(),
        rssBytes: residentBytes(running.pid),
        openSockets: openSocketCount(running.pid),
        databaseConnections: database === undefined ? null : await database.connectionCount()
      })
    }

    const totalMs = (options.warmupSeconds + options.durationSeconds) * 1000
    const measureFrom = begin + options.warmupSeconds * 1000
    let nextSample = begin
    let pick = 0
    while (performance.now() - begin < totalMs) {
      const elapsed = performance.now() - begin
      const due = Math.floor((elapsed / 1000) * options.ratePerSecond)
      while (sent < due) {
        // A fixed, interleaved order (a stride through the weighted list): every run sends the same mix.
        const template = weighted[(pick = (pick + 7) % weighted.length)] ?? weighted[0]
        if (template === undefined) throw new Error("empty request mix")
        sent++
        const promise = send(template, performance.now())
        inFlight.add(promise)
        void promise.then(() => inFlight.delete(promise))
      }
      if (performance.now() >= nextSample) {
        nextSample += 1000
        if (performance.now() >= measureFrom) await sample()
      }
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    await Promise.all(inFlight)
    await sample()
    const endedAt = performance.now()

    const measured = completed.filter((entry) => entry.at >= measureFrom)
    const windowMs = endedAt - measureFrom
    const thirdOf = (at: number) => Math.min(2, Math.floor(((at - measureFrom) / windowMs) * 3))
    const figures = ([0, 1, 2] as const).map((third): ThirdFigures => {
      const requests = measured.filter((entry) => thirdOf(entry.at) === third)
      const latencies = requests.map((entry) => entry.latencyMs).sort((a, b) => a - b)
      const thirdSamples = samples.filter((entry) => thirdOf(entry.at) === third)
      const rss = thirdSamples.map((entry) => entry.rssBytes / MiB)
      const sockets = thirdSamples.map((entry) => entry.openSockets)
      const connections = thirdSamples.flatMap((entry) => (entry.databaseConnections === null ? [] : [entry.databaseConnections]))
      return {
        requests: requests.length,
        latencyMs: {
          p50: round(percentile(latencies, 50)),
          p95: round(percentile(latencies, 95)),
          p99: round(percentile(latencies, 99)),
          max: round(latencies.at(-1) ?? Number.NaN)
        },
        rssMiB: { median: round(median(rss), 1), max: round(Math.max(...rss), 1) },
        openSockets: { median: median(sockets), max: Math.max(...sockets) },
        databaseConnections: connections.length === 0 ? null : { median: median(connections), max: Math.max(...connections) }
      }
    }) as unknown as readonly [ThirdFigures, ThirdFigures, ThirdFigures]

    const expected = new Map(mix.map((template) => [template.name, template.expectedStatus]))
    const unexpectedCounts = new Map<string, { template: string; expected: number; got: number; count: number }>()
    const statusCounts: Record<string, number> = {}
    for (const entry of completed) {
      statusCounts[entry.status] = (statusCounts[entry.status] ?? 0) + 1
      const want = expected.get(entry.template) ?? -1
      if (entry.status !== want) {
        const key = `${entry.template}:${entry.status}`
        const current = unexpectedCounts.get(key) ?? { template: entry.template, expected: want, got: entry.status, count: 0 }
        current.count++
        unexpectedCounts.set(key, current)
      }
    }
    const unexpected = [...unexpectedCounts.values()]
    const [first, , last] = figures
    const rssGrowthMiB = last.rssMiB.median - first.rssMiB.median
    const rssAllowanceMiB = Math.max(24, first.rssMiB.median * 0.1)
    const latencyAllowance = first.latencyMs.p50 * 2 + 10
    const checks = [
      { name: "no unexpected status", pass: unexpected.length === 0, detail: `${unexpected.reduce((n, u) => n + u.count, 0)} unexpected` },
      { name: "no request lost (error, reset or timeout)", pass: lostRequests.length === 0 && completed.length === sent, detail: `${lostRequests.length} lost of ${sent}` },
      {
        name: "RSS does not grow (last third median vs first)",
        pass: rssGrowthMiB <= rssAllowanceMiB,
        detail: `${first.rssMiB.median} -> ${last.rssMiB.median} MiB (allowance +${round(rssAllowanceMiB, 1)})`
      },
      {
        // The client may open up to CLIENT_SOCKETS keep-alive connections in a burst, and the pool
        // up to POOL_MAX: a leak is growth past both what the first third used and that bound.
        name: "open sockets do not grow",
        pass: last.openSockets.max <= Math.max(first.openSockets.max + 2, SOCKET_BOUND),
        detail: `max ${first.openSockets.max} -> ${last.openSockets.max} (bound ${SOCKET_BOUND})`
      },
      ...(first.databaseConnections === null || last.databaseConnections === null ? [] : [{
        name: "database connections do not grow",
        pass: last.databaseConnections.max <= Math.max(first.databaseConnections.max + 2, POOL_MAX),
        detail: `max ${first.databaseConnections.max} -> ${last.databaseConnections.max}`
      }]),
      {
        // The median, not a tail: on a shared machine the tail says more about the neighbours.
        name: "latency stable (last third p50 <= 2 x first + 10 ms)",
        pass: last.latencyMs.p50 <= latencyAllowance,
        detail: `p50 ${first.latencyMs.p50} -> ${last.latencyMs.p50} ms, p95 ${first.latencyMs.p95} -> ${last.latencyMs.p95} ms`
      },
      {
        name: "the rate was held",
        pass: completed.length >= sent && sent >= Math.floor(((totalMs / 1000) * options.ratePerSecond) * 0.98),
        detail: `${sent} sent in ${round((endedAt - begin) / 1000, 1)} s`
      }
    ]
    return {
      startedAt: new Date(Date.now() - (endedAt - begin)).toISOString(),
      database: database === undefined ? "embedded" : "postgresql",
      durationSeconds: options.durationSeconds,
      warmupSeconds: options.warmupSeconds,
      ratePerSecond: options.ratePerSecond,
      sent,
      answered: completed.length,
      lost: lostRequests.length,
      lostRequests,
      unexpected,
      statusCounts,
      achievedRatePerSecond: round(sent / ((endedAt - begin) / 1000)),
      serviceLogLines: running.logLineCount(),
      thirds: figures,
      checks,
      passed: checks.every((check) => check.pass)
    }
  } finally {
    agent.destroy()
    await service?.stop()
    await database?.drop()
  }
}

export const formatSoakReport = (report: SoakReport): string => {
  const lines = [
    `Soak: ${report.durationSeconds} s at ${report.ratePerSecond} req/s (+${report.warmupSeconds} s warm-up), ${report.database} database`,
    `  requests: ${report.sent} sent, ${report.answered} answered, ${report.lost} lost; statuses ${JSON.stringify(report.statusCounts)}`,
    `  unexpected statuses: ${report.unexpected.length === 0 ? "none" : JSON.stringify(report.unexpected)}`,
    ...report.lostRequests.map((lost) =>
      `  lost: ${lost.template} at ${lost.atSeconds} s, ${lost.reusedSocket ? "on a kept-alive connection" : "on a new connection"}: ${lost.error}`
    ),
    "  third | requests | p50 ms | p95 ms | p99 ms | max ms | RSS MiB (median/max) | sockets (max) | db connections (max)"
  ]
  report.thirds.forEach((third, index) => {
    lines.push(
      `  ${index + 1}     | ${third.requests} | ${third.latencyMs.p50} | ${third.latencyMs.p95} | ${third.latencyMs.p99} | ${third.latencyMs.max} | ${third.rssMiB.median}/${third.rssMiB.max} | ${third.openSockets.max} | ${third.databaseConnections?.max ?? "n/a"}`
    )
  })
  for (const check of report.checks) lines.push(`  ${check.pass ? "ok  " : "FAIL"} ${check.name}: ${check.detail}`)
  return lines.join("\n")
}

export const writeSoakReport = (path: string, report: SoakReport) => writeFileSync(path, `${JSON.stringify(report, null, 2)}\n`)
