import { randomBytes } from "node:crypto"
import {
  computeApiKeyDigest,
  generateApiKeyToken,
  operationIds,
  type OrganizationId,
  scopes as allScopes,
  type StoreUnavailable
} from "@clinical-api/domain"
import { Data, Effect, type Redacted } from "effect"
import { newId } from "../repositories/id-generator.js"
import { PgClient } from "../sql/pg-client.js"

/**
 * A synthetic data set loaded straight into PostgreSQL with set-based SQL (`INSERT ... SELECT
 * FROM generate_series`): no row crosses the wire. Every value is a pure function of the
 * encounter's ordinal and the seed (`hashtextextended`), so one seed gives one data set, and
 * every table is derived from the same encounter expression (no temporary tables).
 *
 * Shape: organization 1 holds `bigOrganizationShare` of the encounters, the others share the
 * rest evenly; about one patient per four encounters of an organization (2% of encounters have
 * none); 1 to 4 documents per encounter; `transcriptShare` of the encounters have an ambient
 * transcript (their first document) of 20 to 200 turns, `recordingShare` of those a recording
 * whose small audio object (a 444-byte WAV of silence) is in the embedded object table, so the
 * audio route answers for every one of them; `demoShare`/`trainingShare` of the encounters are
 * demo/training data. Creation times spread over 2023 and 2024.
 */
export interface GenerateOptions {
  readonly organizations: number
  readonly encounters: number
  readonly seed: number
  readonly bigOrganizationShare: number
  readonly demoShare: number
  readonly trainingShare: number
  readonly transcriptShare: number
  readonly recordingShare: number
  /** Digest key of the service the printed tokens are for. */
  readonly digestKey: Redacted.Redacted<string>
  readonly environment: "live" | "test"
  /** Progress lines (one per table, with its duration). */
  readonly onProgress?: (line: string) => void
}

export const defaultGenerateOptions = {
  organizations: 20,
  encounters: 1_000_000,
  seed: 1,
  bigOrganizationShare: 0.4,
  demoShare: 0.02,
  trainingShare: 0.01,
  transcriptShare: 0.1,
  recordingShare: 0.8
} as const

export interface GeneratedOrganization {
  readonly organizationId: OrganizationId
  readonly encounters: number
  readonly apiKeyId: string
  /** A full-access organization key; only its digest is stored. */
  readonly token: string
}

export interface GenerateReport {
  readonly organizations: ReadonlyArray<GeneratedOrganization>
  readonly rows: Readonly<Record<string, number>>
  readonly seconds: number
}

export class GeneratedDataExists extends Data.TaggedError("GeneratedDataExists")<{ readonly organizationId: string }> {}

/** `org_gen_001`, ...: the generated organizations (organization 1 is the big one). */
export const generatedOrganizationId = (ordinal: number): OrganizationId =>
  `org_gen_${String(ordinal).padStart(3, "0")}` as OrganizationId

/** How many encounters each organization gets: the big one its share, the others the rest, evenly. */
export const encountersPerOrganization = (options: Pick<GenerateOptions, "organizations" | "encounters" | "bigOrganizationShare">) => {
  if (options.organizations === 1) return [options.encounters]
  const big = Math.round(options.encounters * options.bigOrganizationShare)
  const others = options.organizations - 1
  const rest = options.encounters - big
  return [big, ...Array.from({ length: others }, (_, index) => Math.floor(rest / others) + (index < rest % others ? 1 : 0))]
}

/** 44-byte WAV header (8 kHz, 8-bit, mono) and 400 samples of silence, as hex for `decode(..., 'hex')`. */
const silentWavHex = (() => {
  const samples = 400
  const header = Buffer.alloc(44)
  header.write("RIFF", 0, "ascii")
  header.writeUInt32LE(36 + samples, 4)
  header.write("WAVEfmt ", 8, "ascii")
  header.writeUInt32LE(16, 16)
  header.writeUInt16LE(1, 20)
  header.writeUInt16LE(1, 22)
  header.writeUInt32LE(8000, 24)
  header.writeUInt32LE(8000, 28)
  header.writeUInt16LE(1, 32)
  header.writeUInt16LE(8, 34)
  header.write("data", 36, "ascii")
  header.writeUInt32LE(samples, 40)
  return Buffer.concat([header, Buffer.alloc(samples, 0x80)]).toString("hex")
})()

const integer = (value: number, name: string, min: number) => {
  if (!Number.isSafeInteger(value) || value < min) throw new Error(`${name} must be an integer >= ${min}`)
  return value
}

