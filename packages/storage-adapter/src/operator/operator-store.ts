import { randomBytes } from "node:crypto"
import {
  ApiKeyId,
  ApiKeyKind,
  ApiKeyState,
  computeApiKeyDigest,
  generateApiKeyToken,
  IdGenerator,
  type KeyEnvironment,
  type OperationId,
  OrganizationId,
  type OrganizationRecord,
  Scope,
  type StoreUnavailable
} from "@clinical-api/domain"
import { Context, Data, Effect, Layer, Option, type Redacted, Schema, Stream } from "effect"
import { OrganizationRow, toOrganizationRecord } from "../repositories/organization-store.js"
import { decodeRows } from "../sql/decode.js"
import { type Fragment, PgClient, type Sql, textArray } from "../sql/pg-client.js"
import { DateColumn } from "../sql/row-guard.js"

/**
 * What operators do through the command line (packages/http-adapter's CLI calls these):
 * organizations, API keys, and the export of the accounting of disclosures. A failing call
 * changes nothing.
 */

export class UnknownOrganization extends Data.TaggedError("UnknownOrganization")<{
  readonly organizationId: string
}> {
  override get message() {
    return `No organization "${this.organizationId}".`
  }
}

export class OrganizationAlreadyExists extends Data.TaggedError("OrganizationAlreadyExists")<{
  readonly organizationId: string
}> {
  override get message() {
    return `Organization "${this.organizationId}" already exists.`
  }
}

export class UnknownApiKey extends Data.TaggedError("UnknownApiKey")<{ readonly apiKeyId: string }> {
  override get message() {
    return `No API key "${this.apiKeyId}".`
  }
}

/** A revoked key stays revoked: it can be neither disabled nor enabled again. */
export class ApiKeyRevoked extends Data.TaggedError("ApiKeyRevoked")<{ readonly apiKeyId: string }> {
  override get message() {
    return `API key "${this.apiKeyId}" is revoked; a revoked key cannot change state.`
  }
}

/** An API key as operators see it: never the token, never the digest. */
export const ApiKeyListing = Schema.Struct({
  apiKeyId: ApiKeyId,
  organizationId: Schema.NullOr(OrganizationId),
  kind: ApiKeyKind,
  scopes: Schema.Array(Scope),
  state: ApiKeyState,
  expiresAt: Schema.NullOr(DateColumn),
  label: Schema.NullOr(Schema.String),
  createdAt: DateColumn,
  lastUsedAt: Schema.NullOr(DateColumn)
})
export type ApiKeyListing = typeof ApiKeyListing.Type

export interface CreateOrganizationInput {
  readonly organizationId: OrganizationId
  readonly name: string
  readonly approved?: boolean
  readonly enabledRoutes?: ReadonlyArray<OperationId>
}

export interface IssueApiKeyInput {
  readonly organizationId: OrganizationId
  readonly kind?: ApiKeyKind
  readonly scopes: ReadonlyArray<Scope>
  readonly label?: string | null
  readonly expiresAt?: Date | null
  /** `live` gives a `ce_live_` token, `test` a `ce_test_` one. */
  readonly environment: KeyEnvironment
  readonly digestKey: Redacted.Redacted<string>
}

export interface IssuedApiKey {
  readonly apiKey: ApiKeyListing
  /** Shown once, stored nowhere. */
  readonly token: string
}

/** One line of the disclosure export (JSON Lines), in the field names of docs/behaviour.md. */
export interface DisclosureExportLine {
  readonly event_id: string
  readonly occurred_at: string
  readonly organization_id: string
  readonly api_key_id: string
  readonly operation_id: string
  readonly encounter_id: string
  readonly document_id: string | null
  readonly patient_id: string | null
  /** The service's own id of the request that disclosed. */
  readonly request_id: string
  /** The caller's `X-Request-Id` of that request, when it sent one. */
  readonly caller_request_id: string | null
}

