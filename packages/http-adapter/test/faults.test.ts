import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type RunningS3rver, startS3rver } from "../../storage-adapter/test/support/s3rver.js"
import { bearer, paths, send } from "./contract/http.js"
import { Effect } from "effect"
import { contractFixture, tokens } from "./support/contract-fixture.js"
import { startMemoryServer } from "./support/memory-harness.js"
import { type ProxiedServer, startProxiedServer } from "./support/proxied-server.js"
import { databases, riversideFullToken, type StoredServer, startStoredServer } from "./support/stored-server.js"

/**
 * Faults, each real and deterministic: PostgreSQL taken away while the service serves (a
 * loopback proxy between the pool and the database drops every connection and refuses new
 * ones, then forwards again), the S3 audio storage stopped, and a disclosure event the
 * database refuses to write (a trigger on `disclosure_events`). Nothing is answered 500,
 * nothing is disclosed unrecorded, and the service recovers by itself.
 */
const auth = bearer(riversideFullToken())
const unavailable = (reasonCode: "digest_key_unavailable" | "audio_storage_unavailable") => ({
  error: "public_api_unavailable",
  reason_code: reasonCode,
  message: expect.any(String),
  field: null
})

const readRoutes = [
  paths.list("?limit=5"),
  paths.encounter("enc_a1"),
  paths.document("enc_a1", "doc_a1_note"),
  paths.transcript("enc_a1", "doc_a1_tr"),
  paths.audio("enc_a1", "doc_a1_tr")
]

let faultsSurvived = 0

