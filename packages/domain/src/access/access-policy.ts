import { Clock, Context, Effect, Layer, Option, Result } from "effect"
import { PublicApiConfig, type PublicApiEnvironment } from "../config.js"
import { orRefuse, PublicApiError } from "../errors.js"
import type { ApiKeyId, OrganizationId } from "../ids.js"
import { ApiKeyStore, OrganizationStore, type StoreUnavailable } from "../ports.js"
import type { ApiKeyRecord, OrganizationRecord } from "../records.js"
import { type OperationId, requiredScopes, type Scope } from "../routes.js"
import { computeApiKeyDigest, hasTestPrefix, parseApiKeyToken, type ParsedApiKeyToken } from "./api-key-token.js"

/**
 * The access policy: docs/behaviour.md "Order of checks, in full", sections 1 (401 and the 503 of
 * the digest lookup) and 2 (403). Each stage is a pure function returning the first failure
 * of its own checks; `decideAccess` composes them over given inputs and `AccessPolicyLive`
 * composes the very same functions over the stores, the configuration and the clock.
 */

/**
 * The authenticated and authorized caller of one request: the proof that authorization ran for
 * `operationId`. Only the access policy makes one; a use case refuses a caller of another operation.
 */
export interface Caller {
  readonly organizationId: OrganizationId
  readonly apiKeyId: ApiKeyId
  readonly scopes: ReadonlyArray<Scope>
  readonly operationId: OperationId
}

export interface AccessConfig {
  readonly environment: PublicApiEnvironment
  readonly apiKeysEnabled: boolean
}

const refuse = (reasonCode: PublicApiError["reasonCode"]) => Result.fail(PublicApiError.of(reasonCode))

/**
 * `Authorization` header syntax (RFC 9110 credentials, whitespace = space or tab only):
 * optional surrounding whitespace, the scheme `Bearer` in any letter case, one or more spaces
 * or tabs, then the token; whitespace around the token is trimmed. No header, another scheme
 * (`Basic x`, or `Bearerx` with no separator) or nothing after the scheme is `missing_bearer`.
 * Anything else between the separator and the trailing whitespace is the token, inner
 * whitespace included: such a token then fails screening as `malformed_token`.
 */
const BEARER_CREDENTIALS = /^[ \t]*([^ \t]+)(?:[ \t]+(.*?))?[ \t]*$/s

export const readBearerToken = (authorization: string | undefined): Result.Result<string, PublicApiError> => {
  if (authorization === undefined) return refuse("missing_bearer")
  const match = BEARER_CREDENTIALS.exec(authorization)
  const scheme = match?.[1]
  const token = match?.[2] ?? ""
  if (scheme === undefined || scheme.toLowerCase() !== "bearer" || token === "") return refuse("missing_bearer")
  return Result.succeed(token)
}

/** The checks that need no store: the configuration switch, the environment's prefix rule, then the token's shape. */
export const screenToken = (token: string, config: AccessConfig): Result.Result<ParsedApiKeyToken, PublicApiError> => {
  if (!config.apiKeysEnabled) return refuse("api_keys_disabled")
  if (config.environment === "production" && hasTestPrefix(token)) return refuse("test_prefix_not_allowed")
  const parsed = parseApiKeyToken(token)
  return parsed === undefined ? refuse("malformed_token") : Result.succeed(parsed)
}

/**
 * The key found by digest, in the contract's order. A key both revoked and expired is
 * `revoked_key`; a key is expired strictly after its `expiresAt` (docs/fixture-format.md: "the instant
 * after which the key is expired"), so at that very instant it is still valid.
 */
export const evaluateKeyRecord = (
  record: Option.Option<ApiKeyRecord>,
  now: Date
): Result.Result<ApiKeyRecord, PublicApiError> => {
  if (Option.isNone(record)) return refuse("invalid_key")
  const key = record.value
  if (key.state === "disabled") return refuse("disabled_key")
  if (key.state === "revoked") return refuse("revoked_key")
  if (key.expiresAt !== null && now.getTime() > key.expiresAt.getTime()) return refuse("expired_key")
  return Result.succeed(key)
}

/** Only `organization` keys bound to an organization are accepted: the organization the rest of the checks are about. */
export const requireOrganizationScope = (key: ApiKeyRecord): Result.Result<OrganizationId, PublicApiError> =>
  key.kind === "organization" && key.organizationId !== null
    ? Result.succeed(key.organizationId)
    : refuse("org_scope_only_required")

/**
 * The 403 checks, in docs/behaviour.md order. A missing organization record, or a record of
 * another organization than the key's, counts as an organization with no enabled route
 * that is not approved.
 */
