/**
 * The floor: what the five routes cost with nothing but `node:http` and postgres.js. It runs
 * the service's own SQL (the statements exported by the storage adapter), including the key
 * lookup by digest, the organization read and the disclosure INSERT committed in the read's
 * own transaction, and answers the same JSON (the domain's presenters). It checks only what
 * the benchmark's requests need (a refused request gets a bare status): it is a yardstick,
 * not a second implementation of the contract.
 *
 * Environment: DATABASE_URL, PORT, API_KEY_DIGEST_KEY, DATABASE_POOL_MAX (default 10),
 * MEDIA_SIGNING_KEY, MEDIA_BASE_URL, AUDIO_URL_TTL_SECONDS (default 900).
 */
import { randomUUID } from "node:crypto"
import { createServer, type ServerResponse } from "node:http"
import {
  computeApiKeyDigest,
  type DisclosureEvent,
  DisclosureEventId,
  type DocumentId,
  type EncounterId,
  type OperationId,
  type OrganizationId,
  parseApiKeyToken,
  parseListQuery,
  type PatientId,
  presentAudioResponse,
  presentDetailResponse,
  presentDocumentDetailResponse,
  presentListResponse,
  presentTranscriptResponse,
  type PublicFinalTranscript,
  RequestId,
  requiredScopes,
  type StoredDocument,
  type StoredEncounter,
  type StoredDocumentSummary,
  withTimestampsAsText
} from "@clinical-api/domain"
import {
  apiKeyByDigestStatement,
  disclosureInsertStatement,
  documentSummariesStatement,
  encounterAndDocumentStatement,
  encounterByIdStatement,
  encounterPageStatement,
  newId,
  organizationByIdStatement,
  makePgClient,
  signMediaToken,
  type Sql,
  type TransactionSql
} from "@clinical-api/storage-adapter"
import { Effect, Exit, Redacted, Result, Scope } from "effect"

const env = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback
  if (value === undefined) throw new Error(`${name} is required`)
  return value
}

// The storage adapter's pool (postgres.js) is used raw: no Effect on the request path.
const poolScope = Effect.runSync(Scope.make())
const sql = (await Effect.runPromise(
  Scope.provide(
    makePgClient({ url: env("DATABASE_URL"), maxConnections: Number(env("DATABASE_POOL_MAX", "10")), prepare: true }),
    poolScope
  )
)).currentPool()
const digestKey = Redacted.make(env("API_KEY_DIGEST_KEY"))
const mediaSigningKey = Redacted.make(env("MEDIA_SIGNING_KEY"))
const mediaBaseUrl = env("MEDIA_BASE_URL")
const audioTtlSeconds = Number(env("AUDIO_URL_TTL_SECONDS", "900"))

type Row = Awaited<ReturnType<typeof encounterByIdStatement>>[number]

class Refusal extends Error {
  constructor(readonly status: number) {
    super(String(status))
  }
}

interface Caller {
  readonly organizationId: OrganizationId
  readonly apiKeyId: string
}

const authorize = async (authorization: string | undefined, operation: OperationId): Promise<Caller> => {
  const token = authorization?.startsWith("Bearer ") ? authorization.slice(7) : undefined
  if (token === undefined || parseApiKeyToken(token) === undefined) throw new Refusal(401)
  const [key] = await apiKeyByDigestStatement(sql, computeApiKeyDigest(digestKey, token))
  if (key === undefined || key["state"] !== "active") throw new Refusal(401)
  const expiresAt = key["expires_at"] as Date | null
  if (expiresAt !== null && expiresAt.getTime() <= Date.now()) throw new Refusal(401)
  if (key["kind"] !== "organization" || key["organization_id"] === null) throw new Refusal(403)
  const scopes = key["scopes"] as ReadonlyArray<string>
  if (!requiredScopes[operation].every((scope) => scopes.includes(scope))) throw new Refusal(403)
  const [organization] = await organizationByIdStatement(sql, key["organization_id"] as string)
  if (organization === undefined || organization["approved"] !== true) throw new Refusal(403)
  if (!(organization["enabled_routes"] as ReadonlyArray<string>).includes(operation)) throw new Refusal(403)
  return { organizationId: key["organization_id"] as OrganizationId, apiKeyId: key["api_key_id"] as string }
}

const toSummary = (row: Row): StoredDocumentSummary => ({
  documentId: row["document_id"],
  schemaType: row["schema_type"],
  title: row["title"],
  status: row["status"],
  workflowVariant: row["workflow_variant"],
  audioDurationSeconds: row["audio_duration_seconds"],
  createdAt: row["created_at"]
})

