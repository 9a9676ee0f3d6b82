import fc from "fast-check"
import { describe, expect, it } from "vitest"
import {
  dataSetArb,
  expectedDisclosures,
  type Expected,
  expectedOutcome,
  requestArb,
  resolveRequest,
  type ResolvedRequest,
  successViolations,
  toFixture
} from "../../domain/test/support/isolation-model.js"
import { send } from "./contract/http.js"
import { databases, startStoredServer } from "./support/stored-server.js"
import { contractReasonTable } from "../../domain/test/support/contract-reason-table.js"

/**
 * The isolation property end to end: each generated data set is loaded by the fixture loader
 * into a fresh database (DATABASE_URL's server, else PGlite), served by the real HTTP stack,
 * and generated requests go over loopback with percent-encoded ids and raw query strings.
 * Each answer is the oracle's refusal (status, the four-field body, the field) or a 200 that
 * holds only the caller organization's clinical data within the contract's fields; the
 * disclosure table then holds exactly the expected events, each of the caller organization.
 */
const DATA_SETS = 8
const REQUESTS_PER_DATA_SET = 40

const STATUS_AND_CATEGORY = contractReasonTable

const pathOf = (request: ResolvedRequest): string => {
  const encounter = `/external/v1/encounters/${encodeURIComponent(request.encounterId)}`
  const document = `${encounter}/documents/${encodeURIComponent(request.documentId)}`
  const path = {
    listPublicEncounters: "/external/v1/encounters",
    getPublicEncounter: encounter,
    getPublicDocument: document,
    getPublicDocumentTranscript: `${document}/transcript`,
    getPublicDocumentAudio: `${document}/audio`
  }[request.operation]
  const query = request.query.map(([key, value]) => `${encodeURIComponent(key)}=${encodeURIComponent(value)}`).join("&")
  return request.query.length === 0 ? path : `${path}?${query}`
}

/**
 * The domain run covers the whole breadth (every environment, switched-off keys...); here
 * each data set is one where the first key can get through, so that hundreds of requests
 * reach the lookups and the successes over the wire.
 */
const servableDataSetArb = dataSetArb.filter((model) => {
  const key = model.keys[0]
  const organization = model.organizations.find((candidate) => candidate.id === key?.organizationId)
  return model.apiKeysEnabled && key !== undefined && organization !== undefined && organization.approved &&
    organization.enabledRoutes.length > 0 && (model.environment === "sandbox" || key.token.startsWith("ce_live_")) &&
    model.encounters.some((encounter) => encounter.organizationId === organization.id && encounter.dataClass === "clinical")
})

describe(`isolation property over HTTP and PostgreSQL storage (${databases.label})`, () => {
  it("every answer is the oracle's refusal with its exact body, or only the caller organization's clinical data; disclosures only of the caller", async () => {
    let cases = 0
    let successes = 0
    let dataSetNumber = 0

    await fc.assert(
      fc.asyncProperty(servableDataSetArb, fc.array(requestArb, { minLength: REQUESTS_PER_DATA_SET, maxLength: REQUESTS_PER_DATA_SET }), async (model, specs) => {
        dataSetNumber++
        const server = await startStoredServer(
          [
            ["PUBLIC_API_ENVIRONMENT", model.environment],
            ["API_KEYS_ENABLED", String(model.apiKeysEnabled)],
            ["API_KEY_DIGEST_KEY", "isolation-postgres-digest-key-0123456789abcdef"],
            ["LEDGER_KEY", "isolation-postgres-ledger-key-0123456789abcdef"]
          ],
          JSON.stringify(toFixture(model))
        )
        try {
          const expectations = new Map<string, Expected>()
          for (const [index, spec] of specs.entries()) {
            const request = resolveRequest(model, spec)
            const requestId = `req_iso_${dataSetNumber}_${index}`
            const response = await send(server.baseUrl, pathOf(request), {
              headers: {
                "x-request-id": requestId,
                ...(request.authorization === undefined ? {} : { authorization: request.authorization })
              }
            })
            const expected = expectedOutcome(model, request, Date.now())
            expectations.set(requestId, expected)
            cases++
            const context = `${JSON.stringify(request)} in ${JSON.stringify(model)}`
            expect(response.headers["cache-control"]).toBe("no-store")
            expect(response.headers["x-request-id"]).toBe(requestId)
            if (expected.kind === "error") {
              const [status, category] = STATUS_AND_CATEGORY[expected.reasonCode] ?? [0, "?"]
              expect({ status: response.status, body: response.body }, context).toEqual({
                status,
                body: { error: category, reason_code: expected.reasonCode, message: expect.any(String), field: expected.field }
              })
            } else {
              expect(response.status, `${context}\n${response.text}`).toBe(200)
              expect(successViolations(model, expected, request.operation, response.body), context).toEqual([])
              successes++
            }
          }

          const events = await server.query((sql) =>
            sql<Array<{ request_id: string; organization_id: string; count: number }>>`
              SELECT caller_request_id AS request_id, organization_id, count(*)::int AS count FROM disclosure_events GROUP BY caller_request_id, organization_id`
          )
          const recorded = new Map(events.map((row) => [row.request_id, row]))
          expect(events.length, "one organization per request's events").toBe(recorded.size)
          for (const [requestId, expected] of expectations) {
            const row = recorded.get(requestId)
            const count = expectedDisclosures(expected)
            expect(row?.count ?? 0, `disclosures of ${requestId}`).toBe(count)
            if (count > 0 && expected.kind !== "error") expect(row?.organization_id).toBe(expected.organizationId)
          }
        } finally {
          await server.close()
        }
      }),
      { numRuns: DATA_SETS }
    )

    expect(cases).toBe(DATA_SETS * REQUESTS_PER_DATA_SET)
    expect(successes, "the generators reach successes over HTTP too").toBeGreaterThanOrEqual(DATA_SETS)
    console.info(`isolation (HTTP, ${databases.label}): ${cases} cases over ${DATA_SETS} databases, ${successes} successes`)
  }, 180_000)
})