const share = (value: number, name: string) => {
  if (!(value >= 0 && value <= 1)) throw new Error(`${name} must be between 0 and 1`)
  return value
}

/**
 * The SQL text of the generator. Only validated integers and shares are spliced into it, so it
 * can be built as text (the statements are long and set-based, and take no user strings).
 */
export const generatorStatements = (options: Omit<GenerateOptions, "digestKey" | "environment" | "onProgress">) => {
  const organizations = integer(options.organizations, "organizations", 1)
  const encounters = integer(options.encounters, "encounters", 1)
  const seed = integer(options.seed, "seed", 0)
  const perOrganization = encountersPerOrganization(options)
  const big = perOrganization[0] ?? 0
  const others = organizations - 1
  const per1000 = (value: number, name: string) => Math.round(share(value, name) * 1000)
  const demo = per1000(options.demoShare, "demo share")
  const training = per1000(options.trainingShare, "training share")
  const transcripts = per1000(options.transcriptShare, "transcript share")
  const recordings = per1000(options.recordingShare, "recording share")

  /** A deterministic non-negative pseudo-random integer below `modulo`, from `expression` and a salt. */
  const draw = (expression: string, salt: number, modulo: number) =>
    `(abs(hashtextextended((${expression})::text, ${seed * 100 + salt})) % ${modulo})`
  const hexId = (prefix: string, expression: string, salt: string) =>
    `('${prefix}' || left(md5('${seed}:${salt}:' || (${expression})::text), 24))`

  // One row per encounter ordinal i, with everything the tables derive from it.
  const encounterSeries = `
    SELECT i,
      o AS organization_ordinal,
      'org_gen_' || lpad(o::text, 3, '0') AS organization_id,
      local,
      ${hexId("enc_", "i", "e")} AS encounter_id,
      CASE WHEN ${draw("i", 1, 1000)} < ${demo} THEN 'demo'
           WHEN ${draw("i", 1, 1000)} < ${demo + training} THEN 'training'
           ELSE 'clinical' END AS data_class,
      timestamptz '2023-01-01 00:00:00+00' + ${draw("i", 2, 731 * 86_400_000)} * interval '1 millisecond' AS created_at,
      CASE WHEN ${draw("i", 3, 50)} = 0 THEN NULL
           ELSE ${hexId("pat_", "o::text || ':' || (local / 4)::text", "p")} END AS patient_id,
      local % 4 = 0 AS first_of_patient,
      1 + ${draw("i", 4, 4)} AS document_count,
      ${draw("i", 5, 1000)} < ${transcripts} AS has_transcript,
      20 + ${draw("i", 6, 181)} AS turn_count,
      ${draw("i", 7, 1000)} < ${recordings} AS has_recording,
      ${draw("i", 8, 100)} < 15 AS phone_call
    FROM generate_series(0, ${encounters - 1}) AS i,
      LATERAL (SELECT CASE WHEN i < ${big} THEN 1 ELSE 2 + (i - ${big}) % ${Math.max(others, 1)} END AS o,
                      CASE WHEN i < ${big} THEN i ELSE (i - ${big}) / ${Math.max(others, 1)} END AS local) AS placed`

  const transcriptDocumentId = hexId("doc_", "e.i::text || ':1'", "d")

  const routes = `ARRAY[${operationIds.map((id) => `'${id}'`).join(", ")}]::text[]`

  return {
    organizations: `
      INSERT INTO organizations (organization_id, name, approved, enabled_routes, created_at)
      SELECT 'org_gen_' || lpad(o::text, 3, '0'), 'Generated Organization ' || o, true, ${routes},
             timestamptz '2022-12-01 00:00:00+00'
      FROM generate_series(1, ${organizations}) AS o`,
    // Patients of the encounter that opens each group of four of an organization (patient (o, local / 4)).
    patients: `
      INSERT INTO patients (patient_id, organization_id, first_name, last_name, date_of_birth)
      SELECT ${hexId("pat_", "e.organization_ordinal::text || ':' || (e.local / 4)::text", "p")}, e.organization_id,
        (ARRAY['Ada','Ben','Chloe','Dev','Elena','Farid','Grace','Hiro','Ines','Jonas','Kemi','Liam','Mira','Noah','Olga','Pavel'])[1 + ${draw("e.i", 10, 16)}],
        (ARRAY['Garcia','Smith','Nguyen','Okafor','Muller','Rossi','Kowalski','Haddad','Silva','Tanaka','Novak','Berg'])[1 + ${draw("e.i", 11, 12)}],
        date '1935-01-01' + ${draw("e.i", 12, 30_000)}::int
      FROM (${encounterSeries}) AS e
      WHERE e.first_of_patient`,
    encounters: `
      INSERT INTO encounters (encounter_id, organization_id, data_class, created_at, updated_at, date_of_service, status, patient_id)
      SELECT e.encounter_id, e.organization_id, e.data_class, e.created_at,
        e.created_at + ${draw("e.i", 13, 3 * 86_400_000)} * interval '1 millisecond',
        CASE WHEN ${draw("e.i", 14, 20)} = 0 THEN NULL ELSE date_trunc('hour', e.created_at) END,
        (ARRAY['completed','completed','completed','signed','in_progress'])[1 + ${draw("e.i", 15, 5)}],
        e.patient_id
      FROM (${encounterSeries}) AS e`,
    documents: `
      INSERT INTO documents (document_id, encounter_id, schema_type, title, status, workflow_variant,
                             audio_duration_seconds, created_at, updated_at, content_markdown)
      SELECT d.document_id, e.encounter_id, d.schema_type,
        CASE d.schema_type WHEN 'ambient_transcript' THEN 'Visit recording'
                           WHEN 'document' THEN 'Visit note ' || j
                           WHEN 'billing' THEN 'Billing codes'
                           ELSE 'Encounter checklist' END,
        CASE WHEN d.schema_type = 'document' THEN NULL ELSE 'final' END,
        CASE WHEN d.schema_type <> 'ambient_transcript' THEN NULL WHEN e.phone_call THEN 'phone_call' ELSE 'ambient' END,
        CASE WHEN d.schema_type = 'ambient_transcript' THEN e.turn_count * 6.0 END,
        e.created_at + j * interval '2 minutes',
        e.created_at + j * interval '2 minutes' + interval '1 hour',
        CASE WHEN d.schema_type = 'document' THEN
          '# Visit note ' || j || E'\\n\\n## Subjective\\n' ||
          (ARRAY['Follow-up for hypertension; home readings 130s/80s.','Cough for five days, no fever, no dyspnoea.',
                 'Annual review; no new complaints.','Knee pain after running, worse on stairs.'])[1 + ${draw("e.i::text || ':' || j::text", 16, 4)}] ||
          E'\\n\\n## Assessment and plan\\n' ||
          (ARRAY['Continue current medication, review in three months.','Supportive care, return if worse.',
                 'Routine bloods ordered.','Physiotherapy referral, ice and rest.'])[1 + ${draw("e.i::text || ':' || j::text", 17, 4)}]
        END
      FROM (${encounterSeries}) AS e,
        generate_series(1, e.document_count) AS j,
        LATERAL (SELECT ${hexId("doc_", "e.i::text || ':' || j::text", "d")} AS document_id,
                        CASE WHEN j = 1 AND e.has_transcript THEN 'ambient_transcript'
                             ELSE (ARRAY['document','document','billing','encounter_checklist'])[1 + ${draw("e.i::text || ':' || j::text", 18, 4)}]
                        END AS schema_type) AS d`,
    transcripts: `
      INSERT INTO transcripts (document_id, provider, audio_duration_seconds)
      SELECT ${transcriptDocumentId}, (ARRAY['deepgram','assemblyai','whisper'])[1 + ${draw("e.i", 19, 3)}], e.turn_count * 6.0
      FROM (${encounterSeries}) AS e
      WHERE e.has_transcript`,
    transcriptTurns: `
      INSERT INTO transcript_turns (document_id, ordinal, speaker, text, start_seconds, end_seconds)
      SELECT e.document_id, t,
        CASE WHEN t % 2 = 1 THEN 'clinician' ELSE 'patient' END,
        (ARRAY['How have you been since the last visit?','Mostly fine, a bit tired in the evenings.',
               'Any chest pain or shortness of breath?','No, nothing like that.',
               'Let us check your blood pressure today.','I have been taking the tablets every morning.',
               'We will keep the same dose for now.','Should I come back in a month?'])[1 + ${draw("e.i::text || ':' || t::text", 20, 8)}],
        (t - 1) * 6.0, (t - 1) * 6.0 + 5.5
      FROM (SELECT s.i, s.turn_count, ${transcriptDocumentId.replaceAll("e.i", "s.i")} AS document_id
            FROM (${encounterSeries}) AS s WHERE s.has_transcript OFFSET 0) AS e,
        generate_series(1, e.turn_count) AS t`,
    recordings: `
      INSERT INTO recordings (document_id, storage_key, content_type)
      SELECT ${transcriptDocumentId}, 'generated/' || ${transcriptDocumentId} || '.wav', 'audio/wav'
      FROM (${encounterSeries}) AS e
      WHERE e.has_transcript AND e.has_recording`,
    recordingObjects: `
      INSERT INTO recording_objects (storage_key, content_type, bytes)
      SELECT r.storage_key, 'audio/wav', decode('${silentWavHex}', 'hex')
      FROM recordings r WHERE r.storage_key LIKE 'generated/%'`
  }
}

