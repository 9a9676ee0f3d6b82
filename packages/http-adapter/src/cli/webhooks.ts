import {
  DocumentId,
  EncounterId,
  TranscriptReadyPublisher,
  WebhookDeliveryId,
  WebhookDeliveryState,
  WEBHOOK_READINESS_ITEMS,
  WebhookReadinessItem,
  WebhookSubscriptionId
} from "@clinical-api/domain"
import {
  type WebhookAttemptRecord,
  type WebhookDeliveryRecord,
  WebhookOperatorStore,
  WebhookOutboxPostgres,
  WebhooksPostgresLive,
  type WebhookSubscriptionRecord
} from "@clinical-api/storage-adapter"
import {
  type AttemptReport,
  attemptDeliveryNow,
  checkEndpointWithDns,
  runDeliveryPass,
  runDeliveryWorker,
  WebhookRuntimeDisabled,
  webhookWorkerConfig,
  type WebhookWorkerSettings
} from "@clinical-api/webhook-adapter"
import { Console, Effect, Layer, Option, Schema } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { nonEmptyText, parseOrganizationId } from "./arguments.js"
import { type DatabaseOptions, onDatabase } from "./database.js"
import { type CliFailure, refuse } from "./failure.js"
import { groupCommand } from "./group.js"
import { jsonOption, printJsonLine, printList, switchFlag } from "./output.js"

/**
 * `webhooks ...`: subscriptions, readiness, activation and revocation, secrets, deliveries,
 * the endpoint test, publishing, and the delivery worker (docs/webhooks.md; the REST
 * API has no such operations). Arguments are checked before the database is opened.
 */

/** The outbox, the delivery queue, the operator store and the publisher, on the CLI's database. */
const WebhookServices = Layer.mergeAll(
  WebhooksPostgresLive,
  TranscriptReadyPublisher.Live.pipe(Layer.provide(WebhookOutboxPostgres))
)

const onWebhooks = <A, E, R>(effect: Effect.Effect<A, E, R>, options: DatabaseOptions = {}) =>
  onDatabase(Effect.provide(effect, WebhookServices), options)

const plainId = (what: string, text: string): Effect.Effect<string, CliFailure> =>
  text === "" || text.trim() !== text || /[\p{Cc}]/u.test(text)
    ? Effect.fail(refuse(`${what} ${JSON.stringify(text)} is not an id (empty, surrounding blanks or control characters)`))
    : Effect.succeed(text)

const parseSubscriptionId = (text: string, what = "the subscription id") =>
  Effect.map(plainId(what, text), Schema.decodeSync(WebhookSubscriptionId))
const parseDeliveryId = (text: string, what = "the delivery id") =>
  Effect.map(plainId(what, text), Schema.decodeSync(WebhookDeliveryId))

const parseReadinessItem = (text: string): Effect.Effect<WebhookReadinessItem, CliFailure> =>
  Schema.is(WebhookReadinessItem)(text)
    ? Effect.succeed(text)
    : Effect.fail(refuse(`unknown readiness item ${JSON.stringify(text)}; the items are ${WEBHOOK_READINESS_ITEMS.join(", ")}`))

const parseDeliveryState = (text: string): Effect.Effect<WebhookDeliveryState, CliFailure> =>
  Schema.is(WebhookDeliveryState)(text)
    ? Effect.succeed(text)
    : Effect.fail(refuse(`unknown delivery state ${JSON.stringify(text)} for --state; the states are ${WebhookDeliveryState.literals.join(", ")}`))

/** The worker settings (WEBHOOK_RUNTIME, PUBLIC_API_ENVIRONMENT, ...), validated as a whole. */
const workerSettings = Effect.suspend(() => webhookWorkerConfig)

const requireRuntimeEnabled = (settings: WebhookWorkerSettings) =>
  settings.runtime === "enabled" ? Effect.void : Effect.fail(new WebhookRuntimeDisabled({ runtime: settings.runtime }))

const iso = (date: Date | null) => date?.toISOString() ?? null

