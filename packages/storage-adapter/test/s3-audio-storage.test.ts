import { execFileSync } from "node:child_process"
import { createServer, type Server, type Socket } from "node:net"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { AudioStorage, AudioStorageUnavailable, type RecordingReference } from "@clinical-api/domain"
import { HeadObjectCommand, S3Client } from "@aws-sdk/client-s3"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Cause, ConfigProvider, Effect, Exit, Layer, Option, Redacted } from "effect"
import { TestClock } from "effect/testing"
import {
  audioStorageKindConfig,
  AudioStorageFromConfig,
  EmbeddedAudioObjects,
  IdGeneratorLive,
  loadFixture,
  makePgClient,
  MediaBaseUrlLayer,
  migrate,
  PgClient,
  s3AudioSettingsConfig,
  S3AudioStorageLayer
} from "../src/index.js"
import { type RunningS3rver, startS3rver } from "./support/s3rver.js"
import { embeddedDatabases, serverDatabases } from "../src/testing/test-database.js"

/** A real PostgreSQL server (own random database) when DATABASE_URL is set, else PGlite. */
const databaseUrl = process.env["DATABASE_URL"]?.trim()
const databases = databaseUrl === undefined || databaseUrl === "" ? embeddedDatabases : serverDatabases(databaseUrl)
const freshPgClient = Layer.effect(
  PgClient,
  Effect.flatMap(Effect.orDie(databases.fresh), (db) => makePgClient({ url: db.url, ...db.clientOptions }))
)

const reference = (storageKey: string): RecordingReference => ({ storageKey, contentType: "audio/wav" })

/** Configuration read as the service reads its environment. */
const environmentOf = (entries: ReadonlyArray<readonly [string, string]>) =>
  ConfigProvider.fromEnv({ env: Object.fromEntries(entries) })

const exampleFixture: unknown = JSON.parse(
  readFileSync(new URL("../fixtures/example.fixture.json", import.meta.url), "utf8")
)

/** The signing instant and lifetime a presigned URL carries, and its real expiry. */
const presignedExpiry = (url: string) => {
  const query = new URL(url).searchParams
  const date = query.get("X-Amz-Date") ?? ""
  const match = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(date)
  if (match === null) throw new Error(`no X-Amz-Date in the URL`)
  const [, year, month, day, hour, minute, second] = match.map(Number)
  const signedAt = Date.UTC(year ?? 0, (month ?? 1) - 1, day ?? 0, hour ?? 0, minute ?? 0, second ?? 0)
  const expiresIn = Number(query.get("X-Amz-Expires"))
  return { signedAt, expiresIn, expiresAt: signedAt + expiresIn * 1000 }
}

const withStorage = <A, E>(s3: RunningS3rver, effect: Effect.Effect<A, E, AudioStorage>) =>
  Effect.provide(effect, S3AudioStorageLayer(s3.settings))

/** A TCP server that accepts connections and never answers: a store that hangs. */
const startBlackHole = async (): Promise<{ readonly port: number; readonly close: () => Promise<void> }> => {
  const sockets = new Set<Socket>()
  const server: Server = createServer((socket) => {
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  if (address === null || typeof address === "string") throw new Error("expected a TCP address")
  return {
    port: address.port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      })
  }
}

