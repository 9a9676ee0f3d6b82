import { OperatorStore } from "@clinical-api/storage-adapter"
import { Console, Effect, Option, Stream } from "effect"
import { Command, Flag } from "effect/cli"
import { parseInstant, parseOrganizationId } from "./arguments.js"
import { onDatabase } from "./database.js"
import { refuse } from "./failure.js"
import { groupCommand } from "./group.js"
import { ledgerCommands, writeSealedExportCommand } from "./ledger.js"

const instantOption = (name: string, description: string) =>
  Flag.String(name).pipe(Flag.optional, Flag.withDescription(description))

const exportCommand = Command.make(
  "export",
  {
    organization: Flag.String("organization").pipe(
      Flag.withDescription("The organization whose disclosures are exported (an unknown one is refused).")
    ),
    from: instantOption(
      "from",
      "Inclusive lower bound on occurred_at: an RFC 3339 date-time with offset. Default: the first event."
    ),
    to: instantOption("to", "Exclusive upper bound on occurred_at: an RFC 3339 date-time with offset. Default: now and later."),
    sealed: Flag.Boolean("sealed").pipe(
      Flag.withDefault(false),
      Flag.withDescription(
        "Write the sealed export instead (docs/ledger.md): the seals with the events they cover, verifiable offline " +
          "with disclosures verify --file; events are in chain order and only sealed ones are included."
      )
    )
  },
  (input) =>
    Effect.gen(function* () {
      const organizationId = yield* parseOrganizationId(input.organization, "--organization")
      const from = Option.isSome(input.from) ? yield* parseInstant("--from", input.from.value) : null
      const to = Option.isSome(input.to) ? yield* parseInstant("--to", input.to.value) : null
      if (from !== null && to !== null && to.getTime() <= from.getTime()) {
        return yield* refuse("--to must be later than --from (the range is [from, to))")
      }
      if (input.sealed) return yield* writeSealedExportCommand(organizationId, from, to)
      yield* onDatabase(
        OperatorStore.use((store) =>
          store.exportDisclosures({ organizationId, from, to }).pipe(
            Stream.runForEachArray((lines) => Console.log(lines.map((line) => JSON.stringify(line)).join("\n")))
          )
        )
      )
    })
).pipe(
  Command.withDescription(
    "Export an organization's disclosure events (the accounting of disclosures) as JSON Lines on stdout, one object " +
      "per event with event_id, occurred_at, organization_id, api_key_id, operation_id, encounter_id, document_id, " +
      "patient_id, request_id (the service's id of the request), caller_request_id (the caller's X-Request-Id, or " +
      "null); occurred_at in [--from, --to), in order of occurred_at then event_id."
  )
)

export const disclosuresCommand = groupCommand("disclosures", "The accounting of disclosures.").pipe(
  Command.withSubcommands([exportCommand, ...ledgerCommands])
)
