import { readFileSync } from "node:fs"
import { Schema } from "effect"

const WebhookVectors = Schema.Struct({
  vectors: Schema.Array(
    Schema.Struct({
      name: Schema.String,
      secret: Schema.String,
      timestamp: Schema.String,
      raw_body: Schema.String,
      signature: Schema.String
    })
  )
})

/** /work/shared/spec/webhook-vectors.json, read relative to this file. */
export const webhookVectors = Schema.decodeUnknownSync(WebhookVectors)(
  JSON.parse(readFileSync(new URL("../../../../../shared/spec/webhook-vectors.json", import.meta.url), "utf8"))
).vectors
