import { createHmac, randomBytes, timingSafeEqual } from "node:crypto"
import { AudioStorage, AudioStorageUnavailable, hmacKeyOf, type RecordingReference } from "@clinical-api/domain"
import { Clock, Config, Context, Data, Effect, Layer, Option, Redacted, Schema } from "effect"
import { decodeRows } from "../sql/decode.js"
import { PgClient } from "../sql/pg-client.js"
import { embeddedObjectSeenIn, type MarkedRecordingReference } from "./recording-object-mark.js"

/**
 * The first, embedded audio storage: recording bytes live in the `recording_objects` table,
 * keyed by storage key, so a fixture load (which puts objects) stays one transaction. URLs
 * point at the service itself: `${mediaBaseUrl}/media/${token}`, where the token carries the
 * storage key and the expiry and is signed with the media signing key. The HTTP side serves
 * them with `EmbeddedAudioObjects.readSigned`.
 */
export interface EmbeddedAudioSettings {
  /** Where the service is reached, without a trailing slash, e.g. `http://127.0.0.1:3000`. */
  readonly mediaBaseUrl: string
  readonly signingKey: Redacted.Redacted<string>
}

/**
 * Where the service itself is reached (scheme, host, port, no trailing slash), read each time
 * a URL is signed, so a composition root that learns its address only once it listens (port
 * 0) can still hand it over. The composition root provides it: from `MEDIA_BASE_URL`, else
 * from its own HOST/PORT (`MediaBaseUrlFromConfig`).
 */
export class MediaBaseUrl extends Context.Service<MediaBaseUrl, { readonly get: Effect.Effect<string> }>()(
  "@clinical-api/storage-adapter/MediaBaseUrl"
) {}

const withoutTrailingSlash = (url: string) => url.replace(/\/+$/, "")

/** A fixed base URL. */
export const MediaBaseUrlLayer = (url: string): Layer.Layer<MediaBaseUrl> =>
  Layer.succeed(MediaBaseUrl, MediaBaseUrl.of({ get: Effect.succeed(withoutTrailingSlash(url)) }))

/**
 * `MEDIA_BASE_URL` when it is configured, otherwise `fallback`: the service's own address,
 * fixed, or an effect that yields it once known (e.g. `Deferred.await` of a deferred the
 * composition root completes once the server listens, for PORT=0).
 */
export const MediaBaseUrlFromConfig = (
  fallback: string | Effect.Effect<string>
): Layer.Layer<MediaBaseUrl, Config.ConfigError> =>
  Layer.unwrap(
    Effect.map(Config.option(Config.NonEmptyString("MEDIA_BASE_URL")), (configured) =>
      Option.isSome(configured)
        ? MediaBaseUrlLayer(configured.value)
        : typeof fallback === "string"
        ? MediaBaseUrlLayer(fallback)
        : Layer.succeed(MediaBaseUrl, MediaBaseUrl.of({ get: Effect.map(fallback, withoutTrailingSlash) }))
    )
  )

const base64url = (bytes: Buffer) => bytes.toString("base64url")

const mediaSignature = (signingKey: Redacted.Redacted<string>, storageKey: string, expiresEpochSeconds: number) =>
  createHmac("sha256", hmacKeyOf(signingKey))
    .update(`${storageKey}.${expiresEpochSeconds}`, "utf8")
    .digest()

/** `base64url(storageKey).expiresEpochSeconds.base64url(HMAC-SHA256(key, storageKey + "." + expiry))`. */
export const signMediaToken = (
  signingKey: Redacted.Redacted<string>,
  storageKey: string,
  expiresEpochSeconds: number
): string =>
  `${base64url(Buffer.from(storageKey, "utf8"))}.${expiresEpochSeconds}.${base64url(
    mediaSignature(signingKey, storageKey, expiresEpochSeconds)
  )}`

/** What a media token is worth at a given instant. */
export type MediaTokenCheck =
  | { readonly _tag: "Valid"; readonly storageKey: string }
  | { readonly _tag: "Expired" }
  | { readonly _tag: "Invalid" }

const TOKEN_SHAPE = /^[A-Za-z0-9_-]{1,1024}\.[1-9][0-9]{0,11}\.[A-Za-z0-9_-]{43}$/

/**
 * Checks a token: its signature first (the whole token is recomputed from the storage key and
 * expiry it names and compared in constant time, so a token differing in any character, even
 * one base64url would decode the same, is invalid), then its expiry: valid while `nowMillis`
 * is before it, expired at and after it.
 */
