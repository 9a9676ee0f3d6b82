// Run by s3-audio-storage.test.ts in a process of its own (`node --import tsx`): whether the AWS
// SDK is loaded once the storage adapter is imported, and once an S3 audio storage is made.
// Prints one JSON line.
import { createRequire } from "node:module"
import { Effect, Layer, Option } from "effect"

const require = createRequire(import.meta.url)
const sdkLoaded = () => Object.keys(require.cache).some((path) => path.includes("/@aws-sdk/client-s3/"))

const { S3AudioStorageLayer } = await import("../../src/index.js")
const afterImport = sdkLoaded()
await Effect.runPromise(Effect.scoped(Layer.build(S3AudioStorageLayer({
  bucket: "audio",
  region: "us-east-1",
  endpoint: Option.some("http://127.0.0.1:9"),
  credentials: Option.none(),
  forcePathStyle: true
}))))
process.stdout.write(`${JSON.stringify({ afterImport, afterS3Storage: sdkLoaded() })}\n`)
