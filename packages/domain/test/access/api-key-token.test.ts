import { createHmac, randomBytes } from "node:crypto"
import { readFileSync } from "node:fs"
import { crc32 } from "node:zlib"
import { describe, expect, it } from "@effect/vitest"
import { Redacted } from "effect"
import * as fc from "fast-check"
import {
  apiKeyChecksum,
  computeApiKeyDigest,
  generateApiKeyToken,
  hasTestPrefix,
  type KeyEnvironment,
  parseApiKeyToken
} from "../../src/access/api-key-token.js"
import { prop } from "../support/prop.js"

interface KeyVectors {
  readonly well_formed: ReadonlyArray<string>
  readonly malformed: ReadonlyArray<{ readonly token: string; readonly why: string }>
}

// The key format's test vectors (docs/behaviour.md, "API keys"), kept beside the tests.
const vectors: KeyVectors = JSON.parse(
  readFileSync(new URL("../vectors/key-vectors.json", import.meta.url), "utf8")
)

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/** Independent reading of a base62 checksum (the implementation only ever encodes). */
const decodeBase62 = (digits: string): number =>
  [...digits].reduce((value, digit) => value * 62 + ALPHABET.indexOf(digit), 0)

/** A byte source that cycles through `bytes`; the first byte is forced below 248 so it always yields characters. */
const cyclingSource = (bytes: Uint8Array) => {
  let position = 0
  const consumed: Array<number> = []
  const source = (size: number): Uint8Array => {
    const out = new Uint8Array(size)
    for (let i = 0; i < size; i++) {
      out[i] = bytes[position % bytes.length] ?? 0
      consumed.push(out[i] ?? 0)
      position++
    }
    return out
  }
  return { source, consumed }
}

const byteStreams = fc.uint8Array({ minLength: 1, maxLength: 120 }).map((bytes) => {
  bytes[0] = (bytes[0] ?? 0) % 248
  return bytes
})
const environments = fc.constantFrom<KeyEnvironment>("live", "test")
const base62Strings = (length: number) =>
  fc.array(fc.constantFrom(...ALPHABET), { minLength: length, maxLength: length }).map((chars) => chars.join(""))

