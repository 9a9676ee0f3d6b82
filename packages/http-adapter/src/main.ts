import { NodeRuntime } from "@effect/platform-node"
import { Cause, Config, Console, Effect, Logger, Option } from "effect"
import { printBanner, ServiceLive, Startup } from "./service.js"

/**
 * `pnpm start`: the service on the configured database (the embedded PGlite with the sandbox
 * data by default). SIGINT and SIGTERM interrupt the main fiber: the server stops accepting,
 * drains requests in flight, then the pool and the embedded database close.
 */
// No tracer is configured (no exporter), so the spans of `Effect.fn` would only cost: they are
// made no-ops. A deployment that adds a tracer turns them back on here.
const main = Effect.gen(function*() {
  yield* printBanner(yield* Startup)
  return yield* Effect.never
}).pipe(Effect.provide(ServiceLive), Effect.withTracerEnabled(false))

/** A start that fails says why in one readable block, and exits non-zero. */
const reportStartFailure = (cause: Cause.Cause<unknown>) => {
  const failure = Cause.findErrorOption(cause)
  if (Option.isSome(failure) && failure.value instanceof Config.ConfigError) {
    return Console.error(`The service cannot start: invalid configuration.\n  ${failure.value.message}`)
  }
  return Effect.logError("the service stopped", cause)
}

/**
 * runMain handles the first SIGINT/SIGTERM and then removes its listeners, so a repeated signal
 * would kill the process with the default action in the middle of the drain: Ctrl-C in a
 * terminal reaches every process of the group, and supervisors re-send. The drain is bounded
 * by the grace period, so a repeated signal is only acknowledged.
 */
let shutdownSignals = 0
const acknowledgeRepeatedSignal = (signal: NodeJS.Signals) => {
  if (shutdownSignals++ === 0) return
  process.stderr.write(`${signal}: the service is already draining; it exits when the requests in flight are answered.\n`)
}
process.on("SIGINT", acknowledgeRepeatedSignal)
process.on("SIGTERM", acknowledgeRepeatedSignal)

NodeRuntime.runMain(
  main.pipe(Effect.tapCause(reportStartFailure), Effect.provide(Logger.layer([Logger.consoleJson]))),
  { disableErrorReporting: true }
)
