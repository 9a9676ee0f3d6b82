import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { isWellFormedSigningSecret, type TranscriptReadyEvent } from "@clinical-api/domain"
import { Config, Context, Effect, Layer, Option, Redacted, Result, type Scope } from "effect"
import { refine } from "../internal/config.js"
import { IdempotencyStore, type IdempotencyStoreService, type IdempotencyStoreUnavailable } from "./idempotency-store.js"
import { makeIdempotencyStoreMemory } from "./idempotency-store-memory.js"
import { IdempotencyStorePostgresFromUrl } from "./idempotency-store-postgres.js"
import { makeWebhookRequestHandler, type WebhookReceiptOutcome } from "./request-handler.js"

export interface ExampleReceiverConfig {
  /** 0 picks a free port (printed on stderr at start). */
  readonly port: number
  readonly host: string
  readonly secrets: ReadonlyArray<Redacted.Redacted<string>>
  /** Both or neither: the follow-up fetch of the transcript is made only when both are set. */
  readonly api: Option.Option<{ readonly baseUrl: URL; readonly apiKey: Redacted.Redacted<string> }>
  /** PostgreSQL idempotency store when set; in-memory otherwise. */
  readonly databaseUrl: Option.Option<Redacted.Redacted<string>>
}

// Config.String, not Config.Redacted: only Redacted values leave this parser, and no message
// quotes a value. Absent is refused here, with the same message as an empty list.
const secretsConfig = Config.option(Config.String("RECEIVER_SECRETS")).pipe(
  refine((value) => {
    const entries = Option.getOrElse(value, () => "").split(",").map((entry) => entry.trim()).filter((entry) => entry !== "")
    if (entries.length === 0) {
      return Result.fail("RECEIVER_SECRETS must list at least one signing secret (comma-separated whsec_... values)")
    }
    const badEntry = entries.findIndex((entry) => !isWellFormedSigningSecret(entry))
    if (badEntry !== -1) {
      // The position only: a secret is never echoed, even a malformed one.
      return Result.fail(`RECEIVER_SECRETS entry ${badEntry + 1} is not a signing secret (whsec_ followed by 43 base64url characters)`)
    }
    return Result.succeed(entries.map((entry) => Redacted.make(entry)))
  })
)

const portConfig = Config.String("RECEIVER_PORT").pipe(
  refine((text) => {
    const port = /^[0-9]+$/.test(text.trim()) ? Number(text.trim()) : Number.NaN
    return Number.isSafeInteger(port) && port >= 0 && port <= 65535
      ? Result.succeed(port)
      : Result.fail("RECEIVER_PORT must be a TCP port number from 0 to 65535 (0 picks a free port)")
  }),
  Config.withDefault(8787)
)

const apiBaseUrlConfig = Config.String("RECEIVER_API_BASE_URL").pipe(
  refine((text) => {
    const url = URL.parse(text.trim())
    return url !== null && (url.protocol === "http:" || url.protocol === "https:")
      ? Result.succeed(url)
      : Result.fail("RECEIVER_API_BASE_URL must be an http or https URL, e.g. https://api.example.com")
  })
)

const apiConfig = Config.all({
  baseUrl: Config.option(apiBaseUrlConfig),
  apiKey: Config.option(Config.Redacted("RECEIVER_API_KEY"))
}).pipe(
  refine(({ apiKey, baseUrl }): Result.Result<ExampleReceiverConfig["api"], string> => {
    if (Option.isSome(baseUrl) && Option.isSome(apiKey)) {
      if (Redacted.value(apiKey.value).trim() === "") return Result.fail("RECEIVER_API_KEY is empty")
      return Result.succeed(Option.some({ baseUrl: baseUrl.value, apiKey: apiKey.value }))
    }
    if (Option.isNone(baseUrl) && Option.isNone(apiKey)) return Result.succeed(Option.none())
    return Result.fail(
      `RECEIVER_API_BASE_URL and RECEIVER_API_KEY must be set together (or neither, to skip follow-up fetches); ${
        Option.isSome(baseUrl) ? "RECEIVER_API_KEY" : "RECEIVER_API_BASE_URL"
      } is missing`
    )
  })
)

