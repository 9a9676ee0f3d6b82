import { Schema, SchemaAST } from "effect"

type Guard = (input: unknown) => boolean

/**
 * A date column as the driver returns it: any `Date`, an invalid one too (postgres.js reads
 * `infinity` as one), as `DateFromSelf` was before Effect 4; `Schema.Date` refuses those.
 */
export const DateColumn = Schema.instanceOf(globalThis.Date, { expected: "a Date" })

/** The options `Schema.is` parses with; checks receive them. */
const IS_OPTIONS: SchemaAST.ParseOptions = {}

/** The first failing check stops, as in the library; only whether one fails matters here. */
const passes = (checks: ReadonlyArray<SchemaAST.Check<unknown>>, input: unknown, ast: SchemaAST.AST): boolean => {
  for (const check of checks) {
    if (check._tag === "FilterGroup" ? !passes(check.checks, input, ast) : check.run(input, ast, IS_OPTIONS) !== undefined) {
      return false
    }
  }
  return true
}

/** The library's own `key in input`, for a struct's declared keys. */
const hasKey = (input: object, key: PropertyKey) => (key === "__proto__" ? Object.hasOwn(input, key) : key in input)

const compileBase = (ast: SchemaAST.AST): Guard | undefined => {
  switch (ast._tag) {
    case "String":
      return (input) => typeof input === "string"
    case "Number":
      return (input) => typeof input === "number"
    case "Boolean":
      return (input) => typeof input === "boolean"
    case "Null":
      return (input) => input === null
    case "Unknown":
    case "Any":
      return () => true
    case "Literal": {
      const literal = ast.literal
      return (input) => input === literal
    }
    case "Union": {
      if (ast.options?.mode === "oneOf") return undefined
      const members = ast.types.map(compile)
      return (input) => {
        for (const member of members) if (member(input)) return true
        return false
      }
    }
    case "Objects": {
      if (ast.indexSignatures.length > 0 || ast.propertySignatures.length === 0) return undefined
      const properties = ast.propertySignatures.map((property) => ({
        name: property.name,
        optional: SchemaAST.isOptional(property.type),
        guard: compile(property.type)
      }))
      return (input) => {
        if (typeof input !== "object" || input === null || Array.isArray(input)) return false
        for (const property of properties) {
          if (!hasKey(input, property.name)) {
            if (property.optional) continue
            return false
          }
          if (!property.guard((input as Record<PropertyKey, unknown>)[property.name])) return false
        }
        return true
      }
    }
    case "Declaration":
      return ast === DateColumn.ast ? (input) => input instanceof globalThis.Date : undefined
  }
  return undefined
}

const compile = (ast: SchemaAST.AST): Guard => {
  const base = compileBase(ast)
  // Declarations, tuples, suspensions, transformations and the rest: the library's own check.
  if (base === undefined || ast.encoding !== undefined) return Schema.is(Schema.make<Schema.Top>(ast))
  const checks = ast.checks
  return checks === undefined ? base : (input) => base(input) && passes(checks, input, ast)
}

/**
 * A predicate that holds exactly when `Schema.is(schema)` does, compiled to plain checks for
 * what rows are made of (structs of strings, numbers, literals and null, with their checks and
 * brands); any other node is checked by the library itself. On Effect 4.1 `Schema.is` takes
 * about 2.5 times as long on a list page's 175 rows (1.5 to 2 times with its JIT compiler), so
 * the guard stays (docs/decisions/0008-compiled-row-guard.md). `row-guard.test.ts` holds the
 * two equal on generated values.
 */
export const compileRowGuard = <S extends Schema.Top>(schema: S): (input: unknown) => input is S["Type"] => {
  const guard = compile(SchemaAST.toType(schema.ast))
  return (input): input is S["Type"] => guard(input)
}
