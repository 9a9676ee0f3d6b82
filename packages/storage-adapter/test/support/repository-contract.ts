import { randomBytes } from "node:crypto"
import { readFileSync } from "node:fs"
import postgres from "postgres"
import {
  ApiKeyStore,
  AudioStorage,
  compareBytewise,
  computeApiKeyDigest,
  type DisclosureEvent,
  DisclosureRecorder,
  type DocumentId,
  type EncounterAndDocument,
  type EncounterId,
  type EncounterListQuery,
  EncounterRepository,
  generateApiKeyToken,
  IdGenerator,
  type OrganizationId,
  OrganizationStore,
  StoreUnavailable,
  UnitOfWork
} from "@clinical-api/domain"
import { expect, layer } from "@effect/vitest"
import { Cause, Context, Effect, Exit, Layer, Option, Redacted, Result, Stream } from "effect"
import {
  EmbeddedAudioStorageLayer,
  encounterPageStatement,
  FixtureRejected,
  IdGeneratorLive,
  loadFixture,
  makePgClient,
  migrate,
  MigrationMismatch,
  migrations,
  OperatorStore,
  seekFromOffset,
  OperatorStoreLive,
  PgClient,
  PgClientLayer,
  PostgresPortsLive,
  type Fixture,
  type FixtureEncounter,
  type Sql,
  textArray
} from "../../src/index.js"
import { embeddedObjectSeenIn, type MarkedRecordingReference } from "../../src/repositories/recording-object-mark.js"
import type { TestDatabase, TestDatabaseFactory } from "../../src/testing/test-database.js"

export const digestKey = Redacted.make("contract-suite-digest-key")

const exampleFixtureText = readFileSync(new URL("../../fixtures/example.fixture.json", import.meta.url), "utf8")

class CurrentDatabase extends Context.Service<CurrentDatabase, TestDatabase & { readonly queries: Array<string> }>()("test/CurrentDatabase") {}

/** Unique per call, so that tests sharing one database never see each other's rows. */
const unique = (prefix: string) => `${prefix}_${randomBytes(5).toString("hex")}`

const at = (text: string) => new Date(text)

const query = (overrides: Partial<EncounterListQuery> = {}): EncounterListQuery => ({
  limit: 100,
  offset: 0,
  sortOrder: "asc",
  startAt: null,
  endAt: null,
  ...overrides
})

const encounter = (
  organizationId: string,
  encounterId: string,
  createdAt: string,
  overrides: Partial<FixtureEncounter> = {}
): FixtureEncounter => ({
  encounter_id: encounterId,
  organization_id: organizationId,
  created_at: createdAt,
  updated_at: createdAt,
  date_of_service: null,
  status: null,
  patient_id: null,
  data_class: "clinical",
  documents: [],
  ...overrides
})

const fixture = (parts: Partial<Omit<Fixture, "format">>): Fixture => ({
  format: "clinical-encounter-fixture/v1",
  organizations: [],
  api_keys: [],
  patients: [],
  encounters: [],
  ...parts
})

/** An encounter whose one document is an ambient transcript with these turns. */
const transcribedEncounter = (
  organizationId: string,
  encounterId: string,
  documentId: string,
  turns: ReadonlyArray<{ speaker: string; text: string; start: number; end: number }>
): FixtureEncounter =>
  encounter(organizationId, encounterId, "2026-05-01T09:00:00.000Z", {
    documents: [{
      document_id: documentId,
      schema_type: "ambient_transcript",
      created_at: "2026-05-01T09:00:00.000Z",
      updated_at: "2026-05-01T09:00:00.000Z",
      transcript: { provider: "example-asr", audio_duration_seconds: 9, turns: [...turns] }
    }]
  })

const organization = (organizationId: string) => ({
  organization_id: organizationId,
  name: `Organization ${organizationId}`,
  approved: true,
  enabled_routes: ["listPublicEncounters" as const]
})

const load = (value: unknown) => loadFixture(value, { digestKey })

const ids = (page: { readonly items: ReadonlyArray<{ readonly encounterId: string }> }) =>
  page.items.map((item) => item.encounterId)

const countRows = (table: string, column: string, values: ReadonlyArray<string>) =>
  Effect.flatMap(PgClient, (client) =>
    client.run(
      "test.count",
      (sql) => sql<Array<{ count: number }>>`
        SELECT count(*)::int AS count FROM ${sql(table)} WHERE ${sql(column)} = ANY(${textArray(sql, values)})`
    )
  ).pipe(Effect.map((rows) => rows[0]?.count ?? -1))

/** A disclosure event of a detail read, with a new id from the generator in context. */
const disclosureEvent = (organizationId: OrganizationId, occurredAt: string, encounterId: string) =>
  Effect.map(
    Effect.flatMap(IdGenerator, (ids) => ids.next("disclosure")),
    (eventId): DisclosureEvent =>
      ({
        eventId,
        occurredAt: at(occurredAt),
        organizationId,
        apiKeyId: "key_test",
        operationId: "getPublicEncounter",
        encounterId,
        documentId: null,
        patientId: "pat_1",
        requestId: "req_1",
        callerRequestId: "partner-1"
      }) as DisclosureEvent
  )

/** Midnight-edge days of the list tests: four days, each with encounters at the given times of day. */
const edgeDays = ["2026-04-29", "2026-04-30", "2026-05-01", "2026-05-02"]

/**
 * Two organizations with an encounter at each of the edge times of every edge day: the first's
 * of the given data classes in turn, the other's all clinical.
 */
const loadAroundMidnights = (
  org: string,
  other: string,
  edges: ReadonlyArray<string>,
  classes: ReadonlyArray<FixtureEncounter["data_class"]>
) => {
  const times = edgeDays.flatMap((day) => edges.map((edge) => `${day}T${edge}Z`))
  return load(
    fixture({
      organizations: [organization(org), organization(other)],
      encounters: [
        ...times.map((time, index) =>
          encounter(org, `${org}_e${index}`, time, { data_class: classes[index % classes.length] ?? "clinical" })),
        ...times.map((time, index) => encounter(other, `${other}_e${index}`, time))
      ]
    })
  ).pipe(Effect.as(times))
}

/**
 * Changes through SQL, as an operator's script might make them, that the daily counts must
 * follow: data classes flipped, encounters moved across midnight, encounters deleted.
 */
const changeAroundMidnights = (org: string) =>
  Effect.gen(function* () {
    const client = yield* PgClient
    yield* client.run("test.change", (sql) => sql`
      UPDATE encounters SET data_class = CASE data_class WHEN 'clinical' THEN 'demo' ELSE 'clinical' END
      WHERE organization_id = ${org} AND encounter_id LIKE ${`${org}_e1%`}`)
    yield* client.run("test.change", (sql) => sql`
      UPDATE encounters SET created_at = created_at + interval '1 millisecond'
      WHERE organization_id = ${org} AND created_at::time = '23:59:59.999'`)
    yield* client.run("test.change", (sql) => sql`
      DELETE FROM encounters WHERE organization_id = ${org} AND encounter_id LIKE ${`${org}_e2%`}`)
  })

/**
 * The repository contract: what every PostgreSQL the service runs on must do. Called once per
 * kind of database (a real server, the embedded PGlite) with a factory of fresh databases.
 */
