import { Ajv2020 } from "ajv/dist/2020.js"
import addFormatsModule from "ajv-formats"
import type { ValidateFunction } from "ajv"

type JsonObject = { readonly [key: string]: unknown }
const isObject = (value: unknown): value is JsonObject => typeof value === "object" && value !== null && !Array.isArray(value)

// ajv-formats is CommonJS: its default export is the plugin function.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020

/**
 * Validates response bodies against the OpenAPI document the server serves: the schema of
 * (operationId, status), or the error body schema for answers outside the operations.
 */
export const makeResponseValidator = (document: unknown) => {
  if (!isObject(document) || !isObject(document.paths) || !isObject(document.components)) {
    throw new Error("not an OpenAPI document")
  }
  const components = document.components
  const ajv = addFormats(new Ajv2020({ strict: false, allErrors: true }))
  const cache = new Map<string, ValidateFunction>()
  const compile = (key: string, schema: unknown) => {
    const cached = cache.get(key)
    if (cached !== undefined) return cached
    if (!isObject(schema)) throw new Error(`no schema for ${key}`)
    const validate = ajv.compile({ ...schema, components })
    cache.set(key, validate)
    return validate
  }
  const operations = new Map<string, JsonObject>()
  for (const item of Object.values(document.paths)) {
    if (!isObject(item)) continue
    for (const operation of Object.values(item)) {
      if (isObject(operation) && typeof operation.operationId === "string") operations.set(operation.operationId, operation)
    }
  }

  const schemaOf = (operationId: string, status: number): unknown => {
    const operation = operations.get(operationId)
    if (operation === undefined) throw new Error(`no operation ${operationId}`)
    const responses = operation.responses
    const response = isObject(responses) ? responses[String(status)] : undefined
    if (!isObject(response)) throw new Error(`${operationId} documents no ${status} response`)
    const content = response.content
    const media = isObject(content) ? content["application/json"] : undefined
    return isObject(media) ? media.schema : undefined
  }

  /** Throws with the validation errors when `body` does not match. */
  const check = (validate: ValidateFunction, label: string, body: unknown) => {
    if (!validate(body)) {
      throw new Error(`${label}: body does not match the OpenAPI document: ${JSON.stringify(validate.errors)}\n${JSON.stringify(body)}`)
    }
  }

  return {
    operationIds: [...operations.keys()],
    validate: (operationId: string, status: number, body: unknown) =>
      check(compile(`${operationId} ${status}`, schemaOf(operationId, status)), `${operationId} ${status}`, body),
    validateErrorBody: (body: unknown) =>
      check(compile("PublicApiErrorResponse", { $ref: "#/components/schemas/PublicApiErrorResponse" }), "PublicApiErrorResponse", body)
  }
}

export type ResponseValidator = ReturnType<typeof makeResponseValidator>
