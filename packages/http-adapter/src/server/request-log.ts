import { Context, Effect, Layer } from "effect"

/**
 * Where the one structured line per request goes. The line is built by the exchange
 * (see exchange.ts) from an allow-list of fields, so nothing else (no header, token, path id,
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

export class RequestLogSink extends Context.Service<RequestLogSink, {
  /** Takes one line, at once and without failing: it is called on every request's path. */
  readonly write: (line: string) => void
}>()("@clinical-api/http-adapter/RequestLogSink") {}

/**
 * One JSON line per request on standard output. Lines written in one turn of the event loop
 * leave in one write (a write to a file or pipe is a synchronous system call), at the latest
 * when the loop turns; the layer's release writes what is left.
 */
export const RequestLogSinkStdout: Layer.Layer<RequestLogSink> = Layer.effect(
  RequestLogSink,
  Effect.gen(function*() {
    let pending = ""
    let scheduled = false
    const flush = () => {
      scheduled = false
      if (pending === "") return
      const text = pending
      pending = ""
      process.stdout.write(text)
    }
    yield* Effect.addFinalizer(() => Effect.sync(flush))
    return RequestLogSink.of({
      write: (line) => {
        pending += `${line}\n`
        if (!scheduled) {
          scheduled = true
          setImmediate(flush)
        }
      }
    })
  })
)

/** A sink that keeps the lines in memory, for tests that read or scan the whole log. */
export const makeRequestLogCollector = (): {
  readonly layer: Layer.Layer<RequestLogSink>
  readonly lines: () => ReadonlyArray<string>
} => {
  const lines: Array<string> = []
  return {
    layer: Layer.succeed(RequestLogSink, RequestLogSink.of({ write: (line) => void lines.push(line) })),
    lines: () => [...lines]
  }
}
