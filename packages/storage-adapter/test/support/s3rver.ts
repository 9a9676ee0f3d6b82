import { mkdtempSync, rmSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DeleteObjectCommand, S3Client } from "@aws-sdk/client-s3"
import { Option, Redacted } from "effect"
import type { S3AudioSettings } from "../../src/index.js"

/** The part of s3rver (an in-process fake S3 on Koa, CommonJS, no bundled types) the tests use. */
interface S3rverInstance {
  run(): Promise<{ readonly address: string; readonly port: number }>
  close(): Promise<void>
}
type S3rverConstructor = new (options: {
  readonly address: string
  readonly port: number
  readonly silent: boolean
  readonly directory: string
  readonly configureBuckets: ReadonlyArray<{ readonly name: string }>
}) => S3rverInstance

const S3rver: S3rverConstructor = createRequire(import.meta.url)("s3rver")

/** s3rver accepts any credentials whose access key id is S3RVER; it does not check V4 signatures. */
export const S3RVER_ACCESS_KEY_ID = "S3RVER"
export const S3RVER_SECRET_ACCESS_KEY = "S3RVER"

export interface RunningS3rver {
  readonly endpoint: string
  readonly bucket: string
  /** Settings for the adapter, with short timeouts. */
  readonly settings: S3AudioSettings
  /** The same settings as environment variables, for `AudioStorageFromConfig`. */
  readonly environment: ReadonlyArray<readonly [string, string]>
  readonly deleteObject: (key: string) => Promise<void>
  /** Stops the server (idempotent); its files are removed. */
  readonly stop: () => Promise<void>
}

/** Starts s3rver on an ephemeral loopback port with one empty bucket, files in a fresh temp dir. */
export const startS3rver = async (bucket = "clinical-audio"): Promise<RunningS3rver> => {
  const directory = mkdtempSync(join(tmpdir(), "s3rver-"))
  const server = new S3rver({ address: "127.0.0.1", port: 0, silent: true, directory, configureBuckets: [{ name: bucket }] })
  const { port } = await server.run()
  const endpoint = `http://127.0.0.1:${port}`
  const settings: S3AudioSettings = {
    bucket,
    region: "us-east-1",
    endpoint: Option.some(endpoint),
    credentials: Option.some({
      accessKeyId: S3RVER_ACCESS_KEY_ID,
      secretAccessKey: Redacted.make(S3RVER_SECRET_ACCESS_KEY)
    }),
    forcePathStyle: true,
    connectionTimeoutMillis: 1_000,
    requestTimeoutMillis: 1_000,
    operationTimeoutMillis: 3_000
  }
  const admin = new S3Client({
    region: "us-east-1",
    endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId: S3RVER_ACCESS_KEY_ID, secretAccessKey: S3RVER_SECRET_ACCESS_KEY }
  })
  let stopped = false
  return {
    endpoint,
    bucket,
    settings,
    environment: [
      ["AUDIO_STORAGE", "s3"],
      ["S3_BUCKET", bucket],
      ["S3_REGION", "us-east-1"],
      ["S3_ENDPOINT", endpoint],
      ["S3_ACCESS_KEY_ID", S3RVER_ACCESS_KEY_ID],
      ["S3_SECRET_ACCESS_KEY", S3RVER_SECRET_ACCESS_KEY],
      ["S3_FORCE_PATH_STYLE", "true"]
    ],
    deleteObject: async (key) => {
      await admin.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }))
    },
    stop: async () => {
      if (stopped) return
      stopped = true
      admin.destroy()
      await server.close()
      rmSync(directory, { recursive: true, force: true })
    }
  }
}
