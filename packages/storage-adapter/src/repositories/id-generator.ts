import { randomBytes } from "node:crypto"
import { IdGenerator, type IdKind } from "@clinical-api/domain"
import { Effect, Layer } from "effect"

const prefixes: { readonly [K in IdKind]: string } = {
  disclosure: "dsc_",
  request: "req_",
  api_key: "key_",
  webhook_event: "evt_",
  webhook_delivery: "dlv_",
  webhook_subscription: "whs_"
}

/** 128 random bits in lowercase hex after the kind's prefix; opaque to partners. */
export const newId = (kind: IdKind): string => prefixes[kind] + randomBytes(16).toString("hex")

export const IdGeneratorLive = Layer.succeed(IdGenerator, IdGenerator.of({ next: (kind) => Effect.sync(() => newId(kind)) }))
