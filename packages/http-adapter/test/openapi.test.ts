import { execFile } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { promisify } from "node:util"
import { categoryOf, listQueryLimits, MemoryStoreLayer, type OperationId, operationIds } from "@clinical-api/domain"
import { sandboxFixturePath } from "@clinical-api/storage-adapter"
import { ConfigProvider, Effect, Option, Redacted } from "effect"
import { OpenApi } from "effect/http-api"
import { Validator } from "@seriousme/openapi-schema-validator"
import { Ajv2020 } from "ajv/dist/2020.js"
import addFormatsModule from "ajv-formats"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { serviceConfig } from "../src/config.js"
import { operationRefusals, publishedAt, PublicHttpApi } from "../src/index.js"
import { contractFixture } from "./support/contract-fixture.js"
import { dataSetFromFixture, type FixtureDocument } from "./support/fixture-data-set.js"
import { type StartedServer, startService } from "./support/harness.js"
import { startMemoryServer } from "./support/memory-harness.js"
import { send } from "./contract/http.js"

type Json = { readonly [key: string]: unknown }
/** What `pnpm start` serves with the default configuration: no PUBLIC_BASE_URL, listening on 127.0.0.1:8080. */
const DEFAULT_SERVER_URL = "http://127.0.0.1:8080"
const document = OpenApi.fromApi(publishedAt(DEFAULT_SERVER_URL)) as unknown as Json
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

  it("is what GET /openapi.json serves, without a key, the listening address as its server", async () => {
    const response = await send(server.baseUrl, "/openapi.json")
    expect(response.status).toBe(200)
    expect(response.body).toEqual(OpenApi.fromApi(publishedAt(server.baseUrl)))
    expect(at(response.body, "servers")).toEqual([{ url: server.baseUrl, description: "This service" }])
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

// ajv-formats is CommonJS: its default export is the plugin function.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020

/** The errors of `value` against `schema`, a schema of `doc` (its `#/components/...` references resolved). */
const schemaChecker = (doc: Json) => {
  const ajv = addFormats(new Ajv2020({ strict: false, allErrors: true }))
  const components = at(doc, "components")
  return (schema: unknown, value: unknown) => {
    const validate = ajv.compile({ ...(schema as Json), components })
    return validate(value) ? [] : validate.errors ?? []
  }
}

const refusalSchemas = (doc: Json) =>
  [...operationsOf(doc)].flatMap(([operationId, { operation }]) =>
    Object.entries(operation.responses as Json)
      .filter(([status]) => Number(status) >= 400)
      .map(([status, response]) => ({ label: `${operationId} ${status}`, schema: at(response, "content", "application/json", "schema") as Json }))
  )

/** Every `$ref` target under `node`. */
const referencesIn = (node: unknown): ReadonlyArray<string> => {
  if (Array.isArray(node)) return node.flatMap(referencesIn)
  if (typeof node !== "object" || node === null) return []
  const own = typeof (node as Json).$ref === "string" ? [String((node as Json).$ref)] : []
  return [...own, ...Object.values(node).flatMap(referencesIn)]
}

const requireHere = createRequire(import.meta.url)
/** The script of a package's command, run with this Node (no PATH, no npx, no network). */
const commandOf = (pkg: string, command: string): string => {
  const manifest = requireHere.resolve(`${pkg}/package.json`)
  const { bin } = JSON.parse(readFileSync(manifest, "utf8")) as { readonly bin: Readonly<Record<string, string>> }
  return join(dirname(manifest), bin[command] ?? "")
}
const run = async (args: ReadonlyArray<string>): Promise<string> => {
  const env = { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true", NO_COLOR: "1" }
  try {
    return (await promisify(execFile)(process.execPath, args, { env, maxBuffer: 64 * 1024 * 1024 })).stdout
  } catch (failure) {
    // Both linters exit 1 when they report an error; their JSON report is on stdout all the same.
    const stdout = (failure as { readonly stdout?: string }).stdout
    if (typeof stdout === "string" && stdout.trim() !== "") return stdout
    throw failure
  }
}

describe("OpenAPI document for tools", () => {
  const schemas = at(document, "components", "schemas") as Json
  const errorsOf = schemaChecker(document)

  it("gives every named schema an example that it accepts", () => {
    for (const [name, schema] of Object.entries(schemas)) {
      const examples = at(schema, "examples")
      expect(Array.isArray(examples) && examples.length > 0, `${name} has examples`).toBe(true)
      for (const example of examples as ReadonlyArray<unknown>) expect(errorsOf(schema, example), name).toEqual([])
    }
  })

  it("gives every parameter, of the operations and of the webhook, an example its schema accepts", () => {
    const parameters = [
      ...[...operationsOf(document).values()].flatMap(({ operation }) => operation.parameters as ReadonlyArray<Json>),
      ...(at(document, "webhooks", "recording.transcript_ready", "post", "parameters") as ReadonlyArray<Json>)
    ]
    // 5 list query keys, 1 + 3 * 2 path ids, 5 webhook headers.
    expect(parameters).toHaveLength(17)
    for (const parameter of parameters) {
      const label = `${String(parameter.in)} ${String(parameter.name)}`
      expect(parameter.example, label).toBeDefined()
      expect(parameter.example, label).not.toBe("")
      expect(errorsOf(parameter.schema, parameter.example), label).toEqual([])
    }
  })

  it("gives every refusal an example of each reason code it documents, as a PublicApiErrorResponse", () => {
    for (const { label, schema } of refusalSchemas(document)) {
      const examples = schema.examples as ReadonlyArray<Json>
      expect(examples.map((example) => example.reason_code), label).toEqual(at(schema, "properties", "reason_code", "enum"))
      for (const example of examples) expect(errorsOf(schema, example), label).toEqual([])
      expect(schema.allOf, label).toEqual([{ $ref: "#/components/schemas/PublicApiErrorResponse" }])
    }
  })

  it("has no stray component: each one is reached from an operation or the webhook", () => {
    const reached = new Set<string>()
    const pending = [...referencesIn(at(document, "paths")), ...referencesIn(at(document, "webhooks"))]
    for (let ref = pending.pop(); ref !== undefined; ref = pending.pop()) {
      const name = ref.replace("#/components/schemas/", "")
      if (reached.has(name)) continue
      reached.add(name)
      pending.push(...referencesIn(schemas[name]))
    }
    expect([...reached].sort()).toEqual(Object.keys(schemas).sort())
  })

  it("names PUBLIC_BASE_URL as its one server when it is set", async () => {
    const digestKey = "openapi-test-digest-key-of-at-least-32-characters"
    const service = await startService(
      { PUBLIC_BASE_URL: "https://encounters.clinic.test/gateway/", API_KEY_DIGEST_KEY: digestKey },
      { overrides: { storage: MemoryStoreLayer(dataSetFromFixture(contractFixture, Redacted.make(digestKey))) } }
    )
    try {
      const response = await send(service.baseUrl, "/openapi.json")
      expect(at(response.body, "servers")).toEqual([{ url: "https://encounters.clinic.test/gateway", description: "This service" }])
    } finally {
      await service.close()
    }
  })

  it("refuses a PUBLIC_BASE_URL that is not an absolute http(s) URL, naming the variable", async () => {
    const parse = (url: string) => Effect.runPromise(serviceConfig.parse(ConfigProvider.fromEnv({ env: { PUBLIC_BASE_URL: url } })))
    for (const url of ["encounters.clinic.test", "ftp://encounters.clinic.test", "https://encounters.clinic.test/?a=1", "https://user:secret@encounters.clinic.test"]) {
      await expect(parse(url), url).rejects.toThrow(/PUBLIC_BASE_URL/)
    }
    expect(Option.getOrNull((await parse("http://127.0.0.1:8080/")).publicBaseUrl)).toBe("http://127.0.0.1:8080")
  })

  describe("linted offline by the pinned @redocly/cli and @stoplight/spectral-cli", () => {
    let directory: string
    let file: string
    beforeAll(() => {
      directory = mkdtempSync(join(tmpdir(), "openapi-lint-"))
      file = join(directory, "openapi.json")
      writeFileSync(file, JSON.stringify(document, null, 2))
    })
    afterAll(() => rmSync(directory, { recursive: true, force: true }))

    it("Redocly's recommended rules report no error", async () => {
      const config = new URL("./support/redocly.yaml", import.meta.url).pathname
      const report = JSON.parse(await run([commandOf("@redocly/cli", "redocly"), "lint", "--config", config, "--format", "json", file])) as {
        readonly totals: { readonly errors: number }
        readonly problems: ReadonlyArray<{ readonly severity: string; readonly ruleId: string; readonly message: string }>
      }
      expect(report.problems.filter((problem) => problem.severity === "error")).toEqual([])
      expect(report.totals.errors).toBe(0)
      expect(report.problems.map((problem) => problem.ruleId)).not.toContain("no-unused-components")
    }, 60_000)

    it("Spectral's oas ruleset reports no error", async () => {
      const ruleset = new URL("./support/spectral.yaml", import.meta.url).pathname
      const output = await run([commandOf("@stoplight/spectral-cli", "spectral"), "lint", "--ruleset", ruleset, "--format", "json", file])
      const diagnostics = JSON.parse(output.slice(output.indexOf("["))) as ReadonlyArray<{ readonly severity: number; readonly code: string; readonly message: string }>
      // Severity 0 is an error.
      expect(diagnostics.filter((diagnostic) => diagnostic.severity === 0)).toEqual([])
      expect(diagnostics.map((diagnostic) => diagnostic.code)).not.toContain("oas3-unused-component")
    }, 60_000)
  })
})

describe("the examples, sent to the sandbox data", () => {
  const fixture = JSON.parse(readFileSync(sandboxFixturePath, "utf8")) as FixtureDocument
  const sandboxKey = fixture.api_keys.find((key) => key.label === "riverside full access")?.token ?? ""
  let sandbox: StartedServer
  beforeAll(async () => {
    sandbox = await startMemoryServer(fixture)
  }, 60_000)
  afterAll(() => sandbox?.close())

  /** The operation's example request: its path with the example ids, the list's example query. */
  const exampleTarget = (path: string, operation: Json) => {
    const parameters = operation.parameters as ReadonlyArray<Json>
    const filled = path.replace(/\{(\w+)\}/g, (_, name: string) =>
      encodeURIComponent(String(parameters.find((parameter) => parameter.name === name)?.example)))
    const query = new URLSearchParams(
      parameters.filter((parameter) => parameter.in === "query").map((parameter): [string, string] => [String(parameter.name), String(parameter.example)])
    ).toString()
    return query === "" ? filled : `${filled}?${query}`
  }
  const exampleOf = (operation: Json) => {
    const ref = String(at(operation, "responses", "200", "content", "application/json", "schema", "$ref"))
    return (at(document, "components", "schemas", ref.replace("#/components/schemas/", ""), "examples") as ReadonlyArray<unknown>)[0]
  }

  it("every operation's example request answers 200 with the sandbox key and what its example shows", async () => {
    const validator = schemaChecker(document)
    for (const [operationId, { operation, path }] of operationsOf(document)) {
      const response = await send(sandbox.baseUrl, exampleTarget(path, operation), { headers: { authorization: `Bearer ${sandboxKey}` } })
      expect(response.status, `${operationId}: ${response.text}`).toBe(200)
      expect(validator(at(operation, "responses", "200", "content", "application/json", "schema"), response.body), operationId).toEqual([])
      const example = exampleOf(operation) as Json
      switch (operationId as OperationId) {
        case "listPublicEncounters":
        case "getPublicEncounter":
        case "getPublicDocument":
          expect(response.body, operationId).toEqual(example)
          break
        case "getPublicDocumentTranscript": {
          // The example shows the first turns of the transcript.
          const turns = at(example, "transcript", "turns") as ReadonlyArray<unknown>
          expect(response.body).toMatchObject({ ...example, transcript: { ...(example.transcript as Json), turns: expect.any(Array) } })
          expect((at(response.body, "transcript", "turns") as ReadonlyArray<unknown>).slice(0, turns.length)).toEqual(turns)
          break
        }
        case "getPublicDocumentAudio":
          expect(Object.keys(response.body as Json)).toEqual(Object.keys(example))
          break
      }
    }
  })
})
