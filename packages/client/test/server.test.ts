import { readFileSync } from "node:fs"
import { crc32 } from "node:zlib"
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest"
import { generateTypes } from "../scripts/openapi-types.js"
import {
  ApiError,
  AuthenticationError,
  ClinicalApiClient,
  InvalidRequestError,
  NotFoundError,
  PermissionError,
  ServiceUnavailableError,
  type SyncCheckpoint,
  type SyncItem
} from "../src/index.js"
import { exampleKeys, GENERATED_ENCOUNTERS, startClientTestService, type ClientTestService } from "./support/service.js"

/**
 * The client against the real service on PostgreSQL: the example fixture (for every error
 * class) and one generated organization of 25,000 encounters (for the sync).
 */
let service: ClientTestService

beforeAll(async () => {
  service = await startClientTestService()
}, 300_000)

afterAll(async () => {
  await service?.close()
})

const client = (apiKey: string) => new ClinicalApiClient({ baseUrl: service.baseUrl, apiKey })

/** The organization's listable encounters in the service's order, read from the database. */
const storedOrder = async (): Promise<ReadonlyArray<string>> => {
  const rows = await service.query((sql) =>
    sql<Array<{ encounter_id: string }>>`
      SELECT encounter_id FROM encounters
      WHERE organization_id = ${service.generated.organizationId} AND data_class = 'clinical'
      ORDER BY created_at, encounter_id COLLATE "C"`
  )
  return rows.map((row) => row.encounter_id)
}

const syncIds = async (items: AsyncIterable<SyncItem>, onItem: (item: SyncItem, index: number) => Promise<void> | void = () => {}) => {
  const ids: Array<string> = []
  for await (const item of items) {
    ids.push(item.encounter.encounter_id)
    await onItem(item, ids.length)
  }
  return ids
}

const SINCE = "2000-01-01T00:00:00Z"

describe("syncEncounters against the service", () => {
  it("yields the 25,000 encounters of the organization, each once, in the service's order", async () => {
    const expected = await storedOrder()
    expect(expected).toHaveLength(GENERATED_ENCOUNTERS)
    const ids = await syncIds(client(service.generated.token).syncEncounters({ since: SINCE }))
    expect(ids).toHaveLength(GENERATED_ENCOUNTERS)
    expect(new Set(ids).size).toBe(GENERATED_ENCOUNTERS)
    expect(ids).toEqual(expected)
  }, 300_000)

  it("resumes after being stopped halfway, from the checkpoint as a job stores it (JSON)", async () => {
    const expected = await storedOrder()
    const first: Array<string> = []
    let stored = ""
    for await (const { encounter, checkpoint } of client(service.generated.token).syncEncounters({ since: SINCE })) {
      first.push(encounter.encounter_id)
      stored = JSON.stringify(checkpoint)
      if (first.length === expected.length / 2) break
    }
    const checkpoint = JSON.parse(stored) as SyncCheckpoint
    // A new process: a new client, only the checkpoint carried over.
    const rest = await syncIds(client(service.generated.token).syncEncounters({ since: SINCE, checkpoint }))
    expect(first).toHaveLength(expected.length / 2)
    expect([...first, ...rest]).toEqual(expected)
  }, 300_000)

  it("yields each once and in order while encounters are created in the window it reads", async () => {
    const before = new Set(await storedOrder())
    const ahead = new Set<string>()
    const behind = new Set<string>()
    let created = 0
    const insert = async (encounterId: string, createdAt: string) => {
      await service.query((sql) =>
        sql`
          INSERT INTO encounters (encounter_id, organization_id, data_class, created_at, updated_at)
          VALUES (${encounterId}, ${service.generated.organizationId}, 'clinical', ${createdAt}::timestamptz, ${createdAt}::timestamptz)`
      )
      created += 1
    }
    onTestFinished(async () => {
      await service.query((sql) => sql`DELETE FROM encounters WHERE encounter_id = ANY(${[...ahead, ...behind]})`)
    })
    const ids = await syncIds(client(service.generated.token).syncEncounters({ since: SINCE }), async (item, index) => {
      if (index % 500 !== 0) return
      const at = Date.parse(item.encounter.created_at)
      // Ahead of every page read so far (100 generated encounters span about three days; a
      // month later is past them), with microseconds, which the API shows cut to milliseconds.
      const later = new Date(at + 30 * 86_400_000 + (index % 997))
      const laterText = `${later.toISOString().slice(0, 23)}${String(index % 1000).padStart(3, "0")}Z`
      await insert(`enc_sdk_ahead_${index}`, laterText)
      ahead.add(`enc_sdk_ahead_${index}`)
      // At the instant being read, with ids sorting before and after it, and a year behind it:
      // rows the settle time rules out, which must not cause a repeat or a skip.
      for (const id of [`0_enc_sdk_same_${index}`, `zz_enc_sdk_same_${index}`]) {
        await insert(id, item.encounter.created_at)
        behind.add(id)
      }
      await insert(`enc_sdk_behind_${index}`, new Date(at - 365 * 86_400_000).toISOString())
      behind.add(`enc_sdk_behind_${index}`)
    })
    expect(created).toBeGreaterThan(150)
    expect(new Set(ids).size).toBe(ids.length)
    // Every encounter there was at the start, and every one created ahead of the sync, came.
    const read = new Set(ids)
    expect([...before].filter((id) => !read.has(id))).toEqual([])
    expect([...ahead].filter((id) => !read.has(id))).toEqual([])
    expect(ids.filter((id) => !before.has(id) && !ahead.has(id) && !behind.has(id))).toEqual([])
    // In the service's order (the database's now, every insert included), apart from rows
    // created at an instant already read, which the sync does not promise to place.
    const order = await storedOrder()
    const rank = new Map(order.map((id, index) => [id, index]))
    const placed = ids.filter((id) => !behind.has(id))
    const outOfOrder = placed.filter((id, index) => index > 0 && (rank.get(id) ?? -1) <= (rank.get(placed[index - 1] ?? "") ?? -1))
    expect(outOfOrder).toEqual([])
  }, 300_000)
})

