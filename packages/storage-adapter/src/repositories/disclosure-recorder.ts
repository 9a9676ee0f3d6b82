import { type DisclosureEvent, DisclosureRecorder } from "@clinical-api/domain"
import { Effect, Layer } from "effect"
import { PgClient, type Sql } from "../sql/pg-client.js"

/** The multi-row INSERT of disclosure events (exported for the benchmark's floor server). */
export const disclosureInsertStatement = (sql: Sql, events: ReadonlyArray<DisclosureEvent>) =>
  sql`INSERT INTO disclosure_events ${sql(events.map((event) => ({
    event_id: event.eventId,
    occurred_at: event.occurredAt,
    organization_id: event.organizationId,
    api_key_id: event.apiKeyId,
    operation_id: event.operationId,
    encounter_id: event.encounterId,
    document_id: event.documentId,
    patient_id: event.patientId,
    request_id: event.requestId
  })))}`

/**
 * Writes all events of one read with a single multi-row INSERT. Within a UnitOfWork it is sent
 * with the transaction's COMMIT (`runAtCommit`): the events commit with the read or not at
 * all, and the unit of work succeeds only once they are committed.
 */
export const makeDisclosureRecorder = Effect.gen(function* () {
  const client = yield* PgClient
  const record = Effect.fn("DisclosureRecorder.record")(function* (events: ReadonlyArray<DisclosureEvent>) {
    if (events.length === 0) return
    yield* client.runAtCommit("disclosures.record", (sql) => disclosureInsertStatement(sql, events))
  })
  return DisclosureRecorder.of({ record })
})

export const DisclosureRecorderLive = Layer.effect(DisclosureRecorder, makeDisclosureRecorder)
