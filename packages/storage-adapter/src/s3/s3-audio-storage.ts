import { AudioStorage, AudioStorageUnavailable, type RecordingReference } from "@clinical-api/domain"
import type { S3Client } from "@aws-sdk/client-s3"
import { Clock, Duration, Effect, Layer, Option, Redacted } from "effect"

/**
 * Audio storage in an S3-compatible object store: objects are put and checked with the S3 API
 * and served by the store itself at presigned GET URLs (SigV4 query signing), which stop
 * working at `X-Amz-Date + X-Amz-Expires`, the `expiresAt` returned.
 *
 * Timeouts and retries are short on purpose: an unreachable store must answer the audio route
 * with 503 `audio_storage_unavailable` within a few seconds, not hang on the SDK's defaults.
 *
 * Nothing here logs: the SDK's logger is left at its no-op default, and errors keep the SDK's
 * error as `cause` only (a HEAD or PUT error carries no presigned URL).
 */
export interface S3AudioSettings {
  readonly bucket: string
  readonly region: string
  /** For S3-compatible stores (MinIO, s3rver, ...): `http://host:port`; none for AWS itself. */
  readonly endpoint: Option.Option<string>
  /** Static credentials; none uses the SDK's default chain (environment, profile, instance role). */
  readonly credentials: Option.Option<{
    readonly accessKeyId: string
    readonly secretAccessKey: Redacted.Redacted<string>
  }>
  /** Path-style addressing (`endpoint/bucket/key`), which most S3-compatible stores need. */
  readonly forcePathStyle: boolean
  /** Per-attempt socket connect and response timeouts. */
  readonly connectionTimeoutMillis?: number
  readonly requestTimeoutMillis?: number
  /** Attempts per operation, first one included. */
  readonly maxAttempts?: number
  /** A bound on one whole operation, retries included. */
  readonly operationTimeoutMillis?: number
}

export const S3_DEFAULT_CONNECTION_TIMEOUT_MILLIS = 1_000
export const S3_DEFAULT_REQUEST_TIMEOUT_MILLIS = 2_000
export const S3_DEFAULT_MAX_ATTEMPTS = 2
export const S3_DEFAULT_OPERATION_TIMEOUT_MILLIS = 5_000

/**
 * What the storage uses of the AWS SDK, imported when an S3 storage is made: the SDK is 5 to
 * 6 MB of heap, which a service with embedded audio never needs.
 */
const loadSdk = Effect.promise(async () => {
  const [{ GetObjectCommand, HeadObjectCommand, PutObjectCommand, S3Client, S3ServiceException }, { getSignedUrl }] =
    await Promise.all([import("@aws-sdk/client-s3"), import("@aws-sdk/s3-request-presigner")])
  return { GetObjectCommand, HeadObjectCommand, PutObjectCommand, S3Client, S3ServiceException, getSignedUrl }
})
type S3Sdk = Effect.Success<typeof loadSdk>

const makeS3Client = ({ S3Client }: S3Sdk, settings: S3AudioSettings): S3Client =>
  new S3Client({
    region: settings.region,
    ...Option.match(settings.endpoint, { onNone: () => ({}), onSome: (endpoint) => ({ endpoint }) }),
    forcePathStyle: settings.forcePathStyle,
    ...Option.match(settings.credentials, {
      onNone: () => ({}),
      onSome: (credentials) => ({
        credentials: {
          accessKeyId: credentials.accessKeyId,
          secretAccessKey: Redacted.value(credentials.secretAccessKey)
        }
      })
    }),
    maxAttempts: settings.maxAttempts ?? S3_DEFAULT_MAX_ATTEMPTS,
    requestHandler: {
      connectionTimeout: settings.connectionTimeoutMillis ?? S3_DEFAULT_CONNECTION_TIMEOUT_MILLIS,
      requestTimeout: settings.requestTimeoutMillis ?? S3_DEFAULT_REQUEST_TIMEOUT_MILLIS,
      // Without it the handler only logs a warning when the timeout passes, and keeps waiting.
      throwOnRequestTimeout: true
    },
    // Checksums only where the API requires them: S3-compatible stores do not all accept the
    // flexible checksum headers (or aws-chunked trailers) that newer SDKs send by default.
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED"
  })