export const checkMediaToken = (
  signingKey: Redacted.Redacted<string>,
  token: string,
  nowMillis: number
): MediaTokenCheck => {
  if (!TOKEN_SHAPE.test(token)) return { _tag: "Invalid" }
  const [encodedKey = "", expiryText = ""] = token.split(".")
  const expiresEpochSeconds = Number(expiryText)
  const storageKey = Buffer.from(encodedKey, "base64url").toString("utf8")
  const expected = Buffer.from(signMediaToken(signingKey, storageKey, expiresEpochSeconds), "utf8")
  const given = Buffer.from(token, "utf8")
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { _tag: "Invalid" }
  return nowMillis < expiresEpochSeconds * 1000 ? { _tag: "Valid", storageKey } : { _tag: "Expired" }
}

/** The storage key a token grants, if its signature is right and `nowMillis` is before its expiry. */
export const verifyMediaToken = (
  signingKey: Redacted.Redacted<string>,
  token: string,
  nowMillis: number
): Option.Option<string> => {
  const check = checkMediaToken(signingKey, token, nowMillis)
  return check._tag === "Valid" ? Option.some(check.storageKey) : Option.none()
}

export interface StoredAudioObject {
  readonly contentType: string
  readonly bytes: Uint8Array
}

/** Why a signed media URL serves nothing (for the operator's log line; the client sees one refusal). */
export type MediaRefusal = "invalid_token" | "expired_token" | "object_missing" | "not_served_here"

export class MediaRefused extends Data.TaggedError("MediaRefused")<{ readonly reason: MediaRefusal }> {}

/** Read access to the embedded objects, for the route that serves signed media URLs. */
export class EmbeddedAudioObjects extends Context.Service<EmbeddedAudioObjects, {
  readonly read: (storageKey: string) => Effect.Effect<Option.Option<StoredAudioObject>, AudioStorageUnavailable>
  /** The object a media token grants now (current `Clock`), or why it grants none. */
  readonly readSigned: (token: string) => Effect.Effect<StoredAudioObject, MediaRefused | AudioStorageUnavailable>
}>()("@clinical-api/storage-adapter/EmbeddedAudioObjects") {}

/**
 * For a service whose recordings are in another storage (S3): it serves no media itself, so
 * every token is refused.
 */
export const NoEmbeddedAudioObjects: Layer.Layer<EmbeddedAudioObjects> = Layer.succeed(
  EmbeddedAudioObjects,
  EmbeddedAudioObjects.of({
    read: () => Effect.succeed(Option.none()),
    readSigned: () => Effect.fail(new MediaRefused({ reason: "not_served_here" }))
  })
)

const ObjectRow = Schema.Struct({ content_type: Schema.String, bytes: Schema.Uint8Array })

const toAudioUnavailable = (operation: string) => (cause: unknown) =>
  new AudioStorageUnavailable({ operation, cause })

const makeEmbedded = (signingKey: Redacted.Redacted<string>, mediaBaseUrl: Effect.Effect<string>) =>
  // eslint-disable-next-line no-restricted-syntax -- made once, when the layer is built
  Effect.gen(function* () {
    const client = yield* PgClient

    const put = Effect.fn("AudioStorage.put")(function* (reference: RecordingReference, bytes: Uint8Array) {
      yield* client
        .run(
          "audio.put",
          (sql) => sql`
            INSERT INTO recording_objects (storage_key, content_type, bytes)
            VALUES (${reference.storageKey}, ${reference.contentType}, ${Buffer.from(bytes)})
            ON CONFLICT (storage_key) DO UPDATE SET content_type = EXCLUDED.content_type, bytes = EXCLUDED.bytes`
        )
        .pipe(Effect.mapError(toAudioUnavailable("audio.put")))
    })

    // On the request path: untraced, as a span costs about 12 µs per call even with no tracer
    // configured, some 4% of the CPU of a detail read.
    const exists = Effect.fnUntraced(function* (reference: MarkedRecordingReference) {
      if (reference[embeddedObjectSeenIn] === client) return true
      const rows = yield* client
        .run("audio.exists", (sql) => sql`SELECT 1 FROM recording_objects WHERE storage_key = ${reference.storageKey}`)
        .pipe(Effect.mapError(toAudioUnavailable("audio.exists")))
      return rows.length > 0
    })

    const signUrl = Effect.fnUntraced(function* (reference: RecordingReference, lifetimeSeconds: number) {
      const now = yield* Clock.currentTimeMillis
      // Whole seconds, so that the URL stops working exactly at the `expiresAt` returned.
      const expiresEpochSeconds = Math.floor(now / 1000) + Math.floor(lifetimeSeconds)
      const token = signMediaToken(signingKey, reference.storageKey, expiresEpochSeconds)
      const baseUrl = yield* mediaBaseUrl
      return { url: `${withoutTrailingSlash(baseUrl)}/media/${token}`, expiresAt: new Date(expiresEpochSeconds * 1000) }
    })

    const read = Effect.fn("EmbeddedAudioObjects.read")(function* (storageKey: string) {
      const rows = yield* client
        .run(
          "audio.read",
          (sql) => sql`SELECT content_type, bytes FROM recording_objects WHERE storage_key = ${storageKey}`
        )
        .pipe(
          Effect.flatMap(decodeRows(ObjectRow, "audio.read")),
          Effect.mapError(toAudioUnavailable("audio.read"))
        )
      return Option.map(Option.fromNullishOr(rows[0]), (row) => ({ contentType: row.content_type, bytes: row.bytes }))
    })

    const readSigned = Effect.fn("EmbeddedAudioObjects.readSigned")(function* (token: string) {
      const check = checkMediaToken(signingKey, token, yield* Clock.currentTimeMillis)
      if (check._tag === "Invalid") return yield* new MediaRefused({ reason: "invalid_token" })
      if (check._tag === "Expired") return yield* new MediaRefused({ reason: "expired_token" })
      const stored = yield* read(check.storageKey)
      if (Option.isNone(stored)) return yield* new MediaRefused({ reason: "object_missing" })
      return stored.value
    })

    return {
      storage: AudioStorage.of({ put, exists, signUrl }),
      objects: EmbeddedAudioObjects.of({ read, readSigned })
    }
  })