/** The example receiver's environment, validated. */
export const ExampleReceiverConfig: Config.Config<ExampleReceiverConfig> = Config.all({
  port: portConfig,
  host: Config.String("RECEIVER_HOST").pipe(Config.withDefault("127.0.0.1")),
  secrets: secretsConfig,
  api: apiConfig,
  databaseUrl: Config.option(Config.Redacted("RECEIVER_DATABASE_URL"))
})

/** `skipped`, `ok`, or why the follow-up fetch failed (`http_404`, `timeout`, `network_error`). */
export type FollowUpResult = string

/**
 * The follow-up work for an event. It never fails: the example reports the outcome in its log
 * line and completes the event either way (see `runExampleReceiver`).
 */
export type FollowUp = (event: TranscriptReadyEvent) => Effect.Effect<FollowUpResult>

export const FOLLOW_UP_TIMEOUT_MS = 15_000

/**
 * The default follow-up: GET the transcript the event points at with the bearer key, and report
 * the status. The transcript itself is discarded unread.
 */
export const fetchTranscriptFollowUp =
  (options: { readonly baseUrl: URL; readonly apiKey: Redacted.Redacted<string>; readonly timeoutMs?: number }): FollowUp =>
  (event) =>
    Effect.promise(async (): Promise<FollowUpResult> => {
      const base = options.baseUrl.href.replace(/\/+$/, "")
      const { encounter_id, document_id } = event.resources
      const url = `${base}/external/v1/encounters/${encodeURIComponent(encounter_id)}/documents/${encodeURIComponent(document_id)}/transcript`
      try {
        const response = await fetch(url, {
          headers: { Authorization: `Bearer ${Redacted.value(options.apiKey)}`, Accept: "application/json" },
          signal: AbortSignal.timeout(options.timeoutMs ?? FOLLOW_UP_TIMEOUT_MS)
        })
        await response.body?.cancel()
        return response.ok ? "ok" : `http_${response.status}`
      } catch (error) {
        return error instanceof DOMException && error.name === "TimeoutError" ? "timeout" : "network_error"
      }
    })

/** One stdout line per verified event. */
export interface ReceiptLine {
  readonly received_at: string
  readonly event_id: string
  readonly delivery_id: string
  readonly type: string
  readonly organization_id: string
  readonly encounter_id: string | null
  readonly document_id: string | null
  readonly duplicate: boolean
  readonly follow_up: FollowUpResult
}

/** The line for an outcome that carries a verified event; `undefined` for the others. */
export const receiptLine = (outcome: WebhookReceiptOutcome<FollowUpResult>, receivedAt: Date): ReceiptLine | undefined => {
  const base = (event: { readonly id: string; readonly type: string; readonly organization_id: string }, deliveryId: string) => ({
    received_at: receivedAt.toISOString(),
    event_id: event.id,
    delivery_id: deliveryId,
    type: event.type,
    organization_id: event.organization_id
  })
  switch (outcome._tag) {
    case "Processed":
      return {
        ...base(outcome.event, outcome.deliveryId),
        encounter_id: outcome.event.resources.encounter_id,
        document_id: outcome.event.resources.document_id,
        duplicate: false,
        follow_up: outcome.result
      }
    case "Duplicate":
      return {
        ...base(outcome.event, outcome.deliveryId),
        encounter_id: outcome.event.resources.encounter_id,
        document_id: outcome.event.resources.document_id,
        duplicate: true,
        follow_up: "skipped"
      }
    case "EndpointTest":
      return {
        ...base(outcome.event, outcome.deliveryId),
        encounter_id: null,
        document_id: null,
        duplicate: false,
        follow_up: "skipped"
      }
    default:
      return undefined
  }
}

