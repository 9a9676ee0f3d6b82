import { categoryOf, type OperationId, operationReasonCodes, type ReasonCode, statusOf } from "@clinical-api/domain"
import { Effect, Result } from "effect"
import { FetchHttpClient } from "effect/http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makePublicApiClient, type PublicApiClient } from "../../src/index.js"
import {
  allTokens,
  contractFixture,
  LONG_ENCOUNTER_ID,
  makeToken,
  ODD_DOCUMENT_ID,
  ODD_ENCOUNTER_ID,
  tokens
} from "../support/contract-fixture.js"
import type { ContractHarness, StartedServer } from "../support/harness.js"
import { makeResponseValidator, type ResponseValidator } from "../support/openapi-validator.js"
import { bearer, paths, type RawResponse, send } from "./http.js"

/**
 * The black-box contract suite: the real server on loopback, loaded from a fixture, driven
 * by plain HTTP and by the typed client. Every response checked is validated against the
 * OpenAPI document the server itself serves. Runs over any `ContractHarness`.
 */

const ERROR_KEYS = ["error", "field", "message", "reason_code"]
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/
const SERVICE_REQUEST_ID = /^req_[0-9a-f]{32}$/

const keysOf = (value: unknown) => Object.keys(value as object).sort()

/** One route with ids that make it succeed for the riverside full-access key. */
interface RouteCase {
  readonly operation: OperationId
  readonly path: (query?: string) => string
}

const routeCases: ReadonlyArray<RouteCase> = [
  { operation: "listPublicEncounters", path: (query) => paths.list(query) },
  { operation: "getPublicEncounter", path: (query) => paths.encounter("enc_a1", query) },
  { operation: "getPublicDocument", path: (query) => paths.document("enc_a1", "doc_a1_note", query) },
  { operation: "getPublicDocumentTranscript", path: (query) => paths.transcript("enc_a1", "doc_a1_tr", query) },
  { operation: "getPublicDocumentAudio", path: (query) => paths.audio("enc_a1", "doc_a1_tr", query) }
]

/** Routes of an encounter, for lookups: the encounter's own documents where the route needs one. */
const routesOfEncounter = (encounterId: string, documentId: string): ReadonlyArray<RouteCase> => [
  { operation: "getPublicEncounter", path: (query) => paths.encounter(encounterId, query) },
  { operation: "getPublicDocument", path: (query) => paths.document(encounterId, documentId, query) },
  { operation: "getPublicDocumentTranscript", path: (query) => paths.transcript(encounterId, documentId, query) },
  { operation: "getPublicDocumentAudio", path: (query) => paths.audio(encounterId, documentId, query) }
]

const compareBytes = (a: string, b: string) => Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"))

/** The riverside clinical encounters in the contract's order. */
const expectedOrder = (sortOrder: "asc" | "desc"): ReadonlyArray<string> => {
  const ascending = contractFixture.encounters
    .filter((encounter) => encounter.organization_id === "org_riverside" && encounter.data_class === "clinical")
    .sort((a, b) => Date.parse(a.created_at) - Date.parse(b.created_at) || compareBytes(a.encounter_id, b.encounter_id))
    .map((encounter) => encounter.encounter_id)
  return sortOrder === "asc" ? ascending : [...ascending].reverse()
}

