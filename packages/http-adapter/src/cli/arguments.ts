import {
  ApiKeyId,
  ApiKeyKind,
  type KeyEnvironment,
  OperationId,
  operationIds,
  OrganizationId,
  parseRfc3339Instant,
  Scope,
  scopes as allScopes
} from "@clinical-api/domain"
import { Effect, Schema } from "effect"
import { type CliFailure, refuse } from "./failure.js"

/**
 * Parsing of the values operators type. Each returns the domain's value or a one-line
 * refusal naming the option and what it accepts; commands parse everything before they
 * open the database, so a refused argument changes nothing.
 */

const isOneOf = <const A extends string>(values: ReadonlyArray<A>, text: string): text is A =>
  (values as ReadonlyArray<string>).includes(text)

/** An opaque id: non-empty, no surrounding blanks, no control characters. */
const plainId = (what: string, text: string): Effect.Effect<string, CliFailure> =>
  text === ""
    ? Effect.fail(refuse(`${what} must not be empty`))
    : text.trim() !== text || /[\p{Cc}]/u.test(text)
      ? Effect.fail(refuse(`${what} ${JSON.stringify(text)} has surrounding blanks or control characters`))
      : Effect.succeed(text)

export const parseOrganizationId = (text: string, what = "the organization id") =>
  Effect.map(plainId(what, text), Schema.decodeSync(OrganizationId))

export const parseApiKeyId = (text: string, what = "the API key id") =>
  Effect.map(plainId(what, text), Schema.decodeSync(ApiKeyId))

export const parseOperationId = (text: string): Effect.Effect<OperationId, CliFailure> =>
  isOneOf(OperationId.literals, text)
    ? Effect.succeed(text)
    : Effect.fail(refuse(`unknown route ${JSON.stringify(text)}; the routes are ${operationIds.join(", ")}`))

/** `encounters:read,patients:read`: at least one, each a known scope; duplicates collapse. */
export const parseScopes = (text: string): Effect.Effect<ReadonlyArray<Scope>, CliFailure> => {
  const parts = text.split(",").map((part) => part.trim())
  const unknown = parts.find((part) => !isOneOf(Scope.literals, part))
  if (text.trim() === "") return Effect.fail(refuse(`--scopes needs at least one of ${allScopes.join(", ")}`))
  if (unknown !== undefined) {
    return Effect.fail(
      refuse(
        `unknown scope ${JSON.stringify(unknown)} in --scopes; the scopes are ${allScopes.join(", ")} (comma-separated)`
      )
    )
  }
  return Effect.succeed([...new Set(parts.filter((part) => isOneOf(Scope.literals, part)))])
}

export const parseKeyKind = (text: string): Effect.Effect<ApiKeyKind, CliFailure> =>
  isOneOf(ApiKeyKind.literals, text)
    ? Effect.succeed(text)
    : Effect.fail(
        refuse(`unknown key kind ${JSON.stringify(text)} for --kind; the kinds are ${ApiKeyKind.literals.join(", ")}`)
      )

const keyEnvironments: ReadonlyArray<KeyEnvironment> = ["live", "test"]

export const parseKeyEnvironment = (text: string): Effect.Effect<KeyEnvironment, CliFailure> =>
  isOneOf(keyEnvironments, text)
    ? Effect.succeed(text)
    : Effect.fail(refuse(`unknown key environment ${JSON.stringify(text)} for --environment; use live or test`))

/** An RFC 3339 date-time with an offset, as the API takes them. */
export const parseInstant = (option: string, text: string): Effect.Effect<Date, CliFailure> => {
  const instant = parseRfc3339Instant(text)
  return instant === undefined
    ? Effect.fail(
        refuse(
          `${option} ${JSON.stringify(text)} is not an RFC 3339 date-time with an offset (e.g. 2026-05-01T12:00:00Z or 2026-05-01T14:00:00+02:00)`
        )
      )
    : Effect.succeed(instant)
}

export const nonEmptyText = (option: string, text: string): Effect.Effect<string, CliFailure> =>
  text.trim() === "" ? Effect.fail(refuse(`${option} must not be empty`)) : Effect.succeed(text)