describe("API-key tokens (docs/behaviour.md, API keys)", () => {
  describe("key-vectors.json", () => {
    it("has vectors to check", () => {
      expect(vectors.well_formed.length).toBeGreaterThan(0)
      expect(vectors.malformed.length).toBeGreaterThan(0)
    })

    for (const token of vectors.well_formed) {
      it(`well-formed: ${token}`, () => {
        const environment = token.startsWith("ce_test_") ? "test" : "live"
        expect(parseApiKeyToken(token)).toEqual({ token, environment })
        expect(apiKeyChecksum(token.slice(8, 38))).toBe(token.slice(38))
      })
    }

    for (const { token, why } of vectors.malformed) {
      it(`malformed (${why}): ${token}`, () => {
        expect(parseApiKeyToken(token)).toBeUndefined()
      })
    }
  })

  describe("apiKeyChecksum", () => {
    prop("is 6 base62 digits whose value is the CRC-32 of the ASCII bytes", [base62Strings(30)], ([random]) => {
      const checksum = apiKeyChecksum(random)
      expect(checksum).toMatch(/^[0-9A-Za-z]{6}$/)
      expect(decodeBase62(checksum)).toBe(crc32(Buffer.from(random, "ascii")))
    })

    it("left-pads with 0 (a small CRC gives leading zeros)", () => {
      // Search a short space for an input whose CRC-32 is below 62^5, i.e. needs padding.
      const random = Array.from({ length: 5000 }, (_, i) => `${i}`.padStart(30, "a")).find(
        (candidate) => crc32(candidate) < 62 ** 5
      )
      expect(random).toBeDefined()
      if (random === undefined) return
      expect(apiKeyChecksum(random)).toMatch(/^0[0-9A-Za-z]{5}$/)
      expect(decodeBase62(apiKeyChecksum(random))).toBe(crc32(random))
    })
  })

  describe("parseApiKeyToken", () => {
    const valid = vectors.well_formed[0] ?? ""

    it.each([
      ["empty", ""],
      ["prefix only", "ce_live_"],
      ["one character too many", `${valid}0`],
      ["trailing newline", `${valid}\n`],
      ["leading space", ` ${valid}`],
      ["mixed-case prefix", `Ce_live_${valid.slice(8)}`],
      ["non-ASCII letter in the random part", `${valid.slice(0, 10)}é${valid.slice(11)}`]
    ])("refuses %s", (_, token) => {
      expect(parseApiKeyToken(token)).toBeUndefined()
    })

    prop(
      "changing any one character of a valid token makes it malformed",
      [environments, byteStreams, fc.nat({ max: 43 }), fc.constantFrom(...ALPHABET, "-", "_", " ", "é", "=")],
      ([environment, bytes, position, replacement]) => {
        const token = generateApiKeyToken(environment, cyclingSource(bytes).source)
        fc.pre(token[position] !== replacement)
        const changed = token.slice(0, position) + replacement + token.slice(position + 1)
        expect(parseApiKeyToken(changed)).toBeUndefined()
      },
      { fastCheck: { numRuns: 500 } }
    )
  })

  describe("hasTestPrefix (raw, before the malformed check)", () => {
    it.each([
      ["ce_test_", true],
      ["ce_test_not-even-base62", true],
      [vectors.well_formed[1] ?? "", true],
      [vectors.well_formed[0] ?? "", false],
      ["CE_TEST_Zz0Zz0Zz0Zz0Zz0Zz0Zz0Zz0Zz0Zz04QJMyA", false],
      [" ce_test_x", false],
      ["ce_tes", false]
    ])("%s -> %s", (token, expected) => {
      expect(hasTestPrefix(token)).toBe(expected)
    })
  })

  describe("generateApiKeyToken", () => {
    prop(
      "generated tokens always parse and round-trip with their environment",
      [environments, byteStreams],
      ([environment, bytes]) => {
        const token = generateApiKeyToken(environment, cyclingSource(bytes).source)
        expect(token).toHaveLength(44)
        expect(token.startsWith(`ce_${environment}_`)).toBe(true)
        expect(parseApiKeyToken(token)).toEqual({ token, environment })
      }
    )

    prop(
      "the random characters are the accepted bytes (< 248) mod 62, in order, with no byte drawn in vain",
      [environments, byteStreams],
      ([environment, bytes]) => {
        const { source, consumed } = cyclingSource(bytes)
        const token = generateApiKeyToken(environment, source)
        const accepted = consumed.filter((byte) => byte < 248)
        expect(accepted).toHaveLength(30)
        expect(consumed.at(-1)).toBeLessThan(248)
        expect(token.slice(8, 38)).toBe(accepted.map((byte) => ALPHABET[byte % 62]).join(""))
      }
    )

    it("rejects bytes 248..255 instead of folding them onto 0-7 (no modulo bias)", () => {
      const { source } = cyclingSource(Uint8Array.from([248, 255, 0, 61, 62, 123, 252, 124, 185, 186, 247]))
      expect(generateApiKeyToken("live", source).slice(8, 38)).toBe("0z0z0z0z0z".repeat(3))
    })

    it("over a full cycle of byte values every base62 character is equally frequent", () => {
      // 124 tokens use 3720 = 15 × 248 accepted bytes: 15 full passes over 0..247, so each character 60 times.
      const { source } = cyclingSource(Uint8Array.from({ length: 256 }, (_, byte) => byte))
      const counts = new Map<string, number>()
      for (let i = 0; i < 124; i++) {
        for (const char of generateApiKeyToken("test", source).slice(8, 38)) counts.set(char, (counts.get(char) ?? 0) + 1)
      }
      expect(counts.size).toBe(62)
      expect([...counts.values()].every((count) => count === 60)).toBe(true)
    })

    it("works with node:crypto randomBytes, as the CLI uses it", () => {
      const tokens = Array.from({ length: 50 }, () => generateApiKeyToken("live", (size) => randomBytes(size)))
      expect(new Set(tokens).size).toBe(50)
      for (const token of tokens) expect(parseApiKeyToken(token)).toEqual({ token, environment: "live" })
    })
  })

  describe("computeApiKeyDigest", () => {
    it("matches a value computed independently with openssl (UTF-8 key and message)", () => {
      // printf '%s' "ce_live_0123456789abcdefghijABCDEFGHIJ3mpbCX" | openssl dgst -sha256 -hmac "digest-key-é"
      expect(computeApiKeyDigest(Redacted.make("digest-key-é"), "ce_live_0123456789abcdefghijABCDEFGHIJ3mpbCX")).toBe(
        "23c72b202f074c108122ed6ba3a08b767647d19ae5a3ac3626406034083ebbd9"
      )
    })

    prop(
      "is the lowercase hex HMAC-SHA256 of the token keyed with the digest key",
      [fc.string({ unit: "grapheme", minLength: 1 }), environments, byteStreams],
      ([digestKey, environment, bytes]) => {
        const token = generateApiKeyToken(environment, cyclingSource(bytes).source)
        const expected = createHmac("sha256", Buffer.from(digestKey, "utf8")).update(Buffer.from(token, "utf8")).digest("hex")
        expect(computeApiKeyDigest(Redacted.make(digestKey), token)).toBe(expected)
        expect(expected).toMatch(/^[0-9a-f]{64}$/)
      }
    )

    it("depends on the digest key", () => {
      const token = vectors.well_formed[0] ?? ""
      expect(computeApiKeyDigest(Redacted.make("one"), token)).not.toBe(computeApiKeyDigest(Redacted.make("two"), token))
    })
  })
})
