import { PublicApiError, type ReasonCode } from "@clinical-api/domain"
import { EmbeddedAudioObjects, type StoredAudioObject } from "@clinical-api/storage-adapter"
import { Cause, Effect, Layer, Option } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { Exchange, refuseOtherMethods, refusalResponse } from "./exchange.js"

/**
 * The embedded storage's media route, `GET|HEAD /media/{token}`, outside the contract: the
 * URL the audio route hands out when the service keeps the recordings itself.
 *
 * - The signed token is the credential: no API key, and no disclosure event (the disclosure
 *   was recorded when the audio route issued the URL).
 * - A tampered, malformed, expired or unknown token, or an object gone since, answers exactly
 *   like a path that does not exist: 404 `route_not_found`, four-field body, no byte of the
 *   recording. The reason is only in the log line's `detail`.
 * - `Range`: one byte range (`bytes=a-b`, `bytes=a-`, `bytes=-n`) answers 206 with
 *   `Content-Range`; an unsatisfiable one 416 with `Content-Range: bytes *\/size` and no body.
 *   A multi-range request, a syntactically invalid `Range` (or another unit) and any request
 *   with `If-Range` (the media has no validators to match) are answered 200 with the whole
 *   object, as RFC 9110 section 14.2 allows.
 * - `Cache-Control: no-store` (set by the exchange on every response): recordings are clinical
 *   data, and the URL is short-lived.
 * - The log line has the route template `/media/{token}` only, never the path.
 */
export const MEDIA_ROUTE_PATH = "/media/:token"

export type ByteRangeDecision =
  | { readonly _tag: "Full" }
  | { readonly _tag: "Partial"; readonly start: number; readonly end: number }
  | { readonly _tag: "Unsatisfiable" }

const FULL: ByteRangeDecision = { _tag: "Full" }
const UNSATISFIABLE: ByteRangeDecision = { _tag: "Unsatisfiable" }

/** What to send of an object of `size` bytes for the request's `Range` and `If-Range` headers. */
export const decideByteRange = (
  range: string | undefined,
  ifRange: string | undefined,
  size: number
): ByteRangeDecision => {
  if (range === undefined || ifRange !== undefined) return FULL
  const unit = /^\s*bytes\s*=(.*)$/i.exec(range)
  if (unit === null) return FULL
  const specs = (unit[1] ?? "").split(",").map((spec) => spec.trim()).filter((spec) => spec !== "")
  if (specs.length !== 1) return FULL
  const spec = specs[0] ?? ""
  const suffix = /^-([0-9]+)$/.exec(spec)
  if (suffix !== null) {
    const length = Number(suffix[1])
    if (length === 0 || size === 0) return UNSATISFIABLE
    return { _tag: "Partial", start: Math.max(0, size - length), end: size - 1 }
  }
  const bounded = /^([0-9]+)-([0-9]*)$/.exec(spec)
  if (bounded === null) return FULL
  const start = Number(bounded[1])
  const last = bounded[2] === undefined || bounded[2] === "" ? Number.POSITIVE_INFINITY : Number(bounded[2])
  if (last < start) return FULL
  if (start >= size) return UNSATISFIABLE
  return { _tag: "Partial", start, end: Math.min(last, size - 1) }
}

/** The response of the media route and what the request log notes of it. */
export interface MediaOutcome {
  readonly response: HttpServerResponse.HttpServerResponse
  readonly reasonCode: ReasonCode | null
  readonly detail: string | null
}

const refusal = (reasonCode: ReasonCode, detail: string): MediaOutcome => ({
  response: refusalResponse(new PublicApiError({ reasonCode, field: null, detail })),
  reasonCode,
  detail
})

const objectResponse = (
  object: StoredAudioObject,
  request: HttpServerRequest.HttpServerRequest
): MediaOutcome => {
  const size = object.bytes.byteLength
  const common = { "accept-ranges": "bytes", "x-content-type-options": "nosniff" }
  const decision = decideByteRange(request.headers["range"], request.headers["if-range"], size)
  switch (decision._tag) {
    case "Full":
      return {
        response: HttpServerResponse.uint8Array(object.bytes, {
          status: 200,
          contentType: object.contentType,
          headers: { ...common, "content-length": String(size) }
        }),
        reasonCode: null,
        detail: null
      }
    case "Partial": {
      const part = object.bytes.subarray(decision.start, decision.end + 1)
      return {
        response: HttpServerResponse.uint8Array(part, {
          status: 206,
          contentType: object.contentType,
          headers: {
            ...common,
            "content-length": String(part.byteLength),
            "content-range": `bytes ${decision.start}-${decision.end}/${size}`
          }
        }),
        reasonCode: null,
        detail: null
      }
    }
    case "Unsatisfiable":
      return {
        response: HttpServerResponse.empty({
          status: 416,
          headers: { ...common, "content-range": `bytes */${size}` }
        }),
        reasonCode: null,
        detail: "range not satisfiable"
      }
  }
}

/**
 * Serves one media request (GET or HEAD; the app refuses other methods first). Never fails:
 * a refused token is 404 `route_not_found`, an unreachable store 503 `audio_storage_unavailable`.
 */
export const serveMedia = (
  objects: EmbeddedAudioObjects["Service"],
  request: HttpServerRequest.HttpServerRequest,
  token: string
): Effect.Effect<MediaOutcome> =>
  objects.readSigned(token).pipe(
    Effect.map((object) => objectResponse(object, request)),
    Effect.catchTags({
      MediaRefused: (refused) => Effect.succeed(refusal("route_not_found", `media refused: ${refused.reason}`)),
      AudioStorageUnavailable: (cause) =>
        Effect.succeed(refusal("audio_storage_unavailable", `audio storage unavailable during ${cause.operation}`))
    }),
    Effect.catchCause((cause) => {
      const squashed = Cause.squash(cause)
      const kind = squashed instanceof Error ? squashed.name : typeof squashed
      return Effect.succeed(refusal("audio_storage_unavailable", `unexpected media failure: ${kind}`))
    })
  )

/**
 * `GET|HEAD /media/{token}` on the platform router when the storage keeps the recordings
 * itself (`EmbeddedAudioObjects` in the context); otherwise that path is 404 like any other.
 */
export const MediaRoutes = Layer.unwrap(
  Effect.map(Effect.serviceOption(EmbeddedAudioObjects), (media) =>
    Option.match(media, {
      onNone: () => Layer.empty,
      onSome: (objects) =>
        Layer.mergeAll(
          HttpRouter.add(
            "GET",
            MEDIA_ROUTE_PATH,
            // eslint-disable-next-line no-restricted-syntax -- made once, when the layer is built
            Effect.gen(function*() {
              const request = yield* HttpServerRequest.HttpServerRequest
              const { params } = yield* HttpRouter.RouteContext
              const exchange = yield* Exchange
              const outcome = yield* serveMedia(objects, request, params["token"] ?? "")
              exchange.reasonCode = outcome.reasonCode
              exchange.detail = outcome.detail
              return outcome.response
            })
          ),
          refuseOtherMethods([MEDIA_ROUTE_PATH])
        )
    }))
)
