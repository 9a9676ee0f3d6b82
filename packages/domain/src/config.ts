import { Context, type Option, type Redacted } from "effect"

export type PublicApiEnvironment = "sandbox" | "production"

export interface PublicApiSettings {
  /** `production` refuses `ce_test_` keys; `sandbox` accepts both prefixes. */
  readonly environment: PublicApiEnvironment
  /** When false every request is refused with 401 `api_keys_disabled`. */
  readonly apiKeysEnabled: boolean
  /** The server secret keys are digested with; none means key verification cannot run (503). */
  readonly apiKeyDigestKey: Option.Option<Redacted.Redacted<string>>
  /** Lifetime of a signed audio URL, 60..3600 seconds. */
  readonly audioUrlTtlSeconds: number
}

/** The settings the domain's rules depend on; adapters read them from the environment. */
export class PublicApiConfig extends Context.Service<PublicApiConfig, PublicApiSettings>()(
  "@clinical-api/domain/PublicApiConfig"
) {}

export const AUDIO_URL_TTL_DEFAULT_SECONDS = 300
export const AUDIO_URL_TTL_MIN_SECONDS = 60
export const AUDIO_URL_TTL_MAX_SECONDS = 3600