const subscriptionJson = (subscription: WebhookSubscriptionRecord) => ({
  subscription_id: subscription.subscriptionId,
  organization_id: subscription.organizationId,
  endpoint_url: subscription.endpointUrl,
  state: subscription.state,
  revision: subscription.revision,
  readiness: subscription.readiness,
  created_at: subscription.createdAt.toISOString(),
  updated_at: subscription.updatedAt.toISOString()
})

const deliveryJson = (delivery: WebhookDeliveryRecord) => ({
  delivery_id: delivery.deliveryId,
  event_id: delivery.eventId,
  event_type: delivery.eventType,
  subscription_id: delivery.subscriptionId,
  state: delivery.state,
  attempt_count: delivery.attemptCount,
  max_attempts: delivery.maxAttempts,
  next_attempt_at: delivery.state === "pending" ? delivery.nextAttemptAt.toISOString() : null,
  lease_owner: delivery.leaseOwner,
  lease_expires_at: iso(delivery.leaseExpiresAt),
  last_attempt_at: iso(delivery.lastAttemptAt),
  last_response_status: delivery.lastResponseStatus,
  last_error_class: delivery.lastErrorClass,
  failure_reason: delivery.failureReason,
  created_at: delivery.createdAt.toISOString(),
  updated_at: delivery.updatedAt.toISOString()
})

const attemptJson = (attempt: WebhookAttemptRecord) => ({
  attempt_number: attempt.attemptNumber,
  worker_id: attempt.workerId,
  started_at: attempt.startedAt.toISOString(),
  finished_at: iso(attempt.finishedAt),
  duration_ms: attempt.durationMs,
  response_status: attempt.responseStatus,
  error_class: attempt.errorClass
})

const attemptReportJson = (report: AttemptReport) => ({
  delivery_id: report.deliveryId,
  event_id: report.eventId,
  attempt_number: report.attemptNumber,
  reclaimed_stale: report.reclaimedStale,
  response_status: report.status,
  error_class: report.errorClass,
  duration_ms: report.durationMs,
  next:
    report.recorded._tag === "LeaseLost"
      ? "lease_lost"
      : report.step._tag === "Retry"
        ? `retry at ${report.step.at.toISOString()}`
        : report.step._tag === "Failed"
          ? `failed (${report.step.reason})`
          : "succeeded",
  worker_id: report.workerId
})

const subscriptionArgument = Argument.String("SUBSCRIPTION_ID").pipe(
  Argument.withDescription("The subscription's id (as `webhooks subscriptions list` shows it).")
)
const deliveryArgument = Argument.String("DELIVERY_ID").pipe(
  Argument.withDescription("The delivery's id (as `webhooks deliveries list` shows it).")
)
const itemArgument = Argument.String("ITEM").pipe(
  Argument.withDescription(`A readiness item: ${WEBHOOK_READINESS_ITEMS.join(", ")}.`)
)
const byOption = Flag.String("by").pipe(Flag.withDescription("Who makes the change (recorded as provenance)."))
const reasonOption = Flag.String("reason").pipe(Flag.withDescription("Why (recorded as provenance)."))

const secretWarning = Console.error(
  "warning: the signing secret is shown this once and never again: give it to the receiver now (RECEIVER_SECRETS)"
)

// ---------------------------------------------------------------- subscriptions

const createCommand = Command.make(
  "create",
  {
    organization: Flag.String("organization").pipe(Flag.withDescription("The organization whose events it receives.")),
    url: Flag.String("url").pipe(
      Flag.withDescription(
        "The receiver endpoint. In production: https, and no loopback, private, link-local or metadata address after DNS resolution; the sandbox also allows http and loopback."
      )
    ),
    by: Flag.String("by").pipe(Flag.optional, Flag.withDescription("Who creates it (recorded in revision 1).")),
    json: switchFlag("json", "Print the subscription and its secret as one JSON object.")
  },
  (input) =>
    Effect.gen(function* () {
      const organizationId = yield* parseOrganizationId(input.organization, "--organization")
      const endpointUrl = yield* nonEmptyText("--url", input.url)
      const createdBy = Option.isSome(input.by) ? yield* nonEmptyText("--by", input.by.value) : null
      const settings = yield* workerSettings
      const check = yield* checkEndpointWithDns(endpointUrl, settings.environment)
      if (check._tag === "Refused") {
        return yield* refuse(
          `--url ${JSON.stringify(endpointUrl)} is refused in the ${settings.environment} environment: ${check.problems.join(", ")}`
        )
      }
      const created = yield* onWebhooks(
        WebhookOperatorStore.use((store) => store.createSubscription({ organizationId, endpointUrl, createdBy }))
      )
      yield* secretWarning
      if (input.json) {
        yield* printJsonLine({ ...subscriptionJson(created.subscription), secret: created.secret })
      } else {
        yield* Console.log(`subscription_id: ${created.subscription.subscriptionId}\nstate: disabled\nsecret: ${created.secret}`)
      }
    })
).pipe(
  Command.withDescription(
    "Create a webhook subscription, disabled, with a new whsec_ signing secret printed once (it is stored for signing but never shown again). " +
      "It receives nothing until every readiness item is confirmed and it is activated."
  )
)

