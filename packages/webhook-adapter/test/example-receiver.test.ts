import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"
import { afterAll, afterEach, describe, expect, it } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import { Effect } from "effect"
import postgres from "postgres"
import { buildSignedDelivery, deliverWebhook } from "../src/index.js"
import { newEvent, newSecret, startServer, type TestServer } from "./support.js"

const repositoryRoot = fileURLToPath(new URL("../../..", import.meta.url))
const entry = "packages/webhook-adapter/src/example-receiver.ts"

interface Receiver {
  readonly child: ChildProcessWithoutNullStreams
  readonly url: string
  readonly nextLine: () => Promise<string>
  readonly stderr: () => string
}

const children: Array<ChildProcessWithoutNullStreams> = []
const servers: Array<TestServer> = []
const stopAll = async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve))
      child.kill("SIGTERM")
      await exited
    }
  }
  await Promise.all(servers.splice(0).map((server) => server.close()))
}

const baseEnv = (): NodeJS.ProcessEnv => {
  const env = { ...process.env }
  for (const name of Object.keys(env)) if (name.startsWith("RECEIVER_")) delete env[name]
  return env
}

const spawnReceiver = (env: Readonly<Record<string, string>>) => {
  const child = spawn(process.execPath, ["--import", "tsx", entry], {
    cwd: repositoryRoot,
    env: { ...baseEnv(), ...env },
    stdio: ["pipe", "pipe", "pipe"]
  })
  children.push(child)
  let stderr = ""
  child.stderr.setEncoding("utf8")
  child.stderr.on("data", (chunk: string) => {
    stderr += chunk
  })
  return { child, stderr: () => stderr }
}

const startReceiver = async (env: Readonly<Record<string, string>>): Promise<Receiver> => {
  const { child, stderr } = spawnReceiver({ RECEIVER_PORT: "0", ...env })
  const lines: Array<string> = []
  const waiting: Array<(line: string) => void> = []
  createInterface({ input: child.stdout }).on("line", (line) => {
    const waiter = waiting.shift()
    if (waiter === undefined) lines.push(line)
    else waiter(line)
  })
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`receiver did not start: ${stderr()}`)), 20_000)
    const check = () => {
      const match = /listening on (http:\/\/\S+)/.exec(stderr())
      if (match?.[1] !== undefined) {
        clearTimeout(timer)
        child.stderr.off("data", check)
        resolve(match[1])
      }
    }
    child.stderr.on("data", check)
    child.once("exit", (code) => reject(new Error(`receiver exited with ${code}: ${stderr()}`)))
  })
  const nextLine = () =>
    new Promise<string>((resolve, reject) => {
      const ready = lines.shift()
      if (ready !== undefined) return resolve(ready)
      const timer = setTimeout(() => reject(new Error("no stdout line within 10 s")), 10_000)
      waiting.push((line) => {
        clearTimeout(timer)
        resolve(line)
      })
    })
  return { child, url, nextLine, stderr }
}

const exitOf = (child: ChildProcessWithoutNullStreams) =>
  new Promise<number | null>((resolve) => {
    if (child.exitCode !== null) resolve(child.exitCode)
    else child.once("exit", (code) => resolve(code))
  })

