import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process"
import { randomBytes, randomUUID } from "node:crypto"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"
import {
  DocumentId,
  EncounterId,
  generateSigningSecret,
  makeTranscriptReadyEvent,
  OrganizationId,
  WebhookEventId
} from "@clinical-api/domain"
import { buildSignedDelivery, deliverWebhook } from "@clinical-api/webhook-adapter"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { contractFixture, tokens } from "./support/contract-fixture.js"
import type { StartedServer } from "./support/harness.js"
import { startMemoryServer } from "./support/memory-harness.js"

/**
 * `pnpm receiver` (packages/http-adapter/src/receiver.ts): the example receiver whose
 * follow-up goes through the typed client, as a child process, against the real server.
 */
const repositoryRoot = fileURLToPath(new URL("../../..", import.meta.url))

describe("pnpm receiver: the example receiver with the typed-client follow-up", () => {
  let server: StartedServer
  let receiver: ChildProcessWithoutNullStreams
  let receiverUrl = ""
  const lines: Array<string> = []
  const secret = generateSigningSecret(randomBytes)

  beforeAll(async () => {
    server = await startMemoryServer(contractFixture)
    receiver = spawn(process.execPath, ["--import", "tsx", "packages/http-adapter/src/receiver.ts"], {
      cwd: repositoryRoot,
      env: {
        ...process.env,
        RECEIVER_PORT: "0",
        RECEIVER_SECRETS: secret,
        RECEIVER_API_BASE_URL: server.baseUrl,
        RECEIVER_API_KEY: tokens.riversideFull
      },
      stdio: ["pipe", "pipe", "pipe"]
    })
    createInterface({ input: receiver.stdout }).on("line", (line) => lines.push(line))
    let stderr = ""
    receiverUrl = await new Promise<string>((resolve, reject) => {
      receiver.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk.toString("utf8")
        const match = /listening on (http:\/\/\S+)/.exec(stderr)
        if (match?.[1] !== undefined) resolve(match[1])
      })
      receiver.once("exit", (code) => reject(new Error(`receiver exited with ${code}: ${stderr}`)))
    })
  }, 60_000)

  afterAll(async () => {
    if (receiver?.exitCode === null) {
      const exited = new Promise((resolve) => receiver.once("exit", resolve))
      receiver.kill("SIGTERM")
      await exited
    }
    await server?.close()
  })

  const deliver = async (encounterId: string, documentId: string) => {
    const event = makeTranscriptReadyEvent({
      id: WebhookEventId.make(`evt_${randomUUID()}`),
      occurredAt: new Date(),
      organizationId: OrganizationId.make("org_riverside"),
      encounterId: EncounterId.make(encounterId),
      documentId: DocumentId.make(documentId)
    })
    const before = lines.length
    const delivery = buildSignedDelivery({ event, deliveryId: `dlv_${randomUUID()}`, secret, now: new Date() })
    const outcome = await Effect.runPromise(deliverWebhook({ url: receiverUrl, rawBody: delivery.rawBody, headers: delivery.headers }))
    const deadline = Date.now() + 10_000
    while (lines.length === before && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
    return { outcome, line: JSON.parse(lines[before] ?? "null") as { event_id: string; follow_up: string } }
  }

  it("a verified event fetches the transcript through the typed client: one disclosure, follow_up ok", async () => {
    const disclosuresBefore = (await server.disclosures()).length
    const { outcome, line } = await deliver("enc_a1", "doc_a1_tr")
    expect(outcome).toMatchObject({ _tag: "Response", status: 200 })
    expect(line.follow_up).toBe("ok")
    const events = (await server.disclosures()).slice(disclosuresBefore)
    expect(events.map((event) => [event.operationId, event.encounterId, event.documentId])).toEqual([
      ["getPublicDocumentTranscript", "enc_a1", "doc_a1_tr"]
    ])
  }, 30_000)

  it("a refusal of the follow-up carries the typed reason_code into the receipt line", async () => {
    const { line } = await deliver("enc_a1", "doc_a1_note")
    expect(line.follow_up).toBe("http_400_unsupported_document_type")
  }, 30_000)
})
