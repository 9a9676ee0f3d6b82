import { StoreUnavailable } from "@clinical-api/domain"
import { Effect, Schema } from "effect"
import { compileRowGuard } from "./row-guard.js"

/** A row schema: what the driver returns, decoded without services. */
export type RowSchema<A> = Schema.Decoder<A>

type RowsDecoder = (rows: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<unknown>, Schema.SchemaError>

/**
 * Compiled decoders, one per row schema. Schema compiles a decoder per schema object, and
 * `Schema.Array(schema)` is a new object at every call: compiling it per query cost about
 * eight times the decoding itself.
 */
const compiled = new WeakMap<Schema.Top, RowsDecoder>()

const rowsDecoderOf = <A>(schema: RowSchema<A>): RowsDecoder => {
  let decoder = compiled.get(schema)
  if (decoder === undefined) {
    decoder = Schema.decodeUnknownEffect(Schema.Array(schema)) as RowsDecoder
    compiled.set(schema, decoder)
  }
  return decoder
}

/**
 * Decodes driver rows with Schema. A row that does not decode means the store holds data the
 * service cannot serve; it is answered like an unreachable store (503), never with a 500.
 */
export const decodeRows =
  <A>(schema: RowSchema<A>, operation: string) =>
  (rows: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<A>, StoreUnavailable> =>
    (rowsDecoderOf(schema)(rows) as Effect.Effect<ReadonlyArray<A>, Schema.SchemaError>).pipe(
      Effect.mapError((cause) => new StoreUnavailable({ operation: `${operation}.decode`, cause }))
    )

type RowGuard = (row: unknown) => boolean

const guards = new WeakMap<Schema.Top, RowGuard>()

/**
 * For row schemas without transformations (only checks, brands and declarations such as
 * `Schema.Date`, so their type is what the driver returns): the rows are checked against the
 * schema (`compileRowGuard`) and returned as they are: a list page checks some 175 rows. A row
 * that fails the check is decoded, for the error that says why.
 */
export const checkRows =
  <A>(schema: RowSchema<A>, operation: string) =>
  (rows: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<A>, StoreUnavailable> => {
    let guard = guards.get(schema)
    if (guard === undefined) {
      guard = compileRowGuard(schema)
      guards.set(schema, guard)
    }
    return rows.every(guard) ? Effect.succeed(rows as ReadonlyArray<A>) : decodeRows(schema, operation)(rows)
  }