describe("S3 audio storage against s3rver on loopback", () => {
  let s3: RunningS3rver
  beforeAll(async () => {
    s3 = await startS3rver()
  })
  afterAll(async () => {
    await s3.stop()
  })

  it.live("put then exists: true; a key never put: false (HEAD 404 is not an error)", () =>
    withStorage(
      s3,
      Effect.gen(function* () {
        const storage = yield* AudioStorage
        yield* storage.put(reference("rec_put_exists"), new Uint8Array([1, 2, 3]))
        expect(yield* storage.exists(reference("rec_put_exists"))).toBe(true)
        expect(yield* storage.exists(reference("rec_never_put"))).toBe(false)
      })
    )
  )

  it.live("signUrl: the presigned GET downloads the exact bytes with the stored Content-Type", () =>
    withStorage(
      s3,
      Effect.gen(function* () {
        const storage = yield* AudioStorage
        const bytes = new Uint8Array(Array.from({ length: 4096 }, (_, index) => (index * 31) % 256))
        yield* storage.put({ storageKey: "rec_download", contentType: "audio/mpeg" }, bytes)
        const signed = yield* storage.signUrl({ storageKey: "rec_download", contentType: "audio/mpeg" }, 300)
        const response = yield* Effect.promise(() => fetch(signed.url))
        expect(response.status).toBe(200)
        expect(response.headers.get("content-type")).toBe("audio/mpeg")
        expect(new Uint8Array(yield* Effect.promise(() => response.arrayBuffer()))).toEqual(bytes)
      })
    )
  )

  it.effect("signUrl: expiresAt is exactly X-Amz-Date + X-Amz-Expires, X-Amz-Expires is the lifetime", () =>
    withStorage(
      s3,
      Effect.gen(function* () {
        const storage = yield* AudioStorage
        yield* TestClock.setTime(Date.UTC(2026, 4, 1, 12, 0, 0, 987))
        for (const lifetime of [60, 300, 3600]) {
          const signed = yield* storage.signUrl(reference("rec_any"), lifetime)
          const expiry = presignedExpiry(signed.url)
          expect(expiry.expiresIn).toBe(lifetime)
          expect(expiry.signedAt).toBe(Date.UTC(2026, 4, 1, 12, 0, 0))
          expect(signed.expiresAt.getTime()).toBe(expiry.expiresAt)
        }
      })
    )
  )

  it.effect("an expired presigned URL is refused by the store (signed 65 s ago for 60 s), no byte served", () =>
    withStorage(
      s3,
      Effect.gen(function* () {
        const storage = yield* AudioStorage
        const secret = new Uint8Array([9, 9, 9, 9, 42])
        yield* TestClock.setTime(Date.now())
        yield* storage.put(reference("rec_expired"), secret)
        yield* TestClock.setTime(Date.now() - 65_000)
        const signed = yield* storage.signUrl(reference("rec_expired"), 60)
        expect(signed.expiresAt.getTime()).toBeLessThan(Date.now())
        const response = yield* Effect.promise(() => fetch(signed.url))
        expect(response.status).toBe(403)
        expect(yield* Effect.promise(() => response.text())).toContain("Request has expired")
      })
    )
  )

  it.live(
    "a presigned URL stops working once its real lifetime has passed (2 s, waited)",
    () =>
      withStorage(
        s3,
        Effect.gen(function* () {
          const storage = yield* AudioStorage
          yield* storage.put(reference("rec_short"), new Uint8Array([7, 7]))
          // 2 s, not 1: SigV4 writes its signing time to the whole second, so a URL signed for
          // 1 s late in a second had well under a second left when the first fetch reached s3rver.
          const signed = yield* storage.signUrl(reference("rec_short"), 2)
          const before = yield* Effect.promise(() => fetch(signed.url))
          expect(before.status).toBe(200)
          yield* Effect.sleep(Math.max(0, signed.expiresAt.getTime() - Date.now()) + 1_200)
          const after = yield* Effect.promise(() => fetch(signed.url))
          expect(after.status).toBe(403)
        })
      ),
    10_000
  )

  it.live("a deleted object: exists is false", () =>
    withStorage(
      s3,
      Effect.gen(function* () {
        const storage = yield* AudioStorage
        yield* storage.put(reference("rec_deleted"), new Uint8Array([1]))
        yield* Effect.promise(() => s3.deleteObject("rec_deleted"))
        expect(yield* storage.exists(reference("rec_deleted"))).toBe(false)
      })
    )
  )
})

