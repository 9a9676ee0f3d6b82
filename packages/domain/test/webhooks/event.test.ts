import { describe, expect, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import {
  ENDPOINT_TEST,
  EndpointTestEvent,
  makeEndpointTestEvent,
  makeTranscriptReadyEvent,
  serializeWebhookEvent,
  TRANSCRIPT_READY,
  TranscriptReadyEvent,
  WEBHOOK_API_VERSION,
  webhookEventBody,
  WebhookHeaders
} from "../../src/webhooks/index.js"
import { DocumentId, EncounterId, OrganizationId, WebhookEventId } from "../../src/ids.js"
import { exactParseOptions } from "../../src/resources.js"
import { webhookVectors } from "./vectors.js"

const decode = Schema.decodeUnknownResult(TranscriptReadyEvent, exactParseOptions)

const valid = {
  id: "evt_01",
  type: "recording.transcript_ready",
  api_version: "2026-05-01",
  occurred_at: "2026-05-01T12:00:00.000Z",
  organization_id: "org_a",
  resources: { encounter_id: "enc_1", document_id: "doc_1" }
}

describe("webhook event (contract 6.1)", () => {
  it("names the contract constants and header names", () => {
    expect(WEBHOOK_API_VERSION).toBe("2026-05-01")
    expect(TRANSCRIPT_READY).toBe("recording.transcript_ready")
    expect(ENDPOINT_TEST).toBe("webhook.endpoint_test")
    expect(WebhookHeaders).toEqual({
      eventId: "Service-Event-Id",
      deliveryId: "Service-Delivery-Id",
      timestamp: "Service-Timestamp",
      signature: "Service-Signature",
      version: "Service-Webhook-Version"
    })
  })

  it("decodes every vector body and keeps occurred_at as the exact text sent", () => {
    for (const vector of webhookVectors) {
      const decoded = decode(JSON.parse(vector.raw_body))
      expect(Result.isSuccess(decoded)).toBe(true)
    }
    const second = webhookVectors[1]
    expect(second).toBeDefined()
    const event = Schema.decodeUnknownSync(TranscriptReadyEvent)(JSON.parse(second?.raw_body ?? ""))
    expect(event.occurred_at).toBe("2026-05-01T12:00:00Z")
    expect(event.organization_id).toBe("org_é")
  })

  it("serialises to the exact compact body of the first vector, keys in contract order", () => {
    const first = webhookVectors[0]
    const event = Schema.decodeUnknownSync(TranscriptReadyEvent)(JSON.parse(first?.raw_body ?? ""))
    expect(serializeWebhookEvent(event)).toBe(first?.raw_body)
    expect(new TextDecoder().decode(webhookEventBody(event))).toBe(first?.raw_body)
  })

  it("serialises a non-ASCII value as UTF-8 bytes", () => {
    const event = Schema.decodeUnknownSync(TranscriptReadyEvent)({ ...valid, organization_id: "org_é" })
    const bytes = webhookEventBody(event)
    expect(Buffer.from(bytes).includes(Buffer.from([0xc3, 0xa9]))).toBe(true)
  })

  it("makeTranscriptReadyEvent builds the contract shape with occurred_at in UTC milliseconds", () => {
    const event = makeTranscriptReadyEvent({
      id: WebhookEventId.make("evt_01"),
      occurredAt: new Date("2026-05-01T12:00:00Z"),
      organizationId: OrganizationId.make("org_a"),
      encounterId: EncounterId.make("enc_1"),
      documentId: DocumentId.make("doc_1")
    })
    expect(serializeWebhookEvent(event)).toBe(webhookVectors[0]?.raw_body)
  })

  it("refuses an extra key, at the top and inside resources (no other fields)", () => {
    expect(Result.isFailure(decode({ ...valid, transcript: "text" }))).toBe(true)
    expect(Result.isFailure(decode({ ...valid, resources: { ...valid.resources, patient_id: "p" } }))).toBe(true)
  })

  it("requires every field", () => {
    for (const key of Object.keys(valid)) {
      const partial: Record<string, unknown> = { ...valid }
      delete partial[key]
      expect(Result.isFailure(decode(partial)), key).toBe(true)
    }
    expect(Result.isFailure(decode({ ...valid, resources: { encounter_id: "enc_1" } }))).toBe(true)
    expect(Result.isFailure(decode({ ...valid, resources: { document_id: "doc_1" } }))).toBe(true)
  })

  it("refuses empty ids, another type or api_version, and an occurred_at that is not a date-time", () => {
    expect(Result.isFailure(decode({ ...valid, id: "" }))).toBe(true)
    expect(Result.isFailure(decode({ ...valid, organization_id: "" }))).toBe(true)
    expect(Result.isFailure(decode({ ...valid, resources: { encounter_id: "", document_id: "d" } }))).toBe(true)
    expect(Result.isFailure(decode({ ...valid, resources: { encounter_id: "e", document_id: "" } }))).toBe(true)
    expect(Result.isFailure(decode({ ...valid, type: "webhook.endpoint_test" }))).toBe(true)
    expect(Result.isFailure(decode({ ...valid, api_version: "2026-06-01" }))).toBe(true)
    expect(Result.isFailure(decode({ ...valid, occurred_at: "yesterday" }))).toBe(true)
    expect(Result.isFailure(decode({ ...valid, occurred_at: "2026-02-30T00:00:00Z" }))).toBe(true)
    expect(Result.isFailure(decode({ ...valid, occurred_at: "2026-05-01T12:00:00" }))).toBe(true)
  })

  it("has the identifier RecordingTranscriptReadyEvent", () => {
    expect(TranscriptReadyEvent.ast.annotations?.identifier).toBe(
      "RecordingTranscriptReadyEvent"
    )
  })

  it("webhook.endpoint_test is its own strict shape without resources", () => {
    const event = makeEndpointTestEvent({
      id: WebhookEventId.make("evt_t"),
      occurredAt: new Date("2026-05-01T12:00:00Z"),
      organizationId: OrganizationId.make("org_a")
    })
    expect(JSON.parse(serializeWebhookEvent(event))).toEqual({
      id: "evt_t",
      type: "webhook.endpoint_test",
      api_version: "2026-05-01",
      occurred_at: "2026-05-01T12:00:00.000Z",
      organization_id: "org_a"
    })
    const decodeTest = Schema.decodeUnknownResult(EndpointTestEvent, exactParseOptions)
    expect(Result.isSuccess(decodeTest(JSON.parse(serializeWebhookEvent(event))))).toBe(true)
    expect(Result.isFailure(decodeTest({ ...JSON.parse(serializeWebhookEvent(event)), resources: {} }))).toBe(true)
  })
})
