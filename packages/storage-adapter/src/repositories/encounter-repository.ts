import {
  AudioDurationSeconds,
  CalendarDate,
  DataClass,
  DocumentId,
  type DocumentReads,
  EncounterId,
  type EncounterListQuery,
  EncounterRepository,
  OrganizationId,
  PatientId,
  type PublicFinalTranscript,
  type PublicTranscriptTurn,
  SchemaType,
  type StoreUnavailable,
  type StoredDocumentSummary,
  type StoredDocument,
  type StoredEncounter,
  type StoredEncounterHead,
  WorkflowVariant
} from "@clinical-api/domain"
import { Effect, Layer, Option, Schema } from "effect"
import { checkRows, decodeRows } from "../sql/decode.js"
import { type Fragment, PgClient, type PgClientService, type Sql, textArray } from "../sql/pg-client.js"
import { DateColumn } from "../sql/row-guard.js"
import { embeddedObjectSeenIn, type MarkedRecordingReference } from "./recording-object-mark.js"

/** The row schemas are exported for `row-guard.test.ts`, which checks their compiled guards. */
export const EncounterRow = Schema.Struct({
  encounter_id: EncounterId,
  organization_id: OrganizationId,
  data_class: DataClass,
  created_at: DateColumn,
  updated_at: DateColumn,
  date_of_service: Schema.NullOr(DateColumn),
  status: Schema.NullOr(Schema.String),
  patient_id: Schema.NullOr(PatientId),
  first_name: Schema.NullOr(Schema.String),
  last_name: Schema.NullOr(Schema.String),
  date_of_birth: Schema.NullOr(CalendarDate)
})
type EncounterRow = typeof EncounterRow.Type

/** The count columns of the page statement; the encounter columns are null on the row of an empty page. */
export const PageTotalRow = Schema.Struct({ total: Schema.Int })

export const DocumentSummaryRow = Schema.Struct({
  document_id: DocumentId,
  encounter_id: EncounterId,
  schema_type: SchemaType,
  title: Schema.NullOr(Schema.String),
  status: Schema.NullOr(Schema.String),
  workflow_variant: Schema.NullOr(WorkflowVariant),
  audio_duration_seconds: Schema.NullOr(Schema.Number),
  created_at: DateColumn
})
type DocumentSummaryRow = typeof DocumentSummaryRow.Type

/** A row of `encounterByIdStatement`: the encounter, and one of its documents if it has any. */
export const EncounterWithDocumentRow = Schema.Struct({
  ...EncounterRow.fields,
  doc_document_id: Schema.NullOr(DocumentId),
  doc_schema_type: Schema.NullOr(SchemaType),
  doc_title: Schema.NullOr(Schema.String),
  doc_status: Schema.NullOr(Schema.String),
  doc_workflow_variant: Schema.NullOr(WorkflowVariant),
  doc_audio_duration_seconds: Schema.NullOr(Schema.Number),
  doc_created_at: Schema.NullOr(DateColumn)
})

/** The document columns of `encounterAndDocumentStatement`, when it found the document. */
export const JoinedDocumentRow = Schema.Struct({
  doc_document_id: DocumentId,
  doc_encounter_id: EncounterId,
  doc_schema_type: SchemaType,
  doc_title: Schema.NullOr(Schema.String),
  doc_status: Schema.NullOr(Schema.String),
  doc_workflow_variant: Schema.NullOr(WorkflowVariant),
  doc_audio_duration_seconds: Schema.NullOr(Schema.Number),
  doc_created_at: DateColumn,
  doc_updated_at: DateColumn,
  doc_content_markdown: Schema.NullOr(Schema.String),
  storage_key: Schema.NullOr(Schema.String),
  content_type: Schema.NullOr(Schema.String),
  /** Read for the audio route only. */
  recording_object_stored: Schema.optional(Schema.Boolean)
})

