import { Effect } from "effect"
import { FindMyWay } from "effect/http"
import { describe, expect, it } from "vitest"
import { acceptCallerRequestId, canonicalTarget, operationsByRoutePath, parseQuery, routerConfig } from "../src/index.js"
import { contractFixture, tokens } from "./support/contract-fixture.js"
import { startMemoryServer } from "./support/memory-harness.js"
import { bearer, paths, send } from "./contract/http.js"

describe("HTTP server behaviour beyond the contract suite", () => {
  it("a defect in a use case is 503 digest_key_unavailable with the four-field body, never a 500 or a stack", async () => {
    const server = await startMemoryServer(contractFixture, {}, (api) => ({
      ...api,
      getPublicEncounter: () => Effect.die(new TypeError("secret detail pat_7f3a"))
    }))
    try {
      const response = await send(server.baseUrl, paths.encounter("enc_a1"), { headers: bearer(tokens.riversideFull) })
      expect(response.status).toBe(503)
      expect(response.headers["content-type"]).toBe("application/json")
      expect(response.headers["cache-control"]).toBe("no-store")
      expect(response.body).toEqual({
        error: "public_api_unavailable",
        reason_code: "digest_key_unavailable",
        message: "The service is temporarily unavailable.",
        field: null
      })
      const line = JSON.parse(server.logLines().at(-1) ?? "{}") as Record<string, unknown>
      expect(line).toMatchObject({ status: 503, reason_code: "digest_key_unavailable", detail: "unexpected defect: TypeError" })
      expect(server.logLines().join("\n")).not.toContain("pat_7f3a")
    } finally {
      await server.close()
    }
  })

  it("closing the server drains a request in flight before the scope closes", async () => {
    const server = await startMemoryServer(contractFixture, {}, (api) => ({
      ...api,
      listPublicEncounters: (caller, request) =>
        Effect.andThen(Effect.sleep("400 millis"), api.listPublicEncounters(caller, request))
    }))
    const inFlight = send(server.baseUrl, paths.list(), { headers: bearer(tokens.riversideFull) })
    await new Promise((resolve) => setTimeout(resolve, 100))
    let closedAt = 0
    const closing = server.close().then(() => {
      closedAt = Date.now()
    })
    const response = await inFlight
    const answeredAt = Date.now()
    await closing
    expect(response.status).toBe(200)
    expect((response.body as { total: number }).total).toBeGreaterThan(0)
    // Answered in full although the close began while the request was in flight (a request cut
    // off would reject). The keep-alive connection is closed once idle, not after its 5 s time-out.
    expect(Math.abs(closedAt - answeredAt)).toBeLessThan(1500)
    await expect(send(server.baseUrl, paths.list())).rejects.toThrow()
  })

  it("while it drains, /readyz is 503 draining (a load balancer takes the replica out) and requests are still answered, with Connection: close", async () => {
    const server = await startMemoryServer(contractFixture, {}, (api) => ({
      ...api,
      listPublicEncounters: (caller, request) =>
        Effect.andThen(Effect.sleep("1500 millis"), api.listPublicEncounters(caller, request))
    }))
    expect(await send(server.baseUrl, "/readyz")).toMatchObject({ status: 200, body: { status: "ready" } })
    const inFlight = send(server.baseUrl, paths.list(), { headers: bearer(tokens.riversideFull) })
    await new Promise((resolve) => setTimeout(resolve, 100))
    const closing = server.close()
    await new Promise((resolve) => setTimeout(resolve, 100))
    const readiness = await send(server.baseUrl, "/readyz")
    const arriving = await send(server.baseUrl, paths.encounter("enc_a1"), { headers: bearer(tokens.riversideFull) })
    expect({ status: readiness.status, body: readiness.body }).toEqual({ status: 503, body: { status: "draining" } })
    expect(arriving.status).toBe(200)
    expect(arriving.headers["connection"]).toBe("close")
    expect((await inFlight).status).toBe(200)
    await closing
  })
})

describe("request target reading", () => {
  // The platform router as the server configures it, with the HttpApi's routes, given the
  // canonical target the exchange hands it.
  const router = FindMyWay.make<string>(routerConfig)
  for (const [path, operationId] of operationsByRoutePath) router.on("GET", path as FindMyWay.PathInput, operationId)
  const matchRoute = (url: string) => {
    const target = canonicalTarget(url)
    const found = target === undefined ? undefined : router.find("GET", target.path)
    return found === undefined ? undefined : { operationId: found.handler, params: found.params, path: target?.path }
  }

  it("matches the five routes exactly and decodes each path parameter once", () => {
    expect(matchRoute("/external/v1/encounters")?.operationId).toBe("listPublicEncounters")
    expect(matchRoute("/external/v1/encounters/a%2Fb%2525c")?.params).toEqual({ encounter_id: "a/b%25c" })
    expect(matchRoute("/external/v1/encounters/e/documents/d%20x/audio")).toMatchObject({
      operationId: "getPublicDocumentAudio",
      params: { encounter_id: "e", document_id: "d x" }
    })
    expect(matchRoute("/external/v1/encounters/")).toBeUndefined()
    expect(matchRoute("/External/v1/encounters")).toBeUndefined()
    expect(matchRoute("external/v1/encounters")).toBeUndefined()
  })

  it("hands the router each segment decoded once and re-encoded, so it reads back exactly the decoded id", () => {
    expect(canonicalTarget("/external/v1/encounters/enc_a1;x?limit=1")).toEqual({
      path: "/external/v1/encounters/enc_a1%3Bx",
      rawQuery: "limit=1"
    })
    for (const raw of ["%ZZ", "%C3%28", "a%2Fb", "%25", "%2525", "x%3Fy%23z", "%E2%98%83", "é", "a+b", "x".repeat(300)]) {
      const decoded = (() => {
        try {
          return decodeURIComponent(raw)
        } catch {
          return raw
        }
      })()
      expect(matchRoute(`/external/v1/encounters/${raw}`)?.params, raw).toEqual({ encounter_id: decoded })
    }
    for (const unroutable of ["", "*", "//external/v1/encounters", "/external//v1/encounters", "/external/v1/encounters/", "http://x/external/v1/encounters"]) {
      expect(canonicalTarget(unroutable), unroutable).toBeUndefined()
    }
  })

  it("reads the query as ordered, percent-decoded pairs with repeated keys kept", () => {
    expect(parseQuery("b=2&a=1&b=3&c&d=x%20y+z&%C3%A9=%2B")).toEqual([
      ["b", "2"], ["a", "1"], ["b", "3"], ["c", ""], ["d", "x y z"], ["é", "+"]
    ])
    expect(parseQuery(undefined)).toEqual([])
    expect(parseQuery("")).toEqual([])
  })

  it("accepts a caller request id of 1..128 characters of [A-Za-z0-9._:-] only", () => {
    expect(acceptCallerRequestId("abc-1.2_3:4")).toBe("abc-1.2_3:4")
    expect(acceptCallerRequestId("a".repeat(128))).toBe("a".repeat(128))
    expect(acceptCallerRequestId("a".repeat(129))).toBeUndefined()
    expect(acceptCallerRequestId("")).toBeUndefined()
    expect(acceptCallerRequestId("a b")).toBeUndefined()
    expect(acceptCallerRequestId(undefined)).toBeUndefined()
  })
})
