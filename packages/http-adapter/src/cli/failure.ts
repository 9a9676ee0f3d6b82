import { AudioStorageUnavailable, StoreUnavailable } from "@clinical-api/domain"
import { FixtureRejected } from "@clinical-api/storage-adapter"
import { Cause, Config, Data, Option, Result } from "effect"
import { CliError } from "effect/cli"

/**
 * A refusal of the command line: bad arguments, a missing database, an unknown id. It is
 * raised before anything is written (or by a store call that wrote nothing), and printed as
 * one line on stderr with a non-zero exit.
 */
export class CliFailure extends Data.TaggedError("CliFailure")<{ readonly message: string }> {}

export const refuse = (message: string) => new CliFailure({ message })

const hasMessage = (error: unknown): error is { readonly message: string } =>
  typeof error === "object" && error !== null && typeof Reflect.get(error, "message") === "string"

const causeText = (cause: unknown): string =>
  cause instanceof Error ? cause.message : hasMessage(cause) ? cause.message : String(cause)

/** One line, whatever the error: a multi-line driver message would hide the exit status in noise. */
export const oneLine = (text: string) => text.replace(/\s*\n\s*/g, " ").trim()

/** The line printed for a typed failure; `undefined` for effect/cli's own, which its presenter has printed. */
export const describeFailure = (error: unknown): string | undefined => {
  if (CliError.isCliError(error)) return undefined
  if (error instanceof Config.ConfigError) return `configuration: ${oneLine(error.message)}`
  if (error instanceof StoreUnavailable) {
    return `the database failed during ${error.operation}: ${oneLine(causeText(error.cause))}`
  }
  if (error instanceof AudioStorageUnavailable) {
    return `the audio storage failed during ${error.operation}: ${oneLine(causeText(error.cause))}`
  }
  if (error instanceof FixtureRejected) return `fixture refused at ${error.path}: ${error.message}; nothing was loaded`
  return hasMessage(error) && error.message !== "" ? oneLine(error.message) : oneLine(String(error))
}

/** The line for any failed run, or `undefined` when nothing is left to say (help was printed, or ^C). */
export const describeCause = (cause: Cause.Cause<unknown>): string | undefined => {
  const failure = Cause.findErrorOption(cause)
  if (Option.isSome(failure)) return describeFailure(failure.value)
  const defect = Cause.findDefect(cause)
  if (Result.isSuccess(defect)) return `unexpected failure: ${oneLine(causeText(defect.success))}`
  return Cause.hasInterruptsOnly(cause) ? undefined : oneLine(Cause.pretty(cause))
}