/** The transcript columns of `encounterAndDocumentStatement`, when it read and found the transcript. */
export const JoinedTranscriptRow = Schema.Struct({
  transcript_provider: Schema.String,
  transcript_audio_duration_seconds: Schema.NullOr(AudioDurationSeconds),
  transcript_turns_text: Schema.String
})

const encounterColumns = (sql: Sql) => sql`
  e.encounter_id, e.organization_id, e.data_class, e.created_at, e.updated_at, e.date_of_service, e.status,
  p.patient_id, p.first_name, p.last_name, to_char(p.date_of_birth, 'YYYY-MM-DD') AS date_of_birth`

/** The list filter: one organization, clinical data only, `created_at` in [startAt, endAt). */
const listFilter = (sql: Sql, organizationId: OrganizationId, query: EncounterListQuery) => sql`
  e.organization_id = ${organizationId} AND e.data_class = 'clinical'
  ${query.startAt === null ? sql`` : sql`AND e.created_at >= ${query.startAt}`}
  ${query.endAt === null ? sql`` : sql`AND e.created_at < ${query.endAt}`}`

const listOrder = (sql: Sql, alias: "e" | "page", query: EncounterListQuery) =>
  query.sortOrder === "asc"
    ? sql`ORDER BY ${sql(alias)}.created_at ASC, ${sql(alias)}.encounter_id COLLATE "C" ASC`
    : sql`ORDER BY ${sql(alias)}.created_at DESC, ${sql(alias)}.encounter_id COLLATE "C" DESC`

const DAY_MS = 86_400_000
const utcDayStart = (instant: Date) => new Date(Math.floor(instant.getTime() / DAY_MS) * DAY_MS)
const utcDayStartAtOrAfter = (instant: Date) => {
  const start = utcDayStart(instant)
  return start.getTime() === instant.getTime() ? start : new Date(start.getTime() + DAY_MS)
}
const isoDay = (dayStart: Date) => dayStart.toISOString().slice(0, 10)

/** The UTC days wholly inside the query's range, [from, to) (null: unbounded); none if it is shorter. */
const wholeDaysOf = (query: EncounterListQuery) => {
  const from = query.startAt === null ? null : utcDayStartAtOrAfter(query.startAt)
  const to = query.endAt === null ? null : utcDayStart(query.endAt)
  return from !== null && to !== null && from.getTime() >= to.getTime() ? undefined : { from, to }
}
type WholeDays = NonNullable<ReturnType<typeof wholeDaysOf>>

/** The organization's clinical encounters with `created_at` in [from, to), counted in the list index. */
const countedInIndex = (sql: Sql, organizationId: OrganizationId, query: EncounterListQuery, from: Date | null, to: Date | null) => sql`
  (SELECT count(*) FROM encounters e
   WHERE ${listFilter(sql, organizationId, { ...query, startAt: from, endAt: to })})`

const dailyCountsOf = (sql: Sql, organizationId: OrganizationId, days: WholeDays) => sql`
  encounter_daily_counts WHERE organization_id = ${organizationId}
  ${days.from === null ? sql`` : sql`AND day >= ${isoDay(days.from)}::date`}
  ${days.to === null ? sql`` : sql`AND day < ${isoDay(days.to)}::date`}`

/** The partial day before the range's first whole day (in ascending order), counted in the index; none is 0. */
const partialDayBefore = (sql: Sql, organizationId: OrganizationId, query: EncounterListQuery, days: WholeDays) =>
  query.startAt !== null && days.from !== null && query.startAt.getTime() < days.from.getTime()
    ? countedInIndex(sql, organizationId, query, query.startAt, days.from)
    : undefined

/** The partial day after the range's last whole day, counted in the index; none is 0. */
const partialDayAfter = (sql: Sql, organizationId: OrganizationId, query: EncounterListQuery, days: WholeDays) =>
  query.endAt !== null && days.to !== null && days.to.getTime() < query.endAt.getTime()
    ? countedInIndex(sql, organizationId, query, days.to, query.endAt)
    : undefined

