import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { reasonCatalogue } from "@clinical-api/domain"
import { type RawExchange, exchange, rawGet } from "./support/raw-socket.js"
import { databases, riversideFullToken, type StoredServer, startStoredServer } from "./support/stored-server.js"

/**
 * Hostile input against the real service (PostgreSQL storage, HTTP server on loopback), sent
 * as raw bytes over sockets so that malformed requests really reach it: fuzzed query strings,
 * path parameters, headers and bearer tokens. Every answer is the four-field JSON error body
 * with the catalogue's status for its reason (or a 200 for a request that happens to be
 * valid), never a 5xx, never silence; the limits of docs/operations.md ("Limits") answer 431/400 with
 * the same body shape; and the service still answers afterwards.
 */
const token = riversideFullToken()
const auth = `Authorization: Bearer ${token}`
const LIST = "/external/v1/encounters"
const ENCOUNTER = "/external/v1/encounters/enc_a1"

let tried = 0
const seen = new Map<string, number>()

/** The answer is a contract error body with the catalogue's status, or a 200 JSON body. */
const expectContractAnswer = (answer: RawExchange, what: string) => {
  tried++
  const label = answer.status === 200 ? "200" : `${answer.status} ${String((answer.json as { reason_code?: unknown } | undefined)?.reason_code)}`
  seen.set(label, (seen.get(label) ?? 0) + 1)
  expect(answer.status, `${what}: ${answer.body}`).toBeLessThan(500)
  expect(answer.headers.get("cache-control"), what).toBe("no-store")
  expect(answer.headers.get("x-request-id") ?? "", what).toMatch(/^[A-Za-z0-9._:-]{1,128}$/)
  if (answer.status === 200) {
    expect(answer.json, what).toBeTypeOf("object")
    return
  }
  const body = answer.json as Record<string, unknown> | undefined
  expect(body, `${what}: not JSON: ${answer.body}`).toBeTypeOf("object")
  expect(Object.keys(body ?? {}).sort(), what).toEqual(["error", "field", "message", "reason_code"])
  const reason = String(body?.["reason_code"])
  const catalogued = (reasonCatalogue as Record<string, { status: number; error: string } | undefined>)[reason]
  expect(catalogued, `${what}: reason ${reason} is not in the catalogue`).toBeDefined()
  expect(answer.status, what).toBe(catalogued?.status)
  expect(body?.["error"], what).toBe(catalogued?.error)
  expect(typeof body?.["message"]).toBe("string")
  const field = body?.["field"]
  expect(field === null || (typeof field === "string" && /^[\x20-\x7e]{0,64}$/.test(field)), `${what}: field ${String(field)}`).toBe(true)
}

// ---- generators -------------------------------------------------------------------------------

