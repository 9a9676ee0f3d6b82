import { request as httpRequest } from "node:http"

export interface RawResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string | Array<string> | undefined>>
  readonly text: string
  /** The parsed JSON body, or undefined when there is none. */
  readonly body: unknown
}

/** Sends exactly `path` (no URL normalisation, unlike fetch) and reads the whole answer. */
export const send = (
  baseUrl: string,
  path: string,
  options: { readonly method?: string; readonly headers?: Record<string, string> } = {}
): Promise<RawResponse> =>
  new Promise((resolve, reject) => {
    const url = new URL(baseUrl)
    const outgoing = httpRequest(
      { host: url.hostname, port: url.port, method: options.method ?? "GET", path, headers: options.headers ?? {} },
      (incoming) => {
        const chunks: Array<Buffer> = []
        incoming.on("data", (chunk: Buffer) => chunks.push(chunk))
        incoming.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8")
          let body: unknown = undefined
          if (text !== "") {
            try {
              body = JSON.parse(text)
            } catch {
              body = undefined
            }
          }
          resolve({ status: incoming.statusCode ?? 0, headers: incoming.headers, text, body })
        })
        incoming.on("error", reject)
      }
    )
    outgoing.on("error", reject)
    outgoing.end()
  })

export const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` })

/** `encodeURIComponent` of each id, joined into the path of a route. */
export const paths = {
  list: (query = "") => `/external/v1/encounters${query}`,
  encounter: (encounterId: string, query = "") => `/external/v1/encounters/${encodeURIComponent(encounterId)}${query}`,
  document: (encounterId: string, documentId: string, query = "") =>
    `/external/v1/encounters/${encodeURIComponent(encounterId)}/documents/${encodeURIComponent(documentId)}${query}`,
  transcript: (encounterId: string, documentId: string, query = "") =>
    `/external/v1/encounters/${encodeURIComponent(encounterId)}/documents/${encodeURIComponent(documentId)}/transcript${query}`,
  audio: (encounterId: string, documentId: string, query = "") =>
    `/external/v1/encounters/${encodeURIComponent(encounterId)}/documents/${encodeURIComponent(documentId)}/audio${query}`
}
