import {
  AUDIO_URL_TTL_DEFAULT_SECONDS,
  AUDIO_URL_TTL_MAX_SECONDS,
  AUDIO_URL_TTL_MIN_SECONDS,
  type PublicApiEnvironment
} from "@clinical-api/domain"
import { Config, ConfigError, Effect, Either, Option, Redacted } from "effect"

/**
 * The service's configuration, read from the environment when the layers are built and
 * validated as a whole: a bad value stops start-up with a message naming the variable.
 */
export interface ServiceConfig {
  readonly port: number
  readonly host: string
  readonly databaseUrl: Option.Option<Redacted.Redacted<string>>
  readonly fixtureFile: Option.Option<string>
  readonly environment: PublicApiEnvironment
  readonly apiKeyDigestKey: Option.Option<Redacted.Redacted<string>>
  readonly apiKeysEnabled: boolean
  readonly audioUrlTtlSeconds: number
  /** How long a found API key or organization is reused: the bound on how late a revocation takes effect (0: no cache). */
  readonly accessCacheSeconds: number
}

/** The digest key the sandbox makes for itself; production refuses it. */
export const SANDBOX_DIGEST_KEY = "sandbox-digest-key-not-for-production"

const booleanText = (name: string, fallback: boolean) =>
  Config.string(name).pipe(
    Config.withDefault(String(fallback)),
    Config.mapOrFail((text) => {
      const normalized = text.trim().toLowerCase()
      if (["true", "1", "yes", "on"].includes(normalized)) return Either.right(true)
      if (["false", "0", "no", "off"].includes(normalized)) return Either.right(false)
      return Either.left(ConfigError.InvalidData([], `${name} must be true or false, got ${JSON.stringify(text)}`))
    })
  )

const integerInRange = (name: string, fallback: number, min: number, max: number) =>
  Config.string(name).pipe(
    Config.withDefault(String(fallback)),
    Config.mapOrFail((text) => {
      const value = /^(0|[1-9][0-9]*)$/.test(text.trim()) ? Number(text.trim()) : Number.NaN
      return Number.isSafeInteger(value) && value >= min && value <= max
        ? Either.right(value)
        : Either.left(ConfigError.InvalidData([], `${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(text)}`))
    })
  )

export const serviceConfig: Config.Config<ServiceConfig> = Config.all({
  port: integerInRange("PORT", 8080, 0, 65535),
  host: Config.string("HOST").pipe(Config.withDefault("127.0.0.1")),
  databaseUrl: Config.option(Config.redacted("DATABASE_URL")),
  fixtureFile: Config.option(Config.string("FIXTURE_FILE")),
  environment: Config.literal("sandbox", "production")("PUBLIC_API_ENVIRONMENT").pipe(
    Config.withDefault("sandbox" as const)
  ),
  apiKeyDigestKey: Config.option(Config.redacted("API_KEY_DIGEST_KEY")),
  apiKeysEnabled: booleanText("API_KEYS_ENABLED", true),
  audioUrlTtlSeconds: integerInRange(
    "AUDIO_URL_TTL_SECONDS",
    AUDIO_URL_TTL_DEFAULT_SECONDS,
    AUDIO_URL_TTL_MIN_SECONDS,
    AUDIO_URL_TTL_MAX_SECONDS
  ),
  accessCacheSeconds: integerInRange("ACCESS_CACHE_SECONDS", 5, 0, 60)
}).pipe(
  Config.mapOrFail((config): Either.Either<ServiceConfig, ConfigError.ConfigError> => {
    if (config.environment === "production") {
      const key = Option.map(config.apiKeyDigestKey, Redacted.value)
      if (Option.isNone(key) || key.value.length < 32) {
        return Either.left(ConfigError.InvalidData([], "API_KEY_DIGEST_KEY is required in production (at least 32 characters)"))
      }
      if (key.value === SANDBOX_DIGEST_KEY) {
        return Either.left(ConfigError.InvalidData([], "API_KEY_DIGEST_KEY must not be the sandbox key in production"))
      }
      if (Option.isSome(config.fixtureFile)) {
        return Either.left(ConfigError.InvalidData([], "FIXTURE_FILE is for the sandbox; production does not load fixtures at start"))
      }
    }
    return Either.right({
      ...config,
      apiKeyDigestKey: config.environment === "sandbox" && Option.isNone(config.apiKeyDigestKey)
        ? Option.some(Redacted.make(SANDBOX_DIGEST_KEY))
        : config.apiKeyDigestKey
    })
  })
)

export const loadServiceConfig = Effect.suspend(() => serviceConfig)
