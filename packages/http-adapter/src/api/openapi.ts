import {
  defaultListQuery,
  type ListQueryKey,
  listQueryKeys,
  listQueryLimits,
  type OperationId,
  type ReasonCode,
  SortOrder,
  WEBHOOK_API_VERSION,
  WebhookHeaders
} from "@clinical-api/domain"
import { apiDescription } from "./descriptions.js"
import { listQueryExample, pathParameterExamples, refusalExample, schemaExamples, webhookHeaderExamples } from "./examples.js"

/**
 * The one place the generated OpenAPI document is finished (installed as the `HttpApi`'s
 * `OpenApi.Transform`, so `/openapi.json`, `/docs` and the snapshot all see the same
 * document). It adds what `HttpApi` cannot express without the platform pitfalls the
 * adapter avoids (the bearer scheme without `HttpApiSecurity`, the list query without a
 * query schema, both read from the domain when the document is made), describes the path
 * parameters where readers look for them, discriminates the document detail, adds the
 * webhook, and gives every schema and parameter its example from examples.ts.
 */

type JsonObject = { [key: string]: unknown }

const isObject = (value: unknown): value is JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const objectAt = (value: unknown, path: string): JsonObject => {
  if (!isObject(value)) throw new Error(`OpenAPI document: expected an object at ${path}`)
  return value
}

export const BEARER_SCHEME = "bearerAuth"

/** What the document says of each list query key; the bounds and defaults are the domain's. */
const listQueryParameterDocs: { readonly [K in ListQueryKey]: (limits: typeof listQueryLimits) => { readonly description: string; readonly schema: JsonObject } } = {
  limit: ({ limit }) => ({
    description: `Page size, ${limit.min}..${limit.max}, canonical decimal text. Invalid: 422 \`invalid_limit\`.`,
    schema: { type: "integer", minimum: limit.min, maximum: limit.max, default: limit.default }
  }),
  offset: ({ offset }) => ({
    description: `Zero-based offset, ${offset.min}..${offset.max}, canonical decimal text. Invalid: 422 \`invalid_offset\`.`,
    schema: { type: "integer", minimum: offset.min, maximum: offset.max, default: offset.default }
  }),
  sort_order: () => ({
    description: "Direction of `created_at` (ties by `encounter_id`). Invalid: 422 `invalid_sort`.",
    schema: { type: "string", enum: [...SortOrder.literals], default: defaultListQuery.sortOrder }
  }),
  start_at: () => ({
    description:
      "Inclusive lower bound on `created_at`: RFC 3339 date-time with an explicit offset. Invalid: 422 `invalid_query` (field `start_at`); also when not earlier than `end_at`.",
    schema: { type: "string", format: "date-time" }
  }),
  end_at: () => ({
    description:
      "Exclusive upper bound on `created_at`: RFC 3339 date-time with an explicit offset. Invalid: 422 `invalid_query` (field `end_at`).",
    schema: { type: "string", format: "date-time" }
  })
}

/**
 * The list route's query parameters, read from the domain when the document is made. They are
 * not an endpoint query schema: one would drop unknown keys, which the domain refuses in order.
 */
const listQueryParameters = () =>
  listQueryKeys.map((name) => {
    const { description, schema } = listQueryParameterDocs[name](listQueryLimits)
    return { name, in: "query", required: false, description, schema, example: listQueryExample[name] }
  })

const webhookHeaderDocs: ReadonlyArray<readonly [string, string]> = [
  [WebhookHeaders.eventId, "Equals body `id`. The business idempotency key: deduplicate by it."],
  [WebhookHeaders.deliveryId, "Stable for one event and endpoint delivery, reused across retries. Debug metadata only."],
  [WebhookHeaders.timestamp, "Decimal Unix epoch seconds; the signing timestamp (not necessarily `occurred_at`)."],
  [WebhookHeaders.signature, "`v1=` followed by the hex HMAC-SHA256 of `<Service-Timestamp>.<raw body>` keyed with the endpoint signing secret."],
  [WebhookHeaders.version, `Equals body \`api_version\`. Current value \`${WEBHOOK_API_VERSION}\`.`]
]

