import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type RunningS3rver, startS3rver } from "../../storage-adapter/test/support/s3rver.js"
import { paths } from "./contract/http.js"
import { requestBytes } from "./support/raw-request.js"
import { databases, recordingBytes, riversideFullToken, type StoredServer, startStoredServer } from "./support/stored-server.js"

/**
 * The S3-compatible storage end to end: s3rver on loopback, the service with AUDIO_STORAGE=s3
 * and the S3_* settings, the example fixture uploaded by the fixture loader, the audio
 * route's presigned URL downloaded from the store.
 */
const TTL_SECONDS = 90
const bytes = recordingBytes("doc_a1_tr")
const auth = { authorization: `Bearer ${riversideFullToken()}` }

/** X-Amz-Date + X-Amz-Expires of a presigned URL: when the store stops honouring it. */
const presignedExpiry = (url: string) => {
  const query = new URL(url).searchParams
  const match = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(query.get("X-Amz-Date") ?? "")
  if (match === null) throw new Error("no X-Amz-Date in the URL")
  const [, year, month, day, hour, minute, second] = match.map(Number)
  const signedAt = Date.UTC(year ?? 0, (month ?? 1) - 1, day ?? 0, hour ?? 0, minute ?? 0, second ?? 0)
  const expiresIn = Number(query.get("X-Amz-Expires"))
  return { signedAt, expiresIn, expiresAt: signedAt + expiresIn * 1000 }
}

