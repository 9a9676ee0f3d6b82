import { describe, expect, it } from "vitest"
import {
  ApiConnectionError,
  ApiError,
  AuthenticationError,
  ClinicalApiClient,
  type FetchFunction,
  InvalidRequestError,
  NotFoundError,
  PermissionError,
  ServiceUnavailableError
} from "../src/index.js"

interface Sent {
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
}

/** A `fetch` that records what is sent and answers with `answer`. */
const recordingFetch = (answer: (url: string) => Response = () => Response.json({ items: [], limit: 50, offset: 0, total: 0 })) => {
  const sent: Array<Sent> = []
  const fetch: FetchFunction = async (url, init) => {
    sent.push({ url, headers: { ...(init.headers as Record<string, string>) } })
    return answer(url)
  }
  return { sent, fetch }
}

const errorBody = (error: string, reasonCode: string, field: string | null = null) => ({
  error,
  reason_code: reasonCode,
  message: `Because ${reasonCode}.`,
  field
})

const rejection = async (promise: Promise<unknown>): Promise<unknown> => {
  try {
    await promise
  } catch (error) {
    return error
  }
  throw new Error("expected a rejection")
}

describe("ClinicalApiClient: requests", () => {
  it("sends the key as a bearer token to the five routes, each path id one percent-encoded segment", async () => {
    const { sent, fetch } = recordingFetch(() => Response.json({}))
    const client = new ClinicalApiClient({ baseUrl: "https://api.example.com/", apiKey: "ce_test_key", fetch })
    await client.getEncounter("enc 1/2?x#y%")
    await client.getDocument("é", "doc/1")
    await client.getTranscript("enc_1", "doc_1")
    await client.getAudioUrl("enc_1", "doc_1")
    await client.listEncounters()
    expect(sent.map((request) => request.url)).toEqual([
      "https://api.example.com/external/v1/encounters/enc%201%2F2%3Fx%23y%25",
      "https://api.example.com/external/v1/encounters/%C3%A9/documents/doc%2F1",
      "https://api.example.com/external/v1/encounters/enc_1/documents/doc_1/transcript",
      "https://api.example.com/external/v1/encounters/enc_1/documents/doc_1/audio",
      "https://api.example.com/external/v1/encounters"
    ])
    for (const request of sent) {
      expect(request.headers["authorization"]).toBe("Bearer ce_test_key")
      expect(request.headers["accept"]).toBe("application/json")
    }
  })

  it("keeps a base URL's path prefix", async () => {
    const { sent, fetch } = recordingFetch()
    await new ClinicalApiClient({ baseUrl: new URL("http://127.0.0.1:8080/clinical//"), apiKey: "k", fetch }).listEncounters()
    expect(sent[0]?.url).toBe("http://127.0.0.1:8080/clinical/external/v1/encounters")
  })

  it("encodes the list query as the service reads it: a + offset as %2B, a Date as UTC", async () => {
    const { sent, fetch } = recordingFetch()
    const client = new ClinicalApiClient({ baseUrl: "http://h", apiKey: "k", fetch })
    await client.listEncounters({
      limit: 10,
      offset: 20,
      sort_order: "asc",
      start_at: "2026-05-01T12:00:00+02:00",
      end_at: new Date(Date.UTC(2026, 4, 2))
    })
    expect(sent[0]?.url).toBe(
      "http://h/external/v1/encounters?limit=10&offset=20&sort_order=asc&start_at=2026-05-01T12%3A00%3A00%2B02%3A00&end_at=2026-05-02T00%3A00%3A00.000Z"
    )
  })

  it("sends a request id when asked", async () => {
    const { sent, fetch } = recordingFetch(() => Response.json({}))
    await new ClinicalApiClient({ baseUrl: "http://h", apiKey: "k", fetch }).getEncounter("e", { requestId: "sync-42" })
    expect(sent[0]?.headers["x-request-id"]).toBe("sync-42")
  })

  it("refuses ids no URL path can carry, and bad options, before sending", async () => {
    const { sent, fetch } = recordingFetch()
    const client = new ClinicalApiClient({ baseUrl: "http://h", apiKey: "k", fetch })
    for (const id of ["", ".", ".."]) {
      expect(await rejection(client.getEncounter(id)), id).toBeInstanceOf(TypeError)
      expect(await rejection(client.getDocument("e", id)), id).toBeInstanceOf(TypeError)
    }
    expect(await rejection(client.listEncounters({ start_at: new Date(Number.NaN) }))).toBeInstanceOf(TypeError)
    expect(sent).toEqual([])
    expect(() => new ClinicalApiClient({ baseUrl: "ftp://h", apiKey: "k" })).toThrow(TypeError)
    expect(() => new ClinicalApiClient({ baseUrl: "not a url", apiKey: "k" })).toThrow(TypeError)
    expect(() => new ClinicalApiClient({ baseUrl: "http://h", apiKey: " " })).toThrow(TypeError)
  })
})

