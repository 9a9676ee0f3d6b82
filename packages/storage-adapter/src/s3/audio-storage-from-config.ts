import type { AudioStorage } from "@clinical-api/domain"
import { Config, Effect, Layer, Option } from "effect"
import {
  type EmbeddedAudioObjects,
  EmbeddedAudioStorageWithBaseUrl,
  type MediaBaseUrl,
  NoEmbeddedAudioObjects
} from "../repositories/embedded-audio-storage.js"
import { invalidConfig } from "../sql/database-layer.js"
import type { PgClient } from "../sql/pg-client.js"
import { type S3AudioSettings, S3AudioStorageLayer } from "./s3-audio-storage.js"

export type AudioStorageKind = "embedded" | "s3"

/**
 * S3 settings from the environment: `S3_BUCKET` (required), `S3_REGION` (default
 * `us-east-1`), `S3_ENDPOINT` (S3-compatible stores), `S3_ACCESS_KEY_ID` with
 * `S3_SECRET_ACCESS_KEY` (both or neither; neither uses the SDK's default credential chain)
 * and `S3_FORCE_PATH_STYLE` (default false).
 */
export const s3AudioSettingsConfig: Config.Config<S3AudioSettings> = Config.all({
  bucket: Config.NonEmptyString("S3_BUCKET"),
  region: Config.NonEmptyString("S3_REGION").pipe(Config.withDefault("us-east-1")),
  endpoint: Config.option(
    Config.URL("S3_ENDPOINT").pipe(Config.map((url) => url.toString().replace(/\/+$/, "")))
  ),
  accessKeyId: Config.option(Config.NonEmptyString("S3_ACCESS_KEY_ID")),
  secretAccessKey: Config.option(Config.Redacted("S3_SECRET_ACCESS_KEY")),
  forcePathStyle: Config.Boolean("S3_FORCE_PATH_STYLE").pipe(Config.withDefault(false))
}).pipe(
  Config.mapEffect(({ accessKeyId, secretAccessKey, ...rest }): Effect.Effect<S3AudioSettings, Config.ConfigError> => {
    if (Option.isSome(accessKeyId) !== Option.isSome(secretAccessKey)) {
      return Effect.fail(invalidConfig("S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY must be set together (or neither)"))
    }
    const credentials = Option.zipWith(accessKeyId, secretAccessKey, (id, secret) => ({
      accessKeyId: id,
      secretAccessKey: secret
    }))
    return Effect.succeed({ ...rest, credentials })
  })
)

export const audioStorageKindConfig: Config.Config<AudioStorageKind> = Config.Literals(["embedded", "s3"], "AUDIO_STORAGE")
  .pipe(Config.withDefault("embedded" as const))

/**
 * The audio storage chosen by `AUDIO_STORAGE` (`embedded`, the default, or `s3`).
 *
 * - embedded: bytes in the database, URLs `${MediaBaseUrl}/media/{token}` signed with
 *   `MEDIA_SIGNING_KEY`, served by the HTTP app through `EmbeddedAudioObjects`.
 * - s3: see `s3AudioSettingsConfig`; `EmbeddedAudioObjects` then serves nothing (every
 *   `/media/{token}` is refused), the store serves its own presigned URLs.
 *
 * Fixture loads: with s3 the objects are uploaded while the load's database transaction is
 * open, before it commits. A failed upload rolls the rows back; a failure after the uploads
 * (the commit itself) can leave orphan objects under fresh random keys, never a row that
 * points at nothing.
 */
export const AudioStorageFromConfig: Layer.Layer<
  AudioStorage | EmbeddedAudioObjects,
  Config.ConfigError,
  PgClient | MediaBaseUrl
> = Layer.unwrap(
  Effect.gen(function* () {
    const kind = yield* audioStorageKindConfig
    if (kind === "embedded") return EmbeddedAudioStorageWithBaseUrl
    const settings = yield* s3AudioSettingsConfig
    return Layer.merge(S3AudioStorageLayer(settings), NoEmbeddedAudioObjects)
  })
)