export interface DisclosureExportQuery {
  readonly organizationId: OrganizationId
  /** Inclusive lower bound on occurred_at. */
  readonly from?: Date | null
  /** Exclusive upper bound on occurred_at. */
  readonly to?: Date | null
  /** Rows fetched per query while streaming (default 1000). */
  readonly batchSize?: number
}

export interface OperatorStoreService {
  readonly createOrganization: (
    input: CreateOrganizationInput
  ) => Effect.Effect<OrganizationRecord, OrganizationAlreadyExists | StoreUnavailable>
  readonly approveOrganization: (
    organizationId: OrganizationId
  ) => Effect.Effect<OrganizationRecord, UnknownOrganization | StoreUnavailable>
  readonly unapproveOrganization: (
    organizationId: OrganizationId
  ) => Effect.Effect<OrganizationRecord, UnknownOrganization | StoreUnavailable>
  readonly enableRoute: (
    organizationId: OrganizationId,
    route: OperationId
  ) => Effect.Effect<OrganizationRecord, UnknownOrganization | StoreUnavailable>
  readonly disableRoute: (
    organizationId: OrganizationId,
    route: OperationId
  ) => Effect.Effect<OrganizationRecord, UnknownOrganization | StoreUnavailable>
  readonly listOrganizations: () => Effect.Effect<ReadonlyArray<OrganizationRecord>, StoreUnavailable>

  readonly issueApiKey: (input: IssueApiKeyInput) => Effect.Effect<IssuedApiKey, UnknownOrganization | StoreUnavailable>
  readonly listApiKeys: (filter?: {
    readonly organizationId?: OrganizationId
  }) => Effect.Effect<ReadonlyArray<ApiKeyListing>, UnknownOrganization | StoreUnavailable>
  readonly disableApiKey: (apiKeyId: ApiKeyId) => Effect.Effect<ApiKeyListing, UnknownApiKey | ApiKeyRevoked | StoreUnavailable>
  readonly enableApiKey: (apiKeyId: ApiKeyId) => Effect.Effect<ApiKeyListing, UnknownApiKey | ApiKeyRevoked | StoreUnavailable>
  readonly revokeApiKey: (apiKeyId: ApiKeyId) => Effect.Effect<ApiKeyListing, UnknownApiKey | StoreUnavailable>
  /** `null` removes the expiry. */
  readonly setApiKeyExpiry: (
    apiKeyId: ApiKeyId,
    expiresAt: Date | null
  ) => Effect.Effect<ApiKeyListing, UnknownApiKey | StoreUnavailable>

  /** Disclosure events of one organization, occurred_at in [from, to), ordered by occurred_at then event_id. */
  readonly exportDisclosures: (
    query: DisclosureExportQuery
  ) => Stream.Stream<DisclosureExportLine, UnknownOrganization | StoreUnavailable>
}

export class OperatorStore extends Context.Service<OperatorStore, OperatorStoreService>()("@clinical-api/storage-adapter/OperatorStore") {}

const ApiKeyListingRow = Schema.Struct({
  api_key_id: ApiKeyId,
  organization_id: Schema.NullOr(OrganizationId),
  kind: ApiKeyKind,
  scopes: Schema.Array(Scope),
  state: ApiKeyState,
  expires_at: Schema.NullOr(DateColumn),
  label: Schema.NullOr(Schema.String),
  created_at: DateColumn,
  last_used_at: Schema.NullOr(DateColumn)
})

const toListing = (row: typeof ApiKeyListingRow.Type): ApiKeyListing => ({
  apiKeyId: row.api_key_id,
  organizationId: row.organization_id,
  kind: row.kind,
  scopes: row.scopes,
  state: row.state,
  expiresAt: row.expires_at,
  label: row.label,
  createdAt: row.created_at,
  lastUsedAt: row.last_used_at
})