/** Kept for callers that know their settings up front (tests, tools). */
export const makeEmbeddedAudioStorage = (settings: EmbeddedAudioSettings) =>
  makeEmbedded(settings.signingKey, Effect.succeed(settings.mediaBaseUrl))

const toContext = (made: Effect.Success<ReturnType<typeof makeEmbedded>>) =>
  Context.make(AudioStorage, made.storage).pipe(Context.add(EmbeddedAudioObjects, made.objects))

export const EmbeddedAudioStorageLayer = (
  settings: EmbeddedAudioSettings
): Layer.Layer<AudioStorage | EmbeddedAudioObjects, never, PgClient> =>
  Layer.effectContext(Effect.map(makeEmbeddedAudioStorage(settings), toContext))

/**
 * `MEDIA_SIGNING_KEY`; without one a random key is made per process, so URLs signed before a
 * restart stop working (acceptable for the sandbox, set one elsewhere, and the same one on
 * every instance behind a load balancer).
 */
export const MediaSigningKeyFromConfig: Effect.Effect<Redacted.Redacted<string>, Config.ConfigError> = Effect.map(
  Config.option(Config.Redacted("MEDIA_SIGNING_KEY")),
  Option.getOrElse(() => Redacted.make(randomBytes(32).toString("base64url")))
)

/** The embedded storage with the signing key from configuration and the base URL from `MediaBaseUrl`. */
export const EmbeddedAudioStorageWithBaseUrl: Layer.Layer<
  AudioStorage | EmbeddedAudioObjects,
  Config.ConfigError,
  PgClient | MediaBaseUrl
> = Layer.effectContext(
  Effect.gen(function* () {
    const signingKey = yield* MediaSigningKeyFromConfig
    const baseUrl = yield* MediaBaseUrl
    return toContext(yield* makeEmbedded(signingKey, baseUrl.get))
  })
)

/**
 * Settings from configuration alone: `MEDIA_BASE_URL` (default `http://127.0.0.1:3000`) and
 * `MEDIA_SIGNING_KEY` (see `MediaSigningKeyFromConfig`). Prefer `AudioStorageFromConfig` with a
 * `MediaBaseUrl` from the composition root, which knows the service's own address.
 */
export const EmbeddedAudioSettingsFromConfig: Effect.Effect<EmbeddedAudioSettings, Config.ConfigError> =
  Effect.gen(function* () {
    const mediaBaseUrl = yield* Config.String("MEDIA_BASE_URL").pipe(Config.withDefault("http://127.0.0.1:3000"))
    const signingKey = yield* MediaSigningKeyFromConfig
    return { mediaBaseUrl: withoutTrailingSlash(mediaBaseUrl), signingKey }
  })

export const EmbeddedAudioStorageFromConfig = Layer.unwrap(
  Effect.map(EmbeddedAudioSettingsFromConfig, EmbeddedAudioStorageLayer)
)
