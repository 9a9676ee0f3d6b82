import { readFileSync } from "node:fs"
import { randomBytes } from "node:crypto"
import { generateApiKeyToken } from "@clinical-api/domain"
import { describe, expect, it } from "@effect/vitest"
import { Result } from "effect"
import { type Fixture, FixtureRejected, jsonPointerToPath, validateFixture } from "../src/index.js"

const exampleText = readFileSync(new URL("../fixtures/example.fixture.json", import.meta.url), "utf8")
const example = (): Fixture => JSON.parse(exampleText)

type Path = ReadonlyArray<string | number>

/** The JSON value at `path` of `root` (arrays and objects alike are indexed by key). */
const at = (root: unknown, path: Path): unknown =>
  path.reduce<unknown>((node, key) => (node !== null && typeof node === "object" ? Reflect.get(node, key) : undefined), root)

interface Editor {
  readonly get: (path: Path) => unknown
  readonly set: (path: Path, value: unknown) => void
  readonly remove: (path: Path) => void
}

/** The example fixture with changes made by `edit` on a deep copy. */
const edited = (edit: (fixture: Editor) => void): unknown => {
  const copy: unknown = JSON.parse(exampleText)
  const parent = (path: Path) => at(copy, path.slice(0, -1)) as object
  edit({
    get: (path) => structuredClone(at(copy, path)),
    set: (path, value) => void Reflect.set(parent(path), path.at(-1)!, value),
    remove: (path) => void Reflect.deleteProperty(parent(path), path.at(-1)!)
  })
  return copy
}

const rejection = (input: unknown) => {
  const result = validateFixture(input)
  if (Result.isSuccess(result)) throw new Error("expected the fixture to be refused")
  expect(result.failure).toBeInstanceOf(FixtureRejected)
  return result.failure
}

