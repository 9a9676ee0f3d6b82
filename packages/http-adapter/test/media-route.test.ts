import { AudioStorageUnavailable } from "@clinical-api/domain"
import { EmbeddedAudioObjects, MediaRefused } from "@clinical-api/storage-adapter"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { FindMyWay, HttpServerRequest } from "effect/http"
import { canonicalTarget, routerConfig } from "../src/server/exchange.js"
import { decideByteRange, MEDIA_ROUTE_PATH, serveMedia } from "../src/server/media.js"

const TOKEN = "cmVjX2FiYw.1900000000.c2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dQ"

const objectsThat = (readSigned: EmbeddedAudioObjects["Service"]["readSigned"]) =>
  EmbeddedAudioObjects.of({ read: () => Effect.succeed(Option.none()), readSigned })

const get = (headers: Record<string, string> = {}) =>
  HttpServerRequest.fromWeb(new Request(`http://127.0.0.1/media/${TOKEN}`, { headers }))

const jsonBody = (body: { readonly _tag: string }) => {
  if (body._tag !== "Uint8Array") return undefined
  const { body: bytes, text } = body as { readonly body?: Uint8Array; readonly text?: string }
  return JSON.parse(text ?? new TextDecoder().decode(bytes)) as unknown
}

/** The token the platform router reads from a path, given the canonical target as the exchange hands it. */
const router = FindMyWay.make<null>(routerConfig)
router.on("GET", MEDIA_ROUTE_PATH, null)
const matchMediaPath = (url: string): string | undefined => {
  const target = canonicalTarget(url)
  return target === undefined ? undefined : router.find("GET", target.path)?.params["token"]
}

describe("media route: byte ranges (decideByteRange)", () => {
  it("single ranges: a-b, a-, -n, end clamped to the last byte", () => {
    expect(decideByteRange("bytes=0-9", undefined, 100)).toEqual({ _tag: "Partial", start: 0, end: 9 })
    expect(decideByteRange("bytes=90-", undefined, 100)).toEqual({ _tag: "Partial", start: 90, end: 99 })
    expect(decideByteRange("bytes=-10", undefined, 100)).toEqual({ _tag: "Partial", start: 90, end: 99 })
    expect(decideByteRange("bytes=-1000", undefined, 100)).toEqual({ _tag: "Partial", start: 0, end: 99 })
    expect(decideByteRange("bytes=50-1000", undefined, 100)).toEqual({ _tag: "Partial", start: 50, end: 99 })
    expect(decideByteRange(" bytes = 1-2 ", undefined, 100)).toEqual({ _tag: "Partial", start: 1, end: 2 })
  })

  it("unsatisfiable (416): first byte at or past the end, a zero suffix, any range of an empty object", () => {
    expect(decideByteRange("bytes=100-", undefined, 100)).toEqual({ _tag: "Unsatisfiable" })
    expect(decideByteRange("bytes=100-200", undefined, 100)).toEqual({ _tag: "Unsatisfiable" })
    expect(decideByteRange("bytes=-0", undefined, 100)).toEqual({ _tag: "Unsatisfiable" })
    expect(decideByteRange("bytes=0-", undefined, 0)).toEqual({ _tag: "Unsatisfiable" })
    expect(decideByteRange("bytes=-5", undefined, 0)).toEqual({ _tag: "Unsatisfiable" })
  })

  it("decision: the whole object (200) for no Range, multi-range, invalid syntax, another unit, If-Range", () => {
    for (const range of [undefined, "bytes=0-1,5-6", "bytes=5-1", "bytes=x-y", "bytes=", "items=0-1", "bytes=--1", "0-1"]) {
      expect(decideByteRange(range, undefined, 100), String(range)).toEqual({ _tag: "Full" })
    }
    expect(decideByteRange("bytes=0-1", "\"etag\"", 100)).toEqual({ _tag: "Full" })
  })
})

describe("media route: path and failures (serveMedia)", () => {
  it("matches /media/{token}: exactly one non-empty segment (canonical target, platform router)", () => {
    expect(matchMediaPath(`/media/${TOKEN}`)).toBe(TOKEN)
    expect(matchMediaPath("/media/")).toBeUndefined()
    expect(matchMediaPath("/media")).toBeUndefined()
    expect(matchMediaPath(`/media/${TOKEN}/x`)).toBeUndefined()
    expect(matchMediaPath(`/Media/${TOKEN}`)).toBeUndefined()
    expect(matchMediaPath(`//media/${TOKEN}`)).toBeUndefined()
  })

  it.effect("a refused token (invalid, expired, object missing) is 404 route_not_found; the log detail names the reason, never the token", () =>
    Effect.gen(function* () {
      for (const reason of ["invalid_token", "expired_token", "object_missing"] as const) {
        const outcome = yield* serveMedia(objectsThat(() => Effect.fail(new MediaRefused({ reason }))), get(), TOKEN)
        expect(outcome.response.status).toBe(404)
        expect(outcome.reasonCode).toBe("route_not_found")
        expect(outcome.detail).toBe(`media refused: ${reason}`)
        expect(jsonBody(outcome.response.body)).toEqual({
          error: "public_api_not_found",
          reason_code: "route_not_found",
          message: "No route matches this path.",
          field: null
        })
      }
    })
  )

  it.effect("the embedded store unreachable is 503 audio_storage_unavailable; a defect too, never a 500", () =>
    Effect.gen(function* () {
      const unavailable = yield* serveMedia(
        objectsThat(() => Effect.fail(new AudioStorageUnavailable({ operation: "audio.read", cause: new Error(TOKEN) }))),
        get(),
        TOKEN
      )
      expect(unavailable.response.status).toBe(503)
      expect(unavailable.reasonCode).toBe("audio_storage_unavailable")
      expect(unavailable.detail).toBe("audio storage unavailable during audio.read")
      expect(jsonBody(unavailable.response.body)).toMatchObject({ reason_code: "audio_storage_unavailable", field: null })
      const defect = yield* serveMedia(objectsThat(() => Effect.die(new TypeError(TOKEN))), get(), TOKEN)
      expect(defect.response.status).toBe(503)
      expect(defect.detail).toBe("unexpected media failure: TypeError")
      expect(defect.detail).not.toContain(TOKEN)
    })
  )

  it.effect("an empty object: 200 with Content-Length 0", () =>
    Effect.gen(function* () {
      const outcome = yield* serveMedia(
        objectsThat(() => Effect.succeed({ contentType: "audio/mpeg", bytes: new Uint8Array() })),
        get(),
        TOKEN
      )
      expect(outcome.response.status).toBe(200)
      expect(outcome.response.headers["content-length"]).toBe("0")
      expect(outcome.response.headers["content-type"]).toBe("audio/mpeg")
    })
  )
})
