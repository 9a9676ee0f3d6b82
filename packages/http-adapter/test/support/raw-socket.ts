import { connect } from "node:net"

/** One HTTP/1.1 exchange over a raw socket: exactly these bytes go out, the answer is parsed by hand. */
export interface RawExchange {
  readonly status: number
  readonly headers: ReadonlyMap<string, string>
  readonly body: string
  /** The parsed JSON body, or undefined. */
  readonly json: unknown
}

export class NoAnswer extends Error {}

/**
 * Writes `bytes` on a new connection to `baseUrl`, with `Connection: close` semantics expected
 * from the request itself, and reads until the server closes or the response is complete.
 * Rejects with `NoAnswer` when nothing parseable comes back within `timeoutMs` (a hang) or the
 * connection closes without a status line.
 */
export const exchange = (baseUrl: string, bytes: Buffer | string, timeoutMs = 10_000): Promise<RawExchange> =>
  new Promise((resolve, reject) => {
    const url = new URL(baseUrl)
    const socket = connect(Number(url.port), url.hostname)
    const chunks: Array<Buffer> = []
    let done = false
    const finish = (outcome: RawExchange | Error) => {
      if (done) return
      done = true
      clearTimeout(timer)
      socket.destroy()
      if (outcome instanceof Error) reject(outcome)
      else resolve(outcome)
    }
    const tryParse = (final: boolean): RawExchange | undefined => {
      const all = Buffer.concat(chunks)
      const headerEnd = all.indexOf("\r\n\r\n")
      if (headerEnd === -1) return undefined
      const head = all.subarray(0, headerEnd).toString("latin1").split("\r\n")
      const statusMatch = /^HTTP\/1\.[01] (\d{3})/.exec(head[0] ?? "")
      if (statusMatch === null) return undefined
      const headers = new Map<string, string>()
      for (const line of head.slice(1)) {
        const colon = line.indexOf(":")
        if (colon > 0) headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim())
      }
      const rest = all.subarray(headerEnd + 4)
      const length = headers.get("content-length")
      let body: Buffer | undefined
      if (length !== undefined) {
        if (rest.length < Number(length)) return undefined
        body = rest.subarray(0, Number(length))
      } else if (headers.get("transfer-encoding")?.toLowerCase() === "chunked") {
        const decoded: Array<Buffer> = []
        let offset = 0
        for (;;) {
          const lineEnd = rest.indexOf("\r\n", offset)
          if (lineEnd === -1) return undefined
          const size = Number.parseInt(rest.subarray(offset, lineEnd).toString("latin1"), 16)
          if (Number.isNaN(size)) return undefined
          if (size === 0) break
          if (rest.length < lineEnd + 2 + size) return undefined
          decoded.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size))
          offset = lineEnd + 2 + size + 2
        }
        body = Buffer.concat(decoded)
      } else if (final) {
        body = rest
      } else return undefined
      const text = body.toString("utf8")
      let json: unknown = undefined
      try {
        json = text === "" ? undefined : JSON.parse(text)
      } catch {
        json = undefined
      }
      return { status: Number(statusMatch[1]), headers, body: text, json }
    }
    const timer = setTimeout(() => finish(new NoAnswer(`no answer within ${timeoutMs} ms`)), timeoutMs)
    socket.on("data", (chunk: Buffer) => {
      chunks.push(chunk)
      const parsed = tryParse(false)
      if (parsed !== undefined) finish(parsed)
    })
    socket.on("end", () => finish(tryParse(true) ?? new NoAnswer("the connection closed without an answer")))
    socket.on("close", () => finish(tryParse(true) ?? new NoAnswer("the connection closed without an answer")))
    // A server that closes while we still write (a refused oversized request) is fine: read what it said.
    socket.on("error", () => finish(tryParse(true) ?? new NoAnswer("the connection failed without an answer")))
    socket.write(bytes)
  })

/** A GET request with these raw target and header lines (each line written exactly as given). */
export const rawGet = (target: string | Buffer, headerLines: ReadonlyArray<string | Buffer> = []): Buffer =>
  Buffer.concat([
    Buffer.from("GET "),
    Buffer.isBuffer(target) ? target : Buffer.from(target, "latin1"),
    Buffer.from(" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"),
    ...headerLines.map((line) => Buffer.concat([Buffer.isBuffer(line) ? line : Buffer.from(line, "latin1"), Buffer.from("\r\n")])),
    Buffer.from("\r\n")
  ])
