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

/** The webhook signature's test vectors (docs/webhooks.md), `../vectors/webhook-vectors.json`. */
export const webhookVectors = Schema.decodeUnknownSync(WebhookVectors)(
  JSON.parse(readFileSync(new URL("../vectors/webhook-vectors.json", import.meta.url), "utf8"))
).vectors
