import { readFileSync } from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type RunningS3rver, startS3rver } from "../../storage-adapter/test/support/s3rver.js"
import {
  createFreshDatabase,
  type FreshDatabase,
  loadFixtureWithCli,
  runServiceToExit,
  sandboxFixtureFile,
  type ServiceProcess,
  startServiceProcess
} from "../scripts/service-process.js"
import { send } from "./contract/http.js"

/**
 * The service as real processes (`pnpm start`'s main module): it refuses to start in
 * production without a proper digest key, and two replicas on one PostgreSQL serve the same
 * data and record the same disclosures (stateless replicas, docs/operations.md "Scaling out").
 */
const databaseUrl = process.env["DATABASE_URL"]?.trim()
const DIGEST_KEY = "replicas-digest-key-0123456789abcdef0123456789"

interface SandboxDocument {
  readonly document_id: string
  readonly recording?: { readonly data_base64?: string }
}

/** A recording's bytes as the sandbox data holds them. */
const sandboxRecording = (documentId: string): Buffer => {
  const fixture = JSON.parse(readFileSync(sandboxFixtureFile, "utf8")) as {
    encounters: ReadonlyArray<{ documents?: ReadonlyArray<SandboxDocument> }>
  }
  const document = fixture.encounters.flatMap((encounter) => encounter.documents ?? []).find((candidate) => candidate.document_id === documentId)
  const data = document?.recording?.data_base64
  if (data === undefined) throw new Error(`the sandbox data has no recording of ${documentId}`)
  return Buffer.from(data, "base64")
}

describe("start-up refusals in production (child process)", () => {
  it("PUBLIC_API_ENVIRONMENT=production without API_KEY_DIGEST_KEY: non-zero exit, a message naming the variable", async () => {
    const exited = await runServiceToExit({ PUBLIC_API_ENVIRONMENT: "production" })
    expect(exited.code).not.toBe(0)
    expect(exited.stderr).toContain("The service cannot start: invalid configuration: ")
    expect(exited.stderr).toContain("API_KEY_DIGEST_KEY is required in production")
    expect(exited.stderr).not.toContain("listening on")
  }, 60_000)

  it("production with the sandbox digest key, or one shorter than 32 characters: refused the same way", async () => {
    const [sandboxKey, shortKey] = await Promise.all([
      runServiceToExit({ PUBLIC_API_ENVIRONMENT: "production", API_KEY_DIGEST_KEY: "sandbox-digest-key-not-for-production" }),
      runServiceToExit({ PUBLIC_API_ENVIRONMENT: "production", API_KEY_DIGEST_KEY: "too-short" })
    ])
    expect(sandboxKey.code).not.toBe(0)
    expect(sandboxKey.stderr).toContain("API_KEY_DIGEST_KEY must not be the sandbox key in production")
    expect(shortKey.code).not.toBe(0)
    expect(shortKey.stderr).toContain("at least 32 characters")
  }, 60_000)
})