const listCommand = Command.make(
  "list",
  {
    organization: Flag.String("organization").pipe(Flag.optional, Flag.withDescription("Only this organization's subscriptions.")),
    json: jsonOption
  },
  ({ json, organization }) =>
    Effect.gen(function* () {
      const organizationId = Option.isSome(organization) ? yield* parseOrganizationId(organization.value, "--organization") : undefined
      const subscriptions = yield* onWebhooks(
        WebhookOperatorStore.use((store) =>
          store.listSubscriptions(organizationId === undefined ? {} : { organizationId })
        )
      )
      yield* printList(subscriptions, {
        json,
        toJson: subscriptionJson,
        header: ["SUBSCRIPTION ID", "ORGANIZATION", "STATE", "REV", "NOT CONFIRMED", "URL"],
        toRow: (subscription) => [
          subscription.subscriptionId,
          subscription.organizationId,
          subscription.state,
          String(subscription.revision),
          WEBHOOK_READINESS_ITEMS.filter((item) => subscription.readiness[item] !== "confirmed").join(",") || "-",
          subscription.endpointUrl
        ],
        empty: "No webhook subscriptions."
      })
    })
).pipe(Command.withDescription("List webhook subscriptions (never their secrets): a table, or JSON Lines with --json."))

const showSubscriptionCommand = Command.make("show", { subscription: subscriptionArgument }, ({ subscription }) =>
  Effect.gen(function* () {
    const subscriptionId = yield* parseSubscriptionId(subscription)
    const shown = yield* onWebhooks(WebhookOperatorStore.use((store) => store.getSubscription(subscriptionId)))
    yield* printJsonLine({
      ...subscriptionJson(shown.subscription),
      revisions: shown.revisions.map((revision) => ({
        revision: revision.revision,
        change: revision.change,
        state: revision.state,
        readiness: revision.readiness,
        changed_by: revision.changedBy,
        reason: revision.reason,
        created_at: revision.createdAt.toISOString()
      }))
    })
  })
).pipe(Command.withDescription("Show a subscription with its readiness and every revision (who, why, when) as one JSON object."))

const activateCommand = Command.make(
  "activate",
  { subscription: subscriptionArgument, by: byOption, reason: reasonOption },
  (input) =>
    Effect.gen(function* () {
      const subscriptionId = yield* parseSubscriptionId(input.subscription)
      const by = yield* nonEmptyText("--by", input.by)
      const reason = yield* nonEmptyText("--reason", input.reason)
      const active = yield* onWebhooks(
        WebhookOperatorStore.use((store) => store.activate({ subscriptionId, by, reason }))
      )
      yield* printJsonLine(subscriptionJson(active))
    })
).pipe(
  Command.withDescription(
    "Activate a subscription: refused, naming the missing items, unless every readiness item is confirmed. The readiness record, " +
      "who and why, and the new active revision are written in one transaction."
  )
)

const subscriptionsCommand = groupCommand("subscriptions", "Create, list, show and activate webhook subscriptions.").pipe(
  Command.withSubcommands([createCommand, listCommand, showSubscriptionCommand, activateCommand])
)

// ---------------------------------------------------------------- readiness