describe(`faults (${databases.label})`, () => {
  afterAll(() => console.info(`faults survived: ${faultsSurvived}`))

  // A PostgreSQL server to take away: the embedded PGlite serves a single in-process session,
  // which a proxy can cut but which then recovers only as slowly as that one connection does.
  const serverDatabase = (process.env["DATABASE_URL"]?.trim() ?? "") !== ""

  describe.skipIf(!serverDatabase)("PostgreSQL stopped while serving (needs DATABASE_URL; skipped on the embedded PGlite)", () => {
    let server: ProxiedServer

    beforeAll(async () => {
      server = await startProxiedServer()
    }, 60_000)
    afterAll(async () => await server?.close())

    const disclosuresOf = async (requestIds: ReadonlyArray<string>) =>
      (await server.query((sql) => sql<Array<{ request_id: string }>>`
        SELECT caller_request_id AS request_id FROM disclosure_events WHERE caller_request_id = ANY(${requestIds as Array<string>})`)).map((row) => row.request_id)

    it("503 digest_key_unavailable on every route while the database is gone (readyz 503, healthz 200), then recovery by itself, no restart", async () => {
      for (const path of readRoutes) expect((await send(server.baseUrl, path, { headers: auth })).status).toBe(200)

      server.proxy.cut()
      faultsSurvived++
      const outageIds: Array<string> = []
      for (let round = 0; round < 2; round++) {
        for (const [index, path] of readRoutes.entries()) {
          const requestId = `req_outage_${round}_${index}`
          outageIds.push(requestId)
          const response = await send(server.baseUrl, path, { headers: { ...auth, "x-request-id": requestId } })
          expect({ status: response.status, body: response.body }, path).toEqual({ status: 503, body: unavailable("digest_key_unavailable") })
          expect(response.headers["cache-control"]).toBe("no-store")
        }
      }
      expect((await send(server.baseUrl, "/readyz")).status).toBe(503)
      expect(await send(server.baseUrl, "/readyz")).toMatchObject({ body: { status: "not_ready", database: "unreachable" } })
      expect(await send(server.baseUrl, "/healthz")).toMatchObject({ status: 200, body: { status: "ok" } })
      const metrics = await send(server.baseUrl, "/metrics")
      expect(metrics.status).toBe(200)
      expect(metrics.text).toContain("clinical_api_database_up 0")

      server.proxy.restore()
      const deadline = Date.now() + 20_000
      let recovered = false
      while (!recovered && Date.now() < deadline) {
        recovered = (await send(server.baseUrl, paths.encounter("enc_a1"), { headers: auth })).status === 200
        if (!recovered) await new Promise((resolve) => setTimeout(resolve, 200))
      }
      expect(recovered, "the service answers 200 again without a restart").toBe(true)
      for (const path of readRoutes) expect((await send(server.baseUrl, path, { headers: auth })).status).toBe(200)
      expect(await send(server.baseUrl, "/readyz")).toMatchObject({ status: 200, body: { status: "ready", migrations: "current" } })
      expect(await disclosuresOf(outageIds), "nothing answered 503 was recorded as disclosed").toEqual([])
    }, 60_000)

    it("connections cut while requests are in flight: each answer is 200 or 503 (never a 500 or silence), and every 200 has its disclosure committed", async () => {
      const routes = [paths.list("?limit=20"), paths.encounter("enc_a1"), paths.document("enc_a1", "doc_a1_note")]
      // Connections that fail while queries wait for them can leave a query queued for ever
      // (postgres.js 3.4): the request deadline (10 s) answers those 503 instead of never.
      for (let cycle = 0; cycle < 1; cycle++) {
        const requests = Array.from({ length: 30 }, (_, index) => {
          const requestId = `req_cut_${cycle}_${index}`
          return send(server.baseUrl, routes[index % routes.length] ?? "/", { headers: { ...auth, "x-request-id": requestId } })
            .then((response) => ({ requestId, response }))
        })
        await new Promise((resolve) => setTimeout(resolve, 3 + cycle * 5))
        server.proxy.cut()
        faultsSurvived++
        const answers = await Promise.all(requests)
        server.proxy.restore()
        for (const { response } of answers) {
          expect([200, 503], response.text).toContain(response.status)
          if (response.status === 503) expect(response.body).toEqual(unavailable("digest_key_unavailable"))
        }
        // Recover, then check the accounting: whatever was sent was recorded.
        const deadline = Date.now() + 20_000
        while (Date.now() < deadline && (await send(server.baseUrl, "/readyz")).status !== 200) {
          await new Promise((resolve) => setTimeout(resolve, 100))
        }
        const served = answers.filter(({ response }) => response.status === 200).map(({ requestId }) => requestId)
        const recorded = new Set(await disclosuresOf(served))
        expect(served.filter((requestId) => !recorded.has(requestId)), "answered 200 without a committed disclosure").toEqual([])
      }
    }, 60_000)
  })

  // GET is answered on the Node fast path (the deadline interrupts the request's own fiber),
  // HEAD by the platform's handler (Effect.timeout): both must give the same answer.
  it("a store call that never settles: 503 digest_key_unavailable at the request deadline (10 s), not a hang, on GET and HEAD; the next request is served", async () => {
    const server = await startMemoryServer(contractFixture, {}, (api) => ({ ...api, getPublicEncounter: () => Effect.never }))
    try {
      const startedAt = Date.now()
      const timed = (method: string, requestId: string) =>
        send(server.baseUrl, paths.encounter("enc_a1"), {
          method,
          headers: { ...bearer(tokens.riversideFull), "x-request-id": requestId }
        }).then((response) => ({ response, elapsed: Date.now() - startedAt }))
      const [get, head] = await Promise.all([timed("GET", "req_stuck_get"), timed("HEAD", "req_stuck_head")])
      expect({ status: get.response.status, body: get.response.body }).toEqual({ status: 503, body: unavailable("digest_key_unavailable") })
      expect(head.response.status).toBe(503)
      for (const { elapsed } of [get, head]) {
        expect(elapsed).toBeGreaterThanOrEqual(9_900)
        expect(elapsed).toBeLessThan(20_000)
      }
      const logged = server.logLines().map((line) => JSON.parse(line) as Record<string, unknown>)
        .filter((line) => line["request_id"] === "req_stuck_get" || line["request_id"] === "req_stuck_head")
        .map((line) => ({ method: line["method"], status: line["status"], reason_code: line["reason_code"], detail: line["detail"] }))
      expect(logged.sort((a, b) => String(a.method).localeCompare(String(b.method)))).toEqual(["GET", "HEAD"].map((method) => ({
        method, status: 503, reason_code: "digest_key_unavailable", detail: "request deadline exceeded"
      })))
      faultsSurvived++
      expect((await send(server.baseUrl, paths.list(), { headers: bearer(tokens.riversideFull) })).status).toBe(200)
    } finally {
      await server.close()
    }
  }, 30_000)

  describe("audio storage unreachable", () => {
    let s3: RunningS3rver
    let server: StoredServer

    beforeAll(async () => {
      s3 = await startS3rver()
      server = await startStoredServer(s3.environment)
    }, 60_000)
    afterAll(async () => {
      await server?.close()
    })

    it("503 audio_storage_unavailable on the audio route, no disclosure recorded, the other routes unaffected", async () => {
      expect((await send(server.baseUrl, paths.audio("enc_a1", "doc_a1_tr"), { headers: auth })).status).toBe(200)
      await s3.stop()
      faultsSurvived++
      const response = await send(server.baseUrl, paths.audio("enc_a1", "doc_a1_tr"), { headers: { ...auth, "x-request-id": "req_s3_down" } })
      expect({ status: response.status, body: response.body }).toEqual({ status: 503, body: unavailable("audio_storage_unavailable") })
      expect(response.text).not.toContain("http")
      const recorded = await server.query((sql) => sql<Array<{ count: number }>>`
        SELECT count(*)::int AS count FROM disclosure_events WHERE caller_request_id = 'req_s3_down'`)
      expect(recorded[0]?.count).toBe(0)
      expect((await send(server.baseUrl, paths.document("enc_a1", "doc_a1_note"), { headers: auth })).status).toBe(200)
      expect((await send(server.baseUrl, paths.transcript("enc_a1", "doc_a1_tr"), { headers: auth })).status).toBe(200)
    }, 60_000)
  })

  describe("a disclosure event that cannot be written", () => {
    let server: StoredServer

    beforeAll(async () => {
      server = await startStoredServer([])
    }, 60_000)
    afterAll(async () => await server?.close())

    const count = async () =>
      (await server.query((sql) => sql<Array<{ count: number }>>`SELECT count(*)::int AS count FROM disclosure_events`))[0]?.count ?? -1

    it("503 digest_key_unavailable and not one byte of the data on every route; the same reads succeed once the table accepts writes again", async () => {
      const before = await count()
      await server.query((sql) => sql.unsafe(`
        CREATE FUNCTION refuse_disclosure() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'disclosure log unavailable'; END $$;
        CREATE TRIGGER refuse_disclosure BEFORE INSERT ON disclosure_events
          FOR EACH STATEMENT EXECUTE FUNCTION refuse_disclosure();`).simple())
      faultsSurvived++
      for (const path of readRoutes) {
        const response = await send(server.baseUrl, path, { headers: auth })
        expect({ status: response.status, body: response.body }, path).toEqual({ status: 503, body: unavailable("digest_key_unavailable") })
        for (const leak of ["enc_a1", "doc_a1", "pat_", "audio_url", "/media/", "turns"]) expect(response.text).not.toContain(leak)
      }
      expect(await count()).toBe(before)

      await server.query((sql) => sql.unsafe("DROP TRIGGER refuse_disclosure ON disclosure_events; DROP FUNCTION refuse_disclosure();").simple())
      for (const path of readRoutes) expect((await send(server.baseUrl, path, { headers: auth })).status).toBe(200)
      expect(await count()).toBeGreaterThan(before)
    }, 60_000)
  })
})
