import { Agent, createServer, get, type IncomingHttpHeaders, request, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  createFreshDatabase,
  type FreshDatabase,
  loadFixtureWithCli,
  runCli,
  type ServiceProcess,
  startServiceProcess
} from "../scripts/service-process.js"
import { haproxyInstalled, startHaproxy } from "./support/haproxy.js"

/**
 * Two service processes on one PostgreSQL (DATABASE_URL) behind a small forwarder that does what
 * the load balancer of docs/operations.md ("Scaling out") does: round robin over the replicas
 * whose `/readyz` answers 200, checked every 100 ms, and a request whose connection is refused
 * sent to the other replica (haproxy's `option redispatch`). Nothing else is retried: a reset or
 * an error after the request went out is a lost request. Where `haproxy` is installed, the drain
 * is run again behind HAProxy with the sample configuration of docs/operations.md.
 */
const databaseUrl = process.env["DATABASE_URL"]?.trim()
const ACCESS_CACHE_SECONDS = 2
const RIVERSIDE = "Bearer ce_test_Riverside0full0access0key0000116X8fx"

interface Answer {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  readonly body: Buffer
}

/** GET on `baseUrl` + `path`, the whole body as bytes. */
const fetchBytes = (baseUrl: string, path: string, headers: Record<string, string> = {}, agent?: Agent): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const url = new URL(baseUrl)
    const outgoing = request({ host: url.hostname, port: url.port, path, headers, agent: agent ?? false }, (incoming) => {
      const chunks: Array<Buffer> = []
      incoming.on("data", (chunk: Buffer) => chunks.push(chunk))
      incoming.once("end", () => resolve({ status: incoming.statusCode ?? 0, headers: incoming.headers, body: Buffer.concat(chunks) }))
      incoming.once("error", reject)
    })
    outgoing.once("error", reject)
    outgoing.end()
  })

const jsonOf = (answer: Answer) => JSON.parse(answer.body.toString("utf8")) as Record<string, unknown>

interface Forwarder {
  readonly baseUrl: string
  setBackends: (urls: ReadonlyArray<string>) => void
  /** What went wrong between the forwarder and a replica (anything but a refused connection). */
  readonly failures: Array<string>
  readonly close: () => Promise<void>
}

const HOP_BY_HOP = ["connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"]

const startForwarder = async (checkIntervalMs = 100): Promise<Forwarder> => {
  let backends: Array<{ readonly url: URL; up: boolean }> = []
  const agent = new Agent({ keepAlive: true })
  const failures: Array<string> = []
  let turn = 0
  const server: Server = createServer((incoming, outgoing) => {
    const tried = new Set<URL>()
    const forward = () => {
      const candidates = backends.filter((backend) => backend.up && !tried.has(backend.url))
      const backend = candidates[turn++ % Math.max(candidates.length, 1)]
      if (backend === undefined) {
        failures.push(`${incoming.url ?? ""}: no replica up`)
        outgoing.writeHead(503).end()
        return
      }
      tried.add(backend.url)
      const headers = { ...incoming.headers }
      for (const name of HOP_BY_HOP) delete headers[name]
      const upstream = request(
        { host: backend.url.hostname, port: backend.url.port, method: incoming.method, path: incoming.url, headers, agent },
        (answer) => {
          const answerHeaders = { ...answer.headers }
          for (const name of HOP_BY_HOP) delete answerHeaders[name]
          outgoing.writeHead(answer.statusCode ?? 502, answerHeaders)
          answer.pipe(outgoing)
          answer.once("error", (error) => {
            failures.push(`${incoming.url ?? ""}: answer cut off: ${error.message}`)
            outgoing.destroy()
          })
        }
      )
      upstream.once("error", (error: NodeJS.ErrnoException) => {
        if (error.code === "ECONNREFUSED" && !outgoing.headersSent) {
          backend.up = false
          forward()
          return
        }
        failures.push(`${incoming.url ?? ""}: ${error.code ?? ""} ${error.message}`)
        if (!outgoing.headersSent) outgoing.writeHead(502).end()
        else outgoing.destroy()
      })
      upstream.end()
    }
    forward()
  })
  const checks = setInterval(() => {
    for (const backend of backends) {
      const probe = get({ host: backend.url.hostname, port: backend.url.port, path: "/readyz", agent: false, timeout: 1000 }, (answer) => {
        backend.up = answer.statusCode === 200
        answer.resume()
      })
      probe.once("timeout", () => probe.destroy(new Error("timeout")))
      probe.once("error", () => (backend.up = false))
    }
  }, checkIntervalMs)
  server.listen(0, "127.0.0.1")
  await new Promise((resolve) => server.once("listening", resolve))
  const { port } = server.address() as AddressInfo
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    setBackends: (urls) => (backends = urls.map((url) => ({ url: new URL(url), up: true }))),
    failures,
    close: async () => {
      clearInterval(checks)
      agent.destroy()
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  }
}

