import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { createHash } from "node:crypto"
import { ledgerSignerFromSecret, ledgerVerifierFromPublicKey } from "../src/index.js"
import { toHex } from "@clinical-api/domain"

const signer = ledgerSignerFromSecret("ledger crypto test key, at least 32 characters")
const reference = (data: Uint8Array | string) => createHash("sha256").update(data).digest("hex")

describe("the ledger's SHA-256", () => {
  it("of any text is SHA-256 of its UTF-8 bytes", () => {
    fc.assert(fc.property(fc.string({ unit: "grapheme" }), (text) => {
      expect(toHex(signer.sha256(text))).toBe(reference(text))
    }))
  })

  it("of any bytes, also a view into a larger buffer, is their SHA-256, in 32 bytes of its own", () => {
    fc.assert(fc.property(fc.uint8Array({ maxLength: 600 }), fc.nat({ max: 40 }), (bytes, offset) => {
      const larger = new Uint8Array(offset + bytes.length + 7).fill(0xff)
      larger.set(bytes, offset)
      const digest = signer.sha256(larger.subarray(offset, offset + bytes.length))
      expect(digest.length).toBe(32)
      expect(toHex(digest)).toBe(reference(bytes))
      // Digests share Buffer's pool: writing into one leaves the others as they were.
      signer.sha256(bytes).fill(0)
      expect(toHex(digest)).toBe(reference(bytes))
    }))
  })

  it("is the verifier's too, and a seal's signature checks with the public key alone", () => {
    const verifier = ledgerVerifierFromPublicKey(toHex(signer.publicKey))
    const message = new TextEncoder().encode("disclosure-seal/1\n")
    expect(verifier).not.toBeNull()
    expect(toHex(verifier!.sha256(message))).toBe(reference(message))
    expect(verifier!.verify(message, signer.sign(message))).toBe(true)
  })
})