const tableOrder = [
  ["organizations", "organizations"],
  ["patients", "patients"],
  ["encounters", "encounters"],
  ["documents", "documents"],
  ["transcripts", "transcripts"],
  ["transcriptTurns", "transcript_turns"],
  ["recordings", "recordings"],
  ["recordingObjects", "recording_objects"]
] as const

/**
 * Issues one active full-access organization key per organization, digested with `digestKey`
 * as the service digests presented tokens; returns the tokens (shown once, never stored).
 */
export const issueFullAccessKeys = (
  organizationIds: ReadonlyArray<OrganizationId>,
  digestKey: Redacted.Redacted<string>,
  environment: "live" | "test",
  label: string
) =>
  Effect.gen(function*() {
    const client = yield* PgClient
    const keys = organizationIds.map((organizationId) => {
      const token = generateApiKeyToken(environment, (size) => randomBytes(size))
      return { organizationId, token, apiKeyId: newId("api_key"), digest: computeApiKeyDigest(digestKey, token) }
    })
    if (keys.length === 0) return keys
    for (const key of keys) {
      yield* client.run("generator.keys", (sql) =>
        sql`
          INSERT INTO api_keys (api_key_id, digest, kind, organization_id, scopes, state, label)
          VALUES (${key.apiKeyId}, ${key.digest}, 'organization', ${key.organizationId},
                  string_to_array(${allScopes.join(",")}, ','), 'active', ${label})`)
    }
    return keys
  })