export const defineContractSuite = (harness: ContractHarness): void => {
  describe(`public API contract over HTTP (${harness.name})`, () => {
    let server: StartedServer
    let validator: ResponseValidator
    const extraServers: Array<StartedServer> = []
    const auditedUrls: Array<string> = []

    beforeAll(async () => {
      server = await harness.start(contractFixture)
      const document = await send(server.baseUrl, "/openapi.json")
      validator = makeResponseValidator(document.body)
    })

    afterAll(async () => {
      await Promise.all(extraServers.map((extra) => extra.close()))
      await server?.close()
    })

    const startExtra = async (options: Parameters<ContractHarness["start"]>[1]) => {
      const extra = await harness.start(contractFixture, options)
      extraServers.push(extra)
      return extra
    }

    /** The headers every response carries. */
    const expectCommonHeaders = (response: RawResponse) => {
      expect(response.headers["cache-control"]).toBe("no-store")
      expect(String(response.headers["x-request-id"])).toMatch(REQUEST_ID)
    }

    const expectJson = (response: RawResponse) => {
      expectCommonHeaders(response)
      expect(response.headers["content-type"]).toBe("application/json")
    }

    const expectOk = (response: RawResponse, operation: OperationId) => {
      expect(response.status, response.text).toBe(200)
      expectJson(response)
      validator.validate(operation, 200, response.body)
      return response.body as Record<string, unknown>
    }

    /** The exact error body of the contract, validated against the operation's documented response. */
    const expectError = (
      response: RawResponse,
      operation: OperationId | null,
      reasonCode: ReasonCode,
      field: string | null = null
    ) => {
      expect({ status: response.status, body: response.body }).toMatchObject({
        status: statusOf(reasonCode),
        body: { reason_code: reasonCode, error: categoryOf(reasonCode), field }
      })
      expectJson(response)
      expect(keysOf(response.body)).toEqual(ERROR_KEYS)
      expect(typeof (response.body as { message: unknown }).message).toBe("string")
      if (operation === null) validator.validateErrorBody(response.body)
      else {
        expect(operationReasonCodes[operation]).toContain(reasonCode)
        validator.validate(operation, statusOf(reasonCode), response.body)
      }
    }

    const get = (path: string, headers: Record<string, string> = {}) => send(server.baseUrl, path, { headers })

    describe("success bodies and their exact keys", () => {
      it("listPublicEncounters: items, limit, offset, total; encounter summaries with patient and documents", async () => {
        const body = expectOk(await get(paths.list("?limit=100&sort_order=asc"), bearer(tokens.riversideFull)), "listPublicEncounters")
        expect(keysOf(body)).toEqual(["items", "limit", "offset", "total"])
        const items = body.items as Array<Record<string, unknown>>
        for (const item of items) {
          expect(keysOf(item)).toEqual([
            "created_at", "date_of_service", "documents", "encounter_id", "encounter_type", "organization_id", "patient", "status", "updated_at"
          ])
        }
        const a1 = items.find((item) => item.encounter_id === "enc_a1")
        expect(a1).toEqual({
          encounter_id: "enc_a1",
          organization_id: "org_riverside",
          created_at: "2026-05-01T09:00:00.000Z",
          updated_at: "2026-05-01T11:00:00.000Z",
          date_of_service: "2026-05-01T09:00:00.000Z",
          encounter_type: "ambient",
          status: "signed",
          patient: { patient_id: "pat_7f3a", first_name: "Ada", last_name: "Moreno", date_of_birth: "1961-03-14" },
          documents: [
            { document_id: "doc_a1_tr", schema_type: "ambient_transcript", title: "Visit recording", status: "completed", workflow_variant: "ambient", audio_duration_seconds: 0.1 },
            { document_id: "doc_a1_bill", schema_type: "billing", title: "Billing codes", status: "draft", workflow_variant: null, audio_duration_seconds: null },
            { document_id: "doc_a1_chk", schema_type: "encounter_checklist", title: "Checklist", status: null, workflow_variant: null, audio_duration_seconds: null },
            { document_id: "doc_a1_note", schema_type: "document", title: "SOAP note", status: null, workflow_variant: null, audio_duration_seconds: null }
          ]
        })
        expect(items.find((item) => item.encounter_id === "enc_a2")?.encounter_type).toBe("phone_call")
        expect(items.map((item) => item.encounter_id)).not.toContain("enc_demo")
        expect(items.map((item) => item.encounter_id)).not.toContain("enc_train")
        expect(items.map((item) => item.encounter_id)).not.toContain("enc_l1")
        expect(body).toMatchObject({ limit: 100, offset: 0, total: expectedOrder("asc").length })
      })

      it("getPublicEncounter: { encounter } only", async () => {
        const body = expectOk(await get(paths.encounter("enc_a3"), bearer(tokens.riversideFull)), "getPublicEncounter")
        expect(body).toEqual({
          encounter: {
            encounter_id: "enc_a3",
            organization_id: "org_riverside",
            created_at: "2026-05-02T09:00:00.000Z",
            updated_at: "2026-05-03T09:00:00.000Z",
            date_of_service: "2026-05-02T09:00:00.000Z",
            encounter_type: "ambient",
            status: null,
            patient: null,
            documents: [
              { document_id: "doc_a3_dict", schema_type: "ambient_transcript", title: "Dictation", status: "completed", workflow_variant: null, audio_duration_seconds: null }
            ]
          }
        })
      })

      it("getPublicDocument: a clinical document with markdown content and null status/workflow_variant", async () => {
        const body = expectOk(await get(paths.document("enc_a1", "doc_a1_note"), bearer(tokens.riversideFull)), "getPublicDocument")
        expect(body).toEqual({
          document: {
            document_id: "doc_a1_note",
            encounter_id: "enc_a1",
            schema_type: "document",
            content: { format: "markdown", text: "## Subjective\nCough for two weeks.\n\n## Plan\nChest X-ray." },
            created_at: "2026-05-01T10:00:00.000Z",
            updated_at: "2026-05-01T11:00:00.000Z",
            title: "SOAP note",
            status: null,
            workflow_variant: null
          }
        })
      })

      it("getPublicDocument: ambient transcript metadata carries no turns", async () => {
        const body = expectOk(await get(paths.document("enc_a1", "doc_a1_tr"), bearer(tokens.riversideFull)), "getPublicDocument")
        expect(keysOf(body.document)).toEqual([
          "audio_duration_seconds", "created_at", "document_id", "encounter_id", "schema_type", "status", "title", "updated_at", "workflow_variant"
        ])
      })

      it("getPublicDocumentTranscript: document_id, encounter_id, transcript with turns in order", async () => {
        const body = expectOk(await get(paths.transcript("enc_a1", "doc_a1_tr"), bearer(tokens.riversideFull)), "getPublicDocumentTranscript")
        expect(body).toEqual({
          document_id: "doc_a1_tr",
          encounter_id: "enc_a1",
          transcript: {
            provider: "example-asr",
            audio_duration_seconds: 0.1,
            turns: [
              { speaker: "clinician", text: "What brings you in today?", start: 0, end: 0.04 },
              { speaker: "patient", text: "A cough for two weeks.", start: 0.05, end: 0.1 }
            ]
          }
        })
        const empty = expectOk(await get(paths.transcript("enc_a3", "doc_a3_dict"), bearer(tokens.riversideFull)), "getPublicDocumentTranscript")
        expect(empty.transcript).toEqual({ provider: "example-asr", audio_duration_seconds: null, turns: [] })
      })

      it("getPublicDocumentAudio: audio_url and expires_at only", async () => {
        const before = Date.now()
        const body = expectOk(await get(paths.audio("enc_a1", "doc_a1_tr"), bearer(tokens.riversideFull)), "getPublicDocumentAudio")
        expect(keysOf(body)).toEqual(["audio_url", "expires_at"])
        auditedUrls.push(String(body.audio_url))
        const expiresAt = Date.parse(String(body.expires_at))
        expect(String(body.expires_at)).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
        expect(expiresAt - before).toBeGreaterThan(290_000)
        expect(expiresAt - before).toBeLessThanOrEqual(301_000)
      })
    })

    describe("401 in the contract's order, on every route", () => {
      const malformedChecksum = `${tokens.riversideFull.slice(0, -1)}${tokens.riversideFull.endsWith("x") ? "y" : "x"}`
      const cases: ReadonlyArray<{ readonly name: string; readonly headers: Record<string, string>; readonly reason: ReasonCode }> = [
        { name: "no Authorization header", headers: {}, reason: "missing_bearer" },
        { name: "Basic scheme", headers: { authorization: `Basic ${tokens.riversideFull}` }, reason: "missing_bearer" },
        { name: "Bearer with no token", headers: { authorization: "Bearer" }, reason: "missing_bearer" },
        { name: "Bearer with only spaces", headers: { authorization: "Bearer    " }, reason: "missing_bearer" },
        { name: "scheme glued to the token", headers: { authorization: `Bearer${tokens.riversideFull}` }, reason: "missing_bearer" },
        { name: "bad checksum", headers: bearer(malformedChecksum), reason: "malformed_token" },
        { name: "unknown prefix", headers: bearer(tokens.riversideFull.replace("ce_test_", "ce_prod_")), reason: "malformed_token" },
        { name: "well-formed but unknown", headers: bearer(tokens.unknown), reason: "invalid_key" },
        { name: "disabled key", headers: bearer(tokens.riversideDisabled), reason: "disabled_key" },
        { name: "revoked key", headers: bearer(tokens.riversideRevoked), reason: "revoked_key" },
        { name: "expired key", headers: bearer(tokens.riversideExpired), reason: "expired_key" }
      ]
      for (const route of routeCases) {
        for (const { headers, name, reason } of cases) {
          it(`${route.operation}: ${name} is ${reason}`, async () => {
            expectError(await get(route.path(), headers), route.operation, reason)
          })
        }
      }

      it("the scheme is case-insensitive: `bearer` and `BEARER` are accepted", async () => {
        expectOk(await get(paths.list(), { authorization: `bearer ${tokens.riversideFull}` }), "listPublicEncounters")
        expectOk(await get(paths.list(), { authorization: `BEARER ${tokens.riversideFull}` }), "listPublicEncounters")
      })

      it("api_keys_disabled when API-key authentication is switched off (before the token is even read)", async () => {
        const disabled = await startExtra({ apiKeysEnabled: false })
        for (const route of routeCases) {
          expectError(await send(disabled.baseUrl, route.path(), { headers: bearer(tokens.riversideFull) }), route.operation, "api_keys_disabled")
          expectError(await send(disabled.baseUrl, route.path(), { headers: bearer("not-a-token") }), route.operation, "api_keys_disabled")
          expectError(await send(disabled.baseUrl, route.path()), route.operation, "missing_bearer")
        }
      })

      it("test_prefix_not_allowed in production; a live key passes there", async () => {
        const production = await startExtra({ environment: "production" })
        for (const route of routeCases) {
          expectError(await send(production.baseUrl, route.path(), { headers: bearer(tokens.riversideFull) }), route.operation, "test_prefix_not_allowed")
          // Refused on the prefix before the shape is checked.
          expectError(await send(production.baseUrl, route.path(), { headers: bearer("ce_test_short") }), route.operation, "test_prefix_not_allowed")
        }
        const response = await send(production.baseUrl, paths.list(), { headers: bearer(tokens.riversideLive) })
        expect(response.status).toBe(200)
      })

      it("503 digest_key_unavailable when no digest key is configured, after the token's shape is checked", async () => {
        const noDigest = await startExtra({ digestKeyConfigured: false })
        for (const route of routeCases) {
          expectError(await send(noDigest.baseUrl, route.path(), { headers: bearer(tokens.riversideFull) }), route.operation, "digest_key_unavailable")
          expectError(await send(noDigest.baseUrl, route.path(), { headers: bearer("garbage") }), route.operation, "malformed_token")
        }
      })
    })

    describe("403 in the contract's order", () => {
      for (const route of routeCases) {
        it(`${route.operation}: user and service keys are org_scope_only_required`, async () => {
          expectError(await get(route.path(), bearer(tokens.userKey)), route.operation, "org_scope_only_required")
          expectError(await get(route.path(), bearer(tokens.serviceKey)), route.operation, "org_scope_only_required")
        })
        it(`${route.operation}: route_not_allowed for an organization with no enabled route`, async () => {
          expectError(await get(route.path(), bearer(tokens.noRoutesOrg)), route.operation, "route_not_allowed")
        })
        it(`${route.operation}: organization_not_allowlisted for an unapproved organization`, async () => {
          expectError(await get(route.path(), bearer(tokens.pendingOrg)), route.operation, "organization_not_allowlisted")
        })
      }

      it("route_not_allowed for lakeside on the transcript and audio routes it is not enabled for", async () => {
        expectError(await get(paths.transcript("enc_l1", "doc_l1_note"), bearer(tokens.lakesideFull)), "getPublicDocumentTranscript", "route_not_allowed")
        expectError(await get(paths.audio("enc_l1", "doc_l1_note"), bearer(tokens.lakesideFull)), "getPublicDocumentAudio", "route_not_allowed")
      })

      it("missing_scope: patients:read for list and encounter, recordings:read for audio", async () => {
        expectError(await get(paths.list(), bearer(tokens.riversideDocumentsOnly)), "listPublicEncounters", "missing_scope")
        expectError(await get(paths.encounter("enc_a1"), bearer(tokens.riversideDocumentsOnly)), "getPublicEncounter", "missing_scope")
        expectOk(await get(paths.document("enc_a1", "doc_a1_note"), bearer(tokens.riversideDocumentsOnly)), "getPublicDocument")
        expectOk(await get(paths.transcript("enc_a1", "doc_a1_tr"), bearer(tokens.riversideDocumentsOnly)), "getPublicDocumentTranscript")
        expectError(await get(paths.audio("enc_a1", "doc_a1_tr"), bearer(tokens.riversideNoRecordings)), "getPublicDocumentAudio", "missing_scope")
      })

      for (const route of routesOfEncounter("enc_l1", "doc_l1_note")) {
        it(`${route.operation}: cross_organization_denied for another organization's encounter`, async () => {
          expectError(await get(route.path(), bearer(tokens.riversideFull)), route.operation, "cross_organization_denied")
        })
      }
      for (const encounterId of ["enc_demo", "enc_train"]) {
        for (const route of routesOfEncounter(encounterId, "doc_a1_tr")) {
          it(`${route.operation}: demo_training_denied for ${encounterId}`, async () => {
            expectError(await get(route.path(), bearer(tokens.riversideFull)), route.operation, "demo_training_denied")
          })
        }
      }
    })

    describe("404, 400 and the routes' own checks", () => {
      for (const route of routesOfEncounter("enc_missing", "doc_a1_tr")) {
        it(`${route.operation}: encounter_not_found`, async () => {
          expectError(await get(route.path(), bearer(tokens.riversideFull)), route.operation, "encounter_not_found")
        })
      }
      for (const route of routesOfEncounter("enc_a2", "doc_missing").slice(1)) {
        it(`${route.operation}: document_not_found for a missing document`, async () => {
          expectError(await get(route.path(), bearer(tokens.riversideFull)), route.operation, "document_not_found")
        })
      }
      for (const route of routesOfEncounter("enc_a2", "doc_a1_tr").slice(1)) {
        it(`${route.operation}: document_not_found for a document of another encounter`, async () => {
          expectError(await get(route.path(), bearer(tokens.riversideFull)), route.operation, "document_not_found")
        })
      }

      it("getPublicDocument: unsupported_document_type for billing and encounter_checklist", async () => {
        expectError(await get(paths.document("enc_a1", "doc_a1_bill"), bearer(tokens.riversideFull)), "getPublicDocument", "unsupported_document_type")
        expectError(await get(paths.document("enc_a1", "doc_a1_chk"), bearer(tokens.riversideFull)), "getPublicDocument", "unsupported_document_type")
      })

      it("getPublicDocumentTranscript: unsupported_document_type for a clinical document, transcript_not_found when none is final", async () => {
        expectError(await get(paths.transcript("enc_a1", "doc_a1_note"), bearer(tokens.riversideFull)), "getPublicDocumentTranscript", "unsupported_document_type")
        expectError(await get(paths.transcript("enc_a2", "doc_a2_call"), bearer(tokens.riversideFull)), "getPublicDocumentTranscript", "transcript_not_found")
      })

      it("getPublicDocumentAudio: unsupported_document_type, audio_not_available_for_document, audio_not_found", async () => {
        expectError(await get(paths.audio("enc_a1", "doc_a1_note"), bearer(tokens.riversideFull)), "getPublicDocumentAudio", "unsupported_document_type")
        expectError(await get(paths.audio("enc_a3", "doc_a3_dict"), bearer(tokens.riversideFull)), "getPublicDocumentAudio", "audio_not_available_for_document")
        expectError(await get(paths.audio("enc_a2", "doc_a2_call"), bearer(tokens.riversideFull)), "getPublicDocumentAudio", "audio_not_found")
      })

      for (const route of routeCases) {
        it(`${route.operation}: unsupported_filter names the first unsupported key`, async () => {
          const key = route.operation === "listPublicEncounters" ? "owners" : "limit"
          expectError(await get(route.path(`?${key}=1&other=2`), bearer(tokens.riversideFull)), route.operation, "unsupported_filter", key)
        })
      }

      it("unsupported_filter: keys are case-sensitive, percent-decoded, cut to 64 and non-printable-ASCII replaced by ?", async () => {
        expectError(await get(paths.list("?Limit=1"), bearer(tokens.riversideFull)), "listPublicEncounters", "unsupported_filter", "Limit")
        expectError(await get(paths.list("?record%5Fkind=x"), bearer(tokens.riversideFull)), "listPublicEncounters", "unsupported_filter", "record_kind")
        expectError(await get(paths.list(`?${encodeURIComponent("pätient_id")}=1`), bearer(tokens.riversideFull)), "listPublicEncounters", "unsupported_filter", "p?tient_id")
        expectError(await get(paths.list(`?${"k".repeat(100)}=1`), bearer(tokens.riversideFull)), "listPublicEncounters", "unsupported_filter", "k".repeat(64))
        expectError(await get(paths.encounter("enc_a1", "?=x"), bearer(tokens.riversideFull)), "getPublicEncounter", "unsupported_filter", "")
        for (const key of ["date_of_service", "patient_id", "__proto__", "toString"]) {
          expectError(await get(paths.list(`?${key}=1`), bearer(tokens.riversideFull)), "listPublicEncounters", "unsupported_filter", key)
        }
      })

      it("an empty query (`?` alone) is no query", async () => {
        expectOk(await get(paths.encounter("enc_a1", "?"), bearer(tokens.riversideFull)), "getPublicEncounter")
        expectOk(await get(paths.list("?"), bearer(tokens.riversideFull)), "listPublicEncounters")
      })
    })

    describe("query values of the list route (422)", () => {
      const invalid: ReadonlyArray<readonly [query: string, reason: ReasonCode, field: string]> = [
        ["limit=0", "invalid_limit", "limit"],
        ["limit=101", "invalid_limit", "limit"],
        ["limit=01", "invalid_limit", "limit"],
        ["limit=%2B1", "invalid_limit", "limit"],
        ["limit=-1", "invalid_limit", "limit"],
        ["limit=1e1", "invalid_limit", "limit"],
        ["limit=1.0", "invalid_limit", "limit"],
        ["limit=%201", "invalid_limit", "limit"],
        ["limit=", "invalid_limit", "limit"],
        ["limit", "invalid_limit", "limit"],
        ["limit=99999999999999999999999", "invalid_limit", "limit"],
        ["limit=1&limit=1", "invalid_limit", "limit"],
        ["offset=-1", "invalid_offset", "offset"],
        ["offset=10001", "invalid_offset", "offset"],
        ["offset=00", "invalid_offset", "offset"],
        ["offset=", "invalid_offset", "offset"],
        ["offset=0&offset=0", "invalid_offset", "offset"],
        ["sort_order=ASC", "invalid_sort", "sort_order"],
        ["sort_order=", "invalid_sort", "sort_order"],
        ["sort_order=asc&sort_order=asc", "invalid_sort", "sort_order"],
        ["start_at=2026-05-01", "invalid_query", "start_at"],
        ["start_at=2026-05-01T00:00:00", "invalid_query", "start_at"],
        ["start_at=2026-02-30T00:00:00Z", "invalid_query", "start_at"],
        // A raw `+` is a space in a form-encoded query: the offset must be sent as %2B.
        ["start_at=2026-05-01T00:00:00+02:00", "invalid_query", "start_at"],
        ["end_at=yesterday", "invalid_query", "end_at"],
        ["end_at=2026-05-01T24:00:00Z", "invalid_query", "end_at"],
        ["start_at=2026-05-02T00:00:00Z&end_at=2026-05-02T00:00:00Z", "invalid_query", "start_at"],
        ["start_at=2026-05-03T00:00:00Z&end_at=2026-05-02T00:00:00Z", "invalid_query", "start_at"]
      ]
      for (const [query, reason, field] of invalid) {
        it(`${query} is ${reason} (field ${field})`, async () => {
          expectError(await get(paths.list(`?${query}`), bearer(tokens.riversideFull)), "listPublicEncounters", reason, field)
        })
      }

      it("a refusal's message says which rule was broken and the accepted form", async () => {
        const messageOf = async (query: string) =>
          ((await get(paths.list(`?${query}`), bearer(tokens.riversideFull))).body as { message: string }).message
        expect(await messageOf("start_at=2026-05-01")).toContain("start_at is a date without a time")
        expect(await messageOf("start_at=2026-05-01T00:00:00+02:00")).toContain("must be sent as %2B")
        expect(await messageOf("start_at=2026-05-03T00:00:00Z&end_at=2026-05-02T00:00:00Z")).toContain("start_at must be before end_at")
        expect(await messageOf("limit=500")).toBe("limit must be a whole number from 1 to 100 in plain digits.")
      })

      const valid = ["limit=1", "limit=100", "offset=0", "offset=10000", "sort_order=asc", "sort_order=desc",
        "start_at=2026-05-01T00:00:00Z", "start_at=2026-05-01T02:00:00%2B02:00", "end_at=2026-05-01T00:00:00.5-05:30",
        "start_at=2026-05-01T00:00:00Z&end_at=2026-05-01T00:00:00.001Z"]
      for (const query of valid) {
        it(`${query} is accepted`, async () => {
          expectOk(await get(paths.list(`?${query}`), bearer(tokens.riversideFull)), "listPublicEncounters")
        })
      }

      it("the 422s come in a fixed order whatever the order of the keys", async () => {
        const order: ReadonlyArray<readonly [string, ReasonCode, string]> = [
          ["offset=-1&limit=0", "invalid_limit", "limit"],
          ["sort_order=x&offset=-1", "invalid_offset", "offset"],
          ["start_at=bad&sort_order=x", "invalid_sort", "sort_order"],
          ["end_at=bad&start_at=bad", "invalid_query", "start_at"],
          ["end_at=bad&start_at=2026-05-01T00:00:00Z", "invalid_query", "end_at"]
        ]
        for (const [query, reason, field] of order) {
          expectError(await get(paths.list(`?${query}`), bearer(tokens.riversideFull)), "listPublicEncounters", reason, field)
        }
      })

      it("start_at is inclusive and end_at exclusive on created_at", async () => {
        const body = expectOk(
          await get(paths.list("?sort_order=asc&start_at=2026-05-02T09:00:00Z&end_at=2026-05-04T09:00:00Z"), bearer(tokens.riversideFull)),
          "listPublicEncounters"
        )
        expect((body.items as Array<{ encounter_id: string }>).map((item) => item.encounter_id)).toEqual(["enc_a2", "enc_a3"])
        expect(body.total).toBe(2)
      })
    })

    describe("order of checks across faults", () => {
      const combinations: ReadonlyArray<{
        readonly name: string
        readonly operation: OperationId
        readonly path: string
        readonly headers: Record<string, string>
        readonly reason: ReasonCode
        readonly field?: string
      }> = [
        { name: "no key + unsupported query", operation: "listPublicEncounters", path: paths.list("?owners=1"), headers: {}, reason: "missing_bearer" },
        { name: "malformed key + missing encounter", operation: "getPublicEncounter", path: paths.encounter("enc_missing"), headers: bearer("ce_test_x"), reason: "malformed_token" },
        { name: "revoked key + unsupported query", operation: "listPublicEncounters", path: paths.list("?owners=1"), headers: bearer(tokens.riversideRevoked), reason: "revoked_key" },
        { name: "expired key + invalid limit", operation: "listPublicEncounters", path: paths.list("?limit=0"), headers: bearer(tokens.riversideExpired), reason: "expired_key" },
        { name: "unknown key + route not allowed", operation: "getPublicDocumentTranscript", path: paths.transcript("enc_l1", "doc_l1_note"), headers: bearer(makeToken("test", "unused")), reason: "invalid_key" },
        { name: "user key + route not allowed", operation: "getPublicDocumentTranscript", path: paths.transcript("enc_l1", "doc_l1_note"), headers: bearer(tokens.userKey), reason: "org_scope_only_required" },
        { name: "user key + unsupported query", operation: "getPublicEncounter", path: paths.encounter("enc_a1", "?x=1"), headers: bearer(tokens.userKey), reason: "org_scope_only_required" },
        { name: "route not allowed + cross organization", operation: "getPublicDocumentAudio", path: paths.audio("enc_a1", "doc_a1_tr"), headers: bearer(tokens.lakesideFull), reason: "route_not_allowed" },
        { name: "unapproved organization + bad query", operation: "listPublicEncounters", path: paths.list("?limit=0"), headers: bearer(tokens.pendingOrg), reason: "organization_not_allowlisted" },
        { name: "missing scope + bad query", operation: "listPublicEncounters", path: paths.list("?limit=0&owners=1"), headers: bearer(tokens.riversideDocumentsOnly), reason: "missing_scope" },
        { name: "missing scope + missing encounter", operation: "getPublicDocumentAudio", path: paths.audio("enc_missing", "doc_x"), headers: bearer(tokens.riversideNoRecordings), reason: "missing_scope" },
        { name: "unsupported key before invalid limit", operation: "listPublicEncounters", path: paths.list("?limit=0&owners=1"), headers: bearer(tokens.riversideFull), reason: "unsupported_filter", field: "owners" },
        { name: "unsupported query before lookup (cross organization)", operation: "getPublicEncounter", path: paths.encounter("enc_l1", "?x=1"), headers: bearer(tokens.riversideFull), reason: "unsupported_filter", field: "x" },
        { name: "unsupported query before lookup (missing encounter)", operation: "getPublicDocument", path: paths.document("enc_missing", "doc_x", "?x=1"), headers: bearer(tokens.riversideFull), reason: "unsupported_filter", field: "x" },
        { name: "cross organization before document lookup", operation: "getPublicDocument", path: paths.document("enc_l1", "doc_missing"), headers: bearer(tokens.riversideFull), reason: "cross_organization_denied" },
        { name: "demo before document lookup", operation: "getPublicDocumentTranscript", path: paths.transcript("enc_demo", "doc_missing"), headers: bearer(tokens.riversideFull), reason: "demo_training_denied" },
        { name: "document of another encounter before its type", operation: "getPublicDocument", path: paths.document("enc_a2", "doc_a1_bill"), headers: bearer(tokens.riversideFull), reason: "document_not_found" }
      ]
      for (const combination of combinations) {
        it(`${combination.name}: ${combination.reason}`, async () => {
          expectError(await get(combination.path, combination.headers), combination.operation, combination.reason, combination.field ?? null)
        })
      }
    })

    describe("paging", () => {
      for (const sortOrder of ["asc", "desc"] as const) {
        it(`walking all pages (${sortOrder}, limit 3) sees each encounter once, in created_at then encounter_id order`, async () => {
          const expected = expectedOrder(sortOrder)
          const seen: Array<string> = []
          for (let offset = 0; offset < expected.length + 3; offset += 3) {
            const body = expectOk(
              await get(paths.list(`?limit=3&offset=${offset}&sort_order=${sortOrder}`), bearer(tokens.riversideFull)),
              "listPublicEncounters"
            )
            expect(body).toMatchObject({ limit: 3, offset, total: expected.length })
            seen.push(...(body.items as Array<{ encounter_id: string }>).map((item) => item.encounter_id))
          }
          expect(seen).toEqual(expected)
          expect(new Set(seen).size).toBe(seen.length)
        })
      }

      it("the default is limit 50, offset 0, sort_order desc", async () => {
        const body = expectOk(await get(paths.list(), bearer(tokens.riversideFull)), "listPublicEncounters")
        expect(body).toMatchObject({ limit: 50, offset: 0 })
        expect((body.items as Array<{ encounter_id: string }>).map((item) => item.encounter_id)).toEqual(expectedOrder("desc").slice(0, 50))
      })

      it("an offset past the end gives an empty page with the total", async () => {
        const body = expectOk(await get(paths.list("?offset=10000"), bearer(tokens.riversideFull)), "listPublicEncounters")
        expect(body).toEqual({ items: [], limit: 50, offset: 10000, total: expectedOrder("asc").length })
      })
    })

    describe("path parameters are opaque", () => {
      it("ids with /, %, ?, #, ;, +, spaces and non-ASCII round-trip percent-encoded", async () => {
        const encounter = expectOk(await get(paths.encounter(ODD_ENCOUNTER_ID), bearer(tokens.riversideFull)), "getPublicEncounter")
        expect((encounter.encounter as { encounter_id: string }).encounter_id).toBe(ODD_ENCOUNTER_ID)
        const document = expectOk(await get(paths.document(ODD_ENCOUNTER_ID, ODD_DOCUMENT_ID), bearer(tokens.riversideFull)), "getPublicDocument")
        expect(document.document).toMatchObject({ encounter_id: ODD_ENCOUNTER_ID, document_id: ODD_DOCUMENT_ID })
      })

      it("lowercase percent-encoding is the same id", async () => {
        const path = paths.encounter(ODD_ENCOUNTER_ID).replace(/%[0-9A-F]{2}/g, (escape) => escape.toLowerCase())
        expectOk(await get(path, bearer(tokens.riversideFull)), "getPublicEncounter")
      })

      it("an id of 304 characters is found (no router length limit)", async () => {
        const body = expectOk(await get(paths.encounter(LONG_ENCOUNTER_ID), bearer(tokens.riversideFull)), "getPublicEncounter")
        expect((body.encounter as { encounter_id: string }).encounter_id).toBe(LONG_ENCOUNTER_ID)
      })

      it("a raw `;` is part of the id, and invalid percent-encoding is taken as written: both encounter_not_found", async () => {
        expectError(await get("/external/v1/encounters/enc_a1;x", bearer(tokens.riversideFull)), "getPublicEncounter", "encounter_not_found")
        expectError(await get("/external/v1/encounters/%ZZ", bearer(tokens.riversideFull)), "getPublicEncounter", "encounter_not_found")
        expectError(await get("/external/v1/encounters/%C3%28", bearer(tokens.riversideFull)), "getPublicEncounter", "encounter_not_found")
      })

      it("paths match exactly: trailing slash, letter case, duplicate slashes and empty ids are route_not_found", async () => {
        for (const path of [
          "/external/v1/encounters/",
          "/external/v1/encounters/enc_a1/",
          "/External/v1/encounters",
          "/EXTERNAL/V1/ENCOUNTERS/enc_a1",
          "//external/v1/encounters",
          "/external//v1/encounters",
          "/external/v1/encounters//documents/doc_a1_note",
          "/external/v1/encounters/enc_a1/documents/",
          "/external/v1/encounters/enc_a1/documents/doc_a1_tr/transcript/extra",
          "/external/v1",
          "//",
          "/openapi.json/",
          "/docs/x"
        ]) {
          expectError(await get(path, bearer(tokens.riversideFull)), null, "route_not_found")
        }
      })
    })

    describe("404 and 405 outside the contract", () => {
      it("/ points to the docs page: GET and HEAD are 302 with Location: /docs, other methods 405", async () => {
        for (const method of ["GET", "HEAD"]) {
          const root = await send(server.baseUrl, "/", { method, headers: bearer(tokens.riversideFull) })
          expect({ status: root.status, location: root.headers.location, text: root.text }).toEqual({ status: 302, location: "/docs", text: "" })
        }
        const posted = await send(server.baseUrl, "/", { method: "POST" })
        expectError(posted, null, "method_not_allowed")
        expect(posted.headers.allow).toBe("GET")
      })

      it("a path outside the routes is 404 route_not_found with the four-field body, for any method", async () => {
        for (const method of ["GET", "POST", "DELETE"]) {
          expectError(await send(server.baseUrl, "/external/v2/encounters", { method }), null, "route_not_found")
        }
      })

      for (const route of routeCases) {
        it(`${route.operation}: POST, PUT, PATCH, DELETE, OPTIONS are 405 method_not_allowed with Allow: GET`, async () => {
          for (const method of ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"]) {
            const response = await send(server.baseUrl, route.path(), { method, headers: bearer(tokens.riversideFull) })
            expectError(response, null, "method_not_allowed")
            expect(response.headers.allow).toBe("GET")
          }
        })
      }

      it("405 comes before authentication and records nothing", async () => {
        const before = (await server.disclosures()).length
        expectError(await send(server.baseUrl, paths.list(), { method: "POST" }), null, "method_not_allowed")
        expect((await server.disclosures()).length).toBe(before)
      })

      it("HEAD answers as GET without a body", async () => {
        for (const route of routeCases) {
          const head = await send(server.baseUrl, route.path(), { method: "HEAD", headers: bearer(tokens.riversideFull) })
          expect(head.status).toBe(200)
          expect(head.text).toBe("")
          expectJson(head)
        }
        const refused = await send(server.baseUrl, paths.list(), { method: "HEAD" })
        expect(refused.status).toBe(401)
        expect(refused.text).toBe("")
        expectJson(refused)
      })
    })

    describe("headers", () => {
      it("echoes a valid caller X-Request-Id and replaces an invalid one", async () => {
        const valid = "partner-req_01:abc.DEF"
        const echoed = await get(paths.list(), { ...bearer(tokens.riversideFull), "x-request-id": valid })
        expect(echoed.headers["x-request-id"]).toBe(valid)
        const max = "a".repeat(128)
        expect((await get(paths.list(), { "x-request-id": max })).headers["x-request-id"]).toBe(max)
        for (const invalid of ["a".repeat(129), "has space", "semi;colon", "slash/x", "quote\"", ""]) {
          const response = await get(paths.encounter("enc_a1"), { "x-request-id": invalid })
          expect(response.headers["x-request-id"]).not.toBe(invalid)
          expect(String(response.headers["x-request-id"])).toMatch(REQUEST_ID)
        }
      })

      it("generates a fresh id per request", async () => {
        const first = await get(paths.list())
        const second = await get(paths.list())
        expect(first.headers["x-request-id"]).not.toBe(second.headers["x-request-id"])
      })

      it("/openapi.json needs no key and carries the same headers", async () => {
        const response = await get("/openapi.json")
        expect(response.status).toBe(200)
        expectJson(response)
        expect((response.body as { openapi: string }).openapi).toBe("3.1.0")
      })

      it("/docs is HTML with no-store and a request id", async () => {
        const response = await get("/docs")
        expect(response.status).toBe(200)
        expectCommonHeaders(response)
        expect(String(response.headers["content-type"])).toMatch(/^text\/html/)
      })
    })

    describe("disclosure events", () => {
      it("one event per encounter listed, carrying the request id, key, operation and patient", async () => {
        const before = (await server.disclosures()).length
        const response = await get(paths.list("?sort_order=asc&limit=2"), { ...bearer(tokens.riversideFull), "x-request-id": "disclose-list-1" })
        const body = expectOk(response, "listPublicEncounters")
        const events = (await server.disclosures()).slice(before)
        const items = body.items as Array<{ encounter_id: string; patient: { patient_id: string } | null }>
        expect(events.map((event) => event.encounterId)).toEqual(items.map((item) => item.encounter_id))
        for (const event of events) {
          expect(event).toMatchObject({ operationId: "listPublicEncounters", organizationId: "org_riverside", callerRequestId: "disclose-list-1", documentId: null })
          expect(event.requestId).toMatch(SERVICE_REQUEST_ID)
        }
        expect(new Set(events.map((event) => event.requestId)).size).toBe(1)
      })

      it("each request's events carry the service's own request id; the caller's, repeated, is kept beside it and echoed", async () => {
        const before = (await server.disclosures()).length
        const first = await get(paths.encounter("enc_a1"), { ...bearer(tokens.riversideFull), "x-request-id": "caller-repeats-this" })
        const second = await get(paths.encounter("enc_a1"), { ...bearer(tokens.riversideFull), "x-request-id": "caller-repeats-this" })
        expectOk(first, "getPublicEncounter")
        expectOk(second, "getPublicEncounter")
        expect([first.headers["x-request-id"], second.headers["x-request-id"]]).toEqual(["caller-repeats-this", "caller-repeats-this"])
        const events = (await server.disclosures()).slice(before)
        expect(events.map((event) => event.callerRequestId)).toEqual(["caller-repeats-this", "caller-repeats-this"])
        for (const event of events) expect(event.requestId).toMatch(SERVICE_REQUEST_ID)
        expect(events[0]?.requestId).not.toBe(events[1]?.requestId)
      })

      it("a caller's id in the service's own format is stored as the caller's only", async () => {
        const forged = "req_0123456789abcdef0123456789abcdef"
        const before = (await server.disclosures()).length
        const response = await get(paths.encounter("enc_a1"), { ...bearer(tokens.riversideFull), "x-request-id": forged })
        expectOk(response, "getPublicEncounter")
        expect(response.headers["x-request-id"]).toBe(forged)
        const events = (await server.disclosures()).slice(before)
        expect(events).toHaveLength(1)
        expect(events[0]?.callerRequestId).toBe(forged)
        expect(events[0]?.requestId).toMatch(SERVICE_REQUEST_ID)
        expect(events[0]?.requestId).not.toBe(forged)
      })

      it("one event per read of an encounter, document, transcript or audio URL; repeated reads repeat it", async () => {
        const reads: ReadonlyArray<readonly [OperationId, string, string | null]> = [
          ["getPublicEncounter", paths.encounter("enc_a1"), null],
          ["getPublicEncounter", paths.encounter("enc_a1"), null],
          ["getPublicDocument", paths.document("enc_a1", "doc_a1_note"), "doc_a1_note"],
          ["getPublicDocumentTranscript", paths.transcript("enc_a1", "doc_a1_tr"), "doc_a1_tr"],
          ["getPublicDocumentAudio", paths.audio("enc_a1", "doc_a1_tr"), "doc_a1_tr"]
        ]
        for (const [operation, path, documentId] of reads) {
          const before = (await server.disclosures()).length
          const response = await get(path, bearer(tokens.riversideFull))
          const body = expectOk(response, operation)
          if (operation === "getPublicDocumentAudio") auditedUrls.push(String(body.audio_url))
          const events = (await server.disclosures()).slice(before)
          expect(events).toHaveLength(1)
          expect(events[0]).toMatchObject({
            operationId: operation,
            encounterId: "enc_a1",
            documentId,
            patientId: "pat_7f3a",
            organizationId: "org_riverside",
            requestId: response.headers["x-request-id"],
            callerRequestId: null
          })
        }
      })

      it("refused reads record nothing", async () => {
        const before = (await server.disclosures()).length
        await get(paths.encounter("enc_a1"))
        await get(paths.encounter("enc_a1"), bearer(tokens.riversideRevoked))
        await get(paths.encounter("enc_a1"), bearer(tokens.riversideDocumentsOnly))
        await get(paths.encounter("enc_l1"), bearer(tokens.riversideFull))
        await get(paths.encounter("enc_demo"), bearer(tokens.riversideFull))
        await get(paths.encounter("enc_a1", "?x=1"), bearer(tokens.riversideFull))
        await get(paths.list("?limit=0"), bearer(tokens.riversideFull))
        await get(paths.transcript("enc_a2", "doc_a2_call"), bearer(tokens.riversideFull))
        await get(paths.audio("enc_a2", "doc_a2_call"), bearer(tokens.riversideFull))
        await get(paths.audio("enc_a3", "doc_a3_dict"), bearer(tokens.riversideFull))
        await get(paths.document("enc_a1", "doc_a1_bill"), bearer(tokens.riversideFull))
        expect((await server.disclosures()).length).toBe(before)
      })
    })

    describe("store faults", () => {
      it("a store fault is 503 digest_key_unavailable on every route, and nothing is recorded", async ({ skip }) => {
        if (server.injectFault === undefined) return skip("this harness cannot inject faults")
        const before = (await server.disclosures()).length
        await server.injectFault("store")
        try {
          for (const route of routeCases) {
            expectError(await get(route.path(), bearer(tokens.riversideFull)), route.operation, "digest_key_unavailable")
          }
          // Checks that need no store still come first.
          expectError(await get(paths.list()), "listPublicEncounters", "missing_bearer")
          expectError(await get(paths.list(), bearer("ce_test_x")), "listPublicEncounters", "malformed_token")
        } finally {
          await server.injectFault("none")
        }
        expect((await server.disclosures()).length).toBe(before)
      })

      it("an audio storage fault is 503 audio_storage_unavailable on the audio route only", async ({ skip }) => {
        if (server.injectFault === undefined) return skip("this harness cannot inject faults")
        const before = (await server.disclosures()).length
        await server.injectFault("audioStorage")
        try {
          expectError(await get(paths.audio("enc_a1", "doc_a1_tr"), bearer(tokens.riversideFull)), "getPublicDocumentAudio", "audio_storage_unavailable")
          expectOk(await get(paths.transcript("enc_a1", "doc_a1_tr"), bearer(tokens.riversideFull)), "getPublicDocumentTranscript")
        } finally {
          await server.injectFault("none")
        }
        expect((await server.disclosures()).length).toBe(before + 1)
      })
    })

    describe("typed client", () => {
      const withClient = <A, E>(token: string, use: (client: PublicApiClient) => Effect.Effect<A, E>) =>
        Effect.runPromise(
          Effect.flatMap(makePublicApiClient({ baseUrl: server.baseUrl, apiKey: token }), use).pipe(
            Effect.result,
            Effect.provide(FetchHttpClient.layer)
          )
        )

      it("reads every route, ids round-trip, timestamps decode to Dates", async () => {
        const result = await withClient(tokens.riversideFull, (client) =>
          Effect.all({
            page: client.listPublicEncounters({ limit: 2, sort_order: "asc", start_at: new Date("2026-05-01T00:00:00Z") }),
            encounter: client.getPublicEncounter(ODD_ENCOUNTER_ID),
            document: client.getPublicDocument(ODD_ENCOUNTER_ID, ODD_DOCUMENT_ID),
            transcript: client.getPublicDocumentTranscript("enc_a1", "doc_a1_tr"),
            audio: client.getPublicDocumentAudio("enc_a1", "doc_a1_tr")
          }))
        if (Result.isFailure(result)) throw new Error(`client failed: ${JSON.stringify(result.failure)}`)
        const { audio, document, encounter, page, transcript } = result.success
        expect(page.items.map((item) => item.encounter_id)).toEqual(["enc_a1", "enc_a2"])
        expect(page.items[0]?.created_at).toEqual(new Date("2026-05-01T09:00:00.000Z"))
        expect(encounter.encounter.encounter_id).toBe(ODD_ENCOUNTER_ID)
        expect(document.document.document_id).toBe(ODD_DOCUMENT_ID)
        expect(transcript.transcript.turns).toHaveLength(2)
        expect(audio.expires_at).toBeInstanceOf(Date)
        auditedUrls.push(audio.audio_url)
      })

      const refusals: ReadonlyArray<{
        readonly name: string
        readonly token: string
        readonly call: (client: PublicApiClient) => Effect.Effect<unknown, unknown>
        readonly reason: ReasonCode
        readonly field?: string
      }> = [
        { name: "missing_scope on list", token: tokens.riversideDocumentsOnly, call: (client) => client.listPublicEncounters(), reason: "missing_scope" },
        { name: "invalid_limit", token: tokens.riversideFull, call: (client) => client.listPublicEncounters({ limit: 0 }), reason: "invalid_limit", field: "limit" },
        { name: "unsupported_filter from raw pairs", token: tokens.riversideFull, call: (client) => client.listPublicEncounters([["owners", "me"]]), reason: "unsupported_filter", field: "owners" },
        { name: "revoked_key", token: tokens.riversideRevoked, call: (client) => client.getPublicEncounter("enc_a1"), reason: "revoked_key" },
        { name: "encounter_not_found", token: tokens.riversideFull, call: (client) => client.getPublicEncounter("enc/missing"), reason: "encounter_not_found" },
        { name: "cross_organization_denied", token: tokens.riversideFull, call: (client) => client.getPublicDocument("enc_l1", "doc_l1_note"), reason: "cross_organization_denied" },
        { name: "unsupported_document_type", token: tokens.riversideFull, call: (client) => client.getPublicDocument("enc_a1", "doc_a1_bill"), reason: "unsupported_document_type" },
        { name: "transcript_not_found", token: tokens.riversideFull, call: (client) => client.getPublicDocumentTranscript("enc_a2", "doc_a2_call"), reason: "transcript_not_found" },
        { name: "audio_not_available_for_document", token: tokens.riversideFull, call: (client) => client.getPublicDocumentAudio("enc_a3", "doc_a3_dict"), reason: "audio_not_available_for_document" },
        { name: "audio_not_found", token: tokens.riversideFull, call: (client) => client.getPublicDocumentAudio("enc_a2", "doc_a2_call"), reason: "audio_not_found" }
      ]
      for (const refusal of refusals) {
        it(`fails with a typed PublicApiClientError: ${refusal.name}`, async () => {
          const result = await withClient(refusal.token, refusal.call)
          expect(Result.isFailure(result)).toBe(true)
          if (Result.isFailure(result)) {
            expect(result.failure).toMatchObject({
              _tag: "PublicApiClientError",
              status: statusOf(refusal.reason),
              reason_code: refusal.reason,
              error: categoryOf(refusal.reason),
              field: refusal.field ?? null
            })
          }
        })
      }
    })

    describe("request log", () => {
      it("one JSON line per request with exactly the logged fields, and never a token, signed URL, path id or patient data", async () => {
        const marker = "log-scan-request"
        await get(paths.encounter(ODD_ENCOUNTER_ID), { ...bearer(tokens.riversideFull), "x-request-id": marker })
        // A token in the wrong place (the query and the path) must not be logged either.
        await get(paths.list(`?token=${tokens.riversideFull}`), bearer(tokens.riversideFull))
        await get(`/nowhere/${tokens.riversideFull}`, bearer(tokens.riversideFull))
        const lines = server.logLines()
        expect(lines.length).toBeGreaterThan(100)
        const entries = lines.map((line) => JSON.parse(line) as Record<string, unknown>)
        for (const entry of entries) {
          expect(keysOf(entry)).toEqual([
            "detail", "duration_ms", "level", "message", "method", "operation_id", "organization_id", "reason_code", "request_id", "route", "status", "time"
          ])
        }
        const scanned = entries.find((entry) => entry.request_id === marker)
        expect(scanned).toMatchObject({
          operation_id: "getPublicEncounter",
          route: "/external/v1/encounters/{encounter_id}",
          status: 200,
          reason_code: null,
          organization_id: "org_riverside",
          method: "GET"
        })
        const refusedEntry = entries.find((entry) => entry.reason_code === "missing_scope")
        expect(refusedEntry).toMatchObject({ status: 403, organization_id: null })
        const whole = lines.join("\n")
        const forbidden = [
          ...allTokens,
          ...auditedUrls,
          "media.invalid",
          "Bearer",
          ODD_ENCOUNTER_ID,
          encodeURIComponent(ODD_ENCOUNTER_ID),
          "enc_a1",
          "doc_a1",
          "pat_7f3a",
          "Ada",
          "Moreno",
          "cough"
        ]
        expect(auditedUrls.length).toBeGreaterThan(0)
        for (const secret of forbidden) expect(whole.includes(secret), `log contains ${secret}`).toBe(false)
      })
    })
  })
}
