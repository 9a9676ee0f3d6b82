import { Cause, Config, Effect, Exit, Fiber, Option } from "effect"
import { configErrorMessage } from "../internal/config.js"
import { IdempotencyStoreUnavailable } from "./idempotency-store.js"
import { ExampleReceiverConfig, type FollowUp, runExampleReceiver } from "./example-receiver-app.js"

/**
 * Runs the example receiver as a process until SIGINT/SIGTERM. `makeFollowUp` lets a caller
 * replace the default transcript fetch (the composition root passes the typed client).
 */
export const mainExampleReceiver = (
  makeFollowUp?: (api: Option.Option.Value<ExampleReceiverConfig["api"]>) => FollowUp
): void => {
  const program = Effect.scoped(
    Effect.gen(function* () {
      const config = yield* ExampleReceiverConfig
      const followUp = makeFollowUp === undefined ? undefined : Option.getOrUndefined(Option.map(config.api, makeFollowUp))
      const receiver = yield* runExampleReceiver(followUp === undefined ? { config } : { config, followUp })
      const store = Option.isSome(config.databaseUrl) ? "postgres" : "memory"
      const followUpMode = Option.isSome(config.api) ? "transcript fetch" : "skipped"
      process.stderr.write(
        `example receiver listening on ${receiver.url} (secrets: ${config.secrets.length}, store: ${store}, follow-up: ${followUpMode})\n`
      )
      return yield* Effect.never
    })
  )

  const fiber = Effect.runFork(program)

  const stop = () => {
    Effect.runFork(Fiber.interrupt(fiber))
  }
  process.once("SIGINT", stop)
  process.once("SIGTERM", stop)

  fiber.addObserver((exit) => {
    if (Exit.isSuccess(exit) || Exit.hasInterrupts(exit)) {
      process.exit(0)
    }
    const failure = Option.getOrUndefined(Cause.findErrorOption(exit.cause))
    if (failure instanceof Config.ConfigError) {
      process.stderr.write(`Invalid receiver configuration: ${configErrorMessage(failure)}\n`)
      process.exit(2)
    }
    const why =
      failure === undefined
        ? "unexpected failure"
        : failure instanceof IdempotencyStoreUnavailable
          ? `idempotency store unavailable (${failure.operation})`
          : failure.message
    process.stderr.write(`example receiver stopped: ${why}\n`)
    process.exit(1)
  })
}
