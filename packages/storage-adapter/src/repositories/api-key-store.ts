import {
  ApiKeyId,
  ApiKeyKind,
  type ApiKeyRecord,
  ApiKeyState,
  ApiKeyStore,
  OrganizationId,
  Scope
} from "@clinical-api/domain"
import { Effect, Layer, Option, Schema } from "effect"
import { decodeRows } from "../sql/decode.js"
import { PgClient, type Sql } from "../sql/pg-client.js"
import { DateColumn } from "../sql/row-guard.js"

export const ApiKeyRow = Schema.Struct({
  api_key_id: ApiKeyId,
  organization_id: Schema.NullOr(OrganizationId),
  kind: ApiKeyKind,
  scopes: Schema.Array(Scope),
  state: ApiKeyState,
  expires_at: Schema.NullOr(DateColumn),
  label: Schema.NullOr(Schema.String)
})
export type ApiKeyRow = typeof ApiKeyRow.Type

export const toApiKeyRecord = (row: ApiKeyRow): ApiKeyRecord => ({
  apiKeyId: row.api_key_id,
  organizationId: row.organization_id,
  kind: row.kind,
  scopes: row.scopes,
  state: row.state,
  expiresAt: row.expires_at,
  label: row.label
})

/** The key with this digest (the unique index on `digest` serves it). */
export const apiKeyByDigestStatement = (sql: Sql, digest: string) => sql`
  SELECT api_key_id, organization_id, kind, scopes, state, expires_at, label
  FROM api_keys WHERE digest = ${digest}`

export const makeApiKeyStore = Effect.gen(function* () {
  const client = yield* PgClient
  const findByDigest = Effect.fn("ApiKeyStore.findByDigest")(function* (digest: string) {
    const rows = yield* client
      .run("apiKeys.findByDigest", (sql) => apiKeyByDigestStatement(sql, digest))
      .pipe(Effect.flatMap(decodeRows(ApiKeyRow, "apiKeys.findByDigest")))
    return Option.map(Option.fromNullishOr(rows[0]), toApiKeyRecord)
  })
  return ApiKeyStore.of({ findByDigest })
})

export const ApiKeyStoreLive = Layer.effect(ApiKeyStore, makeApiKeyStore)