/** A stderr note for the outcomes that have no stdout line; names reasons only, never secrets or bodies. */
const diagnostic = (outcome: WebhookReceiptOutcome<FollowUpResult>): string | undefined => {
  switch (outcome._tag) {
    case "Rejected":
      return `rejected: ${outcome.reason} (${outcome.status})`
    case "IgnoredEventType":
      return `ignored: unsupported event type (${outcome.status})`
    case "BadRequest":
      return `refused: ${outcome.problem} (${outcome.status})`
    case "HandlerFailed":
      return `handler failed for ${outcome.event.id} (${outcome.status}); the claim was released`
    case "StoreUnavailable":
      return `idempotency store unavailable for ${outcome.eventId} (${outcome.status})`
    default:
      return undefined
  }
}

export interface RunningReceiver {
  readonly url: string
  readonly port: number
}

export interface ExampleReceiverOptions {
  readonly config: ExampleReceiverConfig
  /** Replaces the default follow-up (the composition root may wire the typed client here). */
  readonly followUp?: FollowUp
  readonly writeLine?: (line: string) => void
  readonly writeDiagnostic?: (line: string) => void
  readonly now?: () => Date
}

const storeFor = (config: ExampleReceiverConfig): Effect.Effect<IdempotencyStoreService, IdempotencyStoreUnavailable, Scope.Scope> =>
  Option.match(config.databaseUrl, {
    onNone: () => Effect.succeed(makeIdempotencyStoreMemory()),
    onSome: (url) =>
      Layer.build(IdempotencyStorePostgresFromUrl({ url })).pipe(Effect.map((context) => Context.get(context, IdempotencyStore)))
  })

/**
 * The example receiver: verifies, deduplicates by event id, runs the follow-up and writes one
 * JSON line per verified event. The follow-up is best effort here: its result goes into the
 * line and the event is completed either way, so a missing document does not turn into
 * redeliveries. A production receiver whose follow-up fails transiently should fail `handle`
 * instead, so the claim is released and the sender's retry runs it again.
 */
export const runExampleReceiver = (
  options: ExampleReceiverOptions
): Effect.Effect<RunningReceiver, IdempotencyStoreUnavailable | Error, Scope.Scope> =>
  Effect.gen(function* () {
    const { config } = options
    const store = yield* storeFor(config)
    const followUp: FollowUp =
      options.followUp ??
      Option.match(config.api, {
        onNone: (): FollowUp => () => Effect.succeed("skipped"),
        onSome: (api) => fetchTranscriptFollowUp(api)
      })
    const writeLine = options.writeLine ?? ((line: string) => process.stdout.write(`${line}\n`))
    const writeDiagnostic = options.writeDiagnostic ?? ((line: string) => process.stderr.write(`${line}\n`))
    const now = options.now ?? (() => new Date())

    const handler = makeWebhookRequestHandler<FollowUpResult, never>({
      secrets: config.secrets,
      store,
      now,
      handle: (event) => followUp(event),
      onOutcome: (outcome) => {
        const line = receiptLine(outcome, now())
        if (line !== undefined) writeLine(JSON.stringify(line))
        const note = diagnostic(outcome)
        if (note !== undefined) writeDiagnostic(note)
      }
    })

    const server = http.createServer(handler)
    yield* Effect.acquireRelease(
      Effect.callback<void, Error>((resume) => {
        const onError = (error: Error) => resume(Effect.fail(error))
        server.once("error", onError)
        server.listen(config.port, config.host, () => {
          server.off("error", onError)
          resume(Effect.void)
        })
      }),
      () =>
        Effect.callback<void>((resume) => {
          server.close(() => resume(Effect.void))
          server.closeAllConnections()
        })
    )
    const { port } = server.address() as AddressInfo
    const host = config.host.includes(":") ? `[${config.host}]` : config.host
    return { url: `http://${host}:${port}`, port }
  })