/**
 * Loads the data set in one transaction (all or nothing), then VACUUM ANALYZE so that the
 * planner knows the new tables and index-only scans see an up-to-date visibility map. Refuses
 * a database that already holds generated organizations.
 */
export const generateDataSet = (
  options: GenerateOptions
): Effect.Effect<GenerateReport, StoreUnavailable | GeneratedDataExists, PgClient> =>
  Effect.gen(function*() {
    const client = yield* PgClient
    const statements = generatorStatements(options)
    const progress = options.onProgress ?? (() => {})
    const startedAt = performance.now()
    const existing = yield* client.run("generator.existing", (sql) =>
      sql<Array<{ organization_id: string }>>`
        SELECT organization_id FROM organizations WHERE organization_id LIKE 'org\\_gen\\_%' LIMIT 1`)
    if (existing[0] !== undefined) {
      return yield* new GeneratedDataExists({ organizationId: existing[0].organization_id })
    }
    const organizationIds = Array.from({ length: options.organizations }, (_, index) => generatedOrganizationId(index + 1))
    const rows: Record<string, number> = {}
    const keys = yield* client.transactionally(Effect.gen(function*() {
      yield* client.run("generator.settings", (sql) => sql`SET LOCAL work_mem = '256MB'`)
      for (const [statement, table] of tableOrder) {
        const tableStartedAt = performance.now()
        const result = yield* client.run(`generator.${statement}`, (sql) => sql.unsafe(statements[statement]))
        rows[table] = result.count
        progress(`${table}: ${result.count} rows in ${((performance.now() - tableStartedAt) / 1000).toFixed(1)} s`)
      }
      return yield* issueFullAccessKeys(organizationIds, options.digestKey, options.environment, "generated full access")
    }))
    rows["api_keys"] = keys.length
    const vacuumStartedAt = performance.now()
    for (const [, table] of tableOrder) {
      yield* client.run("generator.vacuum", (sql) => sql.unsafe(`VACUUM (ANALYZE) ${table}`))
    }
    progress(`vacuum analyze in ${((performance.now() - vacuumStartedAt) / 1000).toFixed(1)} s`)
    const counts = encountersPerOrganization(options)
    return {
      organizations: keys.map((key, index) => ({
        organizationId: key.organizationId,
        encounters: counts[index] ?? 0,
        apiKeyId: key.apiKeyId,
        token: key.token
      })),
      rows,
      seconds: (performance.now() - startedAt) / 1000
    }
  })
