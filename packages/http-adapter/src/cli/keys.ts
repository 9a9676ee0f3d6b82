import { ApiKeyKind, scopes as allScopes } from "@clinical-api/domain"
import { type ApiKeyListing, OperatorStore } from "@clinical-api/storage-adapter"
import { Clock, Console, Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import {
  nonEmptyText,
  parseApiKeyId,
  parseInstant,
  parseKeyEnvironment,
  parseKeyKind,
  parseOrganizationId,
  parseScopes
} from "./arguments.js"
import { digestKeySetting, onDatabase, sandboxKeyNote } from "./database.js"
import { refuse } from "./failure.js"
import { groupCommand } from "./group.js"
import { apiKeyJson, jsonOption, printJsonLine, printList, switchFlag } from "./output.js"

const keyArgument = Argument.String("KEY_ID").pipe(Argument.withDescription("The API key's id (as `keys list` shows it)."))

const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

const printKey = (key: ApiKeyListing) => Effect.flatMap(now, (at) => printJsonLine(apiKeyJson(key, at)))

const issueCommand = Command.make(
  "issue",
  {
    organization: Flag.String("organization").pipe(Flag.withDescription("The organization the key belongs to.")),
    scopes: Flag.String("scopes").pipe(
      Flag.withDescription(`Comma-separated scopes, at least one of ${allScopes.join(", ")}.`)
    ),
    kind: Flag.String("kind").pipe(
      Flag.withDefault("organization"),
      Flag.withDescription(
        `${ApiKeyKind.literals.join(", ")} (default organization). Only organization keys are accepted by the ` +
          "public API; the others get 403 org_scope_only_required."
      )
    ),
    environment: Flag.String("environment").pipe(
      Flag.optional,
      Flag.withDescription(
        "live (a ce_live_ token) or test (ce_test_). Default: live when PUBLIC_API_ENVIRONMENT=production, test in " +
          "the sandbox. A production service refuses test keys, so they are refused here too."
      )
    ),
    label: Flag.String("label").pipe(Flag.optional, Flag.withDescription("A note for operators (who holds the key).")),
    expiresAt: Flag.String("expires-at").pipe(
      Flag.optional,
      Flag.withDescription("When the key stops working: an RFC 3339 date-time with offset, in the future. Default: never.")
    ),
    json: switchFlag("json", "Print the key and its token as one JSON object.")
  },
  (input) =>
    Effect.gen(function* () {
      const organizationId = yield* parseOrganizationId(input.organization, "--organization")
      const scopes = yield* parseScopes(input.scopes)
      const kind = yield* parseKeyKind(input.kind)
      const label = yield* Option.match(input.label, {
        onNone: () => Effect.succeed(null),
        onSome: (text) => nonEmptyText("--label", text)
      })
      const expiresAt = yield* Option.match(input.expiresAt, {
        onNone: () => Effect.succeed(null),
        onSome: (text) => parseInstant("--expires-at", text)
      })
      const issuedAt = yield* now
      if (expiresAt !== null && expiresAt.getTime() <= issuedAt.getTime()) {
        return yield* refuse(`--expires-at ${Option.getOrElse(input.expiresAt, () => "")} is not in the future`)
      }
      const requestedEnvironment = yield* Option.match(input.environment, {
        onNone: () => Effect.succeed(undefined),
        onSome: parseKeyEnvironment
      })
      const setting = yield* digestKeySetting
      const { digestKey, environment: serviceEnvironment } = setting
      const environment = requestedEnvironment ?? (serviceEnvironment === "production" ? "live" : "test")
      if (environment === "test" && serviceEnvironment === "production") {
        return yield* refuse(
          "--environment test makes a ce_test_ key, which a production service refuses (test_prefix_not_allowed)"
        )
      }
      const issued = yield* onDatabase(
        OperatorStore.use((store) =>
          store.issueApiKey({ organizationId, scopes, kind, label, expiresAt, environment, digestKey })
        )
      )
      if (kind !== "organization") {
        yield* Console.error(`note: a ${kind} key is refused by the public API (403 org_scope_only_required)`)
      }
      yield* sandboxKeyNote(setting)
      yield* Console.error(
        "warning: the token is shown this once and cannot be shown again (only its digest is stored): store it now"
      )
      if (input.json) {
        yield* printJsonLine({ ...apiKeyJson(issued.apiKey, issuedAt), token: issued.token })
      } else {
        yield* Console.log(`api_key_id: ${issued.apiKey.apiKeyId}\ntoken: ${issued.token}`)
      }
    })
).pipe(
  Command.withDescription(
    "Issue an API key for an organization and print its id and token. The token is printed once and never again: " +
      "only its digest (HMAC-SHA256 with API_KEY_DIGEST_KEY, as the service computes it) is stored."
  )
)

const listCommand = Command.make(
  "list",
  {
    organization: Flag.String("organization").pipe(
      Flag.optional,
      Flag.withDescription("Only this organization's keys (an unknown organization is refused).")
    ),
    json: jsonOption
  },
  ({ json, organization }) =>
    Effect.gen(function* () {
      const organizationId = yield* Option.match(organization, {
        onNone: () => Effect.succeed(undefined),
        onSome: (text) => parseOrganizationId(text, "--organization")
      })
      const keys = yield* onDatabase(
        OperatorStore.use((store) =>
          store.listApiKeys(organizationId === undefined ? {} : { organizationId })
        )
      )
      const at = yield* now
      yield* printList(keys, {
        json,
        toJson: (key) => apiKeyJson(key, at),
        header: ["KEY ID", "ORGANIZATION", "KIND", "STATE", "SCOPES", "EXPIRES AT", "LABEL"],
        toRow: (key) => {
          const listed = apiKeyJson(key, at)
          return [
            listed.api_key_id,
            listed.organization_id ?? "-",
            listed.kind,
            listed.state,
            listed.scopes.join(","),
            listed.expires_at === null ? "never" : `${listed.expires_at}${listed.expired ? " (expired)" : ""}`,
            listed.label ?? ""
          ]
        },
        empty: "No API keys."
      })
    })
).pipe(
  Command.withDescription(
    "List API keys (never their tokens or digests), optionally of one organization: a table, or JSON Lines with --json."
  )
)

const stateCommand = (name: "disable" | "enable" | "revoke", description: string) =>
  Command.make(name, { key: keyArgument }, ({ key }) =>
    Effect.gen(function* () {
      const apiKeyId = yield* parseApiKeyId(key)
      const updated = yield* onDatabase(
        OperatorStore.use((store) =>
          name === "disable"
            ? store.disableApiKey(apiKeyId)
            : name === "enable"
              ? store.enableApiKey(apiKeyId)
              : store.revokeApiKey(apiKeyId)
        )
      )
      yield* printKey(updated)
    })
  ).pipe(Command.withDescription(`${description} Prints the key (without its token) as one JSON object.`))

const setExpiryCommand = Command.make(
  "set-expiry",
  {
    key: keyArgument,
    at: Flag.String("at").pipe(
      Flag.optional,
      Flag.withDescription("The new expiry: an RFC 3339 date-time with offset (a past one expires the key at once).")
    ),
    never: switchFlag("never", "Remove the expiry.")
  },
  ({ at, key, never }) =>
    Effect.gen(function* () {
      const apiKeyId = yield* parseApiKeyId(key)
      if (Option.isSome(at) && never) return yield* refuse("give either --at T or --never, not both")
      if (Option.isNone(at) && !never) return yield* refuse("give either --at T (an RFC 3339 date-time) or --never")
      const expiresAt = Option.isSome(at) ? yield* parseInstant("--at", at.value) : null
      const updated = yield* onDatabase(
        OperatorStore.use((store) => store.setApiKeyExpiry(apiKeyId, expiresAt))
      )
      yield* printKey(updated)
    })
).pipe(
  Command.withDescription(
    "Set (--at T) or remove (--never) an API key's expiry; an expired key gets 401 expired_key. Prints the key as one JSON object."
  )
)

const keySubcommands = [
  issueCommand,
  listCommand,
  stateCommand("disable", "Disable an API key (401 disabled_key) until it is enabled again. A revoked key is refused."),
  stateCommand("enable", "Enable a disabled API key again. A revoked key is refused: revocation is final."),
  stateCommand("revoke", "Revoke an API key for good (401 revoked_key)."),
  setExpiryCommand
] as const

export const keysCommand = groupCommand(
  "keys",
  "Issue, list, disable, enable, revoke and expire API keys."
).pipe(Command.withSubcommands(keySubcommands))
