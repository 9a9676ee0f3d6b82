import {
  AUDIO_URL_TTL_DEFAULT_SECONDS,
  AUDIO_URL_TTL_MAX_SECONDS,
  AUDIO_URL_TTL_MIN_SECONDS,
  type PublicApiEnvironment
} from "@clinical-api/domain"
import { Config, Effect, Option, Redacted, Schema, SchemaIssue } from "effect"

/**
 * The service's configuration, read from the environment when the layers are built and
 * validated as a whole: a bad value stops start-up with a message naming the variable.
 */
export interface ServiceConfig {
  readonly port: number
  readonly host: string
  /** The URL partners reach the service at (behind a proxy), named as the server of the OpenAPI document. */
  readonly publicBaseUrl: Option.Option<string>
  readonly databaseUrl: Option.Option<Redacted.Redacted<string>>
  readonly fixtureFile: Option.Option<string>
  readonly environment: PublicApiEnvironment
  readonly apiKeyDigestKey: Option.Option<Redacted.Redacted<string>>
  readonly apiKeysEnabled: boolean
  readonly audioUrlTtlSeconds: number
  /** How long a found API key or organization is reused: the bound on how late a revocation takes effect (0: no cache). */
  readonly accessCacheSeconds: number
}

/** A configuration the service refuses, with a message naming the variable. */
export const invalidConfiguration = (message: string): Config.ConfigError =>
  new Config.ConfigError(new Schema.SchemaError(new SchemaIssue.InvalidValue({ message })))

/** The digest key the sandbox makes for itself; production refuses it. */
export const SANDBOX_DIGEST_KEY = "sandbox-digest-key-not-for-production"

const booleanText = (name: string, fallback: boolean) =>
  Config.String(name).pipe(
    Config.withDefault(String(fallback)),
    Config.mapEffect((text) => {
      const normalized = text.trim().toLowerCase()
      if (["true", "1", "yes", "on"].includes(normalized)) return Effect.succeed(true)
      if (["false", "0", "no", "off"].includes(normalized)) return Effect.succeed(false)
      return Effect.fail(invalidConfiguration(`${name} must be true or false, got ${JSON.stringify(text)}`))
    })
  )

const integerInRange = (name: string, fallback: number, min: number, max: number) =>
  Config.String(name).pipe(
    Config.withDefault(String(fallback)),
    Config.mapEffect((text) => {
      const value = /^(0|[1-9][0-9]*)$/.test(text.trim()) ? Number(text.trim()) : Number.NaN
      return Number.isSafeInteger(value) && value >= min && value <= max
        ? Effect.succeed(value)
        : Effect.fail(invalidConfiguration(`${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(text)}`))
    })
  )

/** An absolute http(s) URL without credentials, query or fragment, written without a trailing slash. */
const publicBaseUrl = Config.option(Config.String("PUBLIC_BASE_URL")).pipe(
  Config.mapEffect((value) => {
    if (Option.isNone(value) || value.value.trim() === "") return Effect.succeed(Option.none<string>())
    const text = value.value.trim()
    const url = URL.canParse(text) ? new URL(text) : undefined
    return url !== undefined && (url.protocol === "http:" || url.protocol === "https:") && url.username === "" &&
        url.password === "" && url.search === "" && url.hash === "" && !text.includes("?") && !text.includes("#")
      ? Effect.succeed(Option.some(`${url.origin}${url.pathname.replace(/\/+$/, "")}`))
      : Effect.fail(invalidConfiguration(
        `PUBLIC_BASE_URL must be an absolute http or https URL without credentials, query or fragment, got ${JSON.stringify(text)}`
      ))
  })
)

export const serviceConfig: Config.Config<ServiceConfig> = Config.all({
  port: integerInRange("PORT", 8080, 0, 65535),
  host: Config.String("HOST").pipe(Config.withDefault("127.0.0.1")),
  publicBaseUrl,
  databaseUrl: Config.option(Config.Redacted("DATABASE_URL")),
  fixtureFile: Config.option(Config.String("FIXTURE_FILE")),
  environment: Config.Literals(["sandbox", "production"], "PUBLIC_API_ENVIRONMENT").pipe(
    Config.withDefault("sandbox" as const)
  ),
  apiKeyDigestKey: Config.option(Config.Redacted("API_KEY_DIGEST_KEY")),
  apiKeysEnabled: booleanText("API_KEYS_ENABLED", true),
  audioUrlTtlSeconds: integerInRange(
    "AUDIO_URL_TTL_SECONDS",
    AUDIO_URL_TTL_DEFAULT_SECONDS,
    AUDIO_URL_TTL_MIN_SECONDS,
    AUDIO_URL_TTL_MAX_SECONDS
  ),
  accessCacheSeconds: integerInRange("ACCESS_CACHE_SECONDS", 5, 0, 60)
}).pipe(
  Config.mapEffect((config): Effect.Effect<ServiceConfig, Config.ConfigError> => {
    if (config.environment === "production") {
      const key = Option.map(config.apiKeyDigestKey, Redacted.value)
      if (Option.isNone(key) || key.value.length < 32) {
        return Effect.fail(invalidConfiguration("API_KEY_DIGEST_KEY is required in production (at least 32 characters)"))
      }
      if (key.value === SANDBOX_DIGEST_KEY) {
        return Effect.fail(invalidConfiguration("API_KEY_DIGEST_KEY must not be the sandbox key in production"))
      }
      if (Option.isSome(config.fixtureFile)) {
        return Effect.fail(invalidConfiguration("FIXTURE_FILE is for the sandbox; production does not load fixtures at start"))
      }
    }
    return Effect.succeed({
      ...config,
      apiKeyDigestKey: config.environment === "sandbox" && Option.isNone(config.apiKeyDigestKey)
        ? Option.some(Redacted.make(SANDBOX_DIGEST_KEY))
        : config.apiKeyDigestKey
    })
  })
)

export const loadServiceConfig = Effect.suspend(() => serviceConfig)