export const authorizeOrganization = (
  key: ApiKeyRecord,
  organization: Option.Option<OrganizationRecord>,
  operation: OperationId
): Result.Result<Caller, PublicApiError> =>
  Result.flatMap(requireOrganizationScope(key), (organizationId) => {
    const own = Option.filter(organization, (record) => record.organizationId === organizationId)
    const enabledRoutes = Option.match(own, { onNone: (): ReadonlyArray<OperationId> => [], onSome: (record) => record.enabledRoutes })
    if (!enabledRoutes.includes(operation)) return refuse("route_not_allowed")
    if (!Option.exists(own, (record) => record.approved)) return refuse("organization_not_allowlisted")
    if (!requiredScopes[operation].every((scope) => key.scopes.includes(scope))) return refuse("missing_scope")
    return Result.succeed<Caller>({ organizationId, apiKeyId: key.apiKeyId, scopes: key.scopes, operationId: operation })
  })

export interface AccessDecisionInput {
  readonly authorization: string | undefined
  readonly config: AccessConfig
  /** False when the digest lookup cannot run: no digest key configured, or the key store is unreachable. */
  readonly digestAvailable: boolean
  /** What the digest lookup found. */
  readonly keyRecord: Option.Option<ApiKeyRecord>
  /** The key's organization, as the organization store holds it. */
  readonly organization: Option.Option<OrganizationRecord>
  readonly operation: OperationId
  readonly now: Date
}

/** The whole decision over given inputs: the reference `AccessPolicyLive` is tested against. */
export const decideAccess = (input: AccessDecisionInput): Result.Result<Caller, PublicApiError> =>
  Result.gen(function* () {
    const token = yield* readBearerToken(input.authorization)
    yield* screenToken(token, input.config)
    if (!input.digestAvailable) return yield* refuse("digest_key_unavailable")
    const key = yield* evaluateKeyRecord(input.keyRecord, input.now)
    return yield* authorizeOrganization(key, input.organization, input.operation)
  })

export class AccessPolicy extends Context.Service<AccessPolicy, {
  /** The caller of `operation` with this `Authorization` header, or the first failed check. */
  readonly authorize: (authorization: string | undefined, operation: OperationId) => Effect.Effect<Caller, PublicApiError>
}>()("@clinical-api/domain/AccessPolicy") {}

/**
 * A store failure is answered 503 `digest_key_unavailable` (docs/behaviour.md: key verification and
 * data share one store). The cause goes to `detail`, for logs only; the token is scrubbed
 * from it in case a driver ever echoes it.
 */
const storeUnavailable = (token: string) => (error: StoreUnavailable): PublicApiError => {
  const cause = error.cause instanceof Error ? error.cause.message : String(error.cause ?? "no cause given")
  return new PublicApiError({
    reasonCode: "digest_key_unavailable",
    field: null,
    detail: `store unavailable in ${error.operation}: ${cause}`.split(token).join("[token]")
  })
}

export const AccessPolicyLive: Layer.Layer<AccessPolicy, never, ApiKeyStore | OrganizationStore | PublicApiConfig> =
  Layer.effect(
    AccessPolicy,
    Effect.gen(function* () {
      const keys = yield* ApiKeyStore
      const organizations = yield* OrganizationStore
      const config = yield* PublicApiConfig

      const authorize = Effect.fnUntraced(function* (
        authorization: string | undefined,
        operation: OperationId
      ) {
        const token = yield* orRefuse(readBearerToken(authorization))
        const parsed = yield* orRefuse(screenToken(token, config))
        if (Option.isNone(config.apiKeyDigestKey)) {
          return yield* Effect.fail(
            new PublicApiError({ reasonCode: "digest_key_unavailable", field: null, detail: "no API-key digest key is configured" })
          )
        }
        const keyRecord = yield* keys
          .findByDigest(computeApiKeyDigest(config.apiKeyDigestKey.value, parsed.token))
          .pipe(Effect.mapError(storeUnavailable(parsed.token)))
        const now = new Date(yield* Clock.currentTimeMillis)
        const key = yield* orRefuse(evaluateKeyRecord(keyRecord, now))
        // Checked before the lookup too, so a key that is refused anyway costs no organization read.
        const organizationId = yield* orRefuse(requireOrganizationScope(key))
        const organization = yield* organizations
          .findById(organizationId)
          .pipe(Effect.mapError(storeUnavailable(parsed.token)))
        return yield* orRefuse(authorizeOrganization(key, organization, operation))
      })

      return AccessPolicy.of({ authorize })
    })
  )