const toEncounter = (row: Row, documents: ReadonlyArray<StoredDocumentSummary>): StoredEncounter => ({
  encounterId: row["encounter_id"],
  organizationId: row["organization_id"],
  dataClass: row["data_class"],
  createdAt: row["created_at"],
  updatedAt: row["updated_at"],
  dateOfService: row["date_of_service"],
  status: row["status"],
  patient: row["patient_id"] === null
    ? null
    : {
      patient_id: row["patient_id"],
      first_name: row["first_name"],
      last_name: row["last_name"],
      date_of_birth: row["date_of_birth"]
    },
  documents
})

const documentsOf = async (tx: Sql, encounterIds: ReadonlyArray<string>) => {
  const grouped = new Map<string, Array<StoredDocumentSummary>>()
  if (encounterIds.length === 0) return grouped
  for (const row of await documentSummariesStatement(tx, encounterIds)) {
    const list = grouped.get(row["encounter_id"]) ?? []
    list.push(toSummary(row))
    grouped.set(row["encounter_id"], list)
  }
  return grouped
}

const event = (
  caller: Caller,
  requestId: string,
  operation: OperationId,
  encounterId: string,
  documentId: string | null,
  patientId: string | null
): DisclosureEvent => ({
  eventId: DisclosureEventId.make(newId("disclosure")),
  occurredAt: new Date(),
  organizationId: caller.organizationId,
  apiKeyId: caller.apiKeyId as DisclosureEvent["apiKeyId"],
  operationId: operation,
  encounterId: encounterId as EncounterId,
  documentId: documentId as DocumentId | null,
  patientId: patientId as PatientId | null,
  requestId: RequestId.make(requestId),
  // The bench sends no X-Request-Id.
  callerRequestId: null
})

type Tx = TransactionSql
// postgres.js types a transaction's tagged template apart from the pool's; the statements take either.
const asSql = (tx: Tx): Sql => tx as unknown as Sql

const findEncounter = async (tx: Tx, caller: Caller, encounterId: string) => {
  const rows = await encounterByIdStatement(asSql(tx), encounterId)
  const [row] = rows
  if (row === undefined) throw new Refusal(404)
  if (row["organization_id"] !== caller.organizationId) throw new Refusal(403)
  if (row["data_class"] !== "clinical") throw new Refusal(403)
  const documents = rows.filter((document) => document["doc_document_id"] !== null).map((document) => ({
    documentId: document["doc_document_id"],
    schemaType: document["doc_schema_type"],
    title: document["doc_title"],
    status: document["doc_status"],
    workflowVariant: document["doc_workflow_variant"],
    audioDurationSeconds: document["doc_audio_duration_seconds"],
    createdAt: document["doc_created_at"]
  }))
  return toEncounter(row, documents)
}

/** A document route's encounter and document (and transcript), read in one statement, checked in the contract's order. */
const findDocument = async (tx: Tx, caller: Caller, encounterId: string, documentId: string, operation: OperationId) => {
  const [row] = await encounterAndDocumentStatement(asSql(tx), encounterId, documentId, {
    withFinalTranscript: operation === "getPublicDocumentTranscript",
    forAudioUrl: operation === "getPublicDocumentAudio"
  })
  if (row === undefined || row["encounter_id"] === null) throw new Refusal(404)
  if (row["organization_id"] !== caller.organizationId) throw new Refusal(403)
  if (row["data_class"] !== "clinical") throw new Refusal(403)
  if (row["doc_document_id"] === null || row["doc_encounter_id"] !== encounterId) throw new Refusal(404)
  const encounter = toEncounter(row, [])
  const document: StoredDocument = {
    documentId: row["doc_document_id"],
    encounterId: row["doc_encounter_id"],
    schemaType: row["doc_schema_type"],
    title: row["doc_title"],
    status: row["doc_status"],
    workflowVariant: row["doc_workflow_variant"],
    audioDurationSeconds: row["doc_audio_duration_seconds"],
    createdAt: row["doc_created_at"],
    updatedAt: row["doc_updated_at"],
    contentMarkdown: row["doc_content_markdown"],
    recording: row["storage_key"] === null ? null : { storageKey: row["storage_key"], contentType: row["content_type"] }
  }
  const transcript: PublicFinalTranscript | undefined = row["transcript_provider"] == null
    ? undefined
    : { provider: row["transcript_provider"], audio_duration_seconds: row["transcript_audio_duration_seconds"], turns: JSON.parse(row["transcript_turns_text"]) }
  return { encounter, document, transcript, recordingObjectStored: row["recording_object_stored"] === true }
}

const patientOf = (encounter: StoredEncounter) => encounter.patient?.patient_id ?? null

