import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { bearer, paths, send } from "./contract/http.js"
import { contractFixture, tokens } from "./support/contract-fixture.js"
import { startMemoryServer } from "./support/memory-harness.js"
import type { StartedServer } from "./support/harness.js"
import { databases, riversideFullToken, type StoredServer, startStoredServer } from "./support/stored-server.js"

/**
 * The operations endpoints (docs/operations.md, "Health and metrics"): `/healthz`, `/readyz` and
 * `/metrics`, without an API key, `Cache-Control: no-store` and `X-Request-Id` like every
 * response, nothing of a partner or a patient in them.
 */
describe("operations endpoints (in-memory store)", () => {
  let server: StartedServer

  beforeAll(async () => {
    server = await startMemoryServer(contractFixture)
  })
  afterAll(async () => await server?.close())

  it("GET /healthz: 200 {\"status\":\"ok\"} with no key, no-store and a request id; POST is 405 method_not_allowed", async () => {
    const response = await send(server.baseUrl, "/healthz", { headers: { "x-request-id": "probe-1" } })
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ status: "ok" })
    expect(response.headers["cache-control"]).toBe("no-store")
    expect(response.headers["x-request-id"]).toBe("probe-1")
    const post = await send(server.baseUrl, "/healthz", { method: "POST" })
    expect(post.status).toBe(405)
    expect(post.body).toMatchObject({ reason_code: "method_not_allowed" })
    expect((await send(server.baseUrl, "/healthz/")).status).toBe(404)
  })

  it("GET /readyz without a database to probe is ready", async () => {
    const response = await send(server.baseUrl, "/readyz")
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ status: "ready", database: "none", migrations: "none" })
    expect(response.headers["cache-control"]).toBe("no-store")
  })

  it("GET /metrics: Prometheus text with requests by operation and status, a latency histogram and memory by V8 heap space; no organization, token or path id", async () => {
    await send(server.baseUrl, paths.list("?limit=2"), { headers: bearer(tokens.riversideFull) })
    await send(server.baseUrl, paths.encounter("enc_secret_path_id"), { headers: bearer(tokens.riversideFull) })
    await send(server.baseUrl, paths.list(), { headers: bearer(tokens.riversideRevoked) })
    await send(server.baseUrl, "/nowhere")
    const response = await send(server.baseUrl, "/metrics")
    expect(response.status).toBe(200)
    expect(response.headers["content-type"]).toContain("text/plain")
    expect(response.headers["cache-control"]).toBe("no-store")
    const text = response.text
    expect(text).toMatch(/^clinical_api_http_requests_total\{operation="listPublicEncounters",status="200"\} [1-9]\d*$/m)
    expect(text).toMatch(/^clinical_api_http_requests_total\{operation="listPublicEncounters",status="401"\} [1-9]\d*$/m)
    expect(text).toMatch(/^clinical_api_http_requests_total\{operation="getPublicEncounter",status="404"\} 1$/m)
    expect(text).toMatch(/^clinical_api_http_requests_total\{operation="unmatched",status="404"\} [1-9]\d*$/m)
    expect(text).toMatch(/^clinical_api_http_request_duration_seconds_bucket\{operation="listPublicEncounters",status="200",le="\+Inf"\} [1-9]\d*$/m)
    expect(text).toMatch(/^clinical_api_http_request_duration_seconds_count\{operation="listPublicEncounters",status="200"\} [1-9]\d*$/m)
    expect(text).toMatch(/^# TYPE clinical_api_http_request_duration_seconds histogram$/m)
    expect(text).toMatch(/^clinical_api_http_requests_in_flight \d+$/m)
    expect(text).toMatch(/^process_resident_memory_bytes \d+$/m)
    for (const space of ["new", "old", "code", "large_object"]) {
      expect(text).toMatch(new RegExp(`^nodejs_heap_space_size_total_bytes\\{space="${space}"\\} [1-9]\\d*$`, "m"))
      expect(text).toMatch(new RegExp(`^nodejs_heap_space_size_used_bytes\\{space="${space}"\\} \\d+$`, "m"))
    }
    expect(text).toMatch(/^# TYPE nodejs_heap_space_size_total_bytes gauge$/m)
    expect(text).toMatch(/^nodejs_external_memory_bytes [1-9]\d*$/m)
    for (const secret of ["org_riverside", "enc_secret_path_id", tokens.riversideFull, tokens.riversideRevoked]) expect(text).not.toContain(secret)
  })

  it("GET /metrics: how long the event loop was held since the previous scrape (max, p99, p50 in seconds), afresh after each scrape", async () => {
    const delay = (text: string, name: string) => Number(new RegExp(`^nodejs_eventloop_delay_${name}_seconds (\\S+)$`, "m").exec(text)?.[1])
    await send(server.baseUrl, "/metrics")
    // Node's histogram measures from the first timer tick after a reset: let one pass.
    await new Promise((resolve) => setTimeout(resolve, 30))
    // The server shares this test's event loop: hold it for 80 ms, then let the sampling timer fire.
    const until = performance.now() + 80
    while (performance.now() < until) { /* hold the event loop */ }
    await new Promise((resolve) => setTimeout(resolve, 50))
    const held = (await send(server.baseUrl, "/metrics")).text
    expect(held).toMatch(/^# TYPE nodejs_eventloop_delay_max_seconds gauge$/m)
    expect(delay(held, "max")).toBeGreaterThanOrEqual(0.06)
    expect(delay(held, "max")).toBeLessThan(1)
    expect(delay(held, "p99")).toBeGreaterThanOrEqual(0)
    expect(delay(held, "p50")).toBeLessThanOrEqual(delay(held, "max"))
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(delay((await send(server.baseUrl, "/metrics")).text, "max")).toBeLessThan(0.06)
  })
})

describe(`operations endpoints over PostgreSQL storage (${databases.label})`, () => {
  let server: StoredServer

  beforeAll(async () => {
    server = await startStoredServer([])
  }, 60_000)
  afterAll(async () => await server?.close())

  it("GET /readyz: 200 when the database answers and holds exactly this build's migrations; 503 JSON when one is changed, missing or unknown", async () => {
    expect(await send(server.baseUrl, "/readyz")).toMatchObject({ status: 200, body: { status: "ready", database: "reachable", migrations: "current" } })

    const [first] = await server.query((sql) => sql<Array<{ checksum: string }>>`SELECT checksum FROM schema_migrations WHERE version = 1`)
    const [second] = await server.query((sql) => sql<Array<{ version: number; name: string; checksum: string }>>`
      SELECT version, name, checksum FROM schema_migrations WHERE version = 2`)
    if (first === undefined || second === undefined) throw new Error("migrations 1 and 2 are not applied")

    await server.query((sql) => sql`UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1`)
    expect(await send(server.baseUrl, "/readyz")).toMatchObject({ status: 503, body: { status: "not_ready", migrations: "changed" } })
    await server.query((sql) => sql`UPDATE schema_migrations SET checksum = ${first.checksum} WHERE version = 1`)
    expect((await send(server.baseUrl, "/readyz")).status).toBe(200)

    await server.query((sql) => sql`DELETE FROM schema_migrations WHERE version = 2`)
    expect(await send(server.baseUrl, "/readyz")).toMatchObject({ status: 503, body: { migrations: "pending" } })
    await server.query((sql) => sql`INSERT INTO schema_migrations (version, name, checksum) VALUES (${second.version}, ${second.name}, ${second.checksum})`)
    await server.query((sql) => sql`INSERT INTO schema_migrations (version, name, checksum) VALUES (999, 'from_a_newer_build', 'x')`)
    const unknown = await send(server.baseUrl, "/readyz")
    expect(unknown).toMatchObject({ status: 503, body: { status: "not_ready", migrations: "unknown_version" } })
    expect(unknown.headers["cache-control"]).toBe("no-store")
    expect(unknown.headers["x-request-id"]).toBeTypeOf("string")
    await server.query((sql) => sql`DELETE FROM schema_migrations WHERE version = 999`)
    expect((await send(server.baseUrl, "/readyz")).status).toBe(200)
  })

  it("GET /metrics also reports the database: up, pool size, connections by state, webhook deliveries by state (from webhook_deliveries)", async () => {
    await send(server.baseUrl, paths.list(), { headers: bearer(riversideFullToken()) })
    const text = (await send(server.baseUrl, "/metrics")).text
    expect(text).toMatch(/^clinical_api_database_up 1$/m)
    expect(text).toMatch(/^clinical_api_db_pool_max_connections [1-9]\d*$/m)
    for (const state of ["pending", "sending", "succeeded", "failed", "cancelled"]) {
      expect(text).toMatch(new RegExp(`^clinical_api_webhook_deliveries\\{state="${state}"\\} \\d+$`, "m"))
    }
  })
})