const DisclosureRow = Schema.Struct({
  event_id: Schema.String,
  occurred_at: DateColumn,
  organization_id: Schema.String,
  api_key_id: Schema.String,
  operation_id: Schema.String,
  encounter_id: Schema.String,
  document_id: Schema.NullOr(Schema.String),
  patient_id: Schema.NullOr(Schema.String),
  request_id: Schema.String,
  caller_request_id: Schema.NullOr(Schema.String)
})

const keyColumns = "api_key_id, organization_id, kind, scopes, state, expires_at, label, created_at, last_used_at"

export const makeOperatorStore = Effect.gen(function* () {
  const client = yield* PgClient
  const ids = yield* IdGenerator

  const organizationRows = (operation: string) => decodeRows(OrganizationRow, operation)
  const keyRows = (operation: string) => decodeRows(ApiKeyListingRow, operation)

  const requireOrganization = (organizationId: OrganizationId) =>
    client
      .run("operator.organization", (sql) => sql`SELECT 1 FROM organizations WHERE organization_id = ${organizationId}`)
      .pipe(
        Effect.flatMap((rows) =>
          rows.length === 0 ? Effect.fail(new UnknownOrganization({ organizationId })) : Effect.void
        )
      )

  /** One UPDATE ... RETURNING; no row means no such organization, and nothing changed. */
  const updateOrganization = (
    operation: string,
    organizationId: OrganizationId,
    update: (sql: Sql) => Fragment
  ) =>
    client.run(operation, update).pipe(
      Effect.flatMap(organizationRows(operation)),
      Effect.flatMap((rows) =>
        rows[0] === undefined
          ? Effect.fail(new UnknownOrganization({ organizationId }))
          : Effect.succeed(toOrganizationRecord(rows[0]))
      )
    )

  const createOrganization = Effect.fn("OperatorStore.createOrganization")(function* (input: CreateOrganizationInput) {
    const rows = yield* client
      .run(
        "operator.createOrganization",
        (sql) => sql`
          INSERT INTO organizations (organization_id, name, approved, enabled_routes)
          VALUES (${input.organizationId}, ${input.name}, ${input.approved ?? false},
                  ${textArray(sql, [...new Set(input.enabledRoutes ?? [])])})
          ON CONFLICT (organization_id) DO NOTHING
          RETURNING organization_id, name, approved, enabled_routes`
      )
      .pipe(Effect.flatMap(organizationRows("operator.createOrganization")))
    const row = rows[0]
    if (row === undefined) return yield* new OrganizationAlreadyExists({ organizationId: input.organizationId })
    return toOrganizationRecord(row)
  })

  const setApproved = (operation: string, approved: boolean) => (organizationId: OrganizationId) =>
    updateOrganization(
      operation,
      organizationId,
      (sql) => sql`
        UPDATE organizations SET approved = ${approved} WHERE organization_id = ${organizationId}
        RETURNING organization_id, name, approved, enabled_routes`
    ).pipe(Effect.withSpan(operation))

  const enableRoute = Effect.fn("OperatorStore.enableRoute")(function* (
    organizationId: OrganizationId,
    route: OperationId
  ) {
    return yield* updateOrganization(
      "operator.enableRoute",
      organizationId,
      (sql) => sql`
        UPDATE organizations
        SET enabled_routes = CASE WHEN ${route} = ANY(enabled_routes) THEN enabled_routes
                                  ELSE array_append(enabled_routes, ${route}::text) END
        WHERE organization_id = ${organizationId}
        RETURNING organization_id, name, approved, enabled_routes`
    )
  })

  const disableRoute = Effect.fn("OperatorStore.disableRoute")(function* (
    organizationId: OrganizationId,
    route: OperationId
  ) {
    return yield* updateOrganization(
      "operator.disableRoute",
      organizationId,
      (sql) => sql`
        UPDATE organizations SET enabled_routes = array_remove(enabled_routes, ${route}::text)
        WHERE organization_id = ${organizationId}
        RETURNING organization_id, name, approved, enabled_routes`
    )
  })

  const listOrganizations = Effect.fn("OperatorStore.listOrganizations")(function* () {
    const rows = yield* client
      .run(
        "operator.listOrganizations",
        (sql) => sql`
          SELECT organization_id, name, approved, enabled_routes FROM organizations
          ORDER BY organization_id COLLATE "C"`
      )
      .pipe(Effect.flatMap(organizationRows("operator.listOrganizations")))
    return rows.map(toOrganizationRecord)
  })

  const issueApiKey = Effect.fn("OperatorStore.issueApiKey")(function* (input: IssueApiKeyInput) {
    const token = generateApiKeyToken(input.environment, (size) => randomBytes(size))
    const apiKeyId = yield* ids.next("api_key")
    const rows = yield* client.transactionally(
      Effect.gen(function* () {
        yield* requireOrganization(input.organizationId)
        return yield* client
          .run(
            "operator.issueApiKey",
            (sql) => sql`
              INSERT INTO api_keys (api_key_id, digest, kind, organization_id, scopes, state, expires_at, label)
              VALUES (${apiKeyId}, ${computeApiKeyDigest(input.digestKey, token)}, ${input.kind ?? "organization"},
                      ${input.organizationId}, ${textArray(sql, [...new Set(input.scopes)])}, 'active',
                      ${input.expiresAt ?? null}, ${input.label ?? null})
              RETURNING ${sql.unsafe(keyColumns)}`
          )
          .pipe(Effect.flatMap(keyRows("operator.issueApiKey")))
      })
    )
    const row = rows[0]
    if (row === undefined) return yield* Effect.die(new Error("INSERT ... RETURNING returned no row"))
    return { apiKey: toListing(row), token }
  })

  const listApiKeys = Effect.fn("OperatorStore.listApiKeys")(function* (
    filter: { readonly organizationId?: OrganizationId } = {}
  ) {
    const organizationId = filter.organizationId
    if (organizationId !== undefined) yield* requireOrganization(organizationId)
    const rows = yield* client
      .run(
        "operator.listApiKeys",
        (sql) => sql`
          SELECT ${sql.unsafe(keyColumns)} FROM api_keys
          ${organizationId === undefined ? sql`` : sql`WHERE organization_id = ${organizationId}`}
          ORDER BY organization_id COLLATE "C" NULLS FIRST, created_at, api_key_id COLLATE "C"`
      )
      .pipe(Effect.flatMap(keyRows("operator.listApiKeys")))
    return rows.map(toListing)
  })

  /** Updates one key, locked first; `guard` may refuse its current state (then nothing changes). */
  const updateKey = <E>(
    operation: string,
    apiKeyId: ApiKeyId,
    assignment: (sql: Sql) => Fragment,
    guard: (state: string) => Effect.Effect<void, E>
  ) =>
    client.transactionally(
      Effect.gen(function* () {
        const current = yield* client.run(
          `${operation}.lock`,
          (sql) => sql<Array<{ state: string }>>`SELECT state FROM api_keys WHERE api_key_id = ${apiKeyId} FOR UPDATE`
        )
        const state = current[0]?.state
        if (state === undefined) return yield* new UnknownApiKey({ apiKeyId })
        yield* guard(state)
        const rows = yield* client
          .run(
            operation,
            (sql) => sql`
              UPDATE api_keys SET ${assignment(sql)} WHERE api_key_id = ${apiKeyId}
              RETURNING ${sql.unsafe(keyColumns)}`
          )
          .pipe(Effect.flatMap(keyRows(operation)))
        const row = rows[0]
        if (row === undefined) return yield* new UnknownApiKey({ apiKeyId })
        return toListing(row)
      })
    )

  const anyState = () => Effect.void
  const notRevoked = (apiKeyId: ApiKeyId) => (state: string) =>
    state === "revoked" ? Effect.fail(new ApiKeyRevoked({ apiKeyId })) : Effect.void

  const disableApiKey = (apiKeyId: ApiKeyId) =>
    updateKey("operator.disableApiKey", apiKeyId, (sql) => sql`state = 'disabled'`, notRevoked(apiKeyId)).pipe(
      Effect.withSpan("OperatorStore.disableApiKey")
    )
  const enableApiKey = (apiKeyId: ApiKeyId) =>
    updateKey("operator.enableApiKey", apiKeyId, (sql) => sql`state = 'active'`, notRevoked(apiKeyId)).pipe(
      Effect.withSpan("OperatorStore.enableApiKey")
    )
  const revokeApiKey = (apiKeyId: ApiKeyId) =>
    updateKey("operator.revokeApiKey", apiKeyId, (sql) => sql`state = 'revoked'`, anyState).pipe(
      Effect.withSpan("OperatorStore.revokeApiKey")
    )
  const setApiKeyExpiry = (apiKeyId: ApiKeyId, expiresAt: Date | null) =>
    updateKey("operator.setApiKeyExpiry", apiKeyId, (sql) => sql`expires_at = ${expiresAt}`, anyState).pipe(
      Effect.withSpan("OperatorStore.setApiKeyExpiry")
    )

  const exportDisclosures = (query: DisclosureExportQuery): Stream.Stream<DisclosureExportLine, UnknownOrganization | StoreUnavailable> => {
    const batchSize = Math.max(1, query.batchSize ?? 1000)
    const from = query.from ?? null
    const to = query.to ?? null
    type Cursor = { readonly occurredAt: Date; readonly eventId: string } | null
    // Keyset pagination on (occurred_at, event_id): constant memory whatever the volume.
    const page = (cursor: Cursor) =>
      client
        .run(
          "operator.exportDisclosures",
          (sql) => sql`
            SELECT event_id, occurred_at, organization_id, api_key_id, operation_id, encounter_id,
                   document_id, patient_id, request_id, caller_request_id
            FROM disclosure_events
            WHERE organization_id = ${query.organizationId}
            ${from === null ? sql`` : sql`AND occurred_at >= ${from}`}
            ${to === null ? sql`` : sql`AND occurred_at < ${to}`}
            ${cursor === null ? sql`` : sql`AND (occurred_at, event_id) > (${cursor.occurredAt}, ${cursor.eventId}::text COLLATE "C")`}
            ORDER BY occurred_at, event_id COLLATE "C"
            LIMIT ${batchSize}`
        )
        .pipe(Effect.flatMap(decodeRows(DisclosureRow, "operator.exportDisclosures")))
    return Stream.unwrap(
      Effect.as(
        requireOrganization(query.organizationId),
        Stream.paginate(null as Cursor, (cursor) =>
          Effect.map(page(cursor), (rows) => {
            const last = rows.at(-1)
            const lines = rows.map(
              (row): DisclosureExportLine => ({
                event_id: row.event_id,
                occurred_at: row.occurred_at.toISOString(),
                organization_id: row.organization_id,
                api_key_id: row.api_key_id,
                operation_id: row.operation_id,
                encounter_id: row.encounter_id,
                document_id: row.document_id,
                patient_id: row.patient_id,
                request_id: row.request_id,
                caller_request_id: row.caller_request_id
              })
            )
            return [
              lines,
              rows.length < batchSize || last === undefined
                ? Option.none<Cursor>()
                : Option.some<Cursor>({ occurredAt: last.occurred_at, eventId: last.event_id })
            ] as const
          })
        )
      )
    )
  }

  return OperatorStore.of({
    createOrganization,
    approveOrganization: setApproved("OperatorStore.approveOrganization", true),
    unapproveOrganization: setApproved("OperatorStore.unapproveOrganization", false),
    enableRoute,
    disableRoute,
    listOrganizations,
    issueApiKey,
    listApiKeys,
    disableApiKey,
    enableApiKey,
    revokeApiKey,
    setApiKeyExpiry,
    exportDisclosures
  })
})

export const OperatorStoreLive: Layer.Layer<OperatorStore, never, PgClient | IdGenerator> = Layer.effect(
  OperatorStore,
  makeOperatorStore
)
