import { OperationId, OrganizationId, type OrganizationRecord, OrganizationStore } from "@clinical-api/domain"
import { Effect, Layer, Option, Schema } from "effect"
import { decodeRows } from "../sql/decode.js"
import { PgClient, type Sql } from "../sql/pg-client.js"

export const OrganizationRow = Schema.Struct({
  organization_id: OrganizationId,
  name: Schema.String,
  approved: Schema.Boolean,
  enabled_routes: Schema.Array(OperationId)
})
export type OrganizationRow = typeof OrganizationRow.Type

export const toOrganizationRecord = (row: OrganizationRow): OrganizationRecord => ({
  organizationId: row.organization_id,
  name: row.name,
  approved: row.approved,
  enabledRoutes: row.enabled_routes
})

export const organizationByIdStatement = (sql: Sql, organizationId: string) => sql`
  SELECT organization_id, name, approved, enabled_routes
  FROM organizations WHERE organization_id = ${organizationId}`

export const makeOrganizationStore = Effect.gen(function* () {
  const client = yield* PgClient
  const findById = Effect.fn("OrganizationStore.findById")(function* (organizationId: OrganizationId) {
    const rows = yield* client
      .run("organizations.findById", (sql) => organizationByIdStatement(sql, organizationId))
      .pipe(Effect.flatMap(decodeRows(OrganizationRow, "organizations.findById")))
    return Option.map(Option.fromNullishOr(rows[0]), toOrganizationRecord)
  })
  return OrganizationStore.of({ findById })
})

export const OrganizationStoreLive = Layer.effect(OrganizationStore, makeOrganizationStore)