/**
 * The exact number of the organization's clinical encounters with `created_at` in
 * [startAt, endAt): the whole UTC days of the range from `encounter_daily_counts` (migration 4,
 * kept by triggers in the same transaction as every change), plus the partial days at its
 * edges counted in the list index. A range shorter than a whole day is counted in the index.
 */
const clinicalTotal = (sql: Sql, organizationId: OrganizationId, query: EncounterListQuery): Fragment => {
  const days = wholeDaysOf(query)
  if (days === undefined) return countedInIndex(sql, organizationId, query, query.startAt, query.endAt)
  let total: Fragment = sql`(SELECT coalesce(sum(clinical_count), 0) FROM ${dailyCountsOf(sql, organizationId, days)})`
  const before = partialDayBefore(sql, organizationId, query, days)
  const after = partialDayAfter(sql, organizationId, query, days)
  if (before !== undefined) total = sql`${total} + ${before}`
  if (after !== undefined) total = sql`${total} + ${after}`
  return total
}

/**
 * From this offset on, the page does not skip its offset in the index entry by entry: it seeks
 * the first whole UTC day that the offset does not pass entirely, from the daily counts, and
 * skips in the index only what remains of the offset within that day (`pageSeek`). Seeking
 * pays off from about a thousand entries on: below, a plain skip costs as little
 * (docs/decisions/0006-daily-counts.md).
 */
export const seekFromOffset = 1_000

/**
 * Where the page starts, and how many of the range's encounters come before that in the
 * list's order (`skipped`, at most the offset); no row if the offset ends inside the partial
 * day at the range's near edge, or past the range. The days are walked in the list's order
 * with a running sum, along the counts' primary key (which holds the count: an index-only
 * scan), and the walk stops at the first day the offset does not pass: descending, the page
 * reads from the end of that day (`created_at < bound`); ascending, from its start
 * (`created_at >= bound`). The counts are kept in the same transactions as the encounters, so
 * in the statement's one snapshot the two agree.
 */
const pageSeek = (sql: Sql, organizationId: OrganizationId, query: EncounterListQuery, days: WholeDays): Fragment => {
  const descending = query.sortOrder === "desc"
  const partialFirst = descending
    ? partialDayAfter(sql, organizationId, query, days)
    : partialDayBefore(sql, organizationId, query, days)
  const order = descending ? sql`DESC` : sql`ASC`
  return sql`
    SELECT bound, skipped FROM (
      SELECT bound, through - clinical_count AS skipped FROM (
        SELECT day, clinical_count,
               ${descending ? sql`(day + 1)::timestamp AT TIME ZONE 'UTC'` : sql`day::timestamp AT TIME ZONE 'UTC'`} AS bound,
               ${partialFirst ?? sql`0`} + sum(clinical_count) OVER walk AS through
        FROM ${dailyCountsOf(sql, organizationId, days)}
        WINDOW walk AS (ORDER BY day ${order})
      ) AS days_in_order
      WHERE through > ${query.offset}
      ORDER BY day ${order}
      LIMIT 1
    ) AS first_day_not_passed
    WHERE skipped <= ${query.offset}`
}

/**
 * The page and the exact total in ONE statement, so both see the same snapshot and an offset
 * past the end still returns the total (the count row is there even when the page is empty).
 * The total comes from `clinicalTotal` (daily counts plus the edges in the index). The page's
 * keys are read in order from the same index alone (an index-only scan: skipping `offset`
 * entries touches no table page; from `seekFromOffset` on, most of the offset is sought in the
 * daily counts, `pageSeek`), then only `limit` encounters and patients are fetched. Exported
 * so tests and the benchmark's floor server run exactly this SQL; `seekFrom` is there for tests.
 */
