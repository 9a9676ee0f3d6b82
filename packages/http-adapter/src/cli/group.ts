import { Effect } from "effect"
import { Command } from "effect/cli"
import { refuse } from "./failure.js"

/**
 * A command that only groups subcommands (give them with `Command.withSubcommands`): run
 * alone, it exits non-zero pointing at its `--help`, which lists them with their descriptions.
 */
export const groupCommand = <Name extends string>(name: Name, description: string) =>
  Command.make(name, {}, () =>
    Effect.fail(refuse(`${name} needs a subcommand: see \`${name} --help\` for the list`))
  ).pipe(Command.withDescription(description))