describe("example receiver (child process)", () => {
  afterEach(stopAll)

  it("one signed event: 200 and one JSON line; the redelivery: 200 and a line with duplicate true", async () => {
    const secret = newSecret()
    const receiver = await startReceiver({ RECEIVER_SECRETS: `${newSecret()},${secret}` })
    const event = newEvent()
    const delivery = buildSignedDelivery({ event, deliveryId: "dlv_example_1", secret, now: new Date() })
    expect(await Effect.runPromise(deliverWebhook({ url: `${receiver.url}/webhooks`, ...delivery }))).toEqual({
      _tag: "Response",
      status: 200
    })
    const line = JSON.parse(await receiver.nextLine())
    expect(line).toEqual({
      received_at: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/),
      event_id: event.id,
      delivery_id: "dlv_example_1",
      type: "recording.transcript_ready",
      organization_id: "org_a",
      encounter_id: event.resources.encounter_id,
      document_id: event.resources.document_id,
      duplicate: false,
      follow_up: "skipped"
    })
    const again = buildSignedDelivery({ event, deliveryId: "dlv_example_1", secret, now: new Date() })
    expect(await Effect.runPromise(deliverWebhook({ url: receiver.url, ...again }))).toEqual({ _tag: "Response", status: 200 })
    expect(JSON.parse(await receiver.nextLine())).toMatchObject({ event_id: event.id, duplicate: true, follow_up: "skipped" })
    // A refused delivery writes no stdout line, only a stderr note without the secret.
    const forged = buildSignedDelivery({ event: newEvent(), deliveryId: "dlv_x", secret: newSecret(), now: new Date() })
    expect(await Effect.runPromise(deliverWebhook({ url: receiver.url, ...forged }))).toEqual({ _tag: "Response", status: 401 })
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect(receiver.stderr()).toContain("rejected: invalid_signature (401)")
    expect(receiver.stderr()).not.toContain(secret)
    receiver.child.kill("SIGTERM")
    expect(await exitOf(receiver.child)).toBe(0)
  })

  it("with RECEIVER_API_BASE_URL and RECEIVER_API_KEY: GETs the transcript with the bearer key, follow_up ok or the status", async () => {
    const requests: Array<{ method: string | undefined; url: string | undefined; authorization: string | undefined }> = []
    let status = 200
    const api = await startServer((req, res) => {
      requests.push({ method: req.method, url: req.url, authorization: req.headers.authorization })
      res.writeHead(status, { "Content-Type": "application/json" }).end("{}")
    })
    servers.push(api)
    const secret = newSecret()
    const receiver = await startReceiver({
      RECEIVER_SECRETS: secret,
      RECEIVER_API_BASE_URL: `${api.url}/`,
      RECEIVER_API_KEY: "sk_test_follow_up"
    })
    const event = newEvent({ encounterId: "enc/1 a", documentId: "doc?2" })
    const delivery = buildSignedDelivery({ event, deliveryId: "dlv_follow", secret, now: new Date() })
    expect(await Effect.runPromise(deliverWebhook({ url: receiver.url, ...delivery }))).toEqual({ _tag: "Response", status: 200 })
    expect(JSON.parse(await receiver.nextLine())).toMatchObject({ event_id: event.id, duplicate: false, follow_up: "ok" })
    expect(requests).toEqual([
      {
        method: "GET",
        url: "/external/v1/encounters/enc%2F1%20a/documents/doc%3F2/transcript",
        authorization: "Bearer sk_test_follow_up"
      }
    ])
    status = 404
    const second = buildSignedDelivery({ event: newEvent(), deliveryId: "dlv_follow_2", secret, now: new Date() })
    await Effect.runPromise(deliverWebhook({ url: receiver.url, ...second }))
    expect(JSON.parse(await receiver.nextLine())).toMatchObject({ follow_up: "http_404" })
    expect(receiver.stderr()).not.toContain("sk_test_follow_up")
  })


  const databaseUrl = process.env["DATABASE_URL"]
  it.skipIf(databaseUrl === undefined || databaseUrl === "")(
    "two receiver processes on one PostgreSQL store (RECEIVER_DATABASE_URL): one event delivered to both runs once",
    async () => {
      const admin = postgres(databaseUrl ?? "", { max: 1, onnotice: () => undefined })
      const databaseName = `webhook_example_receiver_${randomBytes(6).toString("hex")}`
      await admin.unsafe(`CREATE DATABASE ${databaseName}`)
      try {
        const url = new URL(databaseUrl ?? "")
        url.pathname = `/${databaseName}`
        const secret = newSecret()
        const [one, two] = await Promise.all([
          startReceiver({ RECEIVER_SECRETS: secret, RECEIVER_DATABASE_URL: url.href }),
          startReceiver({ RECEIVER_SECRETS: secret, RECEIVER_DATABASE_URL: url.href })
        ])
        if (one === undefined || two === undefined) throw new Error("receivers did not start")
        const event = newEvent()
        const send = (receiver: Receiver, deliveryId: string) =>
          Effect.runPromise(
            deliverWebhook({ url: receiver.url, ...buildSignedDelivery({ event, deliveryId, secret, now: new Date() }) })
          )
        const outcomes = await Promise.all([send(one, "dlv_one"), send(two, "dlv_two")])
        for (const outcome of outcomes) expect(outcome._tag === "Response" && [200, 409].includes(outcome.status)).toBe(true)
        const lines = (await Promise.all([one.nextLine(), two.nextLine()])).map((line) => JSON.parse(line))
        expect(lines.filter((line) => line.duplicate === false)).toHaveLength(1)
        // After both answers, either receiver reports the event as a completed duplicate.
        expect(await send(two, "dlv_three")).toEqual({ _tag: "Response", status: 200 })
        expect(JSON.parse(await two.nextLine())).toMatchObject({ event_id: event.id, duplicate: true })
      } finally {
        await stopAll()
        await admin.unsafe(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`)
        await admin.end({ timeout: 5 })
      }
    }
  )
})

describe("example receiver: configuration is validated at start", () => {
  afterAll(stopAll)

  const badConfigurations: ReadonlyArray<{ readonly name: string; readonly env: Record<string, string>; readonly message: RegExp }> = [
    { name: "RECEIVER_SECRETS missing", env: {}, message: /RECEIVER_SECRETS/ },
    { name: "a malformed secret (not echoed)", env: { RECEIVER_SECRETS: "whsec_tooShortToBeReal" }, message: /RECEIVER_SECRETS entry 1 is not a signing secret/ },
    { name: "a port out of range", env: { RECEIVER_SECRETS: newSecret(), RECEIVER_PORT: "70000" }, message: /RECEIVER_PORT must be a TCP port/ },
    { name: "a base URL without a key", env: { RECEIVER_SECRETS: newSecret(), RECEIVER_API_BASE_URL: "http://127.0.0.1:1" }, message: /must be set together/ },
    { name: "a base URL that is not http(s)", env: { RECEIVER_SECRETS: newSecret(), RECEIVER_API_BASE_URL: "ftp://x", RECEIVER_API_KEY: "k" }, message: /RECEIVER_API_BASE_URL must be an http or https URL/ }
  ]

  for (const { env, message, name } of badConfigurations) {
    it(`bad configuration, ${name}: exit code 2 and a clear message`, async () => {
      const { child, stderr } = spawnReceiver({ RECEIVER_PORT: "0", ...env })
      expect(await exitOf(child)).toBe(2)
      expect(stderr()).toMatch(/^Invalid receiver configuration: /)
      expect(stderr()).toMatch(message)
      expect(stderr()).not.toContain("whsec_tooShortToBeReal")
    })
  }
})