const hex = (byte: number) => `%${byte.toString(16).toUpperCase().padStart(2, "0")}`
/** Characters a request target may carry raw (RFC 3986 unreserved and sub-delims, ':', '@', '/', '?'). */
const TARGET_SAFE = /^[A-Za-z0-9\-._~!$&'()*+,;=:@/?]$/

const percentEncodedBytes = fc.uint8Array({ maxLength: 64 }).map((bytes) =>
  [...bytes].map((byte) => (TARGET_SAFE.test(String.fromCharCode(byte)) && byte !== 0x3f && byte !== 0x2f ? String.fromCharCode(byte) : hex(byte))).join("")
)
const invalidPercent = fc.constantFrom("%", "%G1", "%E9", "%ED%A0%80", "%C0%AF", "%FF%FE", "%%", "%2", "%u0041", "%F0%9F%98")
const unicodeText = fc.string({ unit: "grapheme", maxLength: 24 }).map((text) => encodeURIComponent(text))
const specials = fc.constantFrom("%00", "%0D%0A", "%0A", "+", "%2B", "%20", "%09", "%7F", "..", "%2E%2E", "%2F", "%5C", "__proto__", "constructor")
const pieceArb = fc.oneof(percentEncodedBytes, invalidPercent, unicodeText, specials, fc.constantFrom("limit", "offset", "sort_order", "start_at", "end_at"))
const textArb = fc.array(pieceArb, { maxLength: 5 }).map((pieces) => pieces.join(""))

const queryArb = fc.oneof(
  fc.array(fc.tuple(textArb, fc.option(textArb, { nil: undefined })), { maxLength: 12 }).map((pairs) =>
    pairs.map(([key, value]) => (value === undefined ? key : `${key}=${value}`)).join(fc.sample(fc.constantFrom("&", "&&", ";"), 1)[0] ?? "&")
  ),
  fc.nat({ max: 3000 }).map((count) => Array.from({ length: count }, (_, index) => `k${index % 7}=${index}`).join("&")),
  fc.constantFrom("limit=1&limit=1", "limit=100&offset=10000", "limit=1e2", "limit=%31", "offset=-0", "sort_order=asc&sort_order=asc",
    "start_at=2026-01-01T00:00:00%2B01:00", "start_at=2026-01-01T00:00:00+01:00", "end_at=0000-01-01T00:00:00Z", "start_at=2026-12-31T23:59:60Z",
    "=", "&", "==&==", "limit", "limit=&offset=", `limit=${"9".repeat(5000)}`)
)

const segmentArb = fc.oneof(
  textArb.filter((text) => text !== ""),
  fc.constantFrom("enc_a1", "enc_a2", "doc_a1_tr", "%00", "enc_a1%00", "..", ".", "%2e", "%2F", "a%2Fb", "x".repeat(8000), "%E2%98%83")
)

const headerValueArb = fc.oneof(
  fc.uint8Array({ minLength: 0, maxLength: 200 }).map((bytes) => Buffer.from(bytes.filter((byte) => byte !== 0x0d && byte !== 0x0a))),
  fc.string({ unit: "grapheme", maxLength: 60 }).map((text) => Buffer.from(text, "utf8")),
  fc.constantFrom("", " ", "\t", "x".repeat(12_000)).map((text) => Buffer.from(text, "latin1"))
)

const bearerArb = fc.oneof(
  fc.string({ maxLength: 80 }).map((text) => `Bearer ${text}`),
  fc.nat({ max: token.length - 1 }).chain((position) =>
    fc.constantFrom("0", "z", "_", " ", "é", "").map((replacement) => `Bearer ${token.slice(0, position)}${replacement}${token.slice(position + 1)}`)
  ),
  fc.constantFrom(`Bearer ${token}${token}`, `Bearer  ${token} `, `bearer\t${token}`, `Bearer ${token.toLowerCase()}`, `Token ${token}`,
    `Bearer ${"ce_live_".padEnd(44, "A")}`, "Bearer", "Bearer ce_test_", `Bearer ${token.replace("ce_test_", "ce_prod_")}`)
)

// ---- the suite -------------------------------------------------------------------------------

describe(`hostile input on the real server (${databases.label})`, () => {
  let server: StoredServer

  beforeAll(async () => {
    server = await startStoredServer([])
  }, 60_000)

  afterAll(async () => {
    await server?.close()
    console.info(`hostile input: ${tried} bad inputs answered`, Object.fromEntries([...seen].sort()))
  })

  const stillServing = async () => {
    const answer = await exchange(server.baseUrl, rawGet(`${LIST}?limit=1`, [auth]))
    expect(answer.status).toBe(200)
  }

  it("fuzzed query strings on every kind of route: a contract error body (400 unsupported_filter, 422 invalid_*) or 200, never a 5xx", async () => {
    await fc.assert(
      fc.asyncProperty(queryArb, fc.constantFrom(LIST, ENCOUNTER, `${ENCOUNTER}/documents/doc_a1_tr/audio`), fc.boolean(), async (query, route, withKey) => {
        const answer = await exchange(server.baseUrl, rawGet(`${route}?${query}`, withKey ? [auth] : []))
        expectContractAnswer(answer, `GET ${route}?${query.slice(0, 200)}`)
        if (route !== LIST && withKey && [...new URLSearchParams(query)].length > 0 && answer.status !== 431) {
          // Any key at all on a route without query parameters is the first refusal after authorization.
          expect((answer.json as { reason_code?: string }).reason_code, query.slice(0, 200)).toBe("unsupported_filter")
        }
      }),
      { numRuns: 350, seed: 8_001 }
    )
    await stillServing()
  }, 60_000)

  it("fuzzed path parameters (percent-encoding valid and not, NUL, dot segments, overlong ids): 404/403/400 with the body, never a 5xx", async () => {
    await fc.assert(
      fc.asyncProperty(segmentArb, segmentArb, fc.constantFrom("", "/transcript", "/audio"), async (encounterId, documentId, tail) => {
        const target = fc.sample(fc.constantFrom(
          `/external/v1/encounters/${encounterId}`,
          `/external/v1/encounters/${encounterId}/documents/${documentId}${tail}`,
          `/external/v1/${encounterId}`,
          `/${encounterId}/../external/v1/encounters`
        ), { numRuns: 1, seed: encounterId.length + documentId.length })[0] ?? "/"
        const answer = await exchange(server.baseUrl, rawGet(target, [auth]))
        expectContractAnswer(answer, `GET ${target.slice(0, 200)}`)
      }),
      { numRuns: 350, seed: 8_002 }
    )
    await stillServing()
  }, 60_000)

  it("fuzzed header values (random bytes, Unicode, empty, overlong) in Authorization, X-Request-Id and other headers", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom("Authorization", "X-Request-Id", "Accept", "X-Forwarded-For", "Range"), headerValueArb, async (name, value) => {
        const line = Buffer.concat([Buffer.from(`${name}: `), value])
        const headers = name === "Authorization" ? [line] : [auth, line]
        const answer = await exchange(server.baseUrl, rawGet(`${LIST}?limit=2`, headers))
        expectContractAnswer(answer, `${name}: ${value.toString("latin1").slice(0, 120)}`)
        if (name === "X-Request-Id" && answer.status !== 400 && answer.status !== 431) {
          const sent = value.toString("latin1").trim()
          const echoed = answer.headers.get("x-request-id")
          if (!/^[A-Za-z0-9._:-]{1,128}$/.test(sent)) expect(echoed).not.toBe(sent)
        }
      }),
      { numRuns: 250, seed: 8_003 }
    )
    await stillServing()
  }, 60_000)

  it("fuzzed bearer tokens: every one is a 401 (missing_bearer, malformed_token, invalid_key) or the real key's 200, never a 5xx", async () => {
    await fc.assert(
      fc.asyncProperty(bearerArb, async (authorization) => {
        const answer = await exchange(server.baseUrl, rawGet(`${LIST}?limit=1`, [Buffer.from(`Authorization: ${authorization}`, "utf8")]))
        expectContractAnswer(answer, `Authorization: ${authorization}`)
        expect([200, 400, 401], authorization).toContain(answer.status)
      }),
      { numRuns: 250, seed: 8_004 }
    )
    await stillServing()
  }, 60_000)

  it("raw NUL, CR and LF inside a header, bare LF line ends, garbage request lines: 400 malformed_http_request with the body, then the connection closes", async () => {
    const malformed: ReadonlyArray<Buffer> = [
      rawGet(LIST, [Buffer.from(`Authorization: Bearer ${token.slice(0, 10)}\u0000${token.slice(10)}`, "latin1")]),
      rawGet(LIST, [Buffer.from("X-Test: a\rb", "latin1")]),
      rawGet(LIST, [Buffer.from("X Bad Name: 1", "latin1")]),
      rawGet(LIST, [Buffer.from("Authorization: Bearer x\r\n folded continuation", "latin1")]),
      rawGet(Buffer.from(`${LIST}?a=\u0000`, "latin1"), [auth]),
      rawGet(Buffer.from(`${LIST} extra`, "latin1"), [auth]),
      Buffer.from("\u0000\u0001\u0002 garbage\r\n\r\n", "latin1"),
      Buffer.from("GET\r\n\r\n", "latin1"),
      Buffer.from(`GET ${LIST} HTTP/9.9\r\nHost: x\r\n\r\n`, "latin1"),
      Buffer.from(`GET ${LIST} HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`, "latin1"),
      Buffer.from(`GET ${LIST} HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n`, "latin1")
    ]
    for (const request of malformed) {
      const answer = await exchange(server.baseUrl, request)
      expectContractAnswer(answer, JSON.stringify(request.toString("latin1").slice(0, 120)))
      expect(answer.status).toBe(400)
    }
    await fc.assert(
      // Leading empty lines are allowed before a request (RFC 9112 2.2): bytes with nothing but
      // CR, LF, space or tab are not a request yet, and the server rightly waits for one.
      fc.asyncProperty(fc.uint8Array({ minLength: 1, maxLength: 300 }).filter((bytes) => bytes.some((byte) => ![0x0d, 0x0a, 0x20, 0x09].includes(byte))), async (bytes) => {
        const answer = await exchange(server.baseUrl, Buffer.concat([Buffer.from(bytes), Buffer.from("\r\n\r\n")]))
        expectContractAnswer(answer, `garbage ${Buffer.from(bytes).toString("hex").slice(0, 80)}`)
      }),
      { numRuns: 150, seed: 8_005 }
    )
    await stillServing()
  }, 60_000)

  it("limits (docs/operations.md \"Limits\"): request line + headers up to 16 KiB are served; beyond, 431 request_header_fields_too_large with the body; 2,000+ headers, repeated Authorization", async () => {
    // Just under the limit: a long query is read (and refused by the API's own rules, not by the transport).
    const nearLimit = await exchange(server.baseUrl, rawGet(`${LIST}?${"a".repeat(15_500)}=1`, [auth]))
    expectContractAnswer(nearLimit, "a 15.5 KiB query")
    expect((nearLimit.json as { reason_code?: string }).reason_code).toBe("unsupported_filter")

    for (const request of [
      rawGet(`${LIST}?limit=${"1".repeat(17_000)}`, [auth]),
      rawGet(`/external/v1/encounters/${"x".repeat(20_000)}`, [auth]),
      rawGet(LIST, [`Authorization: Bearer ${"A".repeat(17_000)}`]),
      rawGet(LIST, [auth, ...Array.from({ length: 3000 }, (_, index) => `X-Many-${index}: ${index}`)]),
      rawGet(LIST, [auth, `Cookie: ${"c=1; ".repeat(4000)}`])
    ]) {
      const answer = await exchange(server.baseUrl, request)
      expectContractAnswer(answer, `${request.length} bytes of request head`)
      expect(answer.status).toBe(431)
      expect((answer.json as { reason_code?: string }).reason_code).toBe("request_header_fields_too_large")
      expect(answer.headers.get("connection")).toBe("close")
    }

    // Many small headers well under the byte limit are accepted (Node 24 counts some bytes per
    // header beyond its text: about 950 one-character headers reach 16 KiB).
    const manySmall = rawGet(`${LIST}?limit=1`, [auth, ...Array.from({ length: 500 }, (_, index) => `X-${index}: 1`)])
    expect(manySmall.length).toBeLessThan(8 * 1024)
    const manyHeaders = await exchange(server.baseUrl, manySmall)
    expectContractAnswer(manyHeaders, "500 small headers")
    expect(manyHeaders.status).toBe(200)

    // A repeated Authorization header: Node keeps the first one and drops the others.
    const repeated = await exchange(server.baseUrl, rawGet(`${LIST}?limit=1`, ["Authorization: Bearer nonsense", auth]))
    expectContractAnswer(repeated, "two Authorization headers")
    expect((repeated.json as { reason_code?: string }).reason_code).toBe("malformed_token")

    // Thousands of query parameters within the limit: the first unsupported key is named.
    const thousands = await exchange(server.baseUrl, rawGet(`${LIST}?${Array.from({ length: 2000 }, (_, index) => `p${index % 10}=1`).join("&")}`, [auth]))
    expectContractAnswer(thousands, "2,000 parameters")
    expect(thousands.json).toMatchObject({ reason_code: "unsupported_filter", field: "p0" })

    await stillServing()
  }, 60_000)

  it("many concurrent hostile connections at once: all answered, the service keeps serving", async () => {
    const requests = Array.from({ length: 200 }, (_, index) =>
      index % 4 === 0
        ? rawGet(`${LIST}?${"%".repeat(index)}`, [auth])
        : index % 4 === 1
        ? rawGet(LIST, [`Authorization: Bearer ${"x".repeat(index * 100)}`])
        : index % 4 === 2
        ? Buffer.from(`GARBAGE ${index}\r\n\r\n`)
        : rawGet(`/external/v1/encounters/${"%00".repeat(index)}`, [auth])
    )
    const answers = await Promise.all(requests.map((request) => exchange(server.baseUrl, request)))
    answers.forEach((answer, index) => expectContractAnswer(answer, `concurrent #${index}`))
    await stillServing()
    expect(tried).toBeGreaterThan(1500)
  }, 60_000)
})