const readinessChangeCommand = (name: "confirm" | "unconfirm", description: string) =>
  Command.make(
    name,
    {
      subscription: subscriptionArgument,
      item: itemArgument,
      by: Flag.String("by").pipe(Flag.optional, Flag.withDescription("Who makes the change (recorded in the revision)."))
    },
    (input) =>
      Effect.gen(function* () {
        const subscriptionId = yield* parseSubscriptionId(input.subscription)
        const item = yield* parseReadinessItem(input.item)
        const by = Option.isSome(input.by) ? yield* nonEmptyText("--by", input.by.value) : null
        const updated = yield* onWebhooks(
          WebhookOperatorStore.use((store) =>
            store.setReadiness({ subscriptionId, item, confirmed: name === "confirm", by })
          )
        )
        yield* printJsonLine(subscriptionJson(updated))
      })
  ).pipe(Command.withDescription(`${description} A new revision; prints the subscription as one JSON object.`))

const revokeCommand = Command.make(
  "revoke",
  { subscription: subscriptionArgument, by: byOption, reason: reasonOption },
  (input) =>
    Effect.gen(function* () {
      const subscriptionId = yield* parseSubscriptionId(input.subscription)
      const by = yield* nonEmptyText("--by", input.by)
      const reason = yield* nonEmptyText("--reason", input.reason)
      const revoked = yield* onWebhooks(
        WebhookOperatorStore.use((store) => store.revokeReadiness({ subscriptionId, by, reason }))
      )
      yield* printJsonLine({
        ...subscriptionJson(revoked.subscription),
        cancelled_deliveries: {
          pending: revoked.cancelled.pending,
          sending: revoked.cancelled.sending,
          stale_sending: revoked.cancelled.staleSending
        }
      })
    })
).pipe(
  Command.withDescription(
    "Revoke a subscription's readiness: it is disabled (a new revision, readiness back to the initial record) and, in the same " +
      "transaction, its pending, sending and stale sending deliveries are cancelled. A send in flight finishes but its result " +
      "never overwrites the cancellation."
  )
)

const readinessCommand = groupCommand(
  "readiness",
  `Confirm, unconfirm or revoke readiness items (${WEBHOOK_READINESS_ITEMS.join(", ")}). Receiver correlation starts not_confirmed_runtime_blocked.`
).pipe(
  Command.withSubcommands([
    readinessChangeCommand("confirm", "Confirm a readiness item of a subscription."),
    readinessChangeCommand(
      "unconfirm",
      "Return a readiness item to its initial status (refused for an active subscription: revoke readiness instead)."
    ),
    revokeCommand
  ])
)

// ---------------------------------------------------------------- secrets

const rotateCommand = Command.make("rotate", { subscription: subscriptionArgument }, ({ subscription }) =>
  Effect.gen(function* () {
    const subscriptionId = yield* parseSubscriptionId(subscription)
    const secret = yield* onWebhooks(WebhookOperatorStore.use((store) => store.rotateSecret(subscriptionId)))
    yield* secretWarning
    yield* Console.error("note: the sender signs with this newest secret from now on; receivers should accept both until they switch")
    yield* Console.log(`subscription_id: ${subscriptionId}\nsecret: ${secret}`)
  })
).pipe(Command.withDescription("Make a new signing secret for a subscription and print it once; the sender signs with the newest secret."))

const secretsCommand = groupCommand("secrets", "Rotate webhook signing secrets.").pipe(Command.withSubcommands([rotateCommand]))

// ---------------------------------------------------------------- deliveries

