import { request as httpRequest } from "node:http"

export interface RawBytesResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string | Array<string> | undefined>>
  readonly body: Buffer
  /** The parsed JSON body, or undefined when it is not JSON. */
  readonly json: unknown
}

/** Sends exactly `url`'s path and query (no normalisation) and reads the whole answer as bytes. */
export const requestBytes = (
  url: string,
  options: { readonly method?: string; readonly headers?: Record<string, string> } = {}
): Promise<RawBytesResponse> =>
  new Promise((resolve, reject) => {
    const target = new URL(url)
    const outgoing = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        method: options.method ?? "GET",
        path: `${target.pathname}${target.search}`,
        headers: options.headers ?? {}
      },
      (incoming) => {
        const chunks: Array<Buffer> = []
        incoming.on("data", (chunk: Buffer) => chunks.push(chunk))
        incoming.on("end", () => {
          const body = Buffer.concat(chunks)
          let json: unknown = undefined
          try {
            json = body.length === 0 ? undefined : JSON.parse(body.toString("utf8"))
          } catch {
            json = undefined
          }
          resolve({ status: incoming.statusCode ?? 0, headers: incoming.headers, body, json })
        })
        incoming.on("error", reject)
      }
    )
    outgoing.on("error", reject)
    outgoing.end()
  })
