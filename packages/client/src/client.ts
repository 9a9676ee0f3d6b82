import { ApiConnectionError, ApiError, errorFromResponse } from "./errors.js"
import { encounterPages, syncEncounters, type SyncItem, type SyncOptions } from "./sync.js"
import type {
  DocumentAudioResponse,
  DocumentDetailResponse,
  DocumentTranscriptResponse,
  EncounterDetailResponse,
  EncounterListResponse,
  ListEncountersQuery
} from "./types.js"

/** The `fetch` the client calls: the global one by default. */
export type FetchFunction = (input: string, init: RequestInit) => Promise<Response>

export interface ClinicalApiClientOptions {
  /** The service's address, e.g. `https://api.example.com` (a path prefix, if any, is kept). */
  readonly baseUrl: string | URL
  /** The organization's API key (`ce_live_...` or `ce_test_...`), sent as a bearer token. */
  readonly apiKey: string
  /** Another `fetch` (a proxy agent, a test double). */
  readonly fetch?: FetchFunction
}

export interface RequestOptions {
  readonly signal?: AbortSignal
  /**
   * Sent as `X-Request-Id`; the service uses it when it is 1 to 128 characters of
   * `[A-Za-z0-9._:-]` and makes its own otherwise. Either way it is on the error.
   */
  readonly requestId?: string
}

const API_PREFIX = "/external/v1"

const signalOnly = (signal: AbortSignal | undefined): RequestOptions => (signal === undefined ? {} : { signal })

/** One path segment: percent-encoded, so an id holding `/`, `?`, `%` or spaces stays one opaque id. */
const segment = (name: string, id: string): string => {
  if (typeof id !== "string" || id.length === 0) throw new TypeError(`${name} must be a non-empty string`)
  // URL parsing resolves "." and ".." (even percent-encoded) as dot segments, so no request can carry them.
  if (id === "." || id === "..") throw new TypeError(`${name} "${id}" cannot be sent as a URL path segment`)
  return encodeURIComponent(id)
}

const timestampParameter = (name: string, value: Date | string): string => {
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new TypeError(`${name} is an invalid Date`)
    return value.toISOString()
  }
  return value
}

/** The list query as the service reads it; `URLSearchParams` writes a `+` offset as `%2B`. */
const listQueryString = (query: ListEncountersQuery): string => {
  const parameters = new URLSearchParams()
  if (query.limit !== undefined) parameters.set("limit", String(query.limit))
  if (query.offset !== undefined) parameters.set("offset", String(query.offset))
  if (query.sort_order !== undefined) parameters.set("sort_order", query.sort_order)
  if (query.start_at !== undefined) parameters.set("start_at", timestampParameter("start_at", query.start_at))
  if (query.end_at !== undefined) parameters.set("end_at", timestampParameter("end_at", query.end_at))
  const text = parameters.toString()
  return text === "" ? "" : `?${text}`
}

/**
 * The Clinical Encounter Public API over `fetch`. Every method resolves with the operation's
 * 200 body, exactly as the API definition describes it, or rejects with an `ApiError` subclass
 * (by status) carrying the contract's `reason_code`, or an `ApiConnectionError`.
 */
export class ClinicalApiClient {
  readonly #base: string
  readonly #authorization: string
  readonly #fetch: FetchFunction