const deliveriesListCommand = Command.make(
  "list",
  {
    subscription: Flag.String("subscription").pipe(Flag.optional, Flag.withDescription("Only this subscription's deliveries.")),
    state: Flag.String("state").pipe(
      Flag.optional,
      Flag.withDescription(`Only deliveries in this state: ${WebhookDeliveryState.literals.join(", ")}.`)
    ),
    json: jsonOption
  },
  (input) =>
    Effect.gen(function* () {
      const subscriptionId = Option.isSome(input.subscription)
        ? yield* parseSubscriptionId(input.subscription.value, "--subscription")
        : undefined
      const state = Option.isSome(input.state) ? yield* parseDeliveryState(input.state.value) : undefined
      const deliveries = yield* onWebhooks(
        WebhookOperatorStore.use((store) =>
          store.listDeliveries({
            ...(subscriptionId === undefined ? {} : { subscriptionId }),
            ...(state === undefined ? {} : { state })
          })
        )
      )
      yield* printList(deliveries, {
        json: input.json,
        toJson: deliveryJson,
        header: ["DELIVERY ID", "EVENT ID", "TYPE", "STATE", "ATTEMPTS", "LAST", "SUBSCRIPTION"],
        toRow: (delivery) => [
          delivery.deliveryId,
          delivery.eventId,
          delivery.eventType,
          delivery.state,
          `${delivery.attemptCount}/${delivery.maxAttempts}`,
          delivery.lastResponseStatus !== null ? String(delivery.lastResponseStatus) : (delivery.lastErrorClass ?? "-"),
          delivery.subscriptionId
        ],
        empty: "No webhook deliveries."
      })
    })
).pipe(Command.withDescription("List deliveries, newest first (at most 1000): a table, or JSON Lines with --json."))

const deliveriesShowCommand = Command.make("show", { delivery: deliveryArgument }, ({ delivery }) =>
  Effect.gen(function* () {
    const deliveryId = yield* parseDeliveryId(delivery)
    const shown = yield* onWebhooks(WebhookOperatorStore.use((store) => store.showDelivery(deliveryId)))
    yield* printJsonLine({ ...deliveryJson(shown.delivery), attempts: shown.attempts.map(attemptJson) })
  })
).pipe(
  Command.withDescription(
    "Show a delivery with every attempt (start, duration, status or error class; never a response body) as one JSON object."
  )
)

const redeliverCommand = Command.make("redeliver", { delivery: deliveryArgument }, ({ delivery }) =>
  Effect.gen(function* () {
    const deliveryId = yield* parseDeliveryId(delivery)
    const redelivered = yield* onWebhooks(WebhookOperatorStore.use((store) => store.redeliver(deliveryId)))
    yield* printJsonLine(deliveryJson(redelivered))
  })
).pipe(
  Command.withDescription(
    "Put a failed delivery back to pending, due now. Its attempt count is kept (the attempt history stays whole) and its retry " +
      "schedule starts again from the first delay. Any other state, or a disabled subscription, is refused."
  )
)

const deliveriesCommand = groupCommand("deliveries", "List, show and redeliver webhook deliveries.").pipe(
  Command.withSubcommands([deliveriesListCommand, deliveriesShowCommand, redeliverCommand])
)

// ---------------------------------------------------------------- send-test, publish, worker

const sendTestCommand = Command.make("send-test", { subscription: subscriptionArgument }, ({ subscription }) =>
  Effect.gen(function* () {
    const subscriptionId = yield* parseSubscriptionId(subscription)
    const settings = yield* workerSettings
    yield* requireRuntimeEnabled(settings)
    const report = yield* onWebhooks(
      Effect.gen(function* () {
        const store = yield* WebhookOperatorStore
        const { deliveryId } = yield* store.createEndpointTest(subscriptionId)
        const attempted = yield* attemptDeliveryNow(deliveryId, {
          runtime: settings.runtime,
          environment: settings.environment,
          leaseMs: settings.leaseMs,
          attemptTimeoutMs: settings.attemptTimeoutMs
        })
        return { deliveryId, attempted }
      })
    )
    if (report.attempted === undefined) return yield* refuse(`the endpoint test ${report.deliveryId} could not be leased`)
    yield* printJsonLine(attemptReportJson(report.attempted))
    if (report.attempted.step._tag !== "Succeeded") {
      return yield* refuse(`the endpoint test was not accepted (${report.attempted.status ?? report.attempted.errorClass})`)
    }
  })
).pipe(
  Command.withDescription(
    "Send one webhook.endpoint_test event (not in the public inventory) to a subscription's endpoint, signed with its newest " +
      "secret, tried once, whatever the subscription's state. Needs WEBHOOK_RUNTIME=enabled. Exits non-zero unless it gets a 2xx."
  )
)

