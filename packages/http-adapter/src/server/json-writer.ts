import { formatTimestamp, Timestamp } from "@clinical-api/domain"
import type { Schema, SchemaAST } from "effect"

/**
 * A success body's JSON text, written by a function compiled once from the body's schema
 * instead of encoding the value through the schema and then calling `JSON.stringify` on the
 * result: for a 50-item list page that was about a third of the service's CPU per request
 * (docs/decisions/0013-success-bodies-written-from-their-schemas.md).
 *
 * The writer walks the schema's type side and writes the value in the schema's key order. It
 * covers a schema whose only transformations are the domain's `Timestamp` (a `Date` written as
 * UTC with milliseconds) and identity ones (the decoding defaults of optional keys): any other
 * transformation, or a form the compiler does not know, compiles to `undefined`, and the caller
 * encodes through the schema.
 * `json-writer.test.ts` checks the text against `JSON.stringify` of `Schema.encode` for every
 * success schema of the API over generated values.
 */
export type JsonWriter = (value: unknown) => string

type Compiled = JsonWriter | undefined

const writeString: JsonWriter = (value) => JSON.stringify(value)

const writeNumber: JsonWriter = (value) =>
  // JSON.stringify writes NaN and the infinities as null, and String(-0) is "0" as it is.
  typeof value === "number" && Number.isFinite(value) ? String(value) : JSON.stringify(value)

const writeTimestamp: JsonWriter = (value) =>
  value instanceof Date ? `"${formatTimestamp(value)}"` : JSON.stringify(value)

const isScalar = (ast: SchemaAST.AST): boolean =>
  ast.encoding === undefined &&
  (ast._tag === "Literal" || ast._tag === "String" || ast._tag === "Number" || ast._tag === "Boolean" ||
    (ast._tag === "Union" && ast.types.every(isScalar)))

/** The members' common property whose every member fixes a different literal, if there is one. */
const discriminant = (members: ReadonlyArray<SchemaAST.Objects>): string | undefined => {
  const first = members[0]
  if (first === undefined) return undefined
  for (const candidate of first.propertySignatures) {
    if (typeof candidate.name !== "string") continue
    const literals = members.map((member) => {
      const property = member.propertySignatures.find((signature) => signature.name === candidate.name)
      return property?.type._tag === "Literal" && property.type.encoding === undefined ? property.type.literal : undefined
    })
    if (literals.every((literal) => literal !== undefined) && new Set(literals).size === literals.length) {
      return candidate.name
    }
  }
  return undefined
}

const compileObjects = (ast: SchemaAST.Objects): Compiled => {
  if (ast.indexSignatures.length > 0) return undefined
  const fields: Array<{ readonly name: string; readonly prefix: string; readonly optional: boolean; readonly write: JsonWriter }> = []
  for (const signature of ast.propertySignatures) {
    if (typeof signature.name !== "string") return undefined
    const write = compile(signature.type)
    if (write === undefined) return undefined
    fields.push({
      name: signature.name,
      prefix: JSON.stringify(signature.name) + ":",
      optional: signature.type.context?.isOptional === true,
      write
    })
  }
  return (value) => {
    const record = value as Record<string, unknown>
    let text = "{"
    for (const field of fields) {
      const item = record[field.name]
      if (item === undefined && field.optional) continue
      text += (text.length === 1 ? "" : ",") + field.prefix + field.write(item)
    }
    return text + "}"
  }
}

const compileUnion = (ast: SchemaAST.Union): Compiled => {
  const nullable = ast.types.some((member) => member._tag === "Null")
  const others = ast.types.filter((member) => member._tag !== "Null")
  let write: Compiled
  if (others.length === 1) {
    write = compile(others[0]!)
  } else if (others.every(isScalar)) {
    write = writeString
  } else if (others.every((member): member is SchemaAST.Objects => member._tag === "Objects" && member.encoding === undefined)) {
    const key = discriminant(others)
    if (key === undefined) return undefined
    const byLiteral = new Map<unknown, JsonWriter>()
    for (const member of others) {
      const literal = member.propertySignatures.find((signature) => signature.name === key)!.type as SchemaAST.Literal
      const memberWrite = compileObjects(member)
      if (memberWrite === undefined) return undefined
      byLiteral.set(literal.literal, memberWrite)
    }
    write = (value) => {
      const chosen = byLiteral.get((value as Record<string, unknown>)[key])
      if (chosen === undefined) throw new TypeError(`no member of the union has ${key} ${String((value as Record<string, unknown>)[key])}`)
      return chosen(value)
    }
  }
  if (write === undefined) return undefined
  const some = write
  return nullable ? (value) => (value === null ? "null" : some(value)) : some
}