  constructor(options: ClinicalApiClientOptions) {
    const base = new URL(options.baseUrl)
    if (base.protocol !== "http:" && base.protocol !== "https:") {
      throw new TypeError(`baseUrl must be an http or https URL, got ${base.protocol}`)
    }
    if (typeof options.apiKey !== "string" || options.apiKey.trim() === "") {
      throw new TypeError("apiKey must be a non-empty string")
    }
    this.#base = `${base.origin}${base.pathname.replace(/\/+$/, "")}`
    this.#authorization = `Bearer ${options.apiKey}`
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init))
  }

  /** `GET /external/v1/encounters`: one page, `total` counted when the query ran. */
  async listEncounters(query: ListEncountersQuery = {}, options: RequestOptions = {}): Promise<EncounterListResponse> {
    return this.#get(`${API_PREFIX}/encounters${listQueryString(query)}`, options)
  }

  /** `GET /external/v1/encounters/{encounter_id}` */
  async getEncounter(encounterId: string, options: RequestOptions = {}): Promise<EncounterDetailResponse> {
    return this.#get(`${API_PREFIX}/encounters/${segment("encounterId", encounterId)}`, options)
  }

  /** `GET /external/v1/encounters/{encounter_id}/documents/{document_id}` */
  async getDocument(encounterId: string, documentId: string, options: RequestOptions = {}): Promise<DocumentDetailResponse> {
    return this.#get(this.#documentPath(encounterId, documentId), options)
  }

  /** `GET .../documents/{document_id}/transcript`: the finalized transcript, turns in order. */
  async getTranscript(
    encounterId: string,
    documentId: string,
    options: RequestOptions = {}
  ): Promise<DocumentTranscriptResponse> {
    return this.#get(`${this.#documentPath(encounterId, documentId)}/transcript`, options)
  }

  /**
   * `GET .../documents/{document_id}/audio`: a signed URL of the recording, valid until
   * `expires_at`. Use it at once; do not store or log it.
   */
  async getAudioUrl(encounterId: string, documentId: string, options: RequestOptions = {}): Promise<DocumentAudioResponse> {
    return this.#get(`${this.#documentPath(encounterId, documentId)}/audio`, options)
  }

  /**
   * The list's pages from `query.offset` (default 0) on, until a page is not full. Offset
   * paging has no snapshot: rows created meanwhile shift later pages. It stops with a
   * `RangeError` where the next page would need an offset past the contract's 10,000; use
   * `syncEncounters` to read everything.
   */
  encounterPages(
    query: ListEncountersQuery = {},
    options: { readonly signal?: AbortSignal } = {}
  ): AsyncGenerator<EncounterListResponse> {
    return encounterPages((pageQuery) => this.listEncounters(pageQuery, signalOnly(options.signal)), query)
  }

  /** Every encounter from `since` on, oldest first, each once, resumable: see `SyncOptions`. */
  syncEncounters(options: SyncOptions): AsyncGenerator<SyncItem> {
    return syncEncounters((pageQuery) => this.listEncounters(pageQuery, signalOnly(options.signal)), options)
  }

  #documentPath(encounterId: string, documentId: string): string {
    return `${API_PREFIX}/encounters/${segment("encounterId", encounterId)}/documents/${
      segment("documentId", documentId)
    }`
  }

  async #get<Body>(pathAndQuery: string, options: RequestOptions): Promise<Body> {
    const headers: Record<string, string> = { accept: "application/json", authorization: this.#authorization }
    if (options.requestId !== undefined) headers["x-request-id"] = options.requestId
    const init: RequestInit = { method: "GET", headers, ...(options.signal === undefined ? {} : { signal: options.signal }) }
    let response: Response
    let text: string
    try {
      response = await this.#fetch(`${this.#base}${pathAndQuery}`, init)
      // Read to the end whatever the status: an unread body keeps the connection busy.
      text = await response.text()
    } catch (cause) {
      const reason = cause instanceof Error ? cause.message : String(cause)
      throw new ApiConnectionError(`GET ${pathAndQuery.split("?")[0]} got no answer: ${reason}`, { cause })
    }
    if (!response.ok) throw errorFromResponse(response.status, response.statusText, response.headers, text)
    try {
      return JSON.parse(text) as Body
    } catch {
      throw new ApiError({
        status: response.status,
        error: null,
        reasonCode: null,
        field: null,
        requestId: response.headers.get("x-request-id"),
        message: `HTTP ${response.status} with a body that is not JSON (${response.headers.get("content-type") ?? "no content type"})`
      })
    }
  }
}