export const encounterPageStatement = (
  sql: Sql,
  organizationId: OrganizationId,
  query: EncounterListQuery,
  seekFrom: number = seekFromOffset
) => {
  const days = query.offset >= seekFrom ? wholeDaysOf(query) : undefined
  const seeking = days !== undefined
  const seekBound = !seeking
    ? sql``
    : query.sortOrder === "desc"
    ? sql`AND e.created_at < coalesce((SELECT bound FROM seek), 'infinity')`
    : sql`AND e.created_at >= coalesce((SELECT bound FROM seek), '-infinity')`
  const offset = seeking ? sql`(${query.offset}::bigint - coalesce((SELECT skipped FROM seek), 0))::bigint` : sql`${query.offset}`
  return sql`
  ${seeking ? sql`WITH seek AS (${pageSeek(sql, organizationId, query, days)})` : sql``}
  SELECT counted.total, page.*
  FROM (SELECT (${clinicalTotal(sql, organizationId, query)})::int AS total) AS counted
  LEFT JOIN LATERAL (
    SELECT ${encounterColumns(sql)}
    FROM (
      SELECT e.encounter_id
      FROM encounters e
      WHERE ${listFilter(sql, organizationId, query)} ${seekBound}
      ${listOrder(sql, "e", query)}
      LIMIT ${query.limit} OFFSET ${offset}
    ) AS page_keys
    JOIN encounters e ON e.encounter_id = page_keys.encounter_id
    LEFT JOIN patients p ON p.patient_id = e.patient_id
  ) AS page ON true
  ${listOrder(sql, "page", query)}`
}

/** Documents of several encounters in one query, each encounter's ordered by created_at, then document_id bytewise. */
export const documentSummariesStatement = (sql: Sql, encounterIds: ReadonlyArray<string>) => sql`
  SELECT document_id, encounter_id, schema_type, title, status, workflow_variant, audio_duration_seconds, created_at
  FROM documents
  WHERE encounter_id = ANY(${textArray(sql, encounterIds)})
  ORDER BY encounter_id, created_at, document_id COLLATE "C"`

/**
 * One encounter with its patient and its documents, in one statement: a row per document
 * (its columns prefixed `doc_`, in the documents' order), or one row with null `doc_` columns
 * for an encounter without documents.
 */
export const encounterByIdStatement = (sql: Sql, encounterId: string) => sql`
  SELECT ${encounterColumns(sql)},
         d.document_id AS doc_document_id, d.schema_type AS doc_schema_type, d.title AS doc_title,
         d.status AS doc_status, d.workflow_variant AS doc_workflow_variant,
         d.audio_duration_seconds AS doc_audio_duration_seconds, d.created_at AS doc_created_at
  FROM encounters e
  LEFT JOIN patients p ON p.patient_id = e.patient_id
  LEFT JOIN documents d ON d.encounter_id = e.encounter_id
  WHERE e.encounter_id = ${encounterId}
  ORDER BY d.created_at, d.document_id COLLATE "C"`

/**
 * A document route's reads in one statement, one row: the encounter with its patient (null
 * columns if there is none), and the document by its own id whatever its encounter, with its
 * recording reference (`doc_` columns, null if there is none), with `withFinalTranscript` its
 * final transcript (`transcript_` columns), and with `forAudioUrl` whether the recording's
 * embedded object is stored (`recording_object_stored`). Each is found by its own primary key.
 */