describe("encounterPages against the service", () => {
  it("pages up to the offset cap, then says to use syncEncounters", async () => {
    let read = 0
    const pages = client(service.generated.token).encounterPages({ limit: 100, sort_order: "asc" })
    await expect((async () => {
      for await (const page of pages) read += page.items.length
    })()).rejects.toThrow(/syncEncounters/)
    expect(read).toBe(10_100)
  }, 300_000)
})

/** A key of the documented form (30 base62 characters, then their CRC-32 in base62) that no one holds. */
const wellFormedUnknownKey = () => {
  const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
  const random = "SdkTest0unknown0key00000000000"
  let checksum = crc32(random)
  let text = ""
  for (let index = 0; index < 6; index += 1) {
    text = `${alphabet[checksum % 62]}${text}`
    checksum = Math.floor(checksum / 62)
  }
  return `ce_test_${random}${text}`
}

const failure = async (request: Promise<unknown> | (() => Promise<unknown>)): Promise<ApiError> => {
  try {
    await (typeof request === "function" ? request() : request)
  } catch (error) {
    if (error instanceof ApiError) return error
    throw error
  }
  throw new Error("expected an ApiError")
}

describe("typed errors from the service, one class per status, with the contract's reason_code", () => {
  const full = () => client(exampleKeys.riversideFull)

  it("401 AuthenticationError", async () => {
    const cases = [
      [exampleKeys.riversideRevoked, "revoked_key"],
      [exampleKeys.riversideExpired, "expired_key"],
      ["ce_test_short", "malformed_token"],
      ["ce_test_Riverside0full0access0key0000116X8fy", "malformed_token"],
      [wellFormedUnknownKey(), "invalid_key"]
    ] as const
    for (const [key, reasonCode] of cases) {
      const error = await failure(client(key).listEncounters())
      expect(error, reasonCode).toBeInstanceOf(AuthenticationError)
      expect(error).toMatchObject({ status: 401, error: "api_key_unauthorized", reasonCode, field: null })
    }
  })

  it("403 PermissionError", async () => {
    const cases = [
      [() => client(exampleKeys.riversideUser).listEncounters(), "org_scope_only_required"],
      [() => client(exampleKeys.lakesideFull).getTranscript("enc_l1", "doc_l1_note"), "route_not_allowed"],
      [() => client(exampleKeys.pendingOrganization).listEncounters(), "organization_not_allowlisted"],
      [() => client(exampleKeys.riversideNoRecordings).getAudioUrl("enc_a1", "doc_a1_tr"), "missing_scope"],
      [() => full().getEncounter("enc_l1"), "cross_organization_denied"],
      [() => full().getEncounter("enc_demo"), "demo_training_denied"]
    ] as const
    for (const [request, reasonCode] of cases) {
      const error = await failure(request)
      expect(error, reasonCode).toBeInstanceOf(PermissionError)
      expect(error).toMatchObject({ status: 403, error: "api_key_forbidden", reasonCode })
    }
  })

  it("404 NotFoundError", async () => {
    const cases = [
      [() => full().getEncounter("enc_nowhere"), "encounter_not_found"],
      [() => full().getEncounter("enc a1/..?x"), "encounter_not_found"],
      [() => full().getDocument("enc_a1", "doc_l1_note"), "document_not_found"],
      [() => full().getTranscript("enc_a2", "doc_a2_call"), "transcript_not_found"]
    ] as const
    for (const [request, reasonCode] of cases) {
      const error = await failure(request)
      expect(error, reasonCode).toBeInstanceOf(NotFoundError)
      expect(error).toMatchObject({ status: 404, error: "public_api_not_found", reasonCode })
    }
  })

  it("400 and 422 InvalidRequestError, field naming the query key", async () => {
    const cases = [
      [() => full().getDocument("enc_a1", "doc_a1_bill"), 400, "public_api_bad_request", "unsupported_document_type", null],
      [() => full().getAudioUrl("enc_a3", "doc_a3_dict"), 400, "public_api_bad_request", "audio_not_available_for_document", null],
      [() => full().listEncounters({ limit: 0 }), 422, "api_key_validation_failed", "invalid_limit", "limit"],
      [() => full().listEncounters({ offset: 10_001 }), 422, "api_key_validation_failed", "invalid_offset", "offset"],
      [() => full().listEncounters({ sort_order: "up" as "asc" }), 422, "api_key_validation_failed", "invalid_sort", "sort_order"],
      [
        () => full().listEncounters({ start_at: "2026-05-02T00:00:00+02:00", end_at: "2026-05-01T00:00:00Z" }),
        422,
        "api_key_validation_failed",
        "invalid_query",
        "start_at"
      ]
    ] as const
    for (const [request, status, category, reasonCode, field] of cases) {
      const error = await failure(request)
      expect(error, reasonCode).toBeInstanceOf(InvalidRequestError)
      expect(error).toMatchObject({ status, error: category, reasonCode, field })
    }
  })

  it("a + offset in start_at is sent so the service reads it (200, not invalid_query)", async () => {
    const page = await full().listEncounters({ start_at: "2000-01-01T00:00:00+02:00", limit: 1 })
    expect(page.limit).toBe(1)
  })

  it("carries X-Request-Id: the service's own, or the caller's", async () => {
    const generatedId = await failure(full().getEncounter("enc_nowhere"))
    expect(generatedId.requestId).toMatch(/^[A-Za-z0-9._:-]{1,128}$/)
    const callerId = await failure(full().getEncounter("enc_nowhere", { requestId: "sdk-test-42" }))
    expect(callerId.requestId).toBe("sdk-test-42")
  })

  it("503 ServiceUnavailableError when key verification is unavailable", async () => {
    const unavailable = await service.startWithoutDigestKey()
    try {
      const error = await failure(
        new ClinicalApiClient({ baseUrl: unavailable.baseUrl, apiKey: exampleKeys.riversideFull }).listEncounters()
      )
      expect(error).toBeInstanceOf(ServiceUnavailableError)
      expect(error).toMatchObject({ status: 503, error: "public_api_unavailable", reasonCode: "digest_key_unavailable" })
    } finally {
      await unavailable.close()
    }
  }, 120_000)
})

