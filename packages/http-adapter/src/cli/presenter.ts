import { Console, type Context, Effect } from "effect"
import { type CliError, CliOutput, Command, type HelpDoc, TerminalCapabilities } from "effect/cli"
import { oneLine } from "./failure.js"

/**
 * How effect/cli's own output looks: help on stdout, with each command's usage spelled out
 * (`$ issue --organization text --scopes text [--kind text] ...`) and, for a command with
 * subcommands, every command below it with its usage; a refused invocation is one
 * `error: ...` line on stderr (no help after it, nothing on stdout). Colours only where
 * TerminalCapabilities allows them (a TTY, no NO_COLOR).
 */

/** The value names operators know from the help of earlier versions. */
const valueName = (type: string) => (type === "string" ? "text" : type === "number" ? "float" : type)

const usageOf = (name: string, doc: HelpDoc.HelpDoc): string =>
  [
    name,
    ...doc.flags.map((flag) => {
      const shown = flag.type === "boolean" ? `--${flag.name}` : `--${flag.name} ${valueName(flag.type)}`
      return flag.required ? shown : `[${shown}]`
    }),
    ...(doc.args ?? []).map((arg) => {
      const shown = `<${arg.name}>${arg.variadic ? "..." : ""}`
      return arg.required ? shown : `[${shown}]`
    })
  ].join(" ")

const subcommandNames = (doc: HelpDoc.HelpDoc): ReadonlyArray<string> =>
  (doc.subcommands ?? []).flatMap((group) => group.commands.map((command) => command.name))

interface Listed {
  readonly path: ReadonlyArray<string>
  readonly doc: HelpDoc.HelpDoc
}

/** Each command below, named from the one whose help this is, its description aligned after the usages. */
const renderCommandList = (
  below: ReadonlyArray<Listed>,
  depth: number,
  bold: (text: string) => string
): string => {
  const rows = below.map(({ doc, path }) => ({
    left: `- ${usageOf(path.slice(depth).join(" "), doc)}`,
    right: doc.description
  }))
  const width = Math.max(...rows.map((row) => row.left.length))
  return [
    bold("COMMANDS"),
    ...rows.map((row) => (row.right === "" ? `  ${row.left}` : `  ${row.left.padEnd(width)}  ${row.right}`))
  ].join("\n")
}

const errorLine = (error: CliError.NonShowHelpErrors): string => {
  // Their messages put suggestions on lines of their own: keep the first, say the rest inline.
  if ((error._tag === "UnknownSubcommand" || error._tag === "UnrecognizedOption") && error.suggestions.length > 0) {
    return `${oneLine(error.message.split("\n")[0] ?? "")}; did you mean ${error.suggestions.join(" or ")}?`
  }
  return oneLine(error.message)
}

/**
 * The presenter for `root`. Listing the commands below one needs their help documents,
 * which effect/cli builds only for a `--help` run, so each is asked of `root` with `--help`
 * (parsing only, nothing runs) under a presenter that keeps the document.
 */
export const makePresenter = <Name extends string, Input, ContextInput, E>(
  root: Command.Command<Name, Input, ContextInput, E, Command.Environment>,
  version: string,
  environment: Context.Context<Command.Environment>
): CliOutput.Presenter => {
  const helpDocAt = (path: ReadonlyArray<string>) =>
    Effect.suspend(() => {
      let captured: HelpDoc.HelpDoc | undefined
      const keep: CliOutput.Presenter = {
        present: (event) => Effect.sync(() => (captured = event._tag === "Help" ? event.helpDoc : captured))
      }
      return Command.runWith(root, { version })([...path, "--help"]).pipe(
        Effect.provideService(CliOutput.Presenter, keep),
        Effect.provideContext(environment),
        Effect.map(() => captured)
      )
    })

  const below = (path: ReadonlyArray<string>, doc: HelpDoc.HelpDoc): Effect.Effect<ReadonlyArray<Listed>> =>
    Effect.map(
      Effect.forEach(subcommandNames(doc), (name) =>
        Effect.flatMap(helpDocAt([...path, name]), (child) =>
          child === undefined
            ? Effect.succeed([])
            : Effect.map(below([...path, name], child), (grandchildren) => [
                { path: [...path, name], doc: child },
                ...grandchildren
              ]))
      ),
      (lists) => lists.flat()
    ).pipe(Effect.orDie)

  const helpText = (doc: HelpDoc.HelpDoc, commandPath: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      const { canColor } = yield* TerminalCapabilities.TerminalCapabilities
      const formatter = CliOutput.defaultFormatter({ colors: canColor })
      const retype = (flags: ReadonlyArray<HelpDoc.FlagDoc> | undefined) =>
        flags?.map((flag) => ({ ...flag, type: valueName(flag.type) })) ?? []
      const { subcommands: _listedBelow, ...ownDoc } = doc
      const text = formatter.formatHelpDoc({
        ...ownDoc,
        usage: `$ ${usageOf(commandPath.at(-1) ?? root.name, doc)}`,
        flags: retype(doc.flags),
        globalFlags: retype(doc.globalFlags)
      })
      if (subcommandNames(doc).length === 0) return text
      const listed = yield* below(commandPath.slice(1), doc)
      const bold = (title: string) => (canColor ? `\x1b[1m${title}\x1b[0m` : title)
      return `${text}\n\n${renderCommandList(listed, commandPath.length - 1, bold)}`
    })

  return {
    present: (event) => {
      switch (event._tag) {
        case "Help":
          return Effect.flatMap(helpText(event.helpDoc, event.commandPath), (text) => Console.log(text))
        case "InvalidInvocation":
          return Console.error(`error: ${event.errors.map(errorLine).join("; ")}`)
        case "Version":
          return CliOutput.defaultPresenter.present(event)
      }
    }
  }
}
