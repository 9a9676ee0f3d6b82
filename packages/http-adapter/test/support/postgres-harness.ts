import { DisclosureEvent } from "@clinical-api/domain"
import { Option, Schema } from "effect"
import type { ContractHarness } from "./harness.js"
import { databases, startStoredServer, type StoredServerOptions } from "./stored-server.js"

interface DisclosureRow {
  readonly event_id: string
  readonly occurred_at: Date
  readonly organization_id: string
  readonly api_key_id: string
  readonly operation_id: string
  readonly encounter_id: string
  readonly document_id: string | null
  readonly patient_id: string | null
  readonly request_id: string
  readonly caller_request_id: string | null
}

const decodeEvent = Schema.decodeUnknownSync(DisclosureEvent)

const toEvent = (row: DisclosureRow): DisclosureEvent =>
  decodeEvent({
    eventId: row.event_id,
    occurredAt: row.occurred_at,
    organizationId: row.organization_id,
    apiKeyId: row.api_key_id,
    operationId: row.operation_id,
    encounterId: row.encounter_id,
    documentId: row.document_id,
    patientId: row.patient_id,
    requestId: row.request_id,
    callerRequestId: row.caller_request_id
  })

/**
 * The contract suite's harness over the real stack: PostgreSQL storage (a fresh database on
 * the DATABASE_URL server, or PGlite), the fixture loader, the service's configuration
 * reading and the HTTP server on loopback. Disclosures are read back from the table in the
 * order they were committed. Faults are injected by the fault-specific suites (issue 8), not
 * here: `injectFault` is absent, so the two fault tests of the suite report themselves skipped.
 */
export const postgresHarness: ContractHarness = storedHarness(`PostgreSQL storage (${databases.label})`, {})

/**
 * The same over two database roles: migrated and loaded by the owner, served by a runtime role
 * the migrations granted only what it needs (a real server only).
 */
export const runtimeRoleHarness: ContractHarness = storedHarness(
  `PostgreSQL storage, service on the runtime role (${databases.label})`,
  { runtimeRole: true }
)

function storedHarness(name: string, storedOptions: StoredServerOptions): ContractHarness {
  return {
    name,
    start: async (fixture, options = {}) => {
      const server = await startStoredServer(
        [
          ["PUBLIC_API_ENVIRONMENT", options.environment ?? "sandbox"],
          ["API_KEYS_ENABLED", String(options.apiKeysEnabled ?? true)],
          ["API_KEY_DIGEST_KEY", "contract-suite-digest-key-of-at-least-32-chars"],
          ["LEDGER_KEY", "contract-suite-ledger-key-of-at-least-32-chars"]
        ],
        JSON.stringify(fixture),
        options.digestKeyConfigured === false ? { apiKeyDigestKey: Option.none() } : {},
        storedOptions
      )
      return {
        baseUrl: server.baseUrl,
        disclosures: () =>
          server.query((sql) =>
            sql<Array<DisclosureRow>>`
              SELECT event_id, occurred_at, organization_id, api_key_id, operation_id, encounter_id,
                     document_id, patient_id, request_id, caller_request_id
              FROM disclosure_events ORDER BY recorded_seq`
          ).then((rows) => rows.map(toEvent)),
        logLines: server.logLines,
        close: server.close
      }
    }
  }
}