export const repositoryContract = (factory: TestDatabaseFactory) => {
  const database = Layer.effect(
    CurrentDatabase,
    Effect.map(factory.fresh, (db) => ({ ...db, queries: new Array<string>() }))
  )
  const client = Layer.effect(
    PgClient,
    Effect.flatMap(CurrentDatabase, (db) =>
      // Units started together share one group here whatever their statements took before;
      // how many a group takes under load has its own test (pg-client.test.ts).
      makePgClient({ url: db.url, ...db.clientOptions, groupReadBudgetMs: 0, onQuery: (text) => db.queries.push(text) })
    )
  )
  const migrated = Layer.effectDiscard(migrate())
  const environment = Layer.mergeAll(
    PostgresPortsLive,
    OperatorStoreLive,
    EmbeddedAudioStorageLayer({ mediaBaseUrl: "http://media.test", signingKey: Redacted.make("media-key") })
  ).pipe(
    Layer.provideMerge(IdGeneratorLive),
    Layer.provideMerge(migrated),
    Layer.provideMerge(client),
    Layer.provideMerge(database)
  )

  layer(environment, { timeout: "60 seconds", excludeTestServices: true })(`repository contract on ${factory.label}`, (it) => {
    it.effect("migrate: two concurrent runs on a fresh database apply each migration exactly once", () =>
      Effect.gen(function* () {
        const fresh = yield* factory.fresh
        const runs = yield* fresh.separateClients
          ? Effect.all(
              [
                migrate().pipe(Effect.provide(PgClientLayer({ url: fresh.url, ...fresh.clientOptions }))),
                migrate().pipe(Effect.provide(PgClientLayer({ url: fresh.url, ...fresh.clientOptions })))
              ],
              { concurrency: "unbounded" }
            )
          : // PGlite has one session: the two runs share the one connection it accepts.
            Effect.all([migrate(), migrate()], { concurrency: "unbounded" }).pipe(
              Effect.provide(PgClientLayer({ url: fresh.url, ...fresh.clientOptions }))
            )
        const allVersions = migrations.map((migration) => migration.version)
        expect([...runs[0].applied, ...runs[1].applied].sort((a, b) => a - b)).toEqual(allVersions)
        expect(runs[0].current).toEqual(allVersions)
        expect(runs[1].current).toEqual(allVersions)
        const ledger = yield* Effect.flatMap(PgClient, (pg) =>
          pg.run("test.ledger", (sql) => sql<Array<{ version: number }>>`SELECT version FROM schema_migrations ORDER BY version`)
        ).pipe(Effect.provide(PgClientLayer({ url: fresh.url, ...fresh.clientOptions })))
        expect(ledger.map((row) => row.version)).toEqual(allVersions)
      }).pipe(Effect.scoped)
    )

    it.effect("migrate: a second run applies nothing; an edited or unknown migration is refused", () =>
      Effect.gen(function* () {
        const again = yield* migrate()
        expect(again.applied).toEqual([])
        const edited = migrations.map((migration) => ({ ...migration, sql: `${migration.sql}\n-- edited` }))
        const refused = yield* Effect.flip(migrate(edited))
        expect(refused).toBeInstanceOf(MigrationMismatch)
        expect(refused.message).toContain("checksum changed")
        const unknown = yield* Effect.flip(migrate([]))
        expect(unknown.message).toContain("does not know")
      })
    )

    it.effect("list: ties on created_at are broken by encounter_id bytewise (COLLATE \"C\"), in both directions", () =>
      Effect.gen(function* () {
        const org = unique("org")
        // Bytewise (UTF-8) order and locale order of these ids differ: B < Z < a < b < é bytewise.
        const suffixes = ["a", "B", "é", "Z", "b", "a-1", "a1", "A"]
        const tied = suffixes.map((suffix) => `enc_${suffix}`)
        const bytewise = [...tied].sort(compareBytewise)
        const localeOrder = [...tied].sort((x, y) => x.localeCompare(y, "en-US"))
        expect(bytewise).not.toEqual(localeOrder)
        yield* load(
          fixture({
            organizations: [organization(org)],
            encounters: [
              ...tied.map((id) => encounter(org, `${org}_${id}`, "2026-05-01T09:00:00.000Z")),
              encounter(org, `${org}_enc_early`, "2026-04-30T09:00:00.000Z"),
              encounter(org, `${org}_enc_late`, "2026-05-02T09:00:00.000Z")
            ]
          })
        )
        const repository = yield* EncounterRepository
        const asc = yield* repository.listForOrganization(org as OrganizationId, query({ sortOrder: "asc" }))
        expect(ids(asc)).toEqual([
          `${org}_enc_early`,
          ...bytewise.map((id) => `${org}_${id}`),
          `${org}_enc_late`
        ])
        const desc = yield* repository.listForOrganization(org as OrganizationId, query({ sortOrder: "desc" }))
        expect(ids(desc)).toEqual([...ids(asc)].reverse())
        expect(asc.total).toBe(tied.length + 2)
        // Pages cut through the tie without skipping or repeating.
        const paged: Array<string> = []
        for (let offset = 0; offset < asc.total; offset += 3) {
          paged.push(...ids(yield* repository.listForOrganization(org as OrganizationId, query({ limit: 3, offset }))))
        }
        expect(paged).toEqual(ids(asc))
      })
    )

    it.effect("list: start_at is inclusive, end_at exclusive; totals count the range only", () =>
      Effect.gen(function* () {
        const org = unique("org")
        const times = [
          "2026-05-01T08:59:59.999Z",
          "2026-05-01T09:00:00.000Z",
          "2026-05-01T12:00:00.000Z",
          "2026-05-01T17:59:59.999Z",
          "2026-05-01T18:00:00.000Z"
        ]
        yield* load(
          fixture({
            organizations: [organization(org)],
            encounters: times.map((time, index) => encounter(org, `${org}_e${index}`, time))
          })
        )
        const repository = yield* EncounterRepository
        const inRange = yield* repository.listForOrganization(
          org as OrganizationId,
          query({ startAt: at("2026-05-01T09:00:00.000Z"), endAt: at("2026-05-01T18:00:00.000Z") })
        )
        expect(ids(inRange)).toEqual([`${org}_e1`, `${org}_e2`, `${org}_e3`])
        expect(inRange.total).toBe(3)
        const fromOnly = yield* repository.listForOrganization(
          org as OrganizationId,
          query({ startAt: at("2026-05-01T12:00:00.000Z"), limit: 1 })
        )
        expect(ids(fromOnly)).toEqual([`${org}_e2`])
        expect(fromOnly.total).toBe(3)
        const toOnly = yield* repository.listForOrganization(
          org as OrganizationId,
          query({ endAt: at("2026-05-01T09:00:00.000Z"), sortOrder: "desc" })
        )
        expect(ids(toOnly)).toEqual([`${org}_e0`])
        expect(toOnly.total).toBe(1)
      })
    )

    it.effect("list: the total is exact for every range, around UTC midnights too, after inserts, updates and deletes", () =>
      Effect.gen(function* () {
        const org = unique("org")
        const other = unique("org")
        const times = yield* loadAroundMidnights(
          org,
          other,
          ["00:00:00.000", "00:00:00.001", "11:30:00.000", "23:59:59.999"],
          ["clinical", "clinical", "demo", "clinical", "training"]
        )
        const repository = yield* EncounterRepository
        const client = yield* PgClient
        const bounds = [
          null,
          "2026-04-28T12:00:00.000Z",
          "2026-04-30T00:00:00.000Z",
          "2026-04-30T00:00:00.001Z",
          "2026-04-30T23:59:59.999Z",
          "2026-05-01T00:00:00.000Z",
          "2026-05-01T11:30:00.000Z",
          "2026-05-02T00:00:00.000Z",
          "2026-05-03T00:00:00.000Z"
        ]
        const expectExactTotals = Effect.gen(function* () {
          const rows = yield* client.run("test.truth", (sql) => sql<Array<{ created_at: Date }>>`
            SELECT created_at FROM encounters WHERE organization_id = ${org} AND data_class = 'clinical'`)
          for (const from of bounds) {
            for (const to of bounds) {
              const startAt = from === null ? null : at(from)
              const endAt = to === null ? null : at(to)
              if (startAt !== null && endAt !== null && startAt.getTime() >= endAt.getTime()) continue
              const truth = rows.filter((row) =>
                (startAt === null || row.created_at.getTime() >= startAt.getTime()) &&
                (endAt === null || row.created_at.getTime() < endAt.getTime())).length
              const page = yield* repository.listForOrganization(org as OrganizationId, query({ startAt, endAt, limit: 1 }))
              expect(page.total, `[${from}, ${to})`).toBe(truth)
            }
          }
          return rows.length
        })
        expect(yield* expectExactTotals).toBeGreaterThan(0)
        yield* changeAroundMidnights(org)
        yield* expectExactTotals
        const otherPage = yield* repository.listForOrganization(other as OrganizationId, query({ limit: 1 }))
        expect(otherPage.total).toBe(times.length)
      })
    )

    it.effect("list: a page sought through the daily counts is the page of an entry-by-entry skip, at every offset, range and order, after changes", () =>
      Effect.gen(function* () {
        const org = unique("org")
        const other = unique("org")
        // Ties at the edges too: two encounters at each of midnight and the last millisecond.
        const edges = ["00:00:00.000", "00:00:00.000", "00:00:00.001", "11:30:00.000", "23:59:59.999", "23:59:59.999"]
        yield* loadAroundMidnights(org, other, edges, ["clinical", "clinical", "demo", "clinical", "training", "clinical", "clinical"])
        const client = yield* PgClient
        const bounds = [
          null,
          "2026-04-29T00:00:00.000Z",
          "2026-04-30T00:00:00.001Z",
          "2026-04-30T23:59:59.999Z",
          "2026-05-01T11:30:00.000Z",
          "2026-05-02T00:00:00.000Z",
          "2026-05-03T00:00:00.000Z"
        ]
        const pageOf = (listQuery: EncounterListQuery, seekFrom: number) =>
          client.run("test.page", (sql) =>
            sql<Array<{ total: number; encounter_id: string | null }>>`${encounterPageStatement(sql, org as OrganizationId, listQuery, seekFrom)}`
          ).pipe(Effect.map((rows) => ({
            total: rows[0]?.total,
            ids: rows.flatMap((row) => row.encounter_id === null ? [] : [row.encounter_id])
          })))
        const expectSoughtPagesExact = Effect.gen(function* () {
          const rows = yield* client.run("test.truth", (sql) => sql<Array<{ encounter_id: string; created_at: Date }>>`
            SELECT encounter_id, created_at FROM encounters WHERE organization_id = ${org} AND data_class = 'clinical'`)
          let compared = 0
          for (const from of bounds) {
            for (const to of bounds) {
              const startAt = from === null ? null : at(from)
              const endAt = to === null ? null : at(to)
              if (startAt !== null && endAt !== null && startAt.getTime() >= endAt.getTime()) continue
              const ascending = rows
                .filter((row) =>
                  (startAt === null || row.created_at.getTime() >= startAt.getTime()) &&
                  (endAt === null || row.created_at.getTime() < endAt.getTime()))
                .sort((a, b) => a.created_at.getTime() - b.created_at.getTime() || compareBytewise(a.encounter_id, b.encounter_id))
                .map((row) => row.encounter_id)
              for (const sortOrder of ["asc", "desc"] as const) {
                const ordered = sortOrder === "asc" ? ascending : [...ascending].reverse()
                for (let offset = 0; offset <= ordered.length + 1; offset++) {
                  const listQuery = query({ startAt, endAt, sortOrder, offset, limit: 2 })
                  const sought = yield* pageOf(listQuery, 0)
                  const where = `[${from}, ${to}) ${sortOrder} offset ${offset}`
                  expect(sought, where).toEqual({ total: ordered.length, ids: ordered.slice(offset, offset + 2) })
                  compared++
                }
              }
            }
          }
          return compared
        })
        expect(yield* expectSoughtPagesExact).toBeGreaterThan(500)
        // The seek skips whole days: at the last page of the unbounded list, the page's index scan
        // reads at most a day's entries and the page, not the whole list. And its walk over the
        // daily counts stops at the first day the offset does not pass: at offset 0 it reads the
        // first day and the one after (the running sum looks one row ahead), not all four.
        const pg = yield* PgClient
        const explain = (listQuery: EncounterListQuery) =>
          pg.transactionally(
            Effect.gen(function* () {
              // Small tables make a sequential scan cheaper; take it away to see what the indexes do.
              yield* pg.run("test.settings", (sql) => sql`SET LOCAL enable_seqscan = off`)
              yield* pg.run("test.settings", (sql) => sql`SET LOCAL enable_bitmapscan = off`)
              return yield* pg.run(
                "test.explain",
                (sql) => sql<Array<{ "QUERY PLAN": string }>>`EXPLAIN (ANALYZE, TIMING OFF) ${encounterPageStatement(
                  sql,
                  org as OrganizationId,
                  listQuery,
                  0
                )}`
              )
            })
          ).pipe(Effect.map((rows) => rows.map((row) => row["QUERY PLAN"])))
        const actualRows = (plan: ReadonlyArray<string>, scan: RegExp) =>
          plan.flatMap((line) => {
            const rows = scan.test(line) ? /actual rows=(\d+)/.exec(line)?.[1] : undefined
            return rows === undefined ? [] : [Number(rows)]
          })
        for (const sortOrder of ["asc", "desc"] as const) {
          const total = (yield* pageOf(query({ limit: 1 }), 0)).total ?? 0
          expect(total).toBeGreaterThan(2 * edges.length)
          const plan = yield* explain(query({ sortOrder, offset: total - 2, limit: 2 }))
          const scanned = actualRows(plan, /Index Only Scan.* on encounters /)
          expect(scanned, plan.join("\n")).toHaveLength(1)
          expect(scanned[0], sortOrder).toBeLessThanOrEqual(edges.length + 2)
        }
        const firstPage = yield* explain(query({ sortOrder: "desc", offset: 0, limit: 2 }))
        const walked = actualRows(firstPage, /Scan Backward using encounter_daily_counts_pkey/)
        expect(walked, firstPage.join("\n")).toEqual([2])
        yield* changeAroundMidnights(org)
        yield* expectSoughtPagesExact
        // The repository seeks from `seekFromOffset` on, and only there.
        const db = yield* CurrentDatabase
        const repository = yield* EncounterRepository
        for (const offset of [seekFromOffset - 1, seekFromOffset]) {
          db.queries.length = 0
          const page = yield* repository.listForOrganization(org as OrganizationId, query({ offset, startAt: at("2026-04-29T00:00:00.000Z") }))
          expect(page.items).toEqual([])
          expect(db.queries.some((text) => /WITH seek AS/.test(text)), `offset ${offset}`).toBe(offset >= seekFromOffset)
        }
      })
    )

    it.effect("list: an offset past the end gives no items and the exact total", () =>
      Effect.gen(function* () {
        const org = unique("org")
        yield* load(
          fixture({
            organizations: [organization(org)],
            encounters: [0, 1, 2].map((index) => encounter(org, `${org}_e${index}`, `2026-05-0${index + 1}T09:00:00.000Z`))
          })
        )
        const repository = yield* EncounterRepository
        for (const offset of [3, 4, 10_000]) {
          const page = yield* repository.listForOrganization(org as OrganizationId, query({ offset, limit: 2 }))
          expect(page.items).toEqual([])
          expect(page.total).toBe(3)
        }
        const empty = yield* repository.listForOrganization(unique("org_none") as OrganizationId, query())
        expect(empty).toEqual({ items: [], total: 0 })
      })
    )

    it.effect("list: demo and training encounters and other organizations' encounters are never returned", () =>
      Effect.gen(function* () {
        const org = unique("org")
        const other = unique("org_other")
        yield* load(
          fixture({
            organizations: [organization(org), organization(other)],
            encounters: [
              encounter(org, `${org}_clinical`, "2026-05-01T09:00:00.000Z"),
              encounter(org, `${org}_demo`, "2026-05-01T10:00:00.000Z", { data_class: "demo" }),
              encounter(org, `${org}_training`, "2026-05-01T11:00:00.000Z", { data_class: "training" }),
              encounter(other, `${other}_clinical`, "2026-05-01T09:30:00.000Z")
            ]
          })
        )
        const repository = yield* EncounterRepository
        const page = yield* repository.listForOrganization(org as OrganizationId, query())
        expect(ids(page)).toEqual([`${org}_clinical`])
        expect(page.total).toBe(1)
        // The single-encounter lookup returns any encounter: the policy decides (403s).
        const demo = yield* repository.findEncounter(`${org}_demo` as EncounterId)
        expect(Option.map(demo, (found) => found.dataClass)).toEqual(Option.some("demo"))
      })
    )

    it.effect("document read: the encounter and the document are each found by their own id, whatever the other, in one statement", () =>
      Effect.gen(function* () {
        const org = unique("org")
        const other = unique("org_other")
        const withDocument = (organizationId: string) =>
          encounter(organizationId, `${organizationId}_e`, "2026-05-01T09:00:00.000Z", {
            documents: [{
              document_id: `${organizationId}_d`,
              schema_type: "document" as const,
              created_at: "2026-05-01T09:00:00.000Z",
              updated_at: "2026-05-01T09:00:00.000Z"
            }]
          })
        yield* load(fixture({ organizations: [organization(org), organization(other)], encounters: [withDocument(org), withDocument(other)] }))
        const repository = yield* EncounterRepository
        const db = yield* CurrentDatabase
        const read = (encounterId: string, documentId: string) =>
          repository.findEncounterAndDocument(encounterId as EncounterId, documentId as DocumentId, { withFinalTranscript: true })
        const idsOf = (found: EncounterAndDocument) => ({
          encounter: Option.getOrNull(Option.map(found.encounter, (head) => head.encounterId)),
          document: Option.getOrNull(Option.map(found.document, (document) => document.documentId)),
          documentOf: Option.getOrNull(Option.map(found.document, (document) => document.encounterId)),
          transcript: Option.isSome(found.finalTranscript)
        })
        db.queries.length = 0
        // Another organization's document: found, with its own encounter; the policy refuses it.
        expect(idsOf(yield* read(`${org}_e`, `${other}_d`))).toEqual({
          encounter: `${org}_e`, document: `${other}_d`, documentOf: `${other}_e`, transcript: false
        })
        expect(db.queries).toHaveLength(1)
        expect(idsOf(yield* read(`${org}_e`, `${org}_d`))).toEqual({
          encounter: `${org}_e`, document: `${org}_d`, documentOf: `${org}_e`, transcript: false
        })
        expect(idsOf(yield* read(`${org}_missing`, `${org}_d`))).toEqual({
          encounter: null, document: `${org}_d`, documentOf: `${org}_e`, transcript: false
        })
        expect(idsOf(yield* read(`${org}_e`, `${org}_missing`))).toEqual({
          encounter: `${org}_e`, document: null, documentOf: null, transcript: false
        })
        expect(yield* read(`${org}_missing`, `${org}_missing`)).toEqual({
          encounter: Option.none(), document: Option.none(), finalTranscript: Option.none()
        })
      })
    )

    it.effect("transcript read: the turns kept in the transcript's row follow every insert, update, delete and truncate of its turns", () =>
      Effect.gen(function* () {
        const org = unique("org")
        const turns = [
          { speaker: "clinician", text: "What brings you in?", start: 0, end: 1.5 },
          { speaker: "patient", text: "A \"cough\"\n\u00e9\u2028", start: 2, end: 3.25 }
        ]
        const transcribed = (encounterId: string, documentId: string) => transcribedEncounter(org, encounterId, documentId, turns)
        yield* load(fixture({
          organizations: [organization(org)],
          encounters: [transcribed(`${org}_e1`, `${org}_d1`), transcribed(`${org}_e2`, `${org}_d2`)]
        }))
        const repository = yield* EncounterRepository
        const pg = yield* PgClient
        const served = (n: 1 | 2) =>
          Effect.map(
            repository.findEncounterAndDocument(`${org}_e${n}` as EncounterId, `${org}_d${n}` as DocumentId, { withFinalTranscript: true }),
            (found) => Option.getOrThrow(found.finalTranscript).turns
          )
        /** The turns as the table holds them, in the route's order. */
        const stored = (n: 1 | 2) =>
          Effect.map(
            pg.run("test.turns", (sql) => sql<Array<{ speaker: string; text: string; start: number; end: number }>>`
              SELECT speaker, text, start_seconds AS start, end_seconds AS "end" FROM transcript_turns
              WHERE document_id = ${`${org}_d${n}`} ORDER BY start_seconds, ordinal`),
            (rows) => rows.map((row) => ({ ...row }))
          )
        const expectServedAsStored = Effect.fnUntraced(function* () {
          for (const n of [1, 2] as const) expect(yield* served(n)).toEqual(yield* stored(n))
        })
        yield* expectServedAsStored()
        expect(yield* served(1)).toEqual(turns)
        const change = (name: string, statement: (sql: Sql) => Promise<unknown>) => pg.run(`test.${name}`, statement)
        // One statement inserting turns of both transcripts, one of them before the first turn.
        yield* change("insert", (sql) => sql`
          INSERT INTO transcript_turns (document_id, ordinal, speaker, text, start_seconds, end_seconds)
          VALUES (${`${org}_d1`}, 2, 'clinician', 'Any fever?', 4, 5), (${`${org}_d2`}, 5, 'patient', 'Before', -1, -0.5)`)
        yield* expectServedAsStored()
        expect(yield* served(2)).toHaveLength(3)
        yield* change("update", (sql) => sql`
          UPDATE transcript_turns SET text = text || ' (edited)', start_seconds = start_seconds + 10
          WHERE document_id = ${`${org}_d1`} AND ordinal = 0`)
        yield* expectServedAsStored()
        // A turn moved from one transcript to the other changes both.
        yield* change("move", (sql) => sql`
          UPDATE transcript_turns SET document_id = ${`${org}_d2`}, ordinal = 9 WHERE document_id = ${`${org}_d1`} AND ordinal = 1`)
        yield* expectServedAsStored()
        expect([(yield* served(1)).length, (yield* served(2)).length]).toEqual([2, 4])
        yield* change("delete", (sql) => sql`DELETE FROM transcript_turns WHERE document_id = ${`${org}_d1`}`)
        yield* expectServedAsStored()
        expect(yield* served(1)).toEqual([])
        // TRUNCATE, in a transaction rolled back so that the other tests' turns stay.
        const rollback = new Error("rollback")
        const truncated = yield* Effect.promise(async () => {
          let turns: Array<unknown> = []
          await pg.currentPool().begin(async (tx) => {
            const transaction = tx as unknown as Sql
            await transaction`TRUNCATE transcript_turns`
            const rows = await transaction<Array<{ turns: unknown }>>`
              SELECT turns_json AS turns FROM transcripts WHERE document_id = ${`${org}_d2`}`
            turns = Array.from(rows, (row) => row.turns)
            throw rollback
          }).catch((error: unknown) => {
            if (error !== rollback) throw error
          })
          return turns
        })
        expect(truncated).toEqual([[]])
        expect(yield* served(2)).toHaveLength(4)
      })
    )

    it.effect("transcript read: turns two transactions write to one transcript at once are all in its row once both commit", () =>
      Effect.gen(function* () {
        const org = unique("org")
        const documentId = `${org}_d`
        yield* load(fixture({
          organizations: [organization(org)],
          encounters: [transcribedEncounter(org, `${org}_e`, documentId, [])]
        }))
        const db = yield* CurrentDatabase
        const insertTurn = (sql: Sql, ordinal: number) => sql`
          INSERT INTO transcript_turns (document_id, ordinal, speaker, text, start_seconds, end_seconds)
          VALUES (${documentId}, ${ordinal}, 'patient', ${`turn ${ordinal}`}, ${ordinal}, ${ordinal + 0.5})`
        if (db.separateClients) {
          // The second writer's trigger waits for the first's lock on the transcript, then
          // rebuilds in a snapshot that holds the first's committed turn.
          const first = postgres(db.url, { max: 1, onnotice: () => {} })
          const second = postgres(db.url, { max: 1, onnotice: () => {} })
          const observer = postgres(db.url, { max: 1, onnotice: () => {} })
          yield* Effect.promise(async () => {
            try {
              let secondDone: Promise<unknown> = Promise.resolve()
              await first.begin(async (tx) => {
                await insertTurn(tx as unknown as Sql, 1)
                secondDone = second.begin((other) => insertTurn(other as unknown as Sql, 2))
                for (let waited = 0; ; waited += 10) {
                  const [waiting] = await observer<Array<{ count: number }>>`
                    SELECT count(*)::int AS count FROM pg_locks WHERE NOT granted AND locktype IN ('tuple', 'transactionid')`
                  if ((waiting?.count ?? 0) > 0) break
                  if (waited > 5_000) throw new Error("the second writer never waited for the first")
                  await new Promise((done) => setTimeout(done, 10))
                }
              })
              await secondDone
            } finally {
              await Promise.all([first.end(), second.end(), observer.end()])
            }
          })
        } else {
          // One connection (PGlite): the writers cannot interleave; one after the other.
          const pg = yield* PgClient
          yield* pg.run("test.first-writer", (sql) => insertTurn(sql, 1))
          yield* pg.run("test.second-writer", (sql) => insertTurn(sql, 2))
        }
        const repository = yield* EncounterRepository
        const found = yield* repository.findEncounterAndDocument(`${org}_e` as EncounterId, documentId as DocumentId, {
          withFinalTranscript: true
        })
        expect(Option.getOrThrow(found.finalTranscript).turns.map((turn) => turn.text)).toEqual(["turn 1", "turn 2"])
      })
    )

    it.effect("list: a page of 100 encounters with patients and documents takes the same fixed number of queries as a page of 1", () =>
      Effect.gen(function* () {
        const org = unique("org")
        const patients = Array.from({ length: 10 }, (_, index) => ({
          patient_id: `${org}_p${index}`,
          organization_id: org,
          first_name: `First${index}`,
          last_name: `Last${index}`,
          date_of_birth: "1980-01-0" + ((index % 9) + 1)
        }))
        yield* load(
          fixture({
            organizations: [organization(org)],
            patients,
            encounters: Array.from({ length: 120 }, (_, index) =>
              encounter(org, `${org}_e${String(index).padStart(3, "0")}`, "2026-05-01T09:00:00.000Z", {
                patient_id: `${org}_p${index % 10}`,
                documents: [0, 1].map((documentIndex) => ({
                  document_id: `${org}_e${index}_d${documentIndex}`,
                  schema_type: documentIndex === 0 ? ("document" as const) : ("billing" as const),
                  created_at: "2026-05-01T09:00:00.000Z",
                  updated_at: "2026-05-01T09:00:00.000Z"
                }))
              })
            )
          })
        )
        const repository = yield* EncounterRepository
        const db = yield* CurrentDatabase
        const queriesFor = (limit: number) =>
          Effect.gen(function* () {
            db.queries.length = 0
            const page = yield* repository.listForOrganization(org as OrganizationId, query({ limit }))
            return { page, count: db.queries.length }
          })
        const one = yield* queriesFor(1)
        const hundred = yield* queriesFor(100)
        expect(hundred.page.items).toHaveLength(100)
        expect(hundred.page.items.every((item) => item.patient !== null && item.documents.length === 2)).toBe(true)
        expect(one.count).toBe(2)
        expect(hundred.count).toBe(one.count)
      })
    )

    it.effect("list: EXPLAIN shows the page's keys read by an index-only scan of encounters_clinical_list, both sort directions, no sort", () =>
      Effect.gen(function* () {
        const pg = yield* PgClient
        const org = unique("org") as OrganizationId
        for (const sortOrder of ["asc", "desc"] as const) {
          const plan = yield* pg.transactionally(
            Effect.gen(function* () {
              // Small tables make a sequential scan cheaper; take it away to see what the index can do.
              yield* pg.run("test.settings", (sql) => sql`SET LOCAL enable_seqscan = off`)
              yield* pg.run("test.settings", (sql) => sql`SET LOCAL enable_bitmapscan = off`)
              return yield* pg.run(
                "test.explain",
                (sql) => sql<Array<{ "QUERY PLAN": string }>>`EXPLAIN ${encounterPageStatement(
                  sql,
                  org,
                  query({ sortOrder, startAt: at("2026-01-01T00:00:00Z"), endAt: at("2027-01-01T00:00:00Z") })
                )}`
              )
            })
          )
          const lines = plan.map((row) => row["QUERY PLAN"])
          // The page's keys under LIMIT/OFFSET are read in order from the index alone (skipping
          // the offset touches no table page): no Sort below the Limit. (The statement's outer
          // ORDER BY re-sorts at most `limit` rows after the LATERAL join.)
          const page = lines.slice(lines.findIndex((line) => line.includes("Limit"))).join("\n")
          expect(page).toMatch(
            sortOrder === "asc"
              ? /Index Only Scan using encounters_clinical_list/
              : /Index Only Scan Backward using encounters_clinical_list/
          )
          expect(page).not.toMatch(/\bSort\b/)
        }
      })
    )

    it.effect("fixture: the example fixture loads and reads back exactly", () =>
      Effect.gen(function* () {
        const report = yield* load(exampleFixtureText)
        const example: Fixture = JSON.parse(exampleFixtureText)
        expect(report).toMatchObject({ organizations: 3, apiKeys: 7, patients: 3, encounters: 7, recordings: 2, recordingObjects: 1 })

        const organizations = yield* OrganizationStore
        for (const org of example.organizations) {
          const found = yield* organizations.findById(org.organization_id as OrganizationId)
          expect(found).toEqual(
            Option.some({
              organizationId: org.organization_id,
              name: org.name,
              approved: org.approved,
              enabledRoutes: org.enabled_routes
            })
          )
        }

        const keys = yield* ApiKeyStore
        for (const key of example.api_keys) {
          const found = yield* keys.findByDigest(computeApiKeyDigest(digestKey, key.token))
          expect(Option.isSome(found)).toBe(true)
          const record = Option.getOrThrow(found)
          expect(record).toMatchObject({
            organizationId: key.organization_id,
            kind: key.kind,
            scopes: key.scopes,
            state: key.state,
            expiresAt: key.expires_at === null ? null : new Date(key.expires_at),
            label: key.label ?? null
          })
        }
        // Only digests are stored.
        const tokensStored = yield* countRows(
          "api_keys",
          "digest",
          example.api_keys.map((key) => key.token)
        )
        expect(tokensStored).toBe(0)

        const repository = yield* EncounterRepository
        const db = yield* CurrentDatabase
        const pg = yield* PgClient
        const patients = new Map(example.patients.map((patient) => [patient.patient_id, patient]))
        for (const fixtureEncounter of example.encounters) {
          const found = Option.getOrThrow(yield* repository.findEncounter(fixtureEncounter.encounter_id as EncounterId))
          const patient = fixtureEncounter.patient_id == null ? null : patients.get(fixtureEncounter.patient_id)
          expect(found).toEqual({
            encounterId: fixtureEncounter.encounter_id,
            organizationId: fixtureEncounter.organization_id,
            dataClass: fixtureEncounter.data_class,
            createdAt: new Date(fixtureEncounter.created_at),
            updatedAt: new Date(fixtureEncounter.updated_at),
            dateOfService: fixtureEncounter.date_of_service == null ? null : new Date(fixtureEncounter.date_of_service),
            status: fixtureEncounter.status ?? null,
            patient:
              patient == null
                ? null
                : {
                    patient_id: patient.patient_id,
                    first_name: patient.first_name ?? null,
                    last_name: patient.last_name ?? null,
                    date_of_birth: patient.date_of_birth ?? null
                  },
            documents: [...fixtureEncounter.documents]
              .sort((a, b) => Date.parse(a.created_at) - Date.parse(b.created_at) || compareBytewise(a.document_id, b.document_id))
              .map((document) => ({
                documentId: document.document_id,
                schemaType: document.schema_type,
                title: document.title ?? null,
                status: document.status ?? null,
                workflowVariant: document.workflow_variant ?? null,
                audioDurationSeconds: document.audio_duration_seconds ?? null,
                createdAt: new Date(document.created_at)
              }))
          })
          const { documents: _documents, ...head } = found
          for (const document of fixtureEncounter.documents) {
            const withTranscript = yield* repository.findEncounterAndDocument(
              fixtureEncounter.encounter_id as EncounterId,
              document.document_id as DocumentId,
              { withFinalTranscript: true }
            )
            expect(withTranscript.encounter).toEqual(Option.some(head))
            const stored = Option.getOrThrow(withTranscript.document)
            expect(stored).toMatchObject({
              documentId: document.document_id,
              encounterId: fixtureEncounter.encounter_id,
              updatedAt: new Date(document.updated_at),
              contentMarkdown: document.content_markdown ?? null
            })
            expect(withTranscript.finalTranscript).toEqual(
              document.transcript == null
                ? Option.none()
                : Option.some({
                    provider: document.transcript.provider,
                    audio_duration_seconds: document.transcript.audio_duration_seconds ?? null,
                    turns: document.transcript.turns
                  })
            )
            // Without the transcript, the rest is the same.
            const withoutTranscript = yield* repository.findEncounterAndDocument(
              fixtureEncounter.encounter_id as EncounterId,
              document.document_id as DocumentId,
              { withFinalTranscript: false }
            )
            expect(withoutTranscript).toEqual({ ...withTranscript, finalTranscript: Option.none() })
            // For the audio route, the same, its recording marked if its object is stored.
            const forAudioUrl = yield* repository.findEncounterAndDocument(
              fixtureEncounter.encounter_id as EncounterId,
              document.document_id as DocumentId,
              { withFinalTranscript: false, forAudioUrl: true }
            )
            const { recording: markedRecording, ...forAudioUrlDocument } = Option.getOrThrow(forAudioUrl.document)
            const { recording: _recording, ...storedDocument } = stored
            expect({ ...forAudioUrl, document: forAudioUrlDocument }).toEqual({ ...withoutTranscript, document: storedDocument })
            if (document.recording == null) {
              expect(stored.recording).toBeNull()
              expect(markedRecording).toBeNull()
            } else {
              expect(stored.recording?.contentType).toBe(document.recording.content_type)
              const objectStored = "data_base64" in document.recording
              const audio = yield* AudioStorage
              db.queries.length = 0
              expect(yield* audio.exists(stored.recording!)).toBe(objectStored)
              expect(db.queries).toHaveLength(1)
              expect({ storageKey: markedRecording?.storageKey, contentType: markedRecording?.contentType }).toEqual(stored.recording)
              expect((markedRecording as MarkedRecordingReference)[embeddedObjectSeenIn] === pg).toBe(objectStored)
              // The storage answers from the mark, without a statement; an unmarked recording is read.
              db.queries.length = 0
              expect(yield* audio.exists(markedRecording!)).toBe(objectStored)
              expect(db.queries).toHaveLength(objectStored ? 0 : 1)
              // A mark from another database's client is not taken on trust.
              if (objectStored) {
                const elsewhere = yield* Effect.scoped(makePgClient({ url: "postgres://127.0.0.1:1/elsewhere" }))
                const removed = yield* pg.run("test.remove-object", (sql) =>
                  sql`DELETE FROM recording_objects WHERE storage_key = ${stored.recording!.storageKey} RETURNING storage_key, content_type, bytes`)
                expect(yield* audio.exists({ ...stored.recording!, [embeddedObjectSeenIn]: elsewhere } as MarkedRecordingReference)).toBe(false)
                yield* pg.run("test.restore-object", (sql) => sql`INSERT INTO recording_objects ${sql(removed[0]!)}`)
              }
            }
          }
        }
        // The turns are served as the store wrote them, so the store refuses to hold a turn the
        // contract cannot carry (a time that is not a finite number) or turns that are not an
        // array; the transcript is served as it was.
        const transcribed = example.encounters
          .flatMap((encounter) => encounter.documents.map((document) => ({ ...document, encounter_id: encounter.encounter_id })))
          .find((document) => document.transcript != null && document.transcript.turns.length > 0)
        if (transcribed === undefined) throw new Error("the example fixture has no transcript with turns")
        const servedTurns = Effect.map(
          repository.findEncounterAndDocument(
            transcribed.encounter_id as EncounterId,
            transcribed.document_id as DocumentId,
            { withFinalTranscript: true }
          ),
          (found) => Option.getOrThrow(found.finalTranscript).turns
        )
        const before = yield* servedTurns
        expect(before).toHaveLength(transcribed.transcript!.turns.length)
        for (const [column, value] of [["start_seconds", "NaN"], ["end_seconds", "Infinity"], ["start_seconds", "-Infinity"]] as const) {
          const refused = yield* Effect.flip(pg.run("test.corrupt-turn", (sql) =>
            sql`UPDATE transcript_turns SET ${sql(column)} = ${value} WHERE document_id = ${transcribed.document_id} AND ordinal = 0`))
          expect(refused.cause).toMatchObject({ code: "23514", constraint_name: "transcript_turns_finite_times" })
        }
        const notAnArray = yield* Effect.flip(pg.run("test.corrupt-turns", (sql) =>
          sql`UPDATE transcripts SET turns_json = '{"speaker": "a"}' WHERE document_id = ${transcribed.document_id}`))
        expect(notAnArray.cause).toMatchObject({ code: "23514", constraint_name: "transcripts_turns_json_array" })
        expect(yield* servedTurns).toEqual(before)
        // Rows are checked, not trusted: a date of birth the contract cannot carry (a five-digit
        // year, which PostgreSQL stores) fails the list that would show it.
        const listed = example.encounters.find((encounter) => encounter.data_class === "clinical" && encounter.patient_id != null)
        if (listed === undefined) throw new Error("the example fixture has no clinical encounter with a patient")
        yield* pg.run("test.corrupt-patient", (sql) =>
          sql`UPDATE patients SET date_of_birth = '10000-01-01' WHERE patient_id = ${listed.patient_id ?? ""}`)
        const unlisted = yield* Effect.result(repository.listForOrganization(listed.organization_id as OrganizationId, query()))
        expect(Result.isFailure(unlisted) && unlisted.failure).toMatchObject({ _tag: "StoreUnavailable", operation: "encounters.list.decode" })
        // Loading it again is refused as a whole.
        const again = yield* Effect.flip(load(exampleFixtureText))
        expect(again).toBeInstanceOf(FixtureRejected)
        expect(again).toMatchObject({ path: "$.organizations[0].organization_id" })
      })
    )

    it.effect("fixture: a broken reference is refused with its JSON path and stores nothing", () =>
      Effect.gen(function* () {
        const org = unique("org")
        const token = generateApiKeyToken("test", (size) => randomBytes(size))
        const broken = fixture({
          organizations: [organization(org)],
          api_keys: [
            { token, organization_id: org, kind: "organization", scopes: ["encounters:read"], state: "active", expires_at: null }
          ],
          patients: [{ patient_id: `${org}_p`, organization_id: org }],
          encounters: [
            encounter(org, `${org}_e0`, "2026-05-01T09:00:00.000Z", { patient_id: `${org}_p` }),
            encounter(org, `${org}_e1`, "2026-05-01T09:00:00.000Z", { patient_id: `${org}_nobody` })
          ]
        })
        const rejected = yield* Effect.flip(load(broken))
        expect(rejected).toEqual(
          new FixtureRejected({ path: "$.encounters[1].patient_id", message: `names unknown patient "${org}_nobody"` })
        )
        expect(yield* countRows("organizations", "organization_id", [org])).toBe(0)
        expect(yield* countRows("encounters", "encounter_id", [`${org}_e0`])).toBe(0)
        const keys = yield* ApiKeyStore
        expect(yield* keys.findByDigest(computeApiKeyDigest(digestKey, token))).toEqual(Option.none())
      })
    )

    it.effect("fixture: a schema error names the first offending path and stores nothing", () =>
      Effect.gen(function* () {
        const org = unique("org")
        const invalid = {
          ...fixture({ organizations: [organization(org)] }),
          encounters: [
            encounter(org, `${org}_e0`, "2026-05-01T09:00:00.000Z"),
            {
              ...encounter(org, `${org}_e1`, "2026-05-01T09:00:00.000Z"),
              documents: [{ document_id: "d", schema_type: "memo", created_at: "2026-05-01T09:00:00Z", updated_at: "2026-05-01T09:00:00Z" }]
            }
          ]
        }
        const rejected = yield* Effect.flip(load(invalid))
        expect(rejected).toBeInstanceOf(FixtureRejected)
        expect(rejected).toMatchObject({ path: "$.encounters[1].documents[0].schema_type" })
        expect(yield* countRows("organizations", "organization_id", [org])).toBe(0)
      })
    )

    it.effect("fixture: a file that repeats one id already stored is refused whole (no partial load)", () =>
      Effect.gen(function* () {
        const org = unique("org")
        yield* load(fixture({ organizations: [organization(org)] }))
        const fresh = unique("org_new")
        const rejected = yield* Effect.flip(
          load(
            fixture({
              organizations: [organization(fresh), organization(org)],
              encounters: [encounter(fresh, `${fresh}_e`, "2026-05-01T09:00:00.000Z")]
            })
          )
        )
        expect(rejected).toMatchObject({ _tag: "FixtureRejected", path: "$.organizations[1].organization_id" })
        expect(yield* countRows("organizations", "organization_id", [fresh])).toBe(0)
        expect(yield* countRows("encounters", "encounter_id", [`${fresh}_e`])).toBe(0)
      })
    )

    it.effect("keys: operator issue/disable/revoke/set-expiry are what ApiKeyStore.findByDigest returns", () =>
      Effect.gen(function* () {
        const operator = yield* OperatorStore
        const keys = yield* ApiKeyStore
        const org = unique("org") as OrganizationId
        yield* operator.createOrganization({ organizationId: org, name: "Keys Inc" })
        const issued = yield* operator.issueApiKey({
          organizationId: org,
          scopes: ["encounters:read", "documents:read"],
          label: "sync job",
          environment: "live",
          digestKey
        })
        expect(issued.token).toMatch(/^ce_live_[0-9A-Za-z]{36}$/)
        const digest = computeApiKeyDigest(digestKey, issued.token)
        const stateOf = Effect.map(keys.findByDigest(digest), Option.map((key) => [key.state, key.expiresAt] as const))
        expect(yield* stateOf).toEqual(Option.some(["active", null]))

        const listed = yield* operator.listApiKeys({ organizationId: org })
        expect(listed.map((key) => key.apiKeyId)).toEqual([issued.apiKey.apiKeyId])
        expect(JSON.stringify(listed)).not.toContain(issued.token)
        expect(JSON.stringify(listed)).not.toContain(digest)

        yield* operator.disableApiKey(issued.apiKey.apiKeyId)
        expect(yield* stateOf).toEqual(Option.some(["disabled", null]))
        yield* operator.enableApiKey(issued.apiKey.apiKeyId)
        expect(yield* stateOf).toEqual(Option.some(["active", null]))
        const expiry = at("2026-06-01T00:00:00.000Z")
        yield* operator.setApiKeyExpiry(issued.apiKey.apiKeyId, expiry)
        expect(yield* stateOf).toEqual(Option.some(["active", expiry]))
        yield* operator.revokeApiKey(issued.apiKey.apiKeyId)
        expect(yield* stateOf).toEqual(Option.some(["revoked", expiry]))
        // Revoked is final: disabling it fails and changes nothing.
        const refused = yield* Effect.flip(operator.disableApiKey(issued.apiKey.apiKeyId))
        expect(refused._tag).toBe("ApiKeyRevoked")
        expect(yield* stateOf).toEqual(Option.some(["revoked", expiry]))
        yield* operator.setApiKeyExpiry(issued.apiKey.apiKeyId, null)
        expect(yield* stateOf).toEqual(Option.some(["revoked", null]))

        const unknownKey = yield* Effect.flip(operator.revokeApiKey("key_missing" as never))
        expect(unknownKey._tag).toBe("UnknownApiKey")
        const unknownOrg = yield* Effect.flip(
          operator.issueApiKey({ organizationId: unique("org_none") as OrganizationId, scopes: [], environment: "test", digestKey })
        )
        expect(unknownOrg._tag).toBe("UnknownOrganization")
        expect(yield* operator.listApiKeys({ organizationId: org })).toHaveLength(1)
      })
    )

    it.effect("organizations: create, approve, unapprove, enable and disable routes; unknown ids change nothing", () =>
      Effect.gen(function* () {
        const operator = yield* OperatorStore
        const organizations = yield* OrganizationStore
        const org = unique("org") as OrganizationId
        const created = yield* operator.createOrganization({ organizationId: org, name: "Routes Ltd" })
        expect(created).toEqual({ organizationId: org, name: "Routes Ltd", approved: false, enabledRoutes: [] })
        expect((yield* Effect.flip(operator.createOrganization({ organizationId: org, name: "again" })))._tag).toBe(
          "OrganizationAlreadyExists"
        )
        yield* operator.approveOrganization(org)
        yield* operator.enableRoute(org, "listPublicEncounters")
        yield* operator.enableRoute(org, "getPublicDocument")
        yield* operator.enableRoute(org, "listPublicEncounters")
        expect(yield* organizations.findById(org)).toEqual(
          Option.some({ organizationId: org, name: "Routes Ltd", approved: true, enabledRoutes: ["listPublicEncounters", "getPublicDocument"] })
        )
        yield* operator.disableRoute(org, "listPublicEncounters")
        const after = yield* operator.unapproveOrganization(org)
        expect(after).toEqual({ organizationId: org, name: "Routes Ltd", approved: false, enabledRoutes: ["getPublicDocument"] })
        const missing = unique("org_none") as OrganizationId
        expect((yield* Effect.flip(operator.approveOrganization(missing)))._tag).toBe("UnknownOrganization")
        expect(yield* organizations.findById(missing)).toEqual(Option.none())
        const listed = yield* operator.listOrganizations()
        expect(listed.map((entry) => entry.organizationId)).toContain(org)
      })
    )

    it.effect("disclosures: written in the read's transaction; a rolled-back unit of work leaves none; export filters by organization and range", () =>
      Effect.gen(function* () {
        const unitOfWork = yield* UnitOfWork
        const recorder = yield* DisclosureRecorder
        const operator = yield* OperatorStore
        const org = unique("org") as OrganizationId
        const other = unique("org_other") as OrganizationId
        yield* operator.createOrganization({ organizationId: org, name: "Disclosing" })
        yield* operator.createOrganization({ organizationId: other, name: "Other" })
        const event = disclosureEvent

        // Committed with the read.
        const committed = yield* Effect.all([
          event(org, "2026-05-01T09:00:00.000Z", "enc_1"),
          event(org, "2026-05-01T10:00:00.000Z", "enc_2"),
          event(org, "2026-05-01T10:00:00.000Z", "enc_3"),
          event(org, "2026-05-01T11:00:00.000Z", "enc_4"),
          event(other, "2026-05-01T10:00:00.000Z", "enc_x")
        ])
        yield* unitOfWork.transactionally(recorder.record(committed))

        // A typed failure after recording rolls back and is re-raised unchanged.
        const rolledBack = yield* event(org, "2026-05-01T10:30:00.000Z", "enc_rolled_back")
        const failure = new StoreUnavailable({ operation: "test.after-record" })
        const failed = yield* Effect.exit(
          unitOfWork.transactionally(Effect.andThen(recorder.record([rolledBack]), Effect.fail(failure)))
        )
        expect(failed).toEqual(Exit.fail(failure))
        // A defect too.
        const defected = yield* event(org, "2026-05-01T10:31:00.000Z", "enc_defect")
        const died = yield* Effect.exit(
          unitOfWork.transactionally(Effect.andThen(recorder.record([defected]), Effect.die("boom")))
        )
        expect(died).toEqual(Exit.die("boom"))
        expect(yield* countRows("disclosure_events", "event_id", [rolledBack.eventId, defected.eventId])).toBe(0)
        // The events are written with the COMMIT: one that cannot be written (here an event id
        // already stored) fails the unit of work after its effect succeeded, and nothing of it commits.
        const beside = yield* event(org, "2026-05-01T10:32:00.000Z", "enc_beside")
        const refusedAtCommit = yield* Effect.exit(
          unitOfWork.transactionally(Effect.as(Effect.andThen(recorder.record([beside]), recorder.record([committed[0]!])), "read"))
        )
        expect(Exit.isFailure(refusedAtCommit) && Cause.findErrorOption(refusedAtCommit.cause).pipe(
          Option.map((error) => (error as StoreUnavailable).operation),
          Option.getOrNull
        )).toBe("disclosures.record")
        expect(yield* countRows("disclosure_events", "event_id", [beside.eventId])).toBe(0)

        const exported = yield* Stream.runCollect(
          operator.exportDisclosures({
            organizationId: org,
            from: at("2026-05-01T10:00:00.000Z"),
            to: at("2026-05-01T11:00:00.000Z"),
            batchSize: 1
          })
        )
        const expected = committed
          .slice(1, 3)
          .sort((a, b) => compareBytewise(a.eventId, b.eventId))
          .map((e) => ({
            event_id: e.eventId,
            occurred_at: "2026-05-01T10:00:00.000Z",
            organization_id: org,
            api_key_id: "key_test",
            operation_id: "getPublicEncounter",
            encounter_id: e.encounterId,
            document_id: null,
            patient_id: "pat_1",
            request_id: "req_1",
            caller_request_id: "partner-1"
          }))
        expect(exported).toEqual(expected)
        const everything = yield* Stream.runCollect(operator.exportDisclosures({ organizationId: org }))
        expect(everything.map((line) => line.encounter_id)).toEqual(
          expect.arrayContaining(["enc_1", "enc_2", "enc_3", "enc_4"])
        )
        expect(everything.length).toBe(4)
        const unknown = yield* Effect.result(Stream.runCollect(operator.exportDisclosures({ organizationId: unique("org_none") as OrganizationId })))
        expect(Result.isFailure(unknown) && unknown.failure._tag).toBe("UnknownOrganization")
      })
    )

    it.effect("unit of work: units started together share one transaction and one COMMIT; each answers only once its events are committed, a failed one leaves none", () =>
      Effect.gen(function* () {
        const unitOfWork = yield* UnitOfWork
        const recorder = yield* DisclosureRecorder
        const pg = yield* PgClient
        const operator = yield* OperatorStore
        const org = unique("org") as OrganizationId
        yield* operator.createOrganization({ organizationId: org, name: "Grouped" })
        const event = (encounterId: string) => disclosureEvent(org, "2026-05-01T09:00:00.000Z", encounterId)
        const transactionId = pg.run("test.txid", (sql) => sql<Array<{ id: string }>>`SELECT txid_current()::text AS id`).pipe(
          Effect.map((rows) => rows[0]!.id)
        )
        /** A unit that reads, records its event, and reports its transaction and whether its event was visible outside it when it answered. */
        const reader = (recorded: DisclosureEvent, then: Effect.Effect<void, StoreUnavailable> = Effect.void) =>
          Effect.flatMap(
            unitOfWork.transactionally(Effect.gen(function* () {
              const id = yield* transactionId
              yield* recorder.record([recorded])
              yield* then
              return id
            })),
            (id) => Effect.map(countRows("disclosure_events", "event_id", [recorded.eventId]), (visible) => ({ id, visible }))
          )

        // Twelve units started in one turn: one transaction and one INSERT of their events, every
        // event committed before its unit answered.
        const db = yield* CurrentDatabase
        const events = yield* Effect.forEach(Array.from({ length: 12 }, (_, index) => `enc_group_${index}`), event)
        db.queries.length = 0
        const together = yield* Effect.forEach(events, (recorded) => reader(recorded), { concurrency: "unbounded" })
        expect(new Set(together.map((outcome) => outcome.id)).size).toBe(1)
        expect(together.every((outcome) => outcome.visible === 1)).toBe(true)
        expect(db.queries.filter((text) => text.includes("INSERT INTO disclosure_events"))).toHaveLength(1)

        // A unit that fails in a group leaves none of its events; the others still commit theirs.
        const kept = yield* event("enc_kept")
        const dropped = yield* event("enc_dropped")
        const failure = new StoreUnavailable({ operation: "test.member-fails" })
        const [keptExit, droppedExit] = yield* Effect.all([
          Effect.exit(reader(kept)),
          Effect.exit(reader(dropped, Effect.fail(failure)))
        ], { concurrency: "unbounded" })
        expect(Exit.isSuccess(keptExit) && keptExit.value.visible).toBe(1)
        expect(droppedExit).toEqual(Exit.fail(failure))
        expect(yield* countRows("disclosure_events", "event_id", [dropped.eventId])).toBe(0)

        // A unit interrupted in a group leaves none either, and does not hold the others.
        const beside = yield* event("enc_beside_interrupted")
        const interrupted = yield* event("enc_interrupted")
        const [besideExit, interruptedExit] = yield* Effect.all([
          Effect.exit(reader(beside)),
          Effect.exit(Effect.timeout(reader(interrupted, Effect.never), "200 millis"))
        ], { concurrency: "unbounded" })
        expect(Exit.isSuccess(besideExit) && besideExit.value.visible).toBe(1)
        expect(Exit.isFailure(interruptedExit)).toBe(true)
        expect(yield* countRows("disclosure_events", "event_id", [interrupted.eventId])).toBe(0)

        // A store failure in any unit fails the whole group: nothing of it commits.
        const innocent = yield* event("enc_innocent")
        const culprit = yield* event("enc_culprit")
        const [innocentExit, culpritExit] = yield* Effect.all([
          Effect.exit(reader(innocent, Effect.sleep("20 millis"))),
          Effect.exit(reader(culprit, Effect.asVoid(pg.run("test.division", (sql) => sql`SELECT 1 / 0`))))
        ], { concurrency: "unbounded" })
        const operationOf = (exit: Exit.Exit<unknown, unknown>) =>
          Exit.isFailure(exit) ? Option.getOrNull(Option.map(Cause.findErrorOption(exit.cause), (error) => (error as StoreUnavailable).operation)) : null
        expect(operationOf(culpritExit)).toBe("test.division")
        expect(operationOf(innocentExit)).not.toBeNull()
        expect(yield* countRows("disclosure_events", "event_id", [innocent.eventId, culprit.eventId])).toBe(0)

        // And the next group is unaffected.
        const after = yield* event("enc_after")
        expect((yield* reader(after)).visible).toBe(1)

        // Once its unit has ended, committed or failed, the fiber is outside any transaction
        // again: an event recorded after it is written at once, not kept for a COMMIT that is over.
        for (const unit of [transactionId, Effect.andThen(transactionId, Effect.fail(failure))]) {
          yield* Effect.exit(unitOfWork.transactionally(unit))
          const loose = yield* event(`enc_loose_${unique("after")}`)
          yield* recorder.record([loose])
          expect(yield* countRows("disclosure_events", "event_id", [loose.eventId])).toBe(1)
        }
      })
    )

    it.effect("unavailable: a pool pointed at a closed port fails with StoreUnavailable, not a defect", () =>
      Effect.gen(function* () {
        const closedPort = yield* Effect.promise(
          () =>
            new Promise<number>((resolve) => {
              // Bind a port, then free it: nothing listens there any more.
              void import("node:net").then(({ createServer }) => {
                const server = createServer()
                server.listen(0, "127.0.0.1", () => {
                  const address = server.address()
                  server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 1))
                })
              })
            })
        )
        // Built apart from the suite's own ports (`local`): layers are otherwise shared across provides.
        const unreachable = PostgresPortsLive.pipe(
          Layer.provideMerge(PgClientLayer({ url: `postgres://postgres@127.0.0.1:${closedPort}/postgres`, connectTimeoutSeconds: 2 }))
        )
        const result = yield* Effect.flip(
          Effect.flatMap(EncounterRepository, (repository) => repository.listForOrganization("org" as OrganizationId, query()))
        ).pipe(Effect.provide(unreachable, { local: true }))
        expect(result).toBeInstanceOf(StoreUnavailable)
        const keyLookup = yield* Effect.flip(
          Effect.flatMap(ApiKeyStore, (store) => store.findByDigest("0".repeat(64)))
        ).pipe(Effect.provide(unreachable, { local: true }))
        expect(keyLookup._tag).toBe("StoreUnavailable")
        const unitOfWork = yield* Effect.flip(
          Effect.flatMap(UnitOfWork, (uow) => uow.transactionally(Effect.void))
        ).pipe(Effect.provide(unreachable, { local: true }))
        expect(unitOfWork._tag).toBe("StoreUnavailable")
      })
    )
  })
}