describe("S3 audio storage when the store is unreachable: AudioStorageUnavailable, quickly", () => {
  it.live("a stopped server (connection refused): exists and put fail with AudioStorageUnavailable", () =>
    Effect.gen(function* () {
      const s3 = yield* Effect.promise(() => startS3rver())
      yield* Effect.promise(() => s3.stop())
      const startedAt = Date.now()
      const exists = yield* Effect.exit(withStorage(s3, Effect.flatMap(AudioStorage, (storage) => storage.exists(reference("rec_x")))))
      const put = yield* Effect.exit(withStorage(s3, Effect.flatMap(AudioStorage, (storage) => storage.put(reference("rec_x"), new Uint8Array([1])))))
      expect(Date.now() - startedAt).toBeLessThan(8_000)
      const exits: ReadonlyArray<Exit.Exit<unknown, AudioStorageUnavailable>> = [exists, put]
      for (const exit of exits) {
        expect(Exit.isFailure(exit)).toBe(true)
        if (Exit.isFailure(exit)) {
          const failure = Option.getOrUndefined(Cause.findErrorOption(exit.cause))
          expect(failure).toBeInstanceOf(AudioStorageUnavailable)
        }
      }
    })
  )

  it.live(
    "a store that accepts connections and never answers: AudioStorageUnavailable within the operation timeout",
    () =>
      Effect.gen(function* () {
        const hole = yield* Effect.promise(() => startBlackHole())
        const startedAt = Date.now()
        const outcome = yield* Effect.result(
          Effect.provide(
            Effect.flatMap(AudioStorage, (storage) => storage.exists(reference("rec_x"))),
            S3AudioStorageLayer({
              bucket: "b",
              region: "us-east-1",
              endpoint: Option.some(`http://127.0.0.1:${hole.port}`),
              credentials: Option.some({ accessKeyId: "a", secretAccessKey: Redacted.make("s") }),
              forcePathStyle: true,
              requestTimeoutMillis: 500,
              operationTimeoutMillis: 2_000
            })
          )
        )
        const elapsed = Date.now() - startedAt
        yield* Effect.promise(() => hole.close())
        expect(outcome._tag).toBe("Failure")
        if (outcome._tag === "Failure") expect(outcome.failure).toBeInstanceOf(AudioStorageUnavailable)
        expect(elapsed).toBeLessThan(3_000)
      }),
    10_000
  )

  it.live("default timeouts: an unreachable store answers within a few seconds, not the SDK's defaults", () =>
    Effect.gen(function* () {
      const hole = yield* Effect.promise(() => startBlackHole())
      const startedAt = Date.now()
      const outcome = yield* Effect.result(
        Effect.provide(
          Effect.flatMap(AudioStorage, (storage) => storage.exists(reference("rec_x"))),
          S3AudioStorageLayer({
            bucket: "b",
            region: "us-east-1",
            endpoint: Option.some(`http://127.0.0.1:${hole.port}`),
            credentials: Option.some({ accessKeyId: "a", secretAccessKey: Redacted.make("s") }),
            forcePathStyle: true
          })
        )
      )
      const elapsed = Date.now() - startedAt
      yield* Effect.promise(() => hole.close())
      expect(outcome._tag).toBe("Failure")
      if (outcome._tag === "Failure") expect(outcome.failure).toBeInstanceOf(AudioStorageUnavailable)
      // Two attempts of 2 s each, bounded at 5 s for the whole operation.
      expect(elapsed).toBeLessThan(5_500)
    }),
    15_000
  )
})

describe("the AWS SDK, loaded only for S3 storage", () => {
  it("importing the storage adapter does not load it (some 5 MB of heap a service with embedded audio never needs); making an S3 storage does", () => {
    const script = fileURLToPath(new URL("./support/aws-sdk-loaded.ts", import.meta.url))
    const repositoryRoot = fileURLToPath(new URL("../../..", import.meta.url))
    const loaded = JSON.parse(execFileSync(process.execPath, ["--import", "tsx", script], {
      cwd: repositoryRoot,
      encoding: "utf8",
      timeout: 60_000
    })) as { afterImport: boolean; afterS3Storage: boolean }
    expect(loaded).toEqual({ afterImport: false, afterS3Storage: true })
  }, 90_000)
})

