import { Effect } from "effect"
import { CliOutput, Command } from "effect/cli"
import { DATABASE_HELP } from "./database.js"
import { disclosuresCommand } from "./disclosures.js"
import { fixturesCommand } from "./fixtures.js"
import { generateCommand } from "./generate.js"
import { groupCommand } from "./group.js"
import { keysCommand } from "./keys.js"
import { migrateCommand } from "./migrate.js"
import { organizationsCommand } from "./organizations.js"
import { makePresenter } from "./presenter.js"
import { webhooksCommand } from "./webhooks.js"

/**
 * The operator command line (`pnpm cli ...`). A new group is one import and one entry in
 * this list.
 */
const groups = [migrateCommand, fixturesCommand, organizationsCommand, keysCommand, disclosuresCommand, webhooksCommand, generateCommand] as const

export const rootCommand = groupCommand(
  "clinical-api",
  "Operator tooling for the Clinical Encounter Public API. " +
    DATABASE_HELP +
    " Every command but migrate needs a migrated schema. API keys are digested with API_KEY_DIGEST_KEY exactly as " +
    "the service does (in the sandbox without one, with the fixed sandbox digest key; production requires one). " +
    "Bad arguments are refused with one line on stderr and exit status 1, before anything is written."
).pipe(Command.withSubcommands(groups))

export const CLI_VERSION = "0.1.0"

/** Parses `argv` (as `process.argv`: runtime and script first) and runs the command. */
export const runCli = (argv: ReadonlyArray<string>) =>
  Effect.flatMap(Effect.context<Command.Environment>(), (environment) =>
    Command.runWith(rootCommand, { version: CLI_VERSION })(argv.slice(2)).pipe(
      Effect.provideService(CliOutput.Presenter, makePresenter(rootCommand, CLI_VERSION, environment))
    ))
