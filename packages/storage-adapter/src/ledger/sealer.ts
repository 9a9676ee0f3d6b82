import { type LedgerSigner } from "@clinical-api/domain"
import { type Duration, Effect, Layer } from "effect"
import { type PgClient } from "../sql/pg-client.js"
import { LedgerKeyFromConfig } from "./ledger-key.js"
import { MAX_EVENTS_PER_SEAL, sealPending } from "./ledger-store.js"
import { ensureDisclosurePartitions } from "./partitions.js"

/** Seals until nothing is left to seal (a backlog takes several seals of `MAX_EVENTS_PER_SEAL`). */
export const sealAll = (signer: LedgerSigner): Effect.Effect<number, never, PgClient> =>
  Effect.gen(function* () {
    let seals = 0
    for (;;) {
      const seal = yield* sealPending(signer).pipe(
        Effect.catchCause((cause) => Effect.as(Effect.logWarning("disclosure sealer: sealing failed, retrying", cause), null))
      )
      if (seal === null) return seals
      seals++
      if (seal.count < MAX_EVENTS_PER_SEAL) return seals
    }
  })

/**
 * The service's background sealer: every `interval` it seals what has committed since (and
 * every hour it makes the ledger's monthly partitions ahead). Every
 * replica runs one; the advisory lock lets one seal at a time and the others skip that tick.
 * Requests never wait for it: their events are committed before it reads them.
 */
export const DisclosureSealerLive = (
  signer: LedgerSigner,
  interval: Duration.Input = "1 second"
): Layer.Layer<never, never, PgClient> =>
  Layer.effectDiscard(
    Effect.andThen(
      Effect.forkScoped(Effect.forever(Effect.andThen(keepPartitionsAhead, Effect.sleep("1 hour")))),
      Effect.forkScoped(Effect.forever(Effect.andThen(sealAll(signer), Effect.sleep(interval))))
    )
  )

/** The ledger's monthly partitions, made ahead at start and every hour (an event of a month without one waits in the default partition). */
const keepPartitionsAhead: Effect.Effect<void, never, PgClient> = ensureDisclosurePartitions().pipe(
  Effect.asVoid,
  Effect.catchCause((cause) => Effect.logWarning("disclosure ledger: making the monthly partitions failed, retrying in an hour", cause))
)

/** The sealer with `LEDGER_KEY` from configuration (required in production). */
export const DisclosureSealerFromConfig = Layer.unwrap(
  Effect.map(LedgerKeyFromConfig, (setting) => DisclosureSealerLive(setting.signer))
)