const transcriptReadyWebhook = {
  post: {
    operationId: "recordingTranscriptReady",
    summary: "recording.transcript_ready",
    description: `Planned, not generally available (\`planned_not_generally_available\`): by default no delivery is sent.

A thin pointer: a recording transcript is ready. The body holds no transcript, patient, audio
URL or secret; fetch the data through the REST routes. Verify the signature over the exact raw
body bytes, reject timestamps more than 300 seconds from your clock, and reject when
\`Service-Event-Id\` differs from body \`id\` or \`Service-Webhook-Version\` from body
\`api_version\`. Delivery is at least once: deduplicate by \`Service-Event-Id\`.`,
    parameters: webhookHeaderDocs.map(([name, description]) => ({
      name,
      in: "header",
      required: true,
      description,
      schema: { type: "string", minLength: 1 },
      example: webhookHeaderExamples[name]
    })),
    requestBody: {
      required: true,
      content: { "application/json": { schema: { $ref: "#/components/schemas/RecordingTranscriptReadyEvent" } } }
    },
    responses: {
      "2XX": { description: "Success; no acknowledgement body is required." },
      default: {
        description:
          "Connection errors, time-outs, 408, 409, 425, 429 and 5xx are retried; 1xx, 3xx and other 4xx are terminal."
      }
    },
    security: []
  }
}

/** A path parameter's description where readers of the operation look for it, and the operation's example value. */
const describePathParameters = (operation: JsonObject, examples: Readonly<Record<string, string>>): void => {
  if (!Array.isArray(operation.parameters)) return
  operation.parameters = operation.parameters.map((parameter: unknown) => {
    if (!isObject(parameter) || !isObject(parameter.schema) || typeof parameter.schema.description !== "string") return parameter
    const { name, required, schema } = parameter
    return { name, in: parameter.in, description: schema.description, required, schema, example: examples[String(name)] }
  })
}

/**
 * A refusal's schema narrows the contract's `PublicApiErrorResponse` to the codes the operation
 * answers with that status; each of those codes is one of its examples.
 */
const describeRefusals = (operation: JsonObject): void => {
  for (const [status, response] of Object.entries(objectAt(operation.responses, "responses"))) {
    if (Number(status) < 400) continue
    const schema = objectAt(objectAt(objectAt(objectAt(response, status).content, "content")["application/json"], "application/json").schema, "schema")
    const codes = objectAt(objectAt(schema.properties, "properties").reason_code, "reason_code").enum as ReadonlyArray<ReasonCode>
    schema.allOf = [{ $ref: "#/components/schemas/PublicApiErrorResponse" }]
    schema.examples = codes.map(refusalExample)
  }
}

const discriminateDocumentDetail = (schemas: JsonObject): void => {
  const detail = objectAt(objectAt(schemas.PublicDocumentDetailResponse, "PublicDocumentDetailResponse").properties, "properties")
  const document = objectAt(detail.document, "document")
  if (!Array.isArray(document.anyOf)) return
  detail.document = {
    oneOf: document.anyOf,
    discriminator: {
      propertyName: "schema_type",
      mapping: {
        document: "#/components/schemas/PublicClinicalDocument",
        ambient_transcript: "#/components/schemas/PublicAmbientTranscriptMetadata"
      }
    }
  }
}

export const finishOpenApiDocument = (spec: Record<string, unknown>): Record<string, unknown> => {
  const document: JsonObject = structuredClone(spec)
  objectAt(document.info, "info").description = apiDescription()
  const components = objectAt(document.components, "components")
  const schemas = objectAt(components.schemas, "components.schemas")

  discriminateDocumentDetail(schemas)
  for (const [name, schema] of Object.entries(schemas)) {
    if (name in schemaExamples) objectAt(schema, name).examples = [schemaExamples[name]]
  }

  components.securitySchemes = {
    [BEARER_SCHEME]: {
      type: "http",
      scheme: "bearer",
      bearerFormat: "API key: ce_live_ or ce_test_ followed by 36 base62 characters",
      description: "Organization-scoped API key sent as `Authorization: Bearer <API_KEY>`; the scheme is case-insensitive."
    }
  }
  document.security = [{ [BEARER_SCHEME]: [] }]

  const paths = objectAt(document.paths, "paths")
  for (const [path, item] of Object.entries(paths)) {
    const operation = objectAt(objectAt(item, path).get, `${path}.get`)
    operation.security = [{ [BEARER_SCHEME]: [] }]
    const operationId = operation.operationId as OperationId
    if (operationId === "listPublicEncounters") operation.parameters = listQueryParameters()
    describePathParameters(operation, pathParameterExamples[operationId])
    describeRefusals(operation)
  }

  document.webhooks = { "recording.transcript_ready": transcriptReadyWebhook }
  return document
}
