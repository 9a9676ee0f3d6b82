import { describe, expect, it } from "@effect/vitest"
import { Option, Redacted } from "effect"
import { signMediaToken, verifyMediaToken } from "../src/index.js"

const key = Redacted.make("media-signing-key")

describe("embedded audio storage: signed media tokens", () => {
  it("grants the storage key until the expiry and not at or after it", () => {
    const token = signMediaToken(key, "rec_abc", 1_800_000_000)
    expect(verifyMediaToken(key, token, 1_799_999_999_999)).toEqual(Option.some("rec_abc"))
    expect(verifyMediaToken(key, token, 1_800_000_000_000)).toEqual(Option.none())
  })

  it("refuses a token signed with another key, or with a changed expiry or storage key", () => {
    const token = signMediaToken(key, "rec_abc", 1_800_000_000)
    expect(verifyMediaToken(Redacted.make("other"), token, 0)).toEqual(Option.none())
    const [storageKey, , signature] = token.split(".")
    expect(verifyMediaToken(key, `${storageKey}.1900000000.${signature}`, 0)).toEqual(Option.none())
    expect(verifyMediaToken(key, `${Buffer.from("rec_other").toString("base64url")}.1800000000.${signature}`, 0)).toEqual(
      Option.none()
    )
    expect(verifyMediaToken(key, "garbage", 0)).toEqual(Option.none())
  })
})