describe(`S3 audio storage end to end against s3rver (${databases.label})`, () => {
  let s3: RunningS3rver
  let server: StoredServer

  const audioRoute = (documentId = "doc_a1_tr", encounterId = "enc_a1") =>
    requestBytes(`${server.baseUrl}${paths.audio(encounterId, documentId)}`, { headers: auth })
  const issue = async () => {
    const response = await audioRoute()
    expect(response.status).toBe(200)
    const body = response.json as { readonly audio_url: string; readonly expires_at: string }
    return { url: body.audio_url, expiresAt: Date.parse(body.expires_at), expiresAtText: body.expires_at }
  }
  const disclosureCount = async () =>
    (await server.query((sql) => sql<Array<{ count: number }>>`SELECT count(*)::int AS count FROM disclosure_events`))[0]?.count ?? -1
  const storageKeyOf = async (documentId: string) =>
    (await server.query((sql) => sql<Array<{ storage_key: string }>>`SELECT storage_key FROM recordings WHERE document_id = ${documentId}`))[0]
      ?.storage_key ?? ""

  beforeAll(async () => {
    s3 = await startS3rver()
    server = await startStoredServer([...s3.environment, ["AUDIO_URL_TTL_SECONDS", String(TTL_SECONDS)]])
  }, 60_000)

  afterAll(async () => {
    await server.close()
    await s3.stop()
  })

  it("the fixture loader uploaded the recording; the route's presigned URL downloads the exact bytes from the store", async () => {
    const issued = await issue()
    expect(issued.url.startsWith(`${s3.endpoint}/${s3.bucket}/`)).toBe(true)
    expect(new URL(issued.url).pathname).toBe(`/${s3.bucket}/${await storageKeyOf("doc_a1_tr")}`)
    const download = await requestBytes(issued.url)
    expect(download.status).toBe(200)
    expect(download.headers["content-type"]).toBe("audio/wav")
    expect(download.body.equals(bytes)).toBe(true)
    const ranged = await requestBytes(issued.url, { headers: { range: "bytes=0-9" } })
    expect(ranged.status).toBe(206)
    expect(ranged.body.equals(bytes.subarray(0, 10))).toBe(true)
  })

  it("expires_at equals the URL's real expiry (X-Amz-Date + X-Amz-Expires); X-Amz-Expires is AUDIO_URL_TTL_SECONDS", async () => {
    const before = Math.floor(Date.now() / 1000) * 1000
    const issued = await issue()
    const expiry = presignedExpiry(issued.url)
    expect(expiry.expiresIn).toBe(TTL_SECONDS)
    expect(issued.expiresAt).toBe(expiry.expiresAt)
    expect(issued.expiresAtText).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.000Z$/)
    expect(expiry.signedAt).toBeGreaterThanOrEqual(before)
    expect(expiry.signedAt).toBeLessThanOrEqual(Date.now())
  })

  it("a URL whose expires_at has passed is refused by the store (issued with the server's clock 95 s back), no byte served", async () => {
    server.clock.freezeAt(Date.now() - (TTL_SECONDS + 5) * 1000)
    const issued = await issue().finally(() => server.clock.resume())
    expect(issued.expiresAt).toBeLessThan(Date.now())
    expect(issued.expiresAt).toBe(presignedExpiry(issued.url).expiresAt)
    const refused = await requestBytes(issued.url)
    expect(refused.status).toBe(403)
    expect(refused.body.includes(bytes.subarray(0, 16))).toBe(false)
    expect(refused.body.toString("utf8")).toContain("Request has expired")
  })

  it("the service serves no /media/{token} of its own with S3 storage: 404 route_not_found", async () => {
    const response = await requestBytes(`${server.baseUrl}/media/abc.1900000000.${"A".repeat(43)}`)
    expect(response.status).toBe(404)
    expect((response.json as { reason_code: string }).reason_code).toBe("route_not_found")
  })

  it("a recording marked missing in the fixture: 404 audio_not_found (nothing was uploaded for it)", async () => {
    const response = await audioRoute("doc_a2_call", "enc_a2")
    expect(response.status).toBe(404)
    expect((response.json as { reason_code: string }).reason_code).toBe("audio_not_found")
  })

  it("no leak: no log line and no stored row holds a presigned URL, its signature or its query", async () => {
    const urls = [(await issue()).url, (await issue()).url]
    const secrets = urls.flatMap((url) => {
      const query = new URL(url).searchParams
      return [url, query.get("X-Amz-Signature") ?? url, "X-Amz-Signature", "X-Amz-Credential"]
    })
    const lines = server.logLines()
    const rows = await server.allRows()
    expect(rows.some((row) => row.startsWith("disclosure_events:"))).toBe(true)
    for (const secret of secrets) {
      for (const line of lines) expect(line.includes(secret), `log line holds ${secret}`).toBe(false)
      for (const row of rows) expect(row.includes(secret), `stored row holds ${secret}`).toBe(false)
    }
  })

  it("a deleted object gives 404 audio_not_found, and records no disclosure", async () => {
    const storageKey = await storageKeyOf("doc_a1_tr")
    const url = (await issue()).url
    await s3.deleteObject(storageKey)
    const before = await disclosureCount()
    const response = await audioRoute()
    expect(response.status).toBe(404)
    expect((response.json as { reason_code: string }).reason_code).toBe("audio_not_found")
    expect(await disclosureCount()).toBe(before)
    expect((await requestBytes(url)).status).toBe(404)
  })

  it("a stopped store gives 503 audio_storage_unavailable within a few seconds, records no disclosure, logs no URL", async () => {
    await s3.stop()
    const before = await disclosureCount()
    const startedAt = Date.now()
    const response = await audioRoute()
    expect(Date.now() - startedAt).toBeLessThan(6_000)
    expect(response.status).toBe(503)
    expect(response.json).toEqual({
      error: "public_api_unavailable",
      reason_code: "audio_storage_unavailable",
      message: "Audio storage is temporarily unavailable.",
      field: null
    })
    expect(await disclosureCount()).toBe(before)
    const last = JSON.parse(server.logLines().at(-1) ?? "{}") as { reason_code: string; detail: string; status: number }
    expect(last).toMatchObject({ status: 503, reason_code: "audio_storage_unavailable" })
    expect(last.detail).not.toContain(s3.endpoint)
  }, 15_000)
})