const handle = async (path: string, rawQuery: string, authorization: string | undefined, requestId: string): Promise<unknown> => {
  const segments = path.split("/").slice(1)
  if (segments[0] !== "external" || segments[1] !== "v1" || segments[2] !== "encounters") throw new Refusal(404)
  const encounterId = segments[3]
  const documentId = segments[5]
  const tail = segments[6]
  if (encounterId === undefined) {
    const caller = await authorize(authorization, "listPublicEncounters")
    const query = parseListQuery([...new URLSearchParams(rawQuery)])
    if (Result.isFailure(query)) throw new Refusal(400)
    return sql.begin(async (tx) => {
      const rows = await encounterPageStatement(asSql(tx), caller.organizationId, query.success)
      const pageRows = rows.filter((row) => row["encounter_id"] !== null)
      const documents = await documentsOf(asSql(tx), pageRows.map((row) => row["encounter_id"]))
      const items = pageRows.map((row) => toEncounter(row, documents.get(row["encounter_id"]) ?? []))
      if (items.length > 0) {
        await disclosureInsertStatement(
          asSql(tx),
          items.map((item) => event(caller, requestId, "listPublicEncounters", item.encounterId, null, patientOf(item)))
        )
      }
      return presentListResponse({ total: rows[0]?.["total"] ?? 0, items }, query.success)
    })
  }
  if (rawQuery !== "") throw new Refusal(400)
  if (segments.length === 4) {
    const caller = await authorize(authorization, "getPublicEncounter")
    return sql.begin(async (tx) => {
      const encounter = await findEncounter(tx, caller, encounterId)
      await disclosureInsertStatement(asSql(tx), [
        event(caller, requestId, "getPublicEncounter", encounterId, null, patientOf(encounter))
      ])
      return presentDetailResponse(encounter)
    })
  }
  if (segments[4] !== "documents" || documentId === undefined) throw new Refusal(404)
  const operation: OperationId = tail === undefined
    ? "getPublicDocument"
    : tail === "transcript"
    ? "getPublicDocumentTranscript"
    : tail === "audio"
    ? "getPublicDocumentAudio"
    : "getPublicDocument"
  if (segments.length > 7 || (tail !== undefined && operation === "getPublicDocument")) throw new Refusal(404)
  const caller = await authorize(authorization, operation)
  return sql.begin(async (tx) => {
    const { document, encounter, transcript, recordingObjectStored } = await findDocument(
      tx, caller, encounterId, documentId, operation
    )
    const record = () =>
      disclosureInsertStatement(asSql(tx), [
        event(caller, requestId, operation, encounterId, documentId, patientOf(encounter))
      ])
    if (operation === "getPublicDocument") {
      if (document.schemaType !== "document" && document.schemaType !== "ambient_transcript") throw new Refusal(422)
      await record()
      return presentDocumentDetailResponse({ ...document, schemaType: document.schemaType })
    }
    if (document.schemaType !== "ambient_transcript") throw new Refusal(422)
    if (operation === "getPublicDocumentTranscript") {
      if (transcript === undefined) throw new Refusal(404)
      await record()
      return presentTranscriptResponse(document, transcript)
    }
    if (document.recording === null || !recordingObjectStored) throw new Refusal(404)
    const expiresEpochSeconds = Math.floor(Date.now() / 1000) + audioTtlSeconds
    const token = signMediaToken(mediaSigningKey, document.recording.storageKey, expiresEpochSeconds)
    await record()
    return presentAudioResponse({
      url: `${mediaBaseUrl}/media/${token}`,
      expiresAt: new Date(expiresEpochSeconds * 1000)
    })
  })
}

const send = (response: ServerResponse, status: number, body: string, requestId: string) => {
  response.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    "cache-control": "no-store",
    "x-request-id": requestId
  })
  response.end(body)
}

const server = createServer((request, response) => {
  const requestId = `req_${randomUUID().replaceAll("-", "")}`
  const target = request.url ?? "/"
  const question = target.indexOf("?")
  const path = question === -1 ? target : target.slice(0, question)
  const rawQuery = question === -1 ? "" : target.slice(question + 1)
  handle(path, rawQuery, request.headers.authorization, requestId).then(
    // The service's own JSON writing (Dates as text first), so the ratio measures the rest.
    (body) => send(response, 200, JSON.stringify(withTimestampsAsText(body)), requestId),
    (error: unknown) => {
      const status = error instanceof Refusal ? error.status : 503
      send(response, status, JSON.stringify({ error: { status } }), requestId)
    }
  )
})

server.listen(Number(env("PORT")), "127.0.0.1", () => {
  process.stderr.write(`floor listening on ${env("PORT")}\n`)
})

const stop = () => {
  server.close()
  void Effect.runPromise(Scope.close(poolScope, Exit.void)).then(() => process.exit(0))
}
process.on("SIGTERM", stop)
process.on("SIGINT", stop)
