import { categoryOf, listQueryLimits, type OperationId, operationIds } from "@clinical-api/domain"
import { OpenApi } from "effect/http-api"
import { Validator } from "@seriousme/openapi-schema-validator"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { operationRefusals, PublicHttpApi } from "../src/index.js"
import { contractFixture } from "./support/contract-fixture.js"
import type { StartedServer } from "./support/harness.js"
import { startMemoryServer } from "./support/memory-harness.js"
import { send } from "./contract/http.js"

type Json = { readonly [key: string]: unknown }
const document = OpenApi.fromApi(PublicHttpApi) as unknown as Json
const at = (value: unknown, ...path: ReadonlyArray<string>): unknown =>
  path.reduce<unknown>((node, key) => (typeof node === "object" && node !== null ? (node as Json)[key] : undefined), value)

const operationsOf = (doc: Json) => {
  const found = new Map<string, { readonly path: string; readonly method: string; readonly operation: Json }>()
  for (const [path, item] of Object.entries(at(doc, "paths") as Json)) {
    for (const [method, operation] of Object.entries(item as Json)) {
      found.set(String((operation as Json).operationId), { path, method, operation: operation as Json })
    }
  }
  return found
}

describe("OpenAPI document", () => {
  let server: StartedServer
  beforeAll(async () => {
    server = await startMemoryServer(contractFixture)
  })
  afterAll(() => server.close())

  it("matches the committed snapshot", async () => {
    await expect(`${JSON.stringify(document, null, 2)}\n`).toMatchFileSnapshot("./__snapshots__/openapi.json")
  })

  it("is valid OpenAPI 3.1 (@seriousme/openapi-schema-validator)", async () => {
    const validator = new Validator()
    const result = await validator.validate(structuredClone(document) as never)
    expect(result.errors ?? []).toEqual([])
    expect(result.valid).toBe(true)
    expect(validator.version).toBe("3.1")
  })

  it("is what GET /openapi.json serves, without a key", async () => {
    const response = await send(server.baseUrl, "/openapi.json")
    expect(response.status).toBe(200)
    expect(response.body).toEqual(document)
  })

  it("has the five GET operations with the operationIds of docs/behaviour.md on the contract's paths", () => {
    const operations = operationsOf(document)
    expect([...operations.keys()].sort()).toEqual([...operationIds].sort())
    expect(Object.fromEntries([...operations].map(([id, { method, path }]) => [id, `${method} ${path}`]))).toEqual({
      listPublicEncounters: "get /external/v1/encounters",
      getPublicEncounter: "get /external/v1/encounters/{encounter_id}",
      getPublicDocument: "get /external/v1/encounters/{encounter_id}/documents/{document_id}",
      getPublicDocumentTranscript: "get /external/v1/encounters/{encounter_id}/documents/{document_id}/transcript",
      getPublicDocumentAudio: "get /external/v1/encounters/{encounter_id}/documents/{document_id}/audio"
    })
  })

  it("names the contract's schemas in components, closed where the contract says so", () => {
    const schemas = at(document, "components", "schemas") as Json
    for (const name of [
      "PublicEncounterSummary", "PublicPatientSummary", "PublicEncounterDocumentSummary", "PublicEncounterListResponse",
      "PublicEncounterDetailResponse", "PublicDocumentDetailResponse", "PublicClinicalDocument", "PublicAmbientTranscriptMetadata",
      "PublicFinalTranscript", "PublicTranscriptTurn", "PublicDocumentTranscriptResponse", "PublicDocumentAudioResponse",
      "PublicApiErrorResponse", "RecordingTranscriptReadyEvent"
    ]) {
      expect(schemas[name], name).toBeDefined()
    }
    expect(at(schemas, "PublicEncounterSummary", "additionalProperties")).toBe(false)
    expect(at(schemas, "PublicApiErrorResponse", "additionalProperties")).toBe(false)
    expect(at(schemas, "PublicApiErrorResponse", "required")).toEqual(["error", "reason_code", "message", "field"])
    expect(at(schemas, "Timestamp", "format")).toBe("date-time")
    expect(JSON.stringify(document)).not.toContain("HttpApiDecodeError")
  })

  it("documents null only where the contract says \"or null\" and requires what it requires (docs/api.md, section 2)", () => {
    const schemas = at(document, "components", "schemas") as Json
    const contract: Readonly<Record<string, { readonly required: ReadonlyArray<string>; readonly nullable: ReadonlyArray<string> }>> = {
      PublicEncounterSummary: {
        required: ["encounter_id", "organization_id", "created_at", "updated_at"],
        nullable: ["date_of_service", "encounter_type", "status", "patient"]
      },
      PublicPatientSummary: { required: ["patient_id"], nullable: ["first_name", "last_name", "date_of_birth"] },
      PublicEncounterDocumentSummary: {
        required: ["document_id", "schema_type"],
        nullable: ["title", "status", "workflow_variant", "audio_duration_seconds"]
      },
      PublicEncounterListResponse: { required: ["items", "limit", "offset", "total"], nullable: [] },
      PublicEncounterDetailResponse: { required: ["encounter"], nullable: [] },
      PublicDocumentDetailResponse: { required: ["document"], nullable: [] },
      PublicClinicalDocument: {
        required: ["document_id", "encounter_id", "schema_type", "content", "created_at", "updated_at"],
        nullable: ["title", "status", "workflow_variant"]
      },
      PublicDocumentContent: { required: [], nullable: ["text"] },
      PublicAmbientTranscriptMetadata: {
        required: ["document_id", "encounter_id", "schema_type", "created_at", "updated_at"],
        nullable: ["title", "status", "workflow_variant", "audio_duration_seconds"]
      },
      PublicFinalTranscript: { required: ["provider", "turns"], nullable: ["audio_duration_seconds"] },
      PublicTranscriptTurn: { required: ["speaker", "text", "start", "end"], nullable: [] },
      PublicDocumentTranscriptResponse: { required: ["document_id", "encounter_id", "transcript"], nullable: [] },
      PublicDocumentAudioResponse: { required: ["audio_url", "expires_at"], nullable: [] },
      PublicApiErrorResponse: { required: ["error", "reason_code", "message", "field"], nullable: ["field"] },
      RecordingTranscriptReadyEvent: {
        required: ["id", "type", "api_version", "occurred_at", "organization_id", "resources"],
        nullable: []
      },
      RecordingTranscriptReadyResources: { required: ["encounter_id", "document_id"], nullable: [] }
    }
    const allowsNull = (schema: unknown): boolean =>
      at(schema, "type") === "null" ||
      (Array.isArray(at(schema, "anyOf")) && (at(schema, "anyOf") as ReadonlyArray<unknown>).some(allowsNull))
    for (const [name, { nullable, required }] of Object.entries(contract)) {
      const properties = at(schemas, name, "properties") as Json
      expect(at(schemas, name, "required") ?? [], name).toEqual(required)
      expect(Object.keys(properties).filter((key) => allowsNull(properties[key])), name).toEqual(nullable)
      expect(at(schemas, name, "additionalProperties"), name).toBe(false)
    }
  })

  it("gives timestamps, date_of_birth and occurred_at the contract's formats", () => {
    const schemas = at(document, "components", "schemas") as Json
    const resolved = (schema: unknown): unknown => {
      const ref = at(schema, "$ref")
      if (typeof ref === "string") return resolved(schemas[ref.replace("#/components/schemas/", "")])
      const members = at(schema, "anyOf")
      return Array.isArray(members) ? resolved(members.find((member) => at(member, "type") !== "null")) : schema
    }
    const formatOf = (component: string, property: string) => at(resolved(at(schemas, component, "properties", property)), "format")
    for (const component of ["PublicEncounterSummary", "PublicClinicalDocument", "PublicAmbientTranscriptMetadata"]) {
      expect(formatOf(component, "created_at"), component).toBe("date-time")
      expect(formatOf(component, "updated_at"), component).toBe("date-time")
    }
    expect(formatOf("PublicEncounterSummary", "date_of_service")).toBe("date-time")
    expect(formatOf("PublicDocumentAudioResponse", "expires_at")).toBe("date-time")
    expect(formatOf("PublicPatientSummary", "date_of_birth")).toBe("date")
    expect(formatOf("RecordingTranscriptReadyEvent", "occurred_at")).toBe("date-time")
    expect(at(schemas, "CalendarDate")).toMatchObject({ type: "string", format: "date" })
    expect(at(schemas, "WebhookEventDateTime")).toMatchObject({ type: "string", format: "date-time" })
  })

  it("documents limit, offset and total of a list page as the integers they can be", () => {
    const page = at(document, "components", "schemas", "PublicEncounterListResponse", "properties") as Json
    expect(page.limit).toMatchObject({ type: "integer", minimum: 1 })
    expect(page.offset).toMatchObject({ type: "integer", minimum: 0 })
    expect(page.total).toMatchObject({ type: "integer", minimum: 0 })
  })

  it("documents each operation's error responses per status with the reason codes it can answer", () => {
    const operations = operationsOf(document)
    for (const operationId of operationIds) {
      const responses = at(operations.get(operationId)?.operation, "responses") as Json
      const expected = operationRefusals(operationId)
      expect(Object.keys(responses).sort()).toEqual(["200", ...expected.map(({ status }) => String(status))].sort())
      for (const { codes, status } of expected) {
        const schema = at(responses, String(status), "content", "application/json", "schema")
        expect(at(schema, "properties", "reason_code", "enum"), `${operationId} ${status}`).toEqual(codes)
        expect(at(schema, "properties", "error", "enum")).toEqual([categoryOf(codes[0])])
        expect(at(schema, "additionalProperties")).toBe(false)
        expect(at(schema, "required")).toEqual(["error", "reason_code", "message", "field"])
      }
    }
    const statuses = (operationId: OperationId) => operationRefusals(operationId).map(({ status }) => status)
    expect(statuses("listPublicEncounters")).toEqual([400, 401, 403, 422, 503])
    expect(statuses("getPublicEncounter")).toEqual([400, 401, 403, 404, 503])
    const audio = operationRefusals("getPublicDocumentAudio")
    expect(audio.find(({ status }) => status === 503)?.codes).toEqual(["digest_key_unavailable", "audio_storage_unavailable"])
    expect(audio.find(({ status }) => status === 404)?.codes).toEqual(["encounter_not_found", "document_not_found", "audio_not_found"])
  })

  it("documents the list query parameters and none elsewhere but the path ids", () => {
    const operations = operationsOf(document)
    const names = (operationId: OperationId) =>
      (at(operations.get(operationId)?.operation, "parameters") as ReadonlyArray<Json>).map((parameter) => `${parameter.in}:${parameter.name}`)
    expect(names("listPublicEncounters")).toEqual(["query:limit", "query:offset", "query:sort_order", "query:start_at", "query:end_at"])
    expect(names("getPublicDocumentAudio")).toEqual(["path:encounter_id", "path:document_id"])
  })

  it("takes the list query's bounds from the domain (list-query.ts): a changed bound shows in the document", () => {
    const limitOf = (doc: Json) =>
      (at(operationsOf(doc).get("listPublicEncounters")?.operation, "parameters") as ReadonlyArray<Json>).find((parameter) => parameter.name === "limit")
    expect(limitOf(document)?.schema).toMatchObject({ minimum: 1, maximum: 100, default: 50 })
    const bounds = listQueryLimits.limit as { max: number }
    const published = bounds.max
    bounds.max = 250
    try {
      // A new options object: OpenApi.fromApi caches the document per options object.
      const changed = OpenApi.fromApi(PublicHttpApi, {}) as unknown as Json
      expect(limitOf(changed)?.schema).toMatchObject({ minimum: 1, maximum: 250, default: 50 })
      expect(limitOf(changed)?.description).toContain("1..250")
      expect(String(at(changed, "info", "description"))).toContain("`limit` (1..250, default 50)")
    } finally {
      bounds.max = published
    }
  })

  it("declares the bearer scheme and requires it on every operation", () => {
    expect(at(document, "components", "securitySchemes", "bearerAuth")).toMatchObject({ type: "http", scheme: "bearer" })
    for (const { operation } of operationsOf(document).values()) expect(operation.security).toEqual([{ bearerAuth: [] }])
  })

  it("describes recording.transcript_ready in webhooks (POST, body schema, the five Service- headers), not webhook.endpoint_test", () => {
    const webhook = at(document, "webhooks", "recording.transcript_ready", "post") as Json
    expect(at(webhook, "requestBody", "content", "application/json", "schema")).toEqual({ $ref: "#/components/schemas/RecordingTranscriptReadyEvent" })
    expect((webhook.parameters as ReadonlyArray<Json>).map((parameter) => [parameter.in, parameter.name, parameter.required])).toEqual([
      ["header", "Service-Event-Id", true],
      ["header", "Service-Delivery-Id", true],
      ["header", "Service-Timestamp", true],
      ["header", "Service-Signature", true],
      ["header", "Service-Webhook-Version", true]
    ])
    expect(Object.keys(at(document, "webhooks") as Json)).toEqual(["recording.transcript_ready"])
    expect(JSON.stringify(document)).not.toContain("endpoint_test")
    expect(at(document, "components", "schemas", "RecordingTranscriptReadyEvent", "additionalProperties")).toBe(false)
  })

  it("documents the decisions: order of checks, query rules, 404/405 outside the contract, headers", () => {
    const description = String(at(document, "info", "description"))
    for (const phrase of ["route_not_found", "method_not_allowed", "Allow: GET", "Cache-Control: no-store", "X-Request-Id", "canonical decimal", "digest_key_unavailable", "never answers 500", "additionalProperties: false"]) {
      expect(description).toContain(phrase)
    }
  })
})