const makeS3AudioStorage = (sdk: S3Sdk, client: S3Client, settings: S3AudioSettings) => {
  const { GetObjectCommand, HeadObjectCommand, PutObjectCommand, S3ServiceException, getSignedUrl } = sdk
  /** HEAD on a missing key (or, indistinguishably, a missing bucket) answers 404 with no body. */
  const isNotFound = (error: unknown): boolean =>
    error instanceof S3ServiceException &&
    (error.name === "NotFound" || error.name === "NoSuchKey" || error.$metadata.httpStatusCode === 404)

  const operationTimeout = Duration.millis(settings.operationTimeoutMillis ?? S3_DEFAULT_OPERATION_TIMEOUT_MILLIS)

  /** Runs one SDK call, interruptible (the abort signal reaches the socket) and bounded in time. */
  const call = <A>(operation: string, send: (abortSignal: AbortSignal) => Promise<A>) =>
    Effect.tryPromise({ try: send, catch: (cause) => cause }).pipe(
      Effect.timeoutOrElse({
        duration: operationTimeout,
        orElse: () => Effect.fail(new Error(`${operation} timed out`))
      })
    )

  const unavailable = (operation: string) => (cause: unknown) => new AudioStorageUnavailable({ operation, cause })

  const put = Effect.fn("AudioStorage.put")(function* (reference: RecordingReference, bytes: Uint8Array) {
    yield* call("audio.put", (abortSignal) =>
      client.send(
        new PutObjectCommand({
          Bucket: settings.bucket,
          Key: reference.storageKey,
          Body: bytes,
          ContentType: reference.contentType,
          ContentLength: bytes.byteLength
        }),
        { abortSignal }
      )
    ).pipe(Effect.mapError(unavailable("audio.put")))
  })

  // On the request path: untraced, as a span costs about 12 µs per call even with no tracer
  // configured, some 4% of the CPU of a detail read.
  const exists = Effect.fnUntraced(function* (reference: RecordingReference) {
    return yield* call("audio.exists", (abortSignal) =>
      client.send(new HeadObjectCommand({ Bucket: settings.bucket, Key: reference.storageKey }), { abortSignal })
    ).pipe(
      Effect.as(true),
      Effect.catchIf(isNotFound, () => Effect.succeed(false)),
      Effect.mapError(unavailable("audio.exists"))
    )
  })

  const signUrl = Effect.fnUntraced(function* (reference: RecordingReference, lifetimeSeconds: number) {
    // X-Amz-Date has whole seconds: sign at the start of the current second, so that
    // X-Amz-Date + X-Amz-Expires is exactly the `expiresAt` returned.
    const signingMillis = Math.floor((yield* Clock.currentTimeMillis) / 1000) * 1000
    const expiresIn = Math.floor(lifetimeSeconds)
    const url = yield* call("audio.sign", () =>
      getSignedUrl(client, new GetObjectCommand({ Bucket: settings.bucket, Key: reference.storageKey }), {
        expiresIn,
        signingDate: new Date(signingMillis)
      })
    ).pipe(Effect.mapError(unavailable("audio.sign")))
    return { url, expiresAt: new Date(signingMillis + expiresIn * 1000) }
  })

  return AudioStorage.of({ put, exists, signUrl })
}

/** The S3 storage; the client (its sockets) is destroyed when the layer is released. */
export const S3AudioStorageLayer = (settings: S3AudioSettings): Layer.Layer<AudioStorage> =>
  Layer.effect(
    AudioStorage,
    Effect.flatMap(loadSdk, (sdk) =>
      Effect.map(
        Effect.acquireRelease(Effect.sync(() => makeS3Client(sdk, settings)), (client) => Effect.sync(() => client.destroy())),
        (client) => makeS3AudioStorage(sdk, client, settings)
      ))
  )
