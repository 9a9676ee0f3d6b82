import { signMediaToken } from "@clinical-api/storage-adapter"
import { Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { paths } from "./contract/http.js"
import { type RawBytesResponse, requestBytes } from "./support/raw-request.js"
import { databases, recordingBytes, riversideFullToken, type StoredServer, startStoredServer } from "./support/stored-server.js"

/**
 * The embedded audio storage end to end: the real stack on PostgreSQL (DATABASE_URL, own
 * database) or PGlite, the example fixture loaded by the fixture loader, the audio route's URL
 * served by the service itself at /media/{token}.
 */
const MEDIA_SIGNING_KEY = "media-suite-signing-key-0123456789"
const TTL_SECONDS = 120
const bytes = recordingBytes("doc_a1_tr")
const size = bytes.length
const auth = { authorization: `Bearer ${riversideFullToken()}` }

const expectRefusedAsNotFound = (response: RawBytesResponse) => {
  expect(response.status).toBe(404)
  expect(response.headers["content-type"]).toMatch(/^application\/json/)
  expect(response.json).toEqual({
    error: "public_api_not_found",
    reason_code: "route_not_found",
    message: "No route matches this path.",
    field: null
  })
  expect(response.body.includes(bytes.subarray(0, 16))).toBe(false)
}

describe(`embedded media route end to end (${databases.label})`, () => {
  let server: StoredServer
  let audioUrl = ""
  let expiresAt = 0

  const issue = async () => {
    const response = await requestBytes(`${server.baseUrl}${paths.audio("enc_a1", "doc_a1_tr")}`, { headers: auth })
    expect(response.status).toBe(200)
    const body = response.json as { readonly audio_url: string; readonly expires_at: string }
    return { url: body.audio_url, expiresAt: Date.parse(body.expires_at), body }
  }
  const tokenOf = (url: string) => url.slice(url.lastIndexOf("/") + 1)
  const storageKeyOf = (url: string) => Buffer.from(tokenOf(url).split(".")[0] ?? "", "base64url").toString("utf8")
  const media = (token: string, headers: Record<string, string> = {}, method = "GET") =>
    requestBytes(`${server.baseUrl}/media/${token}`, { headers, method })
  const disclosureCount = async () =>
    (await server.query((sql) => sql<Array<{ count: number }>>`SELECT count(*)::int AS count FROM disclosure_events`))[0]?.count ?? -1

  beforeAll(async () => {
    server = await startStoredServer([
      ["AUDIO_STORAGE", "embedded"],
      ["MEDIA_SIGNING_KEY", MEDIA_SIGNING_KEY],
      ["AUDIO_URL_TTL_SECONDS", String(TTL_SECONDS)]
    ])
    const issued = await issue()
    audioUrl = issued.url
    expiresAt = issued.expiresAt
  }, 60_000)

  afterAll(async () => {
    server.clock.resume()
    await server.close()
  })

  it("the audio route's URL is the service's own /media/{token}; expires_at is issue time + AUDIO_URL_TTL_SECONDS, the token's own expiry", async () => {
    expect(audioUrl.startsWith(`${server.baseUrl}/media/`)).toBe(true)
    const issued = await issue()
    const nowSeconds = Date.now() / 1000
    expect(issued.expiresAt / 1000).toBeGreaterThan(nowSeconds + TTL_SECONDS - 2)
    expect(issued.expiresAt / 1000).toBeLessThanOrEqual(nowSeconds + TTL_SECONDS)
    expect(issued.body.expires_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.000Z$/)
    expect(Number(tokenOf(issued.url).split(".")[1]) * 1000).toBe(issued.expiresAt)
  })

  it("GET downloads the exact bytes: 200, Content-Type, Content-Length, Accept-Ranges, Cache-Control no-store, no API key needed", async () => {
    const response = await requestBytes(audioUrl)
    expect(response.status).toBe(200)
    expect(response.body.equals(bytes)).toBe(true)
    expect(response.headers["content-type"]).toBe("audio/wav")
    expect(response.headers["content-length"]).toBe(String(size))
    expect(response.headers["accept-ranges"]).toBe("bytes")
    expect(response.headers["cache-control"]).toBe("no-store")
    expect(response.headers["x-content-type-options"]).toBe("nosniff")
    expect(response.headers["x-request-id"]).toMatch(/^req_/)
    expect(response.headers["content-range"]).toBeUndefined()
  })

  it("HEAD answers the same headers without a body", async () => {
    const response = await requestBytes(audioUrl, { method: "HEAD" })
    expect(response.status).toBe(200)
    expect(response.body.length).toBe(0)
    expect(response.headers["content-type"]).toBe("audio/wav")
    expect(response.headers["content-length"]).toBe(String(size))
    expect(response.headers["accept-ranges"]).toBe("bytes")
    const ranged = await requestBytes(audioUrl, { method: "HEAD", headers: { range: "bytes=0-9" } })
    expect(ranged.status).toBe(206)
    expect(ranged.body.length).toBe(0)
    expect(ranged.headers["content-range"]).toBe(`bytes 0-9/${size}`)
    expect(ranged.headers["content-length"]).toBe("10")
  })

  it("Range bytes=a-b, bytes=a-, bytes=-n: 206 with Content-Range and exactly those bytes", async () => {
    const cases: ReadonlyArray<readonly [string, number, number]> = [
      ["bytes=0-99", 0, 99],
      ["bytes=100-", 100, size - 1],
      ["bytes=-50", size - 50, size - 1],
      ["bytes=10-10", 10, 10],
      [`bytes=${size - 1}-`, size - 1, size - 1],
      [`bytes=200-${size + 5000}`, 200, size - 1],
      [`bytes=-${size + 100}`, 0, size - 1],
      ["Bytes = 5-9", 5, 9]
    ]
    for (const [range, start, end] of cases) {
      const response = await requestBytes(audioUrl, { headers: { range } })
      expect(response.status, range).toBe(206)
      expect(response.headers["content-range"], range).toBe(`bytes ${start}-${end}/${size}`)
      expect(response.headers["content-length"], range).toBe(String(end - start + 1))
      expect(response.headers["content-type"], range).toBe("audio/wav")
      expect(response.headers["accept-ranges"], range).toBe("bytes")
      expect(response.body.equals(bytes.subarray(start, end + 1)), range).toBe(true)
    }
  })

  it("an unsatisfiable range (first byte past the end, bytes=-0) is 416 with Content-Range: bytes */size and no byte", async () => {
    for (const range of [`bytes=${size}-`, `bytes=${size + 10}-${size + 20}`, "bytes=-0"]) {
      const response = await requestBytes(audioUrl, { headers: { range } })
      expect(response.status, range).toBe(416)
      expect(response.headers["content-range"], range).toBe(`bytes */${size}`)
      expect(response.body.length, range).toBe(0)
    }
  })

  it("decision: multi-range, an invalid range, another unit or If-Range are answered 200 with the whole object", async () => {
    for (const headers of [
      { range: "bytes=0-1,4-5" },
      { range: "bytes=9-3" },
      { range: "bytes=abc" },
      { range: "items=0-5" },
      { range: "bytes=0-5", "if-range": "\"some-etag\"" }
    ]) {
      const response = await requestBytes(audioUrl, { headers })
      expect(response.status, JSON.stringify(headers)).toBe(200)
      expect(response.body.equals(bytes)).toBe(true)
    }
  })

  it("the URL works until just before expires_at and stops working AT expires_at (server clock placed there)", async () => {
    const token = tokenOf(audioUrl)
    try {
      server.clock.freezeAt(expiresAt - 1)
      const before = await media(token)
      expect(before.status).toBe(200)
      expect(before.body.equals(bytes)).toBe(true)
      server.clock.freezeAt(expiresAt)
      expectRefusedAsNotFound(await media(token))
      expectRefusedAsNotFound(await media(token, { range: "bytes=0-9" }))
      const head = await media(token, {}, "HEAD")
      expect(head.status).toBe(404)
      expect(head.body.length).toBe(0)
      server.clock.freezeAt(expiresAt + 3_600_000)
      expectRefusedAsNotFound(await media(token))
    } finally {
      server.clock.resume()
    }
  })

  it("a real expiry: a token signed for 1 s serves, then is refused after the wait", async () => {
    const expiry = Math.floor(Date.now() / 1000) + 2
    const token = signMediaToken(Redacted.make(MEDIA_SIGNING_KEY), storageKeyOf(audioUrl), expiry)
    expect((await media(token)).status).toBe(200)
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiry * 1000 - Date.now()) + 50))
    expectRefusedAsNotFound(await media(token))
  }, 10_000)

  it("a token whose expiry was moved to the past (re-signed by an attacker without the key) is refused", async () => {
    const [key, , signature] = tokenOf(audioUrl).split(".")
    expectRefusedAsNotFound(await media(`${key}.${Math.floor(Date.now() / 1000) - 10}.${signature}`))
    expectRefusedAsNotFound(await media(`${key}.${Math.floor(Date.now() / 1000) + 99_999}.${signature}`))
    const signedPast = signMediaToken(Redacted.make(MEDIA_SIGNING_KEY), storageKeyOf(audioUrl), Math.floor(Date.now() / 1000) - 1)
    expectRefusedAsNotFound(await media(signedPast))
  })

  it("a changed character anywhere in the token is refused with 404 route_not_found and no byte of the recording", async () => {
    const token = tokenOf(audioUrl)
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    for (let index = 0; index < token.length; index++) {
      const original = token[index] ?? ""
      const replacement = original === "." ? "A" : alphabet[(alphabet.indexOf(original) + 1) % alphabet.length] ?? "A"
      const tampered = `${token.slice(0, index)}${replacement}${token.slice(index + 1)}`
      const response = await media(tampered)
      expect(response.status, `position ${index}`).toBe(404)
      expect(response.body.includes(bytes.subarray(0, 16)), `position ${index}`).toBe(false)
    }
    expectRefusedAsNotFound(await media(`${token}A`))
    expectRefusedAsNotFound(await media(token.slice(0, -1)))
    expectRefusedAsNotFound(await media("garbage"))
  })

  it("a token signed with another key, or for an unknown object, is refused", async () => {
    const expiry = Math.floor(Date.now() / 1000) + 300
    expectRefusedAsNotFound(await media(signMediaToken(Redacted.make("another-key"), storageKeyOf(audioUrl), expiry)))
    expectRefusedAsNotFound(await media(signMediaToken(Redacted.make(MEDIA_SIGNING_KEY), "rec_unknown", expiry)))
  })

  it("other methods are 405 with Allow: GET; /media/ and nested paths are 404 route_not_found", async () => {
    const post = await media(tokenOf(audioUrl), {}, "POST")
    expect(post.status).toBe(405)
    expect(post.headers["allow"]).toBe("GET")
    expect((post.json as { reason_code: string }).reason_code).toBe("method_not_allowed")
    expectRefusedAsNotFound(await requestBytes(`${server.baseUrl}/media/`))
    expectRefusedAsNotFound(await requestBytes(`${server.baseUrl}/media/${tokenOf(audioUrl)}/x`))
    expectRefusedAsNotFound(await requestBytes(`${server.baseUrl}/media`))
  })

  it("serving media records no disclosure; each URL issued by the audio route records exactly one", async () => {
    const before = await disclosureCount()
    for (let index = 0; index < 3; index++) expect((await requestBytes(audioUrl)).status).toBe(200)
    expect(await disclosureCount()).toBe(before)
    await issue()
    expect(await disclosureCount()).toBe(before + 1)
    const events = await server.query((sql) =>
      sql<Array<{ operation_id: string; document_id: string | null }>>`SELECT * FROM disclosure_events ORDER BY occurred_at DESC LIMIT 1`
    )
    expect(events[0]).toMatchObject({ operation_id: "getPublicDocumentAudio", document_id: "doc_a1_tr" })
  })

  it("an object gone from storage after the URL was issued: the URL is refused, the audio route answers 404 audio_not_found", async () => {
    const issued = await issue()
    const storageKey = storageKeyOf(issued.url)
    await server.query((sql) => sql`DELETE FROM recording_objects WHERE storage_key = ${storageKey}`)
    try {
      expectRefusedAsNotFound(await requestBytes(issued.url))
      const route = await requestBytes(`${server.baseUrl}${paths.audio("enc_a1", "doc_a1_tr")}`, { headers: auth })
      expect(route.status).toBe(404)
      expect((route.json as { reason_code: string }).reason_code).toBe("audio_not_found")
    } finally {
      await server.query((sql) =>
        sql`INSERT INTO recording_objects (storage_key, content_type, bytes) VALUES (${storageKey}, 'audio/wav', ${bytes})`
      )
    }
    expect((await requestBytes(issued.url)).body.equals(bytes)).toBe(true)
  })

  it("no leak: no log line and no stored row holds a media URL, token or signature; media lines log the route template only", async () => {
    const urls = [audioUrl, (await issue()).url]
    await requestBytes(urls[1] ?? "")
    await media(`${tokenOf(urls[1] ?? "")}x`)
    const secrets = urls.flatMap((url) => [url, tokenOf(url), tokenOf(url).split(".")[2] ?? url, `/media/${tokenOf(url).slice(0, 12)}`])
    const lines = server.logLines()
    const rows = await server.allRows()
    expect(rows.some((row) => row.startsWith("disclosure_events:"))).toBe(true)
    for (const secret of secrets) {
      for (const line of lines) expect(line.includes(secret), `log line holds ${secret}`).toBe(false)
      for (const row of rows) expect(row.includes(secret), `stored row holds ${secret}`).toBe(false)
    }
    const mediaLines = lines.map((line) => JSON.parse(line) as { route: string | null; operation_id: string | null })
      .filter((line) => line.route === "/media/{token}")
    expect(mediaLines.length).toBeGreaterThan(10)
    expect(mediaLines.every((line) => line.operation_id === null)).toBe(true)
    expect(lines.some((line) => line.includes("/media/") && !line.includes("/media/{token}"))).toBe(false)
  })
})
