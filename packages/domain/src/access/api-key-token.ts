import { createHmac, createSecretKey, type KeyObject } from "node:crypto"
import { crc32 } from "node:zlib"
import { Redacted } from "effect"

/**
 * API-key tokens (docs/behaviour.md, "API keys"): `ce_live_` or `ce_test_`, 30 random base62
 * characters, then a 6-character base62 CRC-32 of those 30 characters. The checksum lets a
 * mistyped key be refused without a store lookup and lets secret scanners recognise leaks.
 */

export type KeyEnvironment = "live" | "test"

export interface ParsedApiKeyToken {
  readonly token: string
  readonly environment: KeyEnvironment
}

export const BASE62_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
export const API_KEY_RANDOM_LENGTH = 30
export const API_KEY_CHECKSUM_LENGTH = 6

const prefixOf: { readonly [E in KeyEnvironment]: string } = { live: "ce_live_", test: "ce_test_" }

/** Case-sensitive prefix, exactly 30 + 6 base62 characters, nothing else (no `m` flag: `$` is the end of input). */
const TOKEN_PATTERN = /^ce_(live|test)_([0-9A-Za-z]{30})([0-9A-Za-z]{6})$/

/**
 * CRC-32 (IEEE, as in zlib) of the ASCII bytes of `random30`, in base62, most significant
 * digit first, left-padded with `0` to 6 characters (62^6 > 2^32, so 6 always suffice).
 * Defined for base62 input, whose UTF-8 bytes are its ASCII bytes.
 */
export const apiKeyChecksum = (random30: string): string => {
  let remaining = crc32(random30)
  let digits = ""
  for (let position = 0; position < API_KEY_CHECKSUM_LENGTH; position++) {
    digits = BASE62_ALPHABET.charAt(remaining % 62) + digits
    remaining = Math.floor(remaining / 62)
  }
  return digits
}

/** The raw prefix test `production` refuses on; it runs before the well-formedness check. */
export const hasTestPrefix = (token: string): boolean => token.startsWith(prefixOf.test)

/** The token and its environment, or `undefined` when it is malformed (prefix, length, alphabet or checksum). */
export const parseApiKeyToken = (token: string): ParsedApiKeyToken | undefined => {
  const match = TOKEN_PATTERN.exec(token)
  if (match === null) return undefined
  const [, environment, random, checksum] = match
  if (random === undefined || checksum === undefined) return undefined
  if (apiKeyChecksum(random) !== checksum) return undefined
  return { token, environment: environment === "test" ? "test" : "live" }
}

/** Bytes at or above this bound are discarded so that `byte % 62` is uniform (248 = 4 × 62). */
const UNBIASED_BYTE_BOUND = 256 - (256 % 62)

/**
 * A new token with 30 uniformly random base62 characters. `randomBytes` is the entropy source
 * (`crypto.randomBytes` in the CLI); rejection sampling keeps the characters free of modulo bias.
 */
export const generateApiKeyToken = (
  environment: KeyEnvironment,
  randomBytes: (size: number) => Uint8Array
): string => {
  let random = ""
  while (random.length < API_KEY_RANDOM_LENGTH) {
    // Only as many bytes as characters are still missing: no entropy is drawn and thrown away.
    for (const byte of randomBytes(API_KEY_RANDOM_LENGTH - random.length)) {
      if (byte < UNBIASED_BYTE_BOUND) random += BASE62_ALPHABET.charAt(byte % 62)
      if (random.length === API_KEY_RANDOM_LENGTH) break
    }
  }
  return prefixOf[environment] + random + apiKeyChecksum(random)
}

/**
 * What the store keeps instead of the token: lowercase hex HMAC-SHA256 keyed with the UTF-8
 * bytes of the server's digest key, over the UTF-8 bytes of the token.
 */
export const computeApiKeyDigest = (digestKey: Redacted.Redacted<string>, token: string): string =>
  createHmac("sha256", hmacKeyOf(digestKey)).update(token, "utf8").digest("hex")

// An HMAC keyed with a KeyObject costs about a seventh of one keyed with bytes (which Node turns
// into a key each time), and every request computes one: one KeyObject per configured secret.
const hmacKeys = new WeakMap<Redacted.Redacted<string>, KeyObject>()

/** The HMAC key of a configured secret (its UTF-8 bytes), made once per `Redacted` value. */
export const hmacKeyOf = (secret: Redacted.Redacted<string>): KeyObject => {
  let key = hmacKeys.get(secret)
  if (key === undefined) {
    key = createSecretKey(Buffer.from(Redacted.value(secret), "utf8"))
    hmacKeys.set(secret, key)
  }
  return key
}