describe.skipIf(databaseUrl === undefined || databaseUrl === "")("two service processes on one PostgreSQL (DATABASE_URL)", () => {
  let database: FreshDatabase
  const replicas: Array<ServiceProcess> = []

  beforeAll(async () => {
    database = await createFreshDatabase(databaseUrl ?? "")
    const env = { DATABASE_URL: database.url, API_KEY_DIGEST_KEY: DIGEST_KEY, MEDIA_SIGNING_KEY: "replicas-media-signing-key-0123456789" }
    await loadFixtureWithCli(env)
    replicas.push(...(await Promise.all([startServiceProcess(env), startServiceProcess(env)])))
  }, 90_000)

  afterAll(async () => {
    await Promise.all(replicas.map((replica) => replica.stop()))
    await database?.drop()
  })

  it("requests alternated between the two answer identically, and each read's disclosures are recorded once, whichever replica served it", async () => {
    const [first, second] = replicas
    if (first === undefined || second === undefined) throw new Error("two replicas expected")
    const auth = { authorization: "Bearer ce_test_Riverside0full0access0key0000116X8fx" }
    const targets = [
      "/external/v1/encounters?limit=10&sort_order=asc",
      "/external/v1/encounters?limit=5&offset=20",
      "/external/v1/encounters/enc_rv_0001",
      "/external/v1/encounters/enc_rv_0001/documents/doc_rv_0001_transcript",
      "/external/v1/encounters/enc_rv_0001/documents/doc_rv_0001_transcript/transcript",
      "/external/v1/encounters/enc_rv_0034",
      "/external/v1/encounters/enc_hb_0001",
      "/external/v1/encounters/nope",
      "/readyz"
    ]
    let requestNumber = 0
    const sameTarget: Array<ReadonlyArray<string>> = []
    for (const target of targets) {
      const answers = []
      for (const replica of [first, second, first, second]) {
        const requestId = `req_replica_${++requestNumber}`
        const response = await send(replica.baseUrl, target, { headers: { ...auth, "x-request-id": requestId } })
        answers.push({ status: response.status, body: response.body, requestId })
      }
      const [reference] = answers
      for (const answer of answers) expect({ status: answer.status, body: answer.body }, target).toEqual({ status: reference?.status, body: reference?.body })
      sameTarget.push(answers.map((answer) => answer.requestId))
    }

    const rows = await database.query((sql) => sql<Array<{ request_id: string; count: number }>>`
      SELECT caller_request_id AS request_id, count(*)::int AS count FROM disclosure_events WHERE caller_request_id LIKE 'req_replica_%' GROUP BY caller_request_id`)
    const recorded = new Map(rows.map((row) => [row.request_id, row.count]))
    sameTarget.forEach((requestIds, index) => {
      const counts = requestIds.map((requestId) => recorded.get(requestId) ?? 0)
      expect(new Set(counts).size, `${targets[index]}: ${JSON.stringify(counts)}`).toBe(1)
    })
    // The list of 10, the list of 5, the encounter, the document, the transcript: recorded by both replicas alike.
    expect(sameTarget.slice(0, 5).map((requestIds) => recorded.get(requestIds[0] ?? "") ?? 0)).toEqual([10, 5, 1, 1, 1])
    expect(sameTarget.slice(5).map((requestIds) => recorded.get(requestIds[1] ?? "") ?? 0)).toEqual([0, 0, 0, 0])
  }, 60_000)

  it("an audio URL issued by one replica is served by the other (same MEDIA_SIGNING_KEY)", async () => {
    const [first, second] = replicas
    if (first === undefined || second === undefined) throw new Error("two replicas expected")
    const list = await send(first.baseUrl, "/external/v1/encounters?limit=100&sort_order=asc", {
      headers: { authorization: "Bearer ce_test_Riverside0full0access0key0000116X8fx" }
    })
    const items = (list.body as { items: ReadonlyArray<{ encounter_id: string; documents: ReadonlyArray<{ document_id: string; schema_type: string }> }> }).items
    let served = false
    for (const item of items) {
      for (const document of item.documents.filter((candidate) => candidate.schema_type === "ambient_transcript")) {
        const issued = await send(first.baseUrl, `/external/v1/encounters/${item.encounter_id}/documents/${document.document_id}/audio`, {
          headers: { authorization: "Bearer ce_test_Riverside0full0access0key0000116X8fx" }
        })
        if (issued.status !== 200) continue
        const url = new URL((issued.body as { audio_url: string }).audio_url)
        const onOther = await send(second.baseUrl, `${url.pathname}${url.search}`)
        expect(onOther.status).toBe(200)
        served = true
        break
      }
      if (served) break
    }
    expect(served, "the sandbox data has a recording to try").toBe(true)
  }, 60_000)
})

describe.skipIf(databaseUrl === undefined || databaseUrl === "")("the service process with S3 audio storage (DATABASE_URL, s3rver)", () => {
  let database: FreshDatabase
  let s3: RunningS3rver
  let service: ServiceProcess

  beforeAll(async () => {
    s3 = await startS3rver()
    database = await createFreshDatabase(databaseUrl ?? "")
    const env = {
      DATABASE_URL: database.url,
      API_KEY_DIGEST_KEY: DIGEST_KEY,
      MEDIA_SIGNING_KEY: "replicas-media-signing-key-0123456789",
      ...Object.fromEntries(s3.environment)
    }
    await loadFixtureWithCli(env)
    service = await startServiceProcess(env)
  }, 90_000)

  afterAll(async () => {
    await service?.stop()
    await database?.drop()
    await s3?.stop()
  })

  // The AWS SDK is imported on demand, from outside the bundle: from a chunk of it, `S3Client` was undefined.
  it("issues a presigned URL that downloads the recording's exact bytes from the store", async () => {
    const issued = await send(service.baseUrl, "/external/v1/encounters/enc_rv_0002/documents/doc_rv_0002_transcript/audio", {
      headers: { authorization: "Bearer ce_test_Riverside0full0access0key0000116X8fx" }
    })
    expect(issued.status).toBe(200)
    const url = (issued.body as { audio_url: string }).audio_url
    expect(url.startsWith(`${s3.endpoint}/${s3.bucket}/`)).toBe(true)
    const download = await fetch(url)
    expect(download.status).toBe(200)
    expect(Buffer.from(await download.arrayBuffer())).toEqual(sandboxRecording("doc_rv_0002_transcript"))
  }, 60_000)
})