describe("ClinicalApiClient: errors", () => {
  const failWith = (status: number, body: string, headers: Record<string, string> = {}) => {
    const { fetch } = recordingFetch(() => new Response(body, { status, headers }))
    return rejection(new ClinicalApiClient({ baseUrl: "http://h", apiKey: "k", fetch }).listEncounters())
  }

  it.each([
    [400, InvalidRequestError, "public_api_bad_request", "unsupported_filter", "owners"],
    [401, AuthenticationError, "api_key_unauthorized", "invalid_key", null],
    [403, PermissionError, "api_key_forbidden", "missing_scope", null],
    [404, NotFoundError, "public_api_not_found", "encounter_not_found", null],
    [405, ApiError, "public_api_method_not_allowed", "method_not_allowed", null],
    [422, InvalidRequestError, "api_key_validation_failed", "invalid_limit", "limit"],
    [503, ServiceUnavailableError, "public_api_unavailable", "digest_key_unavailable", null]
  ] as const)("%i: %o from the contract's body", async (status, ErrorClass, category, reasonCode, field) => {
    const error = await failWith(status, JSON.stringify(errorBody(category, reasonCode, field)), {
      "content-type": "application/json",
      "x-request-id": "req_1"
    })
    expect(error).toBeInstanceOf(ErrorClass)
    expect(error).toBeInstanceOf(ApiError)
    expect(error).toMatchObject({
      name: ErrorClass.name,
      status,
      error: category,
      reasonCode,
      field,
      requestId: "req_1",
      message: `Because ${reasonCode}.`
    })
  })

  it("an answer without the contract's body still rejects with a clear ApiError of its status class", async () => {
    const proxy = await failWith(502, "<html><body>Bad gateway</body></html>", { "content-type": "text/html" })
    expect(proxy).toBeInstanceOf(ApiError)
    expect(proxy).toMatchObject({ status: 502, error: null, reasonCode: null, field: null, requestId: null })
    expect((proxy as ApiError).message).toBe("HTTP 502 without the API's error body (text/html: <html><body>Bad gateway</body></html>)")

    const unavailable = await failWith(503, "")
    expect(unavailable).toBeInstanceOf(ServiceUnavailableError)
    expect((unavailable as ApiError).message).toContain("an empty body")

    const otherJson = await failWith(401, JSON.stringify({ error: "unauthorized" }), { "content-type": "application/json" })
    expect(otherJson).toBeInstanceOf(AuthenticationError)
    expect((otherJson as ApiError).reasonCode).toBeNull()
  })

  it("a 200 that is not JSON rejects with an ApiError", async () => {
    const { fetch } = recordingFetch(() => new Response("<html>", { status: 200, headers: { "x-request-id": "r" } }))
    const error = await rejection(new ClinicalApiClient({ baseUrl: "http://h", apiKey: "k", fetch }).getEncounter("e"))
    expect(error).toBeInstanceOf(ApiError)
    expect(error).toMatchObject({ status: 200, reasonCode: null, requestId: "r" })
  })

  it("no answer at all is an ApiConnectionError with the cause", async () => {
    const cause = new TypeError("fetch failed")
    const client = new ClinicalApiClient({ baseUrl: "http://h", apiKey: "k", fetch: () => Promise.reject(cause) })
    const error = await rejection(client.getEncounter("secret-id"))
    expect(error).toBeInstanceOf(ApiConnectionError)
    expect((error as ApiConnectionError).cause).toBe(cause)
    expect((error as Error).message).toBe("GET /external/v1/encounters/secret-id got no answer: fetch failed")
  })

  it("an aborted request is an ApiConnectionError", async () => {
    const client = new ClinicalApiClient({ baseUrl: "http://127.0.0.1:9", apiKey: "k" })
    const error = await rejection(client.listEncounters({}, { signal: AbortSignal.abort() }))
    expect(error).toBeInstanceOf(ApiConnectionError)
  })
})

describe("ClinicalApiClient: encounterPages", () => {
  const pagedFetch = (total: number) =>
    recordingFetch((url) => {
      const query = new URL(url).searchParams
      const limit = Number(query.get("limit") ?? 50)
      const offset = Number(query.get("offset") ?? 0)
      const count = Math.max(0, Math.min(limit, total - offset))
      const items = Array.from({ length: count }, (_, index) => ({ encounter_id: `enc_${offset + index}` }))
      return Response.json({ items, limit, offset, total })
    })

  it("reads pages until one is not full, from the given offset", async () => {
    const { sent, fetch } = pagedFetch(250)
    const client = new ClinicalApiClient({ baseUrl: "http://h", apiKey: "k", fetch })
    const sizes: Array<number> = []
    for await (const page of client.encounterPages({ limit: 100, offset: 20, sort_order: "asc" })) sizes.push(page.items.length)
    expect(sizes).toEqual([100, 100, 30])
    expect(sent.map((request) => new URL(request.url).searchParams.get("offset"))).toEqual(["20", "120", "220"])
  })

  it("does not ask for a page past total", async () => {
    const { sent, fetch } = pagedFetch(200)
    const client = new ClinicalApiClient({ baseUrl: "http://h", apiKey: "k", fetch })
    for await (const _ of client.encounterPages({ limit: 100 })) void _
    expect(sent).toHaveLength(2)
  })

  it("stops with a RangeError where the next offset would pass 10,000", async () => {
    const { sent, fetch } = pagedFetch(20_000)
    const client = new ClinicalApiClient({ baseUrl: "http://h", apiKey: "k", fetch })
    let read = 0
    const error = await rejection((async () => {
      for await (const page of client.encounterPages({ limit: 100 })) read += page.items.length
    })())
    expect(error).toBeInstanceOf(RangeError)
    expect((error as Error).message).toContain("syncEncounters")
    expect(read).toBe(10_100)
    expect(sent).toHaveLength(101)
  })
})
