import { Cause, Console, Effect } from "effect"
import { describeCause } from "./failure.js"
import { runCli } from "./root.js"

/**
 * The whole command line for one `argv` (as `process.argv`: runtime and script first):
 * parse, run, and on failure print one `error: ...` line on stderr (effect/cli's presenter
 * prints its own argument errors, so those are not repeated). It fails exactly when the exit
 * status must be non-zero. main.ts runs it with the Node services; tests run it in-process too.
 */
export const cliProgram = (argv: ReadonlyArray<string>) =>
  runCli(argv).pipe(
    Effect.tapCause((cause) => {
      const line = describeCause(cause)
      return line === undefined || Cause.hasInterruptsOnly(cause) ? Effect.void : Console.error(`error: ${line}`)
    })
  )
