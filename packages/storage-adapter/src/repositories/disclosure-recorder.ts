import { type DisclosureEvent, DisclosureRecorder, formatTimestamp, type StoreUnavailable } from "@clinical-api/domain"
import { Effect, Layer } from "effect"
import { PgClient, type Sql } from "../sql/pg-client.js"

/**
 * The INSERT of a read's disclosure events, exported for the benchmark's floor server. The
 * events travel as ONE JSON text parameter, unpacked by `json_to_recordset`: a list page's 50
 * events as nine parameters each (450 binds) cost the service and the server several times more.
 * The instants are written as text first: a Date sends `JSON.stringify` down its slow path.
 */
export const disclosureInsertStatement = (sql: Sql, events: ReadonlyArray<DisclosureEvent>) => {
  const rows = JSON.stringify(events.map((event) => ({
    event_id: event.eventId,
    occurred_at: formatTimestamp(event.occurredAt),
    organization_id: event.organizationId,
    api_key_id: event.apiKeyId,
    operation_id: event.operationId,
    encounter_id: event.encounterId,
    document_id: event.documentId,
    patient_id: event.patientId,
    request_id: event.requestId,
    caller_request_id: event.callerRequestId
  })))
  return sql`
    INSERT INTO disclosure_events
      (event_id, occurred_at, organization_id, api_key_id, operation_id, encounter_id, document_id, patient_id, request_id,
       caller_request_id)
    SELECT event_id, occurred_at, organization_id, api_key_id, operation_id, encounter_id, document_id, patient_id, request_id,
           caller_request_id
    FROM json_to_recordset(${rows}::text::json) AS event(
      event_id text, occurred_at timestamptz, organization_id text, api_key_id text, operation_id text,
      encounter_id text, document_id text, patient_id text, request_id text, caller_request_id text)`
}

/**
 * Writes all events of one read with a single multi-row INSERT. Within a UnitOfWork it is sent
 * with the transaction's COMMIT (`appendAtCommit`), in one INSERT with the events of every
 * unit of work in its group: the events commit with the read or not at all, and the unit of
 * work succeeds only once they are committed.
 */
export const makeDisclosureRecorder = Effect.gen(function* () {
  const client = yield* PgClient
  // A plain function, not a generator: it is on every request's path, where each generator
  // step is an operation of the fiber's run loop.
  const record = (events: ReadonlyArray<DisclosureEvent>): Effect.Effect<void, StoreUnavailable> =>
    events.length === 0 ? Effect.void : client.appendAtCommit("disclosures.record", disclosureInsertStatement, events)
  return DisclosureRecorder.of({ record })
})

export const DisclosureRecorderLive = Layer.effect(DisclosureRecorder, makeDisclosureRecorder)
