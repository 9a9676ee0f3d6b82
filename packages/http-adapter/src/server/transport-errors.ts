import { randomUUID } from "node:crypto"
import type { Duplex } from "node:stream"

/**
 * Requests Node's HTTP parser refuses before there is a request at all (README, "Limits"):
 * request line plus headers over `MAX_HEADER_BYTES` (431), a request that is not HTTP/1.x
 * (bytes that are not a token in a header name, CR or LF or NUL in a header value, a bad
 * request line, a bad chunked body: 400), or one not received in time (408). Node would
 * answer these with an empty body; the service answers them with the same four-field JSON
 * body as every other refusal, `Cache-Control: no-store`, an `X-Request-Id`, then closes the
 * connection (the parser cannot find the next request on it). The two reason codes are
 * transport-level, outside the contract's catalogue: the API never saw the request.
 */
interface TransportRefusal {
  readonly status: 400 | 408 | 431
  readonly statusText: string
  readonly reasonCode: "request_header_fields_too_large" | "malformed_http_request" | "request_timeout"
  readonly message: string
}

const headerTooLarge: TransportRefusal = {
  status: 431,
  statusText: "Request Header Fields Too Large",
  reasonCode: "request_header_fields_too_large",
  message: "The request line and headers exceed 16 KiB."
}
const malformed: TransportRefusal = {
  status: 400,
  statusText: "Bad Request",
  reasonCode: "malformed_http_request",
  message: "The request is not valid HTTP/1.1."
}
const timedOut: TransportRefusal = {
  status: 408,
  statusText: "Request Timeout",
  reasonCode: "request_timeout",
  message: "The request was not received in time."
}

const refusalFor = (code: string | undefined): TransportRefusal =>
  code === "HPE_HEADER_OVERFLOW"
    ? headerTooLarge
    : code === "ERR_HTTP_REQUEST_TIMEOUT" || code === "HPE_HEADER_TIMEOUT"
    ? timedOut
    : malformed

/** The raw HTTP/1.1 response of a transport refusal (no request object exists to answer with). */
export const transportRefusalResponse = (code: string | undefined): string => {
  const refusal = refusalFor(code)
  const body = JSON.stringify({
    error: "public_api_bad_request",
    reason_code: refusal.reasonCode,
    message: refusal.message,
    field: null
  })
  return [
    `HTTP/1.1 ${refusal.status} ${refusal.statusText}`,
    "content-type: application/json",
    `content-length: ${Buffer.byteLength(body)}`,
    "cache-control: no-store",
    `x-request-id: req_${randomUUID().replaceAll("-", "")}`,
    "connection: close",
    "",
    body
  ].join("\r\n")
}

/** Node's `clientError` listener: answer once if the socket can still take it, then close. */
export const answerClientError = (error: Error & { readonly code?: string }, socket: Duplex): void => {
  if (error.code === "ECONNRESET" || !socket.writable) {
    socket.destroy()
    return
  }
  // A response already begun on this connection cannot be followed by another status line.
  const inProgress = "_httpMessage" in socket && socket._httpMessage !== null && socket._httpMessage !== undefined
  if (inProgress) {
    socket.destroy()
    return
  }
  socket.end(transportRefusalResponse(error.code))
}
