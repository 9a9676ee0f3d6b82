import { randomUUID } from "node:crypto"
import type { Duplex } from "node:stream"
import { PublicApiError } from "@clinical-api/domain"

/**
 * Requests Node's HTTP parser refuses before there is a request at all (docs/operations.md, "Limits"):
 * request line plus headers over `MAX_HEADER_BYTES` (431), a request that is not HTTP/1.x
 * (bytes that are not a token in a header name, CR or LF or NUL in a header value, a bad
 * request line, a bad chunked body: 400), or one not received in time (408). Node would
 * answer these with an empty body; the service answers them with the same four-field JSON
 * body as every other refusal, `Cache-Control: no-store`, an `X-Request-Id`, then closes the
 * connection (the parser cannot find the next request on it). Their reason codes are in the
 * domain's catalogue, marked outside the contract: the API never saw the request.
 */
type TransportReasonCode = "request_header_fields_too_large" | "malformed_http_request" | "request_timeout"

const statusTexts: Record<TransportReasonCode, string> = {
  request_header_fields_too_large: "Request Header Fields Too Large",
  malformed_http_request: "Bad Request",
  request_timeout: "Request Timeout"
}

const reasonFor = (code: string | undefined): TransportReasonCode =>
  code === "HPE_HEADER_OVERFLOW"
    ? "request_header_fields_too_large"
    : code === "ERR_HTTP_REQUEST_TIMEOUT" || code === "HPE_HEADER_TIMEOUT"
    ? "request_timeout"
    : "malformed_http_request"

/** The raw HTTP/1.1 response of a transport refusal (no request object exists to answer with). */
export const transportRefusalResponse = (code: string | undefined): string => {
  const reasonCode = reasonFor(code)
  const refusal = PublicApiError.of(reasonCode)
  const body = JSON.stringify(refusal.toResponse())
  return [
    `HTTP/1.1 ${refusal.status} ${statusTexts[reasonCode]}`,
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