describe("fixture format (docs/fixture-format.md): schema and references", () => {
  it("accepts the example fixture, as a value and as JSON text", () => {
    expect(Result.isSuccess(validateFixture(example()))).toBe(true)
    expect(Result.isSuccess(validateFixture(exampleText))).toBe(true)
  })

  it("converts JSON pointers to JSON paths", () => {
    expect(jsonPointerToPath("")).toBe("$")
    expect(jsonPointerToPath("/encounters/3/documents/0/schema_type")).toBe("$.encounters[3].documents[0].schema_type")
    expect(jsonPointerToPath("/a~1b/odd key")).toBe('$["a/b"]["odd key"]')
  })

  it("names the first offending path of a schema error: enum, required, additional property, format, const", () => {
    expect(rejection(edited((f) => f.set(["encounters", 3, "documents"], [{ ...(f.get(["encounters", 0, "documents", 1]) as object), schema_type: "memo" }])))).toMatchObject({
      path: "$.encounters[3].documents[0].schema_type",
      message: expect.stringContaining('"document", "ambient_transcript"')
    })
    expect(rejection(edited((f) => f.remove(["patients", 1, "organization_id"])))).toMatchObject({
      path: "$.patients[1].organization_id",
      message: "is required but missing"
    })
    expect(rejection(edited((f) => f.set(["organizations", 2, "owner"], "x")))).toMatchObject({ path: "$.organizations[2].owner" })
    expect(rejection(edited((f) => f.set(["encounters", 1, "created_at"], "2026-05-02 09:00")))).toMatchObject({
      path: "$.encounters[1].created_at"
    })
    expect(rejection(edited((f) => f.set(["format"], "clinical-encounter-fixture/v2")))).toMatchObject({ path: "$.format" })
    expect(rejection(edited((f) => f.set(["encounters", 0, "documents", 0, "recording"], { content_type: "audio/wav" })))).toMatchObject({
      path: "$.encounters[0].documents[0].recording",
      message: expect.stringContaining("matches none of the allowed shapes")
    })
  })

  it("refuses text that is not JSON, at $", () => {
    expect(rejection("{ not json")).toMatchObject({ path: "$", message: expect.stringContaining("not valid JSON") })
  })

  it("refuses a duplicate id of each kind, naming the second occurrence", () => {
    expect(rejection(edited((f) => f.set(["organizations", 3], f.get(["organizations", 0]))))).toMatchObject({
      path: "$.organizations[3].organization_id",
      message: expect.stringContaining("$.organizations[0].organization_id")
    })
    expect(rejection(edited((f) => f.set(["patients", 2, "patient_id"], "pat_7f3a")))).toMatchObject({ path: "$.patients[2].patient_id" })
    expect(rejection(edited((f) => f.set(["encounters", 6, "encounter_id"], "enc_a1")))).toMatchObject({ path: "$.encounters[6].encounter_id" })
    expect(rejection(edited((f) => f.set(["encounters", 6, "documents", 0, "document_id"], "doc_a1_tr")))).toMatchObject({
      path: "$.encounters[6].documents[0].document_id"
    })
    expect(rejection(edited((f) => f.set(["api_keys", 4, "token"], f.get(["api_keys", 0, "token"]))))).toMatchObject({
      path: "$.api_keys[4].token",
      message: expect.stringContaining("duplicate API key token")
    })
  })

  it("refuses unknown organizations and patients, and a patient of another organization", () => {
    expect(rejection(edited((f) => f.set(["api_keys", 1, "organization_id"], "org_ghost")))).toMatchObject({
      path: "$.api_keys[1].organization_id",
      message: 'names unknown organization "org_ghost"'
    })
    expect(rejection(edited((f) => f.set(["patients", 0, "organization_id"], "org_ghost")))).toMatchObject({ path: "$.patients[0].organization_id" })
    expect(rejection(edited((f) => f.set(["encounters", 2, "organization_id"], "org_ghost")))).toMatchObject({ path: "$.encounters[2].organization_id" })
    expect(rejection(edited((f) => f.set(["encounters", 1, "patient_id"], "pat_ghost")))).toMatchObject({ path: "$.encounters[1].patient_id" })
    expect(rejection(edited((f) => f.set(["encounters", 6, "patient_id"], "pat_7f3a")))).toMatchObject({
      path: "$.encounters[6].patient_id",
      message: expect.stringContaining('belongs to organization "org_riverside"')
    })
  })

  it("refuses a malformed key token (checksum) and accepts a freshly generated one (docs/behaviour.md, API keys)", () => {
    expect(rejection(edited((f) => f.set(["api_keys", 0, "token"], "ce_live_0123456789abcdefghijABCDEFGHIJ3mpbC0")))).toMatchObject({
      path: "$.api_keys[0].token",
      message: expect.stringContaining("not a well-formed API key")
    })
    const token = generateApiKeyToken("live", (size) => randomBytes(size))
    expect(Result.isSuccess(validateFixture(edited((f) => f.set(["api_keys", 0, "token"], token))))).toBe(true)
  })

  it("refuses transcripts and recordings on documents that are not ambient transcripts, and bad base64", () => {
    expect(
      rejection(edited((f) => f.set(["encounters", 0, "documents", 1, "transcript"], { provider: "x", turns: [] })))
    ).toMatchObject({ path: "$.encounters[0].documents[1].transcript" })
    expect(
      rejection(edited((f) => f.set(["encounters", 0, "documents", 0, "recording"], { content_type: "audio/wav", data_base64: "not base64!" })))
    ).toMatchObject({ path: "$.encounters[0].documents[0].recording.data_base64" })
  })

  it("reports the first problem in document order when there are several", () => {
    const twoProblems = edited((f) => {
      f.set(["encounters", 5, "patient_id"], "pat_ghost")
      f.set(["patients", 0, "organization_id"], "org_ghost")
    })
    expect(rejection(twoProblems).path).toBe("$.patients[0].organization_id")
  })
})
