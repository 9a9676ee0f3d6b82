import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { definitionDocument, GENERATED_TYPES_PATH, generateTypes } from "../scripts/openapi-types.js"

describe("src/generated/openapi.ts", () => {
  it("is what the http-adapter's API definition generates now (else: pnpm --filter @clinical-api/client generate)", async () => {
    const committed = readFileSync(new URL(`../${GENERATED_TYPES_PATH}`, import.meta.url), "utf8")
    expect(await generateTypes(await definitionDocument())).toBe(committed)
  }, 120_000)
})
