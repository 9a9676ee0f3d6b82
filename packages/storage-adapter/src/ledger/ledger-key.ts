import { type LedgerSigner } from "@clinical-api/domain"
import { Config, Effect, Option, Redacted, Schema, SchemaIssue } from "effect"
import { ledgerSignerFromSecret } from "./ledger-crypto.js"

/** The key the sandbox seals with when LEDGER_KEY is unset; production refuses it. Its seals prove nothing. */
export const SANDBOX_LEDGER_KEY = "sandbox-ledger-key-not-for-production"

export interface LedgerKeySetting {
  readonly signer: LedgerSigner
  /** The fixed sandbox key, used because LEDGER_KEY is unset. */
  readonly sandboxKey: boolean
}

/**
 * `LEDGER_KEY`, the secret seals are signed with, held outside the database: required in
 * production (at least 32 characters, not the sandbox key), the sandbox key otherwise.
 */
export const LedgerKeyFromConfig: Effect.Effect<LedgerKeySetting, Config.ConfigError> = Effect.gen(function* () {
  const environment = yield* Config.Literals(["sandbox", "production"], "PUBLIC_API_ENVIRONMENT").pipe(
    Config.withDefault("sandbox" as const)
  )
  const key = yield* Config.option(Config.Redacted("LEDGER_KEY"))
  const value = Option.map(key, Redacted.value).pipe(Option.filter((text) => text !== ""))
  if (environment === "production") {
    if (Option.isNone(value) || value.value.length < 32) {
      return yield* Effect.fail(invalid("LEDGER_KEY is required in production (at least 32 characters)"))
    }
    if (value.value === SANDBOX_LEDGER_KEY) return yield* Effect.fail(invalid("LEDGER_KEY must not be the sandbox key in production"))
  }
  const secret = Option.getOrElse(value, () => SANDBOX_LEDGER_KEY)
  return { signer: ledgerSignerFromSecret(secret), sandboxKey: secret === SANDBOX_LEDGER_KEY }
})

const invalid = (message: string): Config.ConfigError =>
  new Config.ConfigError(new Schema.SchemaError(new SchemaIssue.InvalidValue({ message })))
