import { type ChildProcess, spawn } from "node:child_process"
import { DocumentId, EncounterId, OrganizationId, WebhookDeliveryId, WebhookOutbox, WebhookEventId, type WebhookSubscriptionId } from "@clinical-api/domain"
import { PgClient, WebhookOperatorStore } from "@clinical-api/storage-adapter"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import {
  CLI_ENTRY,
  type CliDatabase,
  EXAMPLE_FIXTURE,
  freshDatabase,
  jsonLines,
  plain,
  runInProcess,
  WORKSPACE_ROOT
} from "./cli/support/cli-harness.js"
import {
  activeSubscription,
  adminUrl,
  closedPortUrl,
  startReceiver,
  type TestReceiver,
  unique,
  type WebhookServices,
  webhookStackOn
} from "./cli-webhooks-support.js"

/**
 * `pnpm cli webhooks ...` on real PostgreSQL: the operator commands in this process (the same
 * program as `pnpm cli`), and the delivery worker as real child processes for what only
 * processes show (SIGKILL mid-delivery, two workers sharing 1,000 events).
 */

const run = (database: CliDatabase, args: ReadonlyArray<string>, extra: Record<string, string> = {}) =>
  runInProcess(args, { ...database.env, ...extra })

/** Runs `effect` with the webhook stores on the test database. */
const onStore = <A, E>(database: CliDatabase, effect: Effect.Effect<A, E, WebhookServices>) =>
  Effect.runPromise(Effect.scoped(Effect.provide(effect, webhookStackOn(database.env["DATABASE_URL"] ?? "", 4))))

const setEndpoint = (subscriptionId: string, url: string) =>
  PgClient.use((client) =>
    client.run("test.setEndpoint", (sql) => sql`UPDATE webhook_subscriptions SET endpoint_url = ${url} WHERE subscription_id = ${subscriptionId}`)
  )

const deliveryStates = (subscriptionId: string) =>
  PgClient.use((client) =>
    client.run(
      "test.states",
      (sql) => sql<Array<{ state: string; n: number }>>`
        SELECT state, count(*)::int AS n FROM webhook_deliveries WHERE subscription_id = ${subscriptionId} GROUP BY state ORDER BY state`
    )
  ).pipe(Effect.map((rows) => Object.fromEntries(rows.map((row) => [row.state, row.n]))))

const READINESS = [
  "approved_routes",
  "least_privilege_scopes",
  "signing_setup",
  "receiver_correlation",
  "network_allowlisting",
  "delivery_and_audit_readiness"
]

interface WorkerProcess {
  readonly child: ChildProcess
  readonly stdout: () => string
  readonly stderr: () => string
  readonly exited: Promise<number | null>
}

/** `pnpm cli webhooks worker` as a child process on the test database, with the test knobs. */
const spawnWorker = (database: CliDatabase, args: ReadonlyArray<string>, extra: Record<string, string>): WorkerProcess => {
  const env: Record<string, string | undefined> = { ...process.env }
  for (const name of ["DATABASE_URL", "PGLITE_DATA_DIR", "PUBLIC_API_ENVIRONMENT", "WEBHOOK_RUNTIME"]) delete env[name]
  const child = spawn(process.execPath, [CLI_ENTRY, "webhooks", "worker", ...args], {
    cwd: WORKSPACE_ROOT,
    env: { ...env, NO_COLOR: "1", ...database.env, ...extra },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let stdout = ""
  let stderr = ""
  child.stdout?.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)))
  return { child, stdout: () => stdout, stderr: () => stderr, exited }
}

const waitUntil = async (check: () => Promise<boolean> | boolean, timeoutMs: number, what: string) => {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await check()) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
}

const workerKnobs = {
  WEBHOOK_RUNTIME: "enabled",
  WEBHOOK_POLL_INTERVAL_MS: "50",
  WEBHOOK_RETRY_DELAYS_MS: "100",
  WEBHOOK_ATTEMPT_TIMEOUT_MS: "5000"
}

