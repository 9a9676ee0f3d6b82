import { StoreUnavailable } from "@clinical-api/domain"
import { Effect, Schema } from "effect"

/**
 * Decodes driver rows with Schema. A row that does not decode means the store holds data the
 * service cannot serve; it is answered like an unreachable store (503), never with a 500.
 */
export const decodeRows =
  <A, I>(schema: Schema.Schema<A, I>, operation: string) =>
  (rows: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<A>, StoreUnavailable> =>
    Schema.decodeUnknown(Schema.Array(schema))(rows).pipe(
      Effect.mapError((cause) => new StoreUnavailable({ operation: `${operation}.decode`, cause }))
    )