describe("S3 audio storage configuration (AUDIO_STORAGE, S3_*)", () => {
  const read = (entries: ReadonlyArray<readonly [string, string]>) => s3AudioSettingsConfig.parse(environmentOf(entries))

  it.effect("reads bucket, region, endpoint, path style and credentials; the secret stays redacted", () =>
    Effect.gen(function* () {
      const settings = yield* read([
        ["S3_BUCKET", "audio"],
        ["S3_REGION", "eu-west-3"],
        ["S3_ENDPOINT", "http://127.0.0.1:9000/"],
        ["S3_ACCESS_KEY_ID", "AKIAEXAMPLE"],
        ["S3_SECRET_ACCESS_KEY", "very-secret-value"],
        ["S3_FORCE_PATH_STYLE", "true"]
      ])
      expect(settings.bucket).toBe("audio")
      expect(settings.region).toBe("eu-west-3")
      expect(settings.endpoint).toEqual(Option.some("http://127.0.0.1:9000"))
      expect(settings.forcePathStyle).toBe(true)
      const credentials = Option.getOrThrow(settings.credentials)
      expect(credentials.accessKeyId).toBe("AKIAEXAMPLE")
      expect(Redacted.value(credentials.secretAccessKey)).toBe("very-secret-value")
      expect(String(credentials.secretAccessKey)).not.toContain("very-secret-value")
      expect(JSON.stringify(settings)).not.toContain("very-secret-value")
    })
  )

  it.effect("defaults: region us-east-1, no endpoint, virtual-host style, the SDK's credential chain", () =>
    Effect.gen(function* () {
      const settings = yield* read([["S3_BUCKET", "audio"]])
      expect(settings.region).toBe("us-east-1")
      expect(settings.endpoint).toEqual(Option.none())
      expect(settings.forcePathStyle).toBe(false)
      expect(settings.credentials).toEqual(Option.none())
    })
  )

  it.effect("refuses: no bucket; an access key id without its secret; a bad endpoint or path-style value", () =>
    Effect.gen(function* () {
      for (const entries of [
        [],
        [["S3_BUCKET", "audio"], ["S3_ACCESS_KEY_ID", "AKIA"]],
        [["S3_BUCKET", "audio"], ["S3_SECRET_ACCESS_KEY", "secret"]],
        [["S3_BUCKET", "audio"], ["S3_ENDPOINT", "not a url"]],
        [["S3_BUCKET", "audio"], ["S3_FORCE_PATH_STYLE", "maybe"]]
      ] satisfies ReadonlyArray<ReadonlyArray<readonly [string, string]>>) {
        const exit = yield* Effect.exit(read(entries))
        expect(Exit.isFailure(exit)).toBe(true)
      }
    })
  )

  it.effect("AUDIO_STORAGE: embedded by default, s3, anything else refused", () =>
    Effect.gen(function* () {
      const kind = (entries: ReadonlyArray<readonly [string, string]>) => audioStorageKindConfig.parse(environmentOf(entries))
      expect(yield* kind([])).toBe("embedded")
      expect(yield* kind([["AUDIO_STORAGE", "embedded"]])).toBe("embedded")
      expect(yield* kind([["AUDIO_STORAGE", "s3"]])).toBe("s3")
      expect(Exit.isFailure(yield* Effect.exit(kind([["AUDIO_STORAGE", "disk"]])))).toBe(true)
    })
  )
})