const publishCommand = Command.make(
  "publish",
  {
    encounter: Flag.String("encounter").pipe(Flag.withDescription("The encounter id.")),
    document: Flag.String("document").pipe(Flag.withDescription("The document id (of that encounter, with a final transcript)."))
  },
  (input) =>
    Effect.gen(function* () {
      const encounterId = EncounterId.make(yield* plainId("--encounter", input.encounter))
      const documentId = DocumentId.make(yield* plainId("--document", input.document))
      const result = yield* onWebhooks(
        Effect.gen(function* () {
          const store = yield* WebhookOperatorStore
          const organizationId = yield* store.findTranscriptOrganization(encounterId, documentId)
          const publisher = yield* TranscriptReadyPublisher
          return yield* publisher.publish({ organizationId, encounterId, documentId })
        })
      )
      if (!result.created) yield* Console.error("note: this transcript was published before: same event, no new delivery")
      yield* printJsonLine({ event_id: result.event.id, created: result.created, deliveries: result.deliveries, event: result.event })
    })
).pipe(
  Command.withDescription(
    "Publish recording.transcript_ready for a document's final transcript: one event and one delivery per active subscription " +
      "of the encounter's organization, in one transaction. Publishing the same transcript again is the same event. Sends nothing itself."
  )
)

const workerCommand = Command.make(
  "worker",
  {
    once: switchFlag("once", "Attempt what is due now, then exit (deliveries rescheduled for later are left)."),
    concurrency: Flag.Int("concurrency").pipe(
      Flag.optional,
      Flag.withDescription("Deliveries in flight at once, and the most one claim takes (default WEBHOOK_WORKER_CONCURRENCY, or 32).")
    )
  },
  (input) =>
    Effect.gen(function* () {
      const settings = yield* workerSettings
      const concurrency = Option.getOrElse(input.concurrency, () => settings.concurrency)
      if (!Number.isSafeInteger(concurrency) || concurrency < 1 || concurrency > 256) {
        return yield* refuse(`--concurrency must be an integer from 1 to 256, got ${concurrency}`)
      }
      yield* requireRuntimeEnabled(settings)
      const options = {
        runtime: settings.runtime,
        environment: settings.environment,
        concurrency,
        leaseMs: settings.leaseMs,
        retryDelaysMs: settings.retryDelaysMs,
        attemptTimeoutMs: settings.attemptTimeoutMs,
        pollIntervalMs: settings.pollIntervalMs,
        onAttempt: (report: AttemptReport) => printJsonLine(attemptReportJson(report))
      }
      if (input.once) {
        const pass = yield* onWebhooks(runDeliveryPass(options), { asRuntimeRole: true })
        yield* Console.error(
          `worker pass done: ${pass.attempts} attempts, ${pass.succeeded} succeeded, ${pass.retried} to retry, ${pass.failed} failed, ${pass.leaseLost} lease lost`
        )
        return
      }
      yield* Console.error(`webhook delivery worker running (concurrency ${concurrency}, ${settings.environment}); stop with Ctrl-C`)
      return yield* onWebhooks(runDeliveryWorker(options), { asRuntimeRole: true, waitForDatabase: true })
    })
).pipe(
  Command.withDescription(
    "Run the delivery worker: lease due deliveries in batches (FOR UPDATE SKIP LOCKED, 60 s lease), send them signed over kept-alive " +
      "connections, record the attempts in batches " +
      "(one JSON line each on stdout) and retry per the schedule. Refused unless WEBHOOK_RUNTIME=enabled: the runtime status " +
      "planned_not_generally_available sends nothing. Several workers in several processes share the work."
  )
)

export const webhooksCommand = groupCommand(
  "webhooks",
  "Webhook operator tooling: subscriptions, readiness, secrets, deliveries, the endpoint test, publishing and the delivery worker. " +
    "Runtime status planned_not_generally_available (the default): nothing is sent unless WEBHOOK_RUNTIME=enabled."
).pipe(
  Command.withSubcommands([
    subscriptionsCommand,
    readinessCommand,
    secretsCommand,
    deliveriesCommand,
    sendTestCommand,
    publishCommand,
    workerCommand
  ])
)