if (adminUrl === "") {
  console.warn("Skipping the webhooks CLI tests: set DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/postgres)")
  describe("pnpm cli webhooks", () => {
    it.skip("skipped: DATABASE_URL is not set", () => {})
  })
} else {
  describe("pnpm cli webhooks (operator commands, real PostgreSQL)", () => {
    let database: CliDatabase
    let receiver: TestReceiver | undefined

    beforeAll(async () => {
      database = await freshDatabase()
      expect((await run(database, ["migrate"])).code).toBe(0)
      expect((await run(database, ["fixtures", "load", EXAMPLE_FIXTURE])).code).toBe(0)
    })
    afterAll(async () => {
      await receiver?.close()
      await database?.drop()
    })

    it("--help on the group and each command exits 0 and describes it", async () => {
      const commands = [
        ["webhooks"],
        ["webhooks", "subscriptions", "create"],
        ["webhooks", "subscriptions", "list"],
        ["webhooks", "subscriptions", "activate"],
        ["webhooks", "readiness", "confirm"],
        ["webhooks", "readiness", "unconfirm"],
        ["webhooks", "readiness", "revoke"],
        ["webhooks", "secrets", "rotate"],
        ["webhooks", "deliveries", "list"],
        ["webhooks", "deliveries", "show"],
        ["webhooks", "deliveries", "redeliver"],
        ["webhooks", "send-test"],
        ["webhooks", "publish"],
        ["webhooks", "worker"]
      ]
      for (const command of commands) {
        const result = await run(database, [...command, "--help"])
        expect(result.code, command.join(" ")).toBe(0)
        expect(plain(result.stdout)).toContain("DESCRIPTION")
      }
      expect(plain((await run(database, ["webhooks", "worker", "--help"])).stdout)).toContain("WEBHOOK_RUNTIME=enabled")
      expect(plain((await run(database, ["--help"])).stdout)).toContain("webhooks")
    })

    it("subscriptions create: disabled, the whsec_ secret printed once and never listed; bad arguments change nothing", async () => {
      const created = await run(database, ["webhooks", "subscriptions", "create", "--organization", "org_riverside", "--url", "http://127.0.0.1:9/hook", "--json"])
      expect(created.code).toBe(0)
      const [line] = jsonLines(created.stdout)
      expect(line?.["state"]).toBe("disabled")
      expect(String(line?.["secret"])).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/)
      expect(created.stderr).toContain("shown this once")
      const listed = await run(database, ["webhooks", "subscriptions", "list", "--json"])
      expect(listed.stdout).toContain(String(line?.["subscription_id"]))
      expect(listed.stdout).not.toContain("whsec_")
      const shown = await run(database, ["webhooks", "subscriptions", "show", String(line?.["subscription_id"])])
      expect(shown.stdout).not.toContain("whsec_")

      const before = jsonLines(listed.stdout).length
      for (const [args, message] of [
        [["--organization", "org_nobody", "--url", "http://127.0.0.1:9/h"], "org_nobody"],
        [["--organization", "org_riverside", "--url", "ftp://127.0.0.1/h"], "scheme_not_allowed"],
        [["--organization", "org_riverside", "--url", "not a url"], "invalid_url"],
        [["--organization", "org_riverside", "--url", "http://10.0.0.7/h"], "private_address"],
        [["--organization", "org_riverside", "--url", "http://169.254.169.254/latest"], "metadata_address"]
      ] as const) {
        const refused = await run(database, ["webhooks", "subscriptions", "create", ...args])
        expect(refused.code, args.join(" ")).toBe(1)
        expect(refused.stderr).toContain(message)
        expect(refused.stdout).not.toContain("whsec_")
      }
      const production = await run(
        database,
        ["webhooks", "subscriptions", "create", "--organization", "org_riverside", "--url", "https://127.0.0.1/h"],
        { PUBLIC_API_ENVIRONMENT: "production", API_KEY_DIGEST_KEY: "x".repeat(40) }
      )
      expect(production.code).toBe(1)
      expect(production.stderr).toContain("loopback_address")
      expect(jsonLines((await run(database, ["webhooks", "subscriptions", "list", "--json"])).stdout)).toHaveLength(before)
    })

    it("activation refused naming the missing items (receiver_correlation not_confirmed_runtime_blocked) until all are confirmed; then publish, revoke", async () => {
      const created = jsonLines(
        (await run(database, ["webhooks", "subscriptions", "create", "--organization", "org_riverside", "--url", "http://127.0.0.1:9/a", "--json"])).stdout
      )[0]
      const subscription = String(created?.["subscription_id"])
      expect((created?.["readiness"] as Record<string, string>)["receiver_correlation"]).toBe("not_confirmed_runtime_blocked")

      const badItem = await run(database, ["webhooks", "readiness", "confirm", subscription, "vibes"])
      expect(badItem.code).toBe(1)
      expect(badItem.stderr).toContain("approved_routes, least_privilege_scopes")
      for (const item of READINESS.filter((item) => item !== "receiver_correlation")) {
        expect((await run(database, ["webhooks", "readiness", "confirm", subscription, item, "--by", "ops"])).code).toBe(0)
      }
      const refused = await run(database, ["webhooks", "subscriptions", "activate", subscription, "--by", "alice", "--reason", "launch"])
      expect(refused.code).toBe(1)
      expect(refused.stderr).toContain("readiness not confirmed for receiver_correlation")
      const missingArguments = await run(database, ["webhooks", "subscriptions", "activate", subscription])
      expect(missingArguments.code).toBe(1)
      expect((await run(database, ["webhooks", "readiness", "confirm", subscription, "receiver_correlation"])).code).toBe(0)
      const activated = await run(database, ["webhooks", "subscriptions", "activate", subscription, "--by", "alice", "--reason", "launch"])
      expect(activated.code).toBe(0)
      expect(jsonLines(activated.stdout)[0]?.["state"]).toBe("active")
      const history = jsonLines((await run(database, ["webhooks", "subscriptions", "show", subscription])).stdout)[0]
      expect((history?.["revisions"] as Array<Record<string, unknown>>).at(-1)).toMatchObject({
        change: "activated",
        state: "active",
        changed_by: "alice",
        reason: "launch"
      })

      // Publishing twice: one event, one delivery for this subscription.
      const first = jsonLines((await run(database, ["webhooks", "publish", "--encounter", "enc_a1", "--document", "doc_a1_tr"])).stdout)[0]
      expect(first).toMatchObject({ created: true })
      const second = await run(database, ["webhooks", "publish", "--encounter", "enc_a1", "--document", "doc_a1_tr"])
      expect(jsonLines(second.stdout)[0]).toMatchObject({ created: false, deliveries: 0, event_id: first?.["event_id"] })
      const notTranscript = await run(database, ["webhooks", "publish", "--encounter", "enc_a1", "--document", "doc_nope"])
      expect(notTranscript.code).toBe(1)
      expect(notTranscript.stderr).toContain("no such document")
      const pending = jsonLines((await run(database, ["webhooks", "deliveries", "list", "--subscription", subscription, "--state", "pending", "--json"])).stdout)
      expect(pending.map((d) => d["event_id"])).toEqual([first?.["event_id"]])
      expect((await run(database, ["webhooks", "deliveries", "list", "--state", "lost"])).code).toBe(1)

      // The gate: the worker and send-test refuse with the default runtime status, and nothing is sent.
      const worker = await run(database, ["webhooks", "worker", "--once"])
      expect(worker.code).toBe(1)
      expect(worker.stderr).toContain("planned_not_generally_available")
      expect((await run(database, ["webhooks", "send-test", subscription])).code).toBe(1)
      expect(jsonLines((await run(database, ["webhooks", "deliveries", "list", "--subscription", subscription, "--json"])).stdout).map((d) => d["state"])).toEqual(["pending"])

      // Revocation: disabled (a new revision) and the pending delivery cancelled.
      const revoked = await run(database, ["webhooks", "readiness", "revoke", subscription, "--by", "bob", "--reason", "offboarding"])
      expect(revoked.code).toBe(0)
      expect(jsonLines(revoked.stdout)[0]).toMatchObject({ state: "disabled", cancelled_deliveries: { pending: 1, sending: 0, stale_sending: 0 } })
      const delivery = String(pending[0]?.["delivery_id"])
      expect(jsonLines((await run(database, ["webhooks", "deliveries", "show", delivery])).stdout)[0]).toMatchObject({ state: "cancelled", attempts: [] })
      const redeliver = await run(database, ["webhooks", "deliveries", "redeliver", delivery])
      expect(redeliver.code).toBe(1)
      expect(redeliver.stderr).toContain("only a failed delivery is redelivered")
    })

    it("with WEBHOOK_RUNTIME=enabled: send-test, worker --once, redeliver of a failed delivery and secret rotation (signed with the newest)", async () => {
      const created = jsonLines(
        (await run(database, ["webhooks", "subscriptions", "create", "--organization", "org_lakeside", "--url", "http://127.0.0.1:9/b", "--json"])).stdout
      )[0]
      const subscription = String(created?.["subscription_id"])
      const firstSecret = String(created?.["secret"])
      let answer = 404
      receiver = await startReceiver({ secret: firstSecret, script: (index) => (index === 1 ? { status: answer } : "kit") })
      await onStore(database, setEndpoint(subscription, receiver.url))

      const test = await run(database, ["webhooks", "send-test", subscription], { WEBHOOK_RUNTIME: "enabled" })
      expect(test.code).toBe(0)
      expect(jsonLines(test.stdout)[0]).toMatchObject({ response_status: 200, next: "succeeded" })
      expect(receiver.handled.size).toBe(0) // an endpoint test never runs the business handler

      for (const item of READINESS) await run(database, ["webhooks", "readiness", "confirm", subscription, item])
      expect((await run(database, ["webhooks", "subscriptions", "activate", subscription, "--by", "a", "--reason", "r"])).code).toBe(0)
      const event = await onStore(
        database,
        WebhookOutbox.use((outbox) =>
          outbox.publishTranscriptReady({
            eventId: WebhookEventId.make(unique("evt")),
            organizationId: OrganizationId.make("org_lakeside"),
            encounterId: EncounterId.make(unique("enc")),
            documentId: DocumentId.make(unique("doc")),
            occurredAt: new Date()
          })
        )
      )
      const failed = await run(database, ["webhooks", "worker", "--once"], { ...workerKnobs })
      expect(failed.code).toBe(0)
      expect(jsonLines(failed.stdout)[0]).toMatchObject({ response_status: 404, next: "failed (terminal_status)" })
      const delivery = String(jsonLines(failed.stdout)[0]?.["delivery_id"])

      const rotated = await run(database, ["webhooks", "secrets", "rotate", subscription])
      expect(rotated.code).toBe(0)
      const newSecret = /secret: (whsec_\S+)/.exec(rotated.stdout)?.[1] ?? ""
      expect(newSecret).not.toBe(firstSecret)
      await receiver.close()
      // The receiver now knows only the new secret: the redelivery verifies only if signed with it.
      answer = 200
      receiver = await startReceiver({ secret: newSecret })
      await onStore(database, setEndpoint(subscription, receiver.url))
      const redelivered = await run(database, ["webhooks", "deliveries", "redeliver", delivery])
      expect(jsonLines(redelivered.stdout)[0]).toMatchObject({ state: "pending", attempt_count: 1 })
      const again = await run(database, ["webhooks", "worker", "--once", "--concurrency", "2"], { ...workerKnobs })
      expect(jsonLines(again.stdout)[0]).toMatchObject({ delivery_id: delivery, attempt_number: 2, response_status: 200 })
      expect([...receiver.handled.keys()]).toEqual([event.event.id])
      const shown = jsonLines((await run(database, ["webhooks", "deliveries", "show", delivery])).stdout)[0]
      expect((shown?.["attempts"] as Array<Record<string, unknown>>).map((a) => a["response_status"])).toEqual([404, 200])
      expect(JSON.stringify(shown)).not.toContain("never store")
      expect((await run(database, ["webhooks", "worker", "--once", "--concurrency", "0"], workerKnobs)).code).toBe(1)
    })
  })

  describe("pnpm cli webhooks worker as child processes", () => {
    let database: CliDatabase
    const workers: Array<WorkerProcess> = []
    const receivers: Array<TestReceiver> = []

    beforeAll(async () => {
      database = await freshDatabase()
      expect((await run(database, ["migrate"])).code).toBe(0)
    })
    afterAll(async () => {
      for (const worker of workers) worker.child.kill("SIGKILL")
      for (const receiver of receivers) await receiver.close()
      await database?.drop()
    })

    const newSubscription = async (handle?: () => Promise<void>) => {
      const { organizationId, secret, subscriptionId } = await onStore(
        database,
        Effect.flatMap(Effect.promise(() => closedPortUrl()), activeSubscription)
      )
      const receiver = await startReceiver({ secret, ...(handle === undefined ? {} : { handle }) })
      receivers.push(receiver)
      await onStore(database, setEndpoint(subscriptionId, receiver.url))
      return { organizationId, subscriptionId, receiver }
    }

    const states = (subscriptionId: WebhookSubscriptionId) => onStore(database, deliveryStates(subscriptionId))

    it("a worker killed with SIGKILL mid-delivery: the delivery is taken again after the lease and the business handler runs exactly once", async () => {
      let entered = false
      let release: () => void = () => undefined
      const held = new Promise<void>((resolve) => (release = resolve))
      const { organizationId, receiver, subscriptionId } = await newSubscription(async () => {
        entered = true
        await held
      })
      const published = await onStore(
        database,
        WebhookOutbox.use((outbox) =>
          outbox.publishTranscriptReady({
            eventId: WebhookEventId.make(unique("evt")),
            organizationId,
            encounterId: EncounterId.make(unique("enc")),
            documentId: DocumentId.make(unique("doc")),
            occurredAt: new Date()
          })
        )
      )
      const knobs = { ...workerKnobs, WEBHOOK_LEASE_MS: "2000" }
      const first = spawnWorker(database, [], knobs)
      workers.push(first)
      await waitUntil(() => entered, 30_000, "the first worker's request to reach the business handler")
      first.child.kill("SIGKILL")
      expect(await first.exited).toBeNull()
      release() // the receiver finishes its work; the answer goes to a dead connection

      const second = spawnWorker(database, [], knobs)
      workers.push(second)
      await waitUntil(async () => (await states(subscriptionId))["succeeded"] === 1, 30_000, "the delivery to succeed")
      second.child.kill("SIGTERM")
      await second.exited

      expect(receiver.handled.get(published.event.id)).toBe(1)
      expect(receiver.received.map((r) => r.deliveryId)).toEqual([receiver.received[0]?.deliveryId, receiver.received[0]?.deliveryId])
      const shown = await onStore(
        database,
        WebhookOperatorStore.use((store) =>
          Effect.flatMap(store.listDeliveries({ subscriptionId }), (deliveries) => store.showDelivery(deliveries[0]?.deliveryId ?? WebhookDeliveryId.make("missing")))
        )
      )
      expect(shown.delivery).toMatchObject({ state: "succeeded", attemptCount: 2 })
      expect(shown.attempts.map((a) => [a.attemptNumber, a.errorClass ?? a.responseStatus])).toEqual([[1, "lease_expired"], [2, 200]])
      expect(shown.attempts[0]?.workerId).not.toBe(shown.attempts[1]?.workerId)
      expect(jsonLines(second.stdout())[0]).toMatchObject({ reclaimed_stale: true, response_status: 200 })
    }, 90_000)

    it("a worker killed with SIGKILL with a whole batch in flight: no event lost, the batch taken again after its lease, each handled once", async () => {
      let entered = 0
      let release: () => void = () => undefined
      const held = new Promise<void>((resolve) => (release = resolve))
      const { organizationId, receiver, subscriptionId } = await newSubscription(async () => {
        entered++
        await held
      })
      const events = 16
      await onStore(
        database,
        WebhookOutbox.use((outbox) =>
          Effect.forEach(
            Array.from({ length: events }, (_, index) => index),
            (index) =>
              outbox.publishTranscriptReady({
                eventId: WebhookEventId.make(unique("evt")),
                organizationId,
                encounterId: EncounterId.make(`enc_batch_${index}`),
                documentId: DocumentId.make(`doc_batch_${index}`),
                occurredAt: new Date()
              }),
            { discard: true }
          )
        )
      )
      const knobs = { ...workerKnobs, WEBHOOK_LEASE_MS: "2000" }
      const first = spawnWorker(database, ["--concurrency", "8"], knobs)
      workers.push(first)
      // One claim of 8: the whole batch is in the receiver's hands, none answered yet.
      await waitUntil(() => entered === 8, 30_000, "the first worker's batch to reach the business handler")
      first.child.kill("SIGKILL")
      expect(await first.exited).toBeNull()
      expect(await states(subscriptionId)).toEqual({ pending: 8, sending: 8 })
      release()

      // Its own leases are the default 60 s: on a slow machine a short one could expire mid-send
      // and the batch be sent a third time.
      const second = spawnWorker(database, ["--concurrency", "8"], workerKnobs)
      workers.push(second)
      await waitUntil(async () => (await states(subscriptionId))["succeeded"] === events, 30_000, "every delivery to succeed")
      second.child.kill("SIGTERM")
      await second.exited

      expect(receiver.handled.size).toBe(events)
      expect([...receiver.handled.values()].every((runs) => runs === 1)).toBe(true)
      expect(receiver.received).toHaveLength(events + 8)
      const reports = jsonLines(second.stdout())
      expect(reports).toHaveLength(events)
      expect(reports.filter((report) => report["reclaimed_stale"] === true)).toHaveLength(8)
      expect(reports.every((report) => report["response_status"] === 200)).toBe(true)
    }, 90_000)

    it("two workers in two processes on 1,000 events: every event delivered, duplicates counted (at least once, no loss)", async () => {
      const { organizationId, receiver, subscriptionId } = await newSubscription()
      const events = 1000
      await onStore(
        database,
        WebhookOutbox.use((outbox) =>
          Effect.forEach(
            Array.from({ length: events }, (_, index) => index),
            (index) =>
              outbox.publishTranscriptReady({
                eventId: WebhookEventId.make(unique("evt")),
                organizationId,
                encounterId: EncounterId.make(`enc_bulk_${index}`),
                documentId: DocumentId.make(`doc_bulk_${index}`),
                occurredAt: new Date()
              }),
            { concurrency: 4, discard: true }
          )
        )
      )
      const started = Date.now()
      const pair = [spawnWorker(database, ["--concurrency", "8"], workerKnobs), spawnWorker(database, ["--concurrency", "8"], workerKnobs)]
      workers.push(...pair)
      await waitUntil(async () => (await states(subscriptionId))["succeeded"] === events, 55_000, "every delivery to succeed")
      const elapsedMs = Date.now() - started
      for (const worker of pair) worker.child.kill("SIGTERM")
      await Promise.all(pair.map((worker) => worker.exited))

      const perWorker = pair.map((worker) => jsonLines(worker.stdout()).length)
      const duplicates = receiver.received.length - events
      console.log(JSON.stringify({ events, requests: receiver.received.length, duplicates, perWorker, elapsedMs }))
      expect(receiver.handled.size).toBe(events)
      expect([...receiver.handled.values()].every((runs) => runs === 1)).toBe(true)
      expect(duplicates).toBeGreaterThanOrEqual(0)
      expect(perWorker.every((attempts) => attempts > 0)).toBe(true)
      expect(await states(subscriptionId)).toEqual({ succeeded: events })
    }, 120_000)
  })
}