describe(`fixture loader on S3 storage (AUDIO_STORAGE=s3, ${databases.label})`, () => {
  let s3: RunningS3rver
  beforeAll(async () => {
    s3 = await startS3rver()
  })
  afterAll(async () => {
    await s3.stop()
  })

  const environment = (s3Environment: ReadonlyArray<readonly [string, string]>) =>
    AudioStorageFromConfig.pipe(
      Layer.provide(ConfigProvider.layer(environmentOf(s3Environment)))
    ).pipe(
      Layer.provideMerge(MediaBaseUrlLayer("http://127.0.0.1:1")),
      Layer.provideMerge(IdGeneratorLive),
      Layer.provideMerge(Layer.effectDiscard(migrate())),
      Layer.provideMerge(freshPgClient)
    )

  const countRows = (table: string) =>
    Effect.flatMap(PgClient, (client) =>
      client.run("test.count", (sql) => sql<Array<{ count: number }>>`SELECT count(*)::int AS count FROM ${sql(table)}`)
    ).pipe(Effect.map((rows) => rows[0]?.count ?? -1))

  it.live(
    "uploads each recording's bytes to the bucket under its storage key; a `missing` recording has none; nothing in recording_objects",
    () =>
      Effect.gen(function* () {
        const report = yield* loadFixture(exampleFixture, { digestKey: Redacted.make("digest-key") })
        expect(report.recordingObjects).toBe(1)
        const client = yield* PgClient
        const recordings = yield* client.run(
          "test.recordings",
          (sql) => sql<Array<{ document_id: string; storage_key: string }>>`SELECT document_id, storage_key FROM recordings ORDER BY document_id`
        )
        expect(recordings.map((row) => row.document_id)).toEqual(["doc_a1_tr", "doc_a2_call"])
        const admin = new S3Client({
          region: "us-east-1",
          endpoint: s3.endpoint,
          forcePathStyle: true,
          credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" }
        })
        const head = (key: string) =>
          Effect.promise(() =>
            admin.send(new HeadObjectCommand({ Bucket: s3.bucket, Key: key })).then(
              (answer) => ({ found: true as const, length: answer.ContentLength, type: answer.ContentType }),
              () => ({ found: false as const })
            )
          )
        const stored = yield* head(recordings[0]?.storage_key ?? "")
        expect(stored).toMatchObject({ found: true, type: "audio/wav" })
        expect((yield* head(recordings[1]?.storage_key ?? "")).found).toBe(false)
        admin.destroy()
        expect(yield* countRows("recording_objects")).toBe(0)
        const storage = yield* AudioStorage
        expect(yield* storage.exists({ storageKey: recordings[0]?.storage_key ?? "", contentType: "audio/wav" })).toBe(true)
        // With S3 the service serves no media itself.
        const objects = yield* EmbeddedAudioObjects
        const refused = yield* Effect.flip(objects.readSigned("anything"))
        expect(refused._tag).toBe("MediaRefused")
      }).pipe(Effect.provide(environment(s3.environment))),
    30_000
  )

  it.live(
    "an upload that fails (store stopped) fails the load with AudioStorageUnavailable and commits no row",
    () =>
      Effect.gen(function* () {
        const stopped = yield* Effect.promise(() => startS3rver())
        yield* Effect.promise(() => stopped.stop())
        const failure = yield* Effect.flip(
          loadFixture(exampleFixture, { digestKey: Redacted.make("digest-key") }).pipe(
            Effect.provide(
              AudioStorageFromConfig.pipe(
                Layer.provide(MediaBaseUrlLayer("http://127.0.0.1:1")),
                Layer.provide(ConfigProvider.layer(environmentOf(stopped.environment)))
              )
            )
          )
        )
        expect(failure).toBeInstanceOf(AudioStorageUnavailable)
        for (const table of ["organizations", "api_keys", "encounters", "documents", "recordings"]) {
          expect(yield* countRows(table)).toBe(0)
        }
      }).pipe(
        Effect.provide(
          IdGeneratorLive.pipe(
            Layer.provideMerge(Layer.effectDiscard(migrate())),
            Layer.provideMerge(freshPgClient)
          )
        )
      ),
    30_000
  )
})
