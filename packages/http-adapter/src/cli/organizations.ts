import { operationIds } from "@clinical-api/domain"
import { OperatorStore } from "@clinical-api/storage-adapter"
import { Effect } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { nonEmptyText, parseOperationId, parseOrganizationId } from "./arguments.js"
import { onDatabase } from "./database.js"
import { groupCommand } from "./group.js"
import { jsonOption, organizationJson, printJsonLine, printList, switchFlag } from "./output.js"

const organizationArgument = Argument.String("ORGANIZATION_ID").pipe(Argument.withDescription("The organization's id."))
const operationArgument = Argument.String("OPERATION").pipe(
  Argument.withDescription(`The route, by operationId: ${operationIds.join(", ")}.`)
)

const printedOrganization = "Prints the organization as one JSON object."

const createCommand = Command.make(
  "create",
  {
    id: Flag.String("id").pipe(Flag.withDescription("The new organization's id (opaque; shown to partners).")),
    name: Flag.String("name").pipe(Flag.withDescription("Its display name.")),
    approved: switchFlag("approved", "Approve (allowlist) it for the public API at once; by default it is not approved.")
  },
  ({ approved, id, name }) =>
    Effect.gen(function* () {
      const organizationId = yield* parseOrganizationId(id, "--id")
      const displayName = yield* nonEmptyText("--name", name)
      const organization = yield* onDatabase(
        OperatorStore.use((store) => store.createOrganization({ organizationId, name: displayName, approved }))
      )
      yield* printJsonLine(organizationJson(organization))
    })
).pipe(
  Command.withDescription(
    `Create an organization, with no route enabled. An id already taken is refused. ${printedOrganization}`
  )
)

const approvalCommand = (name: "approve" | "unapprove", description: string) =>
  Command.make(name, { organization: organizationArgument }, ({ organization }) =>
    Effect.gen(function* () {
      const organizationId = yield* parseOrganizationId(organization)
      const updated = yield* onDatabase(
        OperatorStore.use((store) =>
          name === "approve" ? store.approveOrganization(organizationId) : store.unapproveOrganization(organizationId)
        )
      )
      yield* printJsonLine(organizationJson(updated))
    })
  ).pipe(Command.withDescription(`${description} ${printedOrganization}`))

const routeCommand = (name: "enable-route" | "disable-route", description: string) =>
  Command.make(name, { organization: organizationArgument, operation: operationArgument }, ({ operation, organization }) =>
    Effect.gen(function* () {
      const organizationId = yield* parseOrganizationId(organization)
      const route = yield* parseOperationId(operation)
      const updated = yield* onDatabase(
        OperatorStore.use((store) =>
          name === "enable-route" ? store.enableRoute(organizationId, route) : store.disableRoute(organizationId, route)
        )
      )
      yield* printJsonLine(organizationJson(updated))
    })
  ).pipe(Command.withDescription(`${description} ${printedOrganization}`))

const listCommand = Command.make("list", { json: jsonOption }, ({ json }) =>
  Effect.gen(function* () {
    const organizations = yield* onDatabase(OperatorStore.use((store) => store.listOrganizations()))
    yield* printList(organizations, {
      json,
      toJson: organizationJson,
      header: ["ORGANIZATION", "APPROVED", "NAME", "ENABLED ROUTES"],
      toRow: (organization) => [
        organization.organizationId,
        organization.approved ? "yes" : "no",
        organization.name,
        organization.enabledRoutes.join(",") || "-"
      ],
      empty: "No organizations."
    })
  })
).pipe(Command.withDescription("List the organizations, by id: a table, or JSON Lines with --json."))

const organizationSubcommands = [
    createCommand,
    approvalCommand("approve", "Approve (allowlist) an organization for the public API."),
    approvalCommand(
      "unapprove",
      "Withdraw an organization's approval: its keys get 403 organization_not_allowlisted from then on."
    ),
    routeCommand(
      "enable-route",
      `Enable one route for an organization (idempotent). OPERATION is one of ${operationIds.join(", ")}.`
    ),
    routeCommand(
      "disable-route",
      "Disable one route for an organization (idempotent): its keys get 403 route_not_allowed on it. " +
        `OPERATION is one of ${operationIds.join(", ")}.`
    ),
    listCommand
] as const

export const organizationsCommand = groupCommand(
  "organizations",
  "Create organizations, approve them for the public API, and enable or disable their routes."
).pipe(Command.withSubcommands(organizationSubcommands))
