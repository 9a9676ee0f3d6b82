import { randomBytes } from "node:crypto"
import { type WebhookSubscriptionId } from "@clinical-api/domain"
import { PgClient } from "@clinical-api/storage-adapter"
import { Effect } from "effect"
import postgres from "postgres"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createFreshDatabase, type FreshDatabase, runCli } from "../scripts/service-process.js"
import {
  activeSubscription,
  adminUrl,
  publishOne,
  startReceiver,
  type TestReceiver,
  type WebhookServices,
  webhookStackOn
} from "./cli-webhooks-support.js"

/**
 * The webhook worker on the runtime role (docs/operations.md, "Two database roles"): the owner
 * migrates, grants and sets up the subscription; the worker, connected as the runtime role
 * only, claims, sends and records a delivery. A grant the worker needs and the migrations do
 * not give fails here, not in production.
 */
describe.skipIf(adminUrl === "")("webhook delivery on the runtime role (DATABASE_URL)", () => {
  let database: FreshDatabase
  const role = `clinical_api_runtime_test_${randomBytes(6).toString("hex")}`
  let runtimeUrl: string
  let admin: postgres.Sql
  let receiver: TestReceiver | undefined

  const asOwner = <A, E>(effect: Effect.Effect<A, E, WebhookServices>) =>
    Effect.runPromise(Effect.scoped(Effect.provide(effect, webhookStackOn(database.url, 2))))

  beforeAll(async () => {
    database = await createFreshDatabase(adminUrl)
    admin = postgres(adminUrl, { max: 1, onnotice: () => {} })
    await admin.unsafe(`CREATE ROLE ${role} LOGIN`)
    const url = new URL(database.url)
    url.username = role
    runtimeUrl = url.toString()
    const migrated = await runCli(["migrate"], {
      DATABASE_URL: runtimeUrl,
      DATABASE_OWNER_URL: database.url,
      DATABASE_RUNTIME_ROLE: role
    })
    expect(migrated.code, migrated.stderr).toBe(0)
  }, 120_000)

  afterAll(async () => {
    await receiver?.close()
    await database?.drop()
    await admin?.unsafe(`DROP ROLE IF EXISTS ${role}`)
    await admin?.end({ timeout: 5 })
  })

  it("worker --once as the runtime role delivers a transcript_ready event, signed, and records it as succeeded", async () => {
    const { subscriptionId, secret } = await asOwner(
      Effect.gen(function* () {
        const subscription = yield* activeSubscription("http://127.0.0.1:9/webhooks")
        yield* publishOne(subscription.organizationId)
        return subscription
      })
    )
    receiver = await startReceiver({ secret })
    await asOwner(setEndpoint(subscriptionId, receiver.url))

    const worker = await runCli(["webhooks", "worker", "--once"], {
      DATABASE_URL: runtimeUrl,
      WEBHOOK_RUNTIME: "enabled",
      WEBHOOK_ATTEMPT_TIMEOUT_MS: "5000"
    })
    expect(worker.code, worker.stderr).toBe(0)
    expect(receiver.handled.size).toBe(1)
    expect([...receiver.handled.values()]).toEqual([1])
    const states = await asOwner(deliveryStates(subscriptionId))
    expect(states).toEqual({ succeeded: 1 })
  }, 120_000)
})

const setEndpoint = (subscriptionId: WebhookSubscriptionId, url: string) =>
  PgClient.use((client) =>
    client.run("test.setEndpoint", (sql) => sql`UPDATE webhook_subscriptions SET endpoint_url = ${url} WHERE subscription_id = ${subscriptionId}`)
  )

const deliveryStates = (subscriptionId: WebhookSubscriptionId) =>
  PgClient.use((client) =>
    client.run(
      "test.states",
      (sql) => sql<Array<{ state: string; n: number }>>`
        SELECT state, count(*)::int AS n FROM webhook_deliveries WHERE subscription_id = ${subscriptionId} GROUP BY state`
    )
  ).pipe(Effect.map((rows) => Object.fromEntries(rows.map((row) => [row.state, row.n]))))