/** Whether `ast` or anything inside it transforms its value. */
const transformsAnywhere = (ast: SchemaAST.AST): boolean => {
  if (ast.encoding !== undefined) return true
  switch (ast._tag) {
    case "Objects":
      return ast.propertySignatures.some((signature) => transformsAnywhere(signature.type)) ||
        ast.indexSignatures.length > 0
    case "Arrays":
      return [...ast.elements, ...ast.rest].some(transformsAnywhere)
    case "Union":
      return ast.types.some(transformsAnywhere)
    default:
      return false
  }
}

/**
 * A chain of identity transformations writes what its outermost encoded side writes: the value
 * passes through every link unchanged. Only then does the writer follow it.
 */
const compileIdentityChain = (links: ReadonlyArray<SchemaAST.Link>): Compiled => {
  const last = links[links.length - 1]
  if (last === undefined) return undefined
  const identity = links.every((link, index) =>
    link.transformation._tag === "Transformation" && link.transformation.encode._tag === "Passthrough" &&
    (index === links.length - 1 || !transformsAnywhere(link.to))
  )
  return identity ? compile(last.to) : undefined
}

/**
 * For an object schema of required scalar fields only: whether a value is a plain object whose
 * own keys are the schema's, in the schema's order, each holding a string, number, boolean or
 * null. `JSON.stringify` writes such a value exactly as the compiled writer does.
 */
const flatRecordCheck = (ast: SchemaAST.AST): ((value: unknown) => boolean) | undefined => {
  if (ast._tag !== "Objects" || ast.encoding !== undefined || ast.indexSignatures.length > 0) return undefined
  const names: Array<string> = []
  for (const signature of ast.propertySignatures) {
    if (typeof signature.name !== "string" || signature.type.context?.isOptional === true || !isScalar(signature.type)) {
      return undefined
    }
    names.push(signature.name)
  }
  return (value) => {
    if (typeof value !== "object" || value === null || Object.getPrototypeOf(value) !== Object.prototype) return false
    const keys = Object.keys(value)
    if (keys.length !== names.length) return false
    for (let index = 0; index < names.length; index++) {
      if (keys[index] !== names[index]) return false
      const field = (value as Record<string, unknown>)[names[index]!]
      const kind = typeof field
      if (kind !== "string" && kind !== "number" && kind !== "boolean" && field !== null) return false
    }
    return true
  }
}

const compile = (ast: SchemaAST.AST): Compiled => {
  if (ast === Timestamp.ast) return writeTimestamp
  if (ast.encoding !== undefined) return compileIdentityChain(ast.encoding)
  switch (ast._tag) {
    case "String":
    case "Literal":
    case "Boolean":
      return writeString
    case "Number":
      return writeNumber
    case "Null":
      return () => "null"
    case "Objects":
      return compileObjects(ast)
    case "Arrays": {
      if (ast.elements.length > 0 || ast.rest.length !== 1) return undefined
      const item = compile(ast.rest[0]!)
      if (item === undefined) return undefined
      const writeItems: JsonWriter = (value) => {
        const items = value as ReadonlyArray<unknown>
        let text = "["
        for (let index = 0; index < items.length; index++) text += (index === 0 ? "" : ",") + item(items[index])
        return text + "]"
      }
      const flat = flatRecordCheck(ast.rest[0]!)
      if (flat === undefined) return writeItems
      // JSON.stringify writes a flat record exactly as the field writers do, in about 60% of their time
      // (a transcript's turns); anything else goes field by field.
      return (value) => {
        const items = value as ReadonlyArray<unknown>
        if (!Array.isArray(items) || Object.getPrototypeOf(items) !== Array.prototype) return writeItems(value)
        // A loop, not `every`, which skips the holes of a sparse array.
        for (let index = 0; index < items.length; index++) if (!flat(items[index])) return writeItems(value)
        return JSON.stringify(items)
      }
    }
    case "Union":
      return compileUnion(ast)
    default:
      return undefined
  }
}

/** The writer of a success body of `schema`, or `undefined` when its schema is not one the writer covers. */
export const compileJsonWriter = (schema: Schema.Top): JsonWriter | undefined => compile(schema.ast)