const issueKey = async (env: Readonly<Record<string, string>>) => {
  const issued = await runCli(["keys", "issue", "--organization", "org_riverside", "--scopes", "encounters:read,patients:read,documents:read,recordings:read", "--json"], env)
  if (issued.code !== 0) throw new Error(`keys issue failed:\n${issued.stderr}`)
  const key = JSON.parse(issued.stdout.trim()) as { api_key_id: string; token: string }
  return { id: key.api_key_id, authorization: `Bearer ${key.token}` }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)))

describe.skipIf(databaseUrl === undefined || databaseUrl === "")("two replicas behind a load balancer stay consistent", () => {
  let database: FreshDatabase
  let forwarder: Forwarder
  let env: Record<string, string>
  const replicas: Array<ServiceProcess> = []

  beforeAll(async () => {
    database = await createFreshDatabase(databaseUrl ?? "")
    forwarder = await startForwarder()
    env = {
      DATABASE_URL: database.url,
      API_KEY_DIGEST_KEY: "replicas-digest-key-0123456789abcdef0123456789",
      MEDIA_SIGNING_KEY: "replicas-media-signing-key-0123456789",
      MEDIA_BASE_URL: forwarder.baseUrl,
      ACCESS_CACHE_SECONDS: String(ACCESS_CACHE_SECONDS),
      // Three processes at most, on a server the other test files share.
      DATABASE_POOL_MAX: "4"
    }
    await loadFixtureWithCli(env)
    replicas.push(...(await Promise.all([startServiceProcess(env), startServiceProcess(env)])))
    forwarder.setBackends(replicas.map((replica) => replica.baseUrl))
  }, 120_000)

  afterAll(async () => {
    await forwarder?.close()
    await Promise.all(replicas.map((replica) => replica.stop()))
    await database?.drop()
  }, 60_000)

  const pair = () => {
    const [first, second] = replicas
    if (first === undefined || second === undefined) throw new Error("two replicas expected")
    return [first, second] as const
  }

  it("a key revoked with the CLI is refused by both replicas once ACCESS_CACHE_SECONDS have passed, and stays refused", async () => {
    const [first, second] = pair()
    const key = await issueKey(env)
    const target = "/external/v1/encounters?limit=1"
    // Both replicas hold the key in their cache before the revocation.
    for (const replica of [first, second]) expect((await fetchBytes(replica.baseUrl, target, { authorization: key.authorization })).status).toBe(200)
    const revoked = await runCli(["keys", "revoke", key.id], env)
    expect(revoked.code, revoked.stderr).toBe(0)
    // The revocation is stored by the time the CLI exits: from then on, the bound.
    await sleep(ACCESS_CACHE_SECONDS * 1000 + 100)
    for (let round = 0; round < 3; round++) {
      for (const replica of [first, second]) {
        const answer = await fetchBytes(replica.baseUrl, target, { authorization: key.authorization })
        expect({ replica: replica.baseUrl, status: answer.status, reason: jsonOf(answer)["reason_code"] })
          .toEqual({ replica: replica.baseUrl, status: 401, reason: "revoked_key" })
      }
    }
  }, 60_000)

  it("an audio URL signed by either replica plays on the other, byte for byte, and points at the load balancer", async () => {
    const [first, second] = pair()
    const list = jsonOf(await fetchBytes(first.baseUrl, "/external/v1/encounters?limit=100&sort_order=asc", { authorization: RIVERSIDE }))
    const items = list["items"] as ReadonlyArray<{ encounter_id: string; documents: ReadonlyArray<{ document_id: string; schema_type: string }> }>
    const recordings = items.flatMap((item) =>
      item.documents.filter((document) => document.schema_type === "ambient_transcript")
        .map((document) => `/external/v1/encounters/${item.encounter_id}/documents/${document.document_id}/audio`)
    )
    let played = 0
    for (const audioPath of recordings) {
      for (const [signer, player] of [[first, second], [second, first]] as const) {
        const issued = await fetchBytes(signer.baseUrl, audioPath, { authorization: RIVERSIDE })
        if (issued.status !== 200) continue
        const audioUrl = new URL(String(jsonOf(issued)["audio_url"]))
        expect(audioUrl.origin).toBe(forwarder.baseUrl)
        const onPlayer = await fetchBytes(player.baseUrl, `${audioUrl.pathname}${audioUrl.search}`)
        const onSigner = await fetchBytes(signer.baseUrl, `${audioUrl.pathname}${audioUrl.search}`)
        expect(onPlayer.status).toBe(200)
        expect(onPlayer.headers["content-type"]).toMatch(/^audio\//)
        expect(onPlayer.body.length).toBeGreaterThan(0)
        expect(onPlayer.body.equals(onSigner.body)).toBe(true)
        played++
      }
      if (played >= 2) break
    }
    expect(played, "the sandbox data has a recording to try").toBe(2)
  }, 60_000)

  /**
   * Eight clients send requests through `balancerUrl` (kept-alive connections) while `leaving`
   * gets SIGTERM; the load goes on for a second after it exits. Every request must be answered
   * 200, with its disclosure events committed.
   */
  const drainUnderLoad = async (balancerUrl: string, leaving: ServiceProcess, staying: ServiceProcess, tag: string) => {
    const clientAgent = new Agent({ keepAlive: true, maxSockets: 16 })
    const targets = ["/external/v1/encounters?limit=5", "/external/v1/encounters/enc_rv_0001", "/external/v1/encounters?limit=2&offset=10"]
    const expectedEvents = [5, 1, 2]
    const answers: Array<{ readonly requestId: string; readonly target: number; readonly status: number }> = []
    const errors: Array<string> = []
    let sending = true
    let requestNumber = 0
    const clientLoop = async () => {
      while (sending) {
        const target = requestNumber % targets.length
        const requestId = `req_${tag}_${++requestNumber}`
        try {
          const answer = await fetchBytes(balancerUrl, targets[target] ?? "", { authorization: RIVERSIDE, "x-request-id": requestId }, clientAgent)
          answers.push({ requestId, target, status: answer.status })
        } catch (error) {
          errors.push(`${requestId}: ${String(error)}`)
        }
      }
    }
    const loops = Array.from({ length: 8 }, clientLoop)
    await sleep(1500)
    const leavingLinesAtSignal = leaving.logLineCount()
    const stayingLinesAtSignal = staying.logLineCount()
    const signalledAt = Date.now()
    const exitCode = await leaving.stop(30_000)
    const drainMs = Date.now() - signalledAt
    const stayingLinesAtExit = staying.logLineCount()
    await sleep(1000)
    sending = false
    await Promise.all(loops)
    clientAgent.destroy()

    expect(errors).toEqual([])
    expect(answers.filter((answer) => answer.status !== 200)).toEqual([])
    // It exited by itself (130: the interrupted main fiber), not killed at the end of stop's grace.
    expect(exitCode).toBe(130)
    // Out of the balancer at its next check, then quiet: well within the 10 s grace period, which
    // a drain waiting for a quiet moment the balancer's checks never leave would run to its end.
    expect(drainMs).toBeLessThan(8000)
    // Both replicas served the load before the signal, and the one staying went on after it.
    expect(leavingLinesAtSignal).toBeGreaterThan(10)
    expect(stayingLinesAtSignal).toBeGreaterThan(10)
    expect(staying.logLineCount()).toBeGreaterThan(stayingLinesAtExit)

    const rows = await database.query((sql) => sql<Array<{ request_id: string; count: number }>>`
      SELECT caller_request_id AS request_id, count(*)::int AS count FROM disclosure_events
      WHERE caller_request_id LIKE ${`req_${tag}_%`} GROUP BY caller_request_id`)
    const recorded = new Map(rows.map((row) => [row.request_id, row.count]))
    const missing = answers.filter((answer) => recorded.get(answer.requestId) !== expectedEvents[answer.target])
    expect(missing).toEqual([])
    expect(answers.length).toBeGreaterThan(100)
  }

  it("SIGTERM to one replica under load: it drains and exits, and every request through the load balancer is answered 200 with its disclosures", async () => {
    const [leaving, staying] = pair()
    await drainUnderLoad(forwarder.baseUrl, leaving, staying, "drain")
    expect(forwarder.failures).toEqual([])
  }, 90_000)

  it.skipIf(!haproxyInstalled)("behind HAProxy with docs/operations.md's sample configuration: when no replica is ready the replicas still answer (not HAProxy's 503), and SIGTERM to one under load loses no request", async () => {
    const [, staying] = pair()
    const joining = await startServiceProcess(env)
    replicas.push(joining)
    const balancer = await startHaproxy([staying.baseUrl, joining.baseUrl])
    const bothReady = async () => {
      const deadline = Date.now() + 30_000
      for (const replica of [staying, joining]) {
        while ((await fetchBytes(replica.baseUrl, "/readyz")).status !== 200 && Date.now() < deadline) await sleep(100)
      }
      // HAProxy's rise 2 of inter 1s.
      await sleep(2500)
    }
    try {
      await bothReady()
      // Both replicas not ready (a migration changed under them, as a database failing over
      // makes them) and taken out at HAProxy's next check: the last-resort backups still
      // reach them, and the API answers.
      const [migration] = await database.query((sql) => sql<Array<{ version: number; checksum: string }>>`
        SELECT version, checksum FROM schema_migrations ORDER BY version LIMIT 1`)
      if (migration === undefined) throw new Error("no migration recorded")
      await database.query((sql) => sql`UPDATE schema_migrations SET checksum = 'changed' WHERE version = ${migration.version}`)
      try {
        await sleep(2500)
        const readiness = await fetchBytes(balancer.baseUrl, "/readyz")
        expect({ status: readiness.status, body: jsonOf(readiness)["status"] }).toEqual({ status: 503, body: "not_ready" })
        for (let index = 0; index < 10; index++) {
          const answer = await fetchBytes(balancer.baseUrl, "/external/v1/encounters/enc_rv_0001", { authorization: RIVERSIDE })
          expect(answer.status).toBe(200)
        }
      } finally {
        await database.query((sql) => sql`UPDATE schema_migrations SET checksum = ${migration.checksum} WHERE version = ${migration.version}`)
      }
      await bothReady()
      await drainUnderLoad(balancer.baseUrl, joining, staying, "haproxy")
    } finally {
      await balancer.stop()
    }
  }, 90_000)
})
