import { NodeRuntime } from "@effect/platform-node"
import { Cause, Config, Effect, Logger, Option } from "effect"
import { HttpServerError } from "effect/http"
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

const oneLine = (text: string) => text.trim().replace(/\s*\n\s*/g, "; ")

/** The one line a start that fails prints, when it is one an operator can act on. */
const startFailureLine = (failure: unknown): string | undefined => {
  if (failure instanceof Config.ConfigError) return `invalid configuration: ${oneLine(failure.cause.message)}`
  if (failure instanceof HttpServerError.ServeError) {
    const cause = failure.cause as NodeJS.ErrnoException & { readonly address?: string; readonly port?: number }
    const where = `${cause.address ?? "the configured host"} port ${cause.port ?? "(PORT)"}`
    if (cause.code === "EADDRINUSE") return `${where} is already in use; stop the process holding it or set PORT to a free port`
    if (cause.code === "EACCES") return `${where} is not allowed to this user; set PORT above 1023`
    if (cause.code === "EADDRNOTAVAIL") return `${where}: the address is not one of this machine's; check HOST`
  }
  return undefined
}

/**
 * A start that fails for a reason the operator can act on (configuration, the port) says so in
 * one line on stderr and exits 1; anything else is logged with its cause.
 */
const reportStartFailure = (cause: Cause.Cause<unknown>) => {
  const line = Option.flatMap(Cause.findErrorOption(cause), (failure) => Option.fromNullishOr(startFailureLine(failure)))
  return Option.isSome(line)
    ? Effect.sync(() => process.stderr.write(`The service cannot start: ${line.value}\n`))
    : Effect.logError("the service stopped", cause)
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