export const encounterAndDocumentStatement = (
  sql: Sql,
  encounterId: string,
  documentId: string,
  reads: DocumentReads
) => sql`
  SELECT ${encounterColumns(sql)},
         d.document_id AS doc_document_id, d.encounter_id AS doc_encounter_id, d.schema_type AS doc_schema_type,
         d.title AS doc_title, d.status AS doc_status, d.workflow_variant AS doc_workflow_variant,
         d.audio_duration_seconds AS doc_audio_duration_seconds, d.created_at AS doc_created_at,
         d.updated_at AS doc_updated_at, d.content_markdown AS doc_content_markdown,
         r.storage_key, r.content_type
         ${reads.withFinalTranscript
           ? sql`, t.provider AS transcript_provider, t.audio_duration_seconds AS transcript_audio_duration_seconds,
                 t.turns_json::text AS transcript_turns_text`
           : sql``}
         ${reads.forAudioUrl === true
           ? sql`, EXISTS (SELECT 1 FROM recording_objects o WHERE o.storage_key = r.storage_key) AS recording_object_stored`
           : sql``}
  FROM (VALUES (1)) AS one_row (one)
  LEFT JOIN encounters e ON e.encounter_id = ${encounterId}
  LEFT JOIN patients p ON p.patient_id = e.patient_id
  LEFT JOIN documents d ON d.document_id = ${documentId}
  LEFT JOIN recordings r ON r.document_id = d.document_id
  ${reads.withFinalTranscript ? sql`LEFT JOIN transcripts t ON t.document_id = d.document_id` : sql``}`

const toStoredEncounterHead = (row: EncounterRow): StoredEncounterHead => ({
  encounterId: row.encounter_id,
  organizationId: row.organization_id,
  dataClass: row.data_class,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
  dateOfService: row.date_of_service,
  status: row.status,
  patient:
    row.patient_id === null
      ? null
      : {
          patient_id: row.patient_id,
          first_name: row.first_name,
          last_name: row.last_name,
          date_of_birth: row.date_of_birth
        }
})

// Not `{ ...head, documents }`: V8 gives each object made by that spread a map of its own, in
// the old generation; adding the property shares one map transition.
const toStoredEncounter = (
  row: EncounterRow,
  documents: ReadonlyArray<StoredDocumentSummary>
): StoredEncounter => Object.assign(toStoredEncounterHead(row), { documents })

const toRecordingReference = (row: typeof JoinedDocumentRow.Type, seenBy: PgClientService): MarkedRecordingReference | null =>
  row.storage_key === null || row.content_type === null
    ? null
    : row.recording_object_stored === true
    ? { storageKey: row.storage_key, contentType: row.content_type, [embeddedObjectSeenIn]: seenBy }
    : { storageKey: row.storage_key, contentType: row.content_type }

const toStoredDocument = (row: typeof JoinedDocumentRow.Type, seenBy: PgClientService): StoredDocument => ({
  documentId: row.doc_document_id,
  encounterId: row.doc_encounter_id,
  schemaType: row.doc_schema_type,
  title: row.doc_title,
  status: row.doc_status,
  workflowVariant: row.doc_workflow_variant,
  audioDurationSeconds: row.doc_audio_duration_seconds,
  createdAt: row.doc_created_at,
  updatedAt: row.doc_updated_at,
  contentMarkdown: row.doc_content_markdown,
  recording: toRecordingReference(row, seenBy)
})

const toDocumentSummary = (row: DocumentSummaryRow): StoredDocumentSummary => ({
  documentId: row.document_id,
  schemaType: row.schema_type,
  title: row.title,
  status: row.status,
  workflowVariant: row.workflow_variant,
  audioDurationSeconds: row.audio_duration_seconds,
  createdAt: row.created_at
})