describe("successful reads", () => {
  it("the five operations answer their contract shapes", async () => {
    const api = client(exampleKeys.riversideFull)
    const { encounter } = await api.getEncounter("enc_a1")
    expect(encounter.encounter_id).toBe("enc_a1")
    expect(encounter.documents?.map((document) => document.document_id)).toContain("doc_a1_tr")
    const { document } = await api.getDocument("enc_a1", "doc_a1_note")
    expect(document.schema_type).toBe("document")
    if (document.schema_type === "document") expect(document.content.format).toBe("markdown")
    const transcript = await api.getTranscript("enc_a1", "doc_a1_tr")
    expect(transcript.transcript.turns.length).toBeGreaterThan(0)
    const audio = await api.getAudioUrl("enc_a1", "doc_a1_tr")
    expect(Date.parse(audio.expires_at)).toBeGreaterThan(Date.now())
    const page = await api.listEncounters({ limit: 2, sort_order: "asc" })
    expect(page).toMatchObject({ limit: 2, offset: 0 })
  })
})

describe("generated types", () => {
  it("are what the served /openapi.json generates", async () => {
    const response = await fetch(`${service.baseUrl}/openapi.json`)
    const committed = readFileSync(new URL("../src/generated/openapi.ts", import.meta.url), "utf8")
    expect(await generateTypes(await response.json()), "run: pnpm --filter @clinical-api/client generate").toBe(committed)
  })
})
