import { Context, Effect, Layer } from "effect"

/**
 * Where the one structured line per request goes. The line is built by the HTTP app
 * (see app.ts) from an allow-list of fields, so nothing else (no header, token, path id,
 * signed URL or body) can reach the sink.
 */
export interface RequestLogEntry {
  readonly level: "info" | "warn" | "error"
  readonly message: "http_request"
  readonly time: string
  readonly request_id: string
  readonly method: string
  /** The route template (`/external/v1/encounters/{encounter_id}`), never the concrete path. */
  readonly route: string | null
  readonly operation_id: string | null
  readonly status: number
  readonly reason_code: string | null
  readonly organization_id: string | null
  readonly duration_ms: number
  /** Operator detail of a failure (the domain's `detail`, or the class of a defect). */
  readonly detail: string | null
}

export class RequestLogSink extends Context.Tag("@clinical-api/http-adapter/RequestLogSink")<
  RequestLogSink,
  { readonly write: (line: string) => Effect.Effect<void> }
>() {}

/** One JSON line per request on standard output. */
export const RequestLogSinkStdout: Layer.Layer<RequestLogSink> = Layer.succeed(
  RequestLogSink,
  RequestLogSink.of({ write: (line) => Effect.sync(() => void process.stdout.write(`${line}\n`)) })
)

/** A sink that keeps the lines in memory, for tests that read or scan the whole log. */
export const makeRequestLogCollector = (): {
  readonly layer: Layer.Layer<RequestLogSink>
  readonly lines: () => ReadonlyArray<string>
} => {
  const lines: Array<string> = []
  return {
    layer: Layer.succeed(RequestLogSink, RequestLogSink.of({ write: (line) => Effect.sync(() => void lines.push(line)) })),
    lines: () => [...lines]
  }
}