export const makeEncounterRepository = Effect.gen(function* () {
  const client = yield* PgClient

  /** One query for the documents of all the given encounters, whatever their number. */
  const documentsByEncounter = (
    encounterIds: ReadonlyArray<string>
  ): Effect.Effect<ReadonlyMap<string, ReadonlyArray<StoredDocumentSummary>>, StoreUnavailable> =>
    encounterIds.length === 0
      ? Effect.succeed(new Map())
      : client.run("encounters.documents", (sql) => documentSummariesStatement(sql, encounterIds)).pipe(
          Effect.flatMap(checkRows(DocumentSummaryRow, "encounters.documents")),
          Effect.map((rows) => {
            const grouped = new Map<string, Array<StoredDocumentSummary>>()
            for (const row of rows) {
              const list = grouped.get(row.encounter_id) ?? []
              list.push(toDocumentSummary(row))
              grouped.set(row.encounter_id, list)
            }
            return grouped
          })
        )

  // On the request path: untraced, as a span costs about 12 µs per call even with no tracer
  // configured, some 4% of the CPU of a detail read.
  const listForOrganization = Effect.fnUntraced(function* (
    organizationId: OrganizationId,
    query: EncounterListQuery
  ) {
    const rows = yield* client.run("encounters.list", (sql) => encounterPageStatement(sql, organizationId, query))
    const totals = yield* decodeRows(PageTotalRow, "encounters.list")(rows.slice(0, 1))
    const total = totals[0]?.total ?? 0
    const pageRows = yield* checkRows(EncounterRow, "encounters.list")(rows.filter((row) => row.encounter_id !== null))
    const documents = yield* documentsByEncounter(pageRows.map((row) => row.encounter_id))
    return {
      total,
      items: pageRows.map((row) => toStoredEncounter(row, documents.get(row.encounter_id) ?? []))
    }
  })

  const findEncounter = Effect.fnUntraced(function* (encounterId: EncounterId) {
    const rows = yield* client
      .run("encounters.find", (sql) => encounterByIdStatement(sql, encounterId))
      .pipe(Effect.flatMap(checkRows(EncounterWithDocumentRow, "encounters.find")))
    const row = rows[0]
    if (row === undefined) return Option.none<StoredEncounter>()
    const documents: Array<StoredDocumentSummary> = []
    for (const document of rows) {
      if (document.doc_document_id === null || document.doc_schema_type === null || document.doc_created_at === null) continue
      documents.push({
        documentId: document.doc_document_id,
        schemaType: document.doc_schema_type,
        title: document.doc_title,
        status: document.doc_status,
        workflowVariant: document.doc_workflow_variant,
        audioDurationSeconds: document.doc_audio_duration_seconds,
        createdAt: document.doc_created_at
      })
    }
    return Option.some(toStoredEncounter(row, documents))
  })

  const findEncounterAndDocument = Effect.fnUntraced(function* (
    encounterId: EncounterId,
    documentId: DocumentId,
    reads: DocumentReads
  ) {
    const operation = "encounters.find-with-document"
    const rows = yield* client.run(operation, (sql) => encounterAndDocumentStatement(sql, encounterId, documentId, reads))
    const row: Record<string, unknown> = rows[0] ?? {}
    const encounter = row["encounter_id"] == null
      ? Option.none<StoredEncounterHead>()
      : Option.some(toStoredEncounterHead((yield* checkRows(EncounterRow, operation)([row]))[0]!))
    const document = row["doc_document_id"] == null
      ? Option.none<StoredDocument>()
      : Option.some(toStoredDocument((yield* checkRows(JoinedDocumentRow, operation)([row]))[0]!, client))
    if (row["transcript_provider"] == null) return { encounter, document, finalTranscript: Option.none<PublicFinalTranscript>() }
    const transcript = (yield* checkRows(JoinedTranscriptRow, operation)([row]))[0]!
    // Parsed, not checked turn by turn (docs/decisions/0007-transcript-turns-json.md): the
    // store holds only what the contract promises. `turns_json` is built by the triggers of
    // migration 6 from typed, NOT NULL columns, in the route's order, each turn exactly
    // { speaker, text, start, end }, and migration 7 refuses a time that is not finite and a
    // `turns_json` that is not an array.
    const finalTranscript: PublicFinalTranscript = {
      provider: transcript.transcript_provider,
      audio_duration_seconds: transcript.transcript_audio_duration_seconds,
      turns: JSON.parse(transcript.transcript_turns_text) as ReadonlyArray<PublicTranscriptTurn>
    }
    return { encounter, document, finalTranscript: Option.some(finalTranscript) }
  })

  return EncounterRepository.of({ listForOrganization, findEncounter, findEncounterAndDocument })
})

export const EncounterRepositoryLive = Layer.effect(EncounterRepository, makeEncounterRepository)
