import { operationIds, PublicDocumentDetailResponse, PublicEncounterListResponse, PublicTranscriptTurn } from "@clinical-api/domain"
import { describe, expect, it, vi } from "@effect/vitest"
import { Schema } from "effect"
import { HttpApi } from "effect/http-api"
import { PublicHttpApi } from "../src/api/definition.js"
import { successWriters } from "../src/server/handlers.js"
import { compileJsonWriter } from "../src/server/json-writer.js"

/** What the HttpApi would put on the wire for `value`: the schema's encoding, then JSON.stringify; or the error it throws. */
const throughSchema = (schema: Schema.Top, value: unknown): string => {
  try {
    return JSON.stringify(Schema.encodeUnknownSync(schema as Schema.Codec<unknown, unknown>)(value))
  } catch (error) {
    return `throws ${error instanceof Error ? error.name : String(error)}`
  }
}

const written = (schema: Schema.Top, value: unknown): string => {
  try {
    return compileJsonWriter(schema)!(value)
  } catch (error) {
    return `throws ${error instanceof Error ? error.name : String(error)}`
  }
}

const successSchemas = (() => {
  const schemas: Array<readonly [string, Schema.Top]> = []
  HttpApi.reflect(PublicHttpApi, {
    onGroup: () => undefined,
    onEndpoint: ({ endpoint }) => {
      for (const success of endpoint.success) schemas.push([endpoint.identifier, success])
    }
  })
  return schemas
})()

describe("success bodies written from their schemas", () => {
  it("every operation of the API has a compiled writer (none falls back to encoding through the schema)", () => {
    expect([...successWriters.keys()].sort()).toEqual([...operationIds].sort())
    expect(successSchemas.map(([operation]) => operation).sort()).toEqual([...operationIds].sort())
  })

  for (const [operation, schema] of successSchemas) {
    it.prop(
      `${operation}: the text is exactly JSON.stringify of the schema's encoding, for generated bodies`,
      [schema as Schema.Schema<unknown>],
      ([value]) => {
        expect(written(schema, value)).toBe(throughSchema(schema, value))
      },
      { arbitrary: { runs: 300 } }
    )
  }

  it("writes timestamps as UTC with milliseconds, nulls and keys in the schema's order, whatever the value's own key order", () => {
    const body = {
      total: 1,
      offset: 0,
      limit: 50,
      items: [{
        documents: [{
          audio_duration_seconds: null,
          workflow_variant: null,
          status: null,
          title: "Note",
          schema_type: "document",
          document_id: "doc_1"
        }],
        patient: null,
        status: null,
        encounter_type: "ambient",
        date_of_service: null,
        updated_at: new Date("2026-05-02T08:30:00.250+02:00"),
        created_at: new Date("2026-05-01T12:00:00Z"),
        organization_id: "org_a",
        encounter_id: "enc_1",
        not_in_the_schema: "dropped"
      }]
    }
    const text = compileJsonWriter(PublicEncounterListResponse)!(body)
    expect(text).toBe(
      "{\"items\":[{\"encounter_id\":\"enc_1\",\"organization_id\":\"org_a\",\"created_at\":\"2026-05-01T12:00:00.000Z\"," +
        "\"updated_at\":\"2026-05-02T06:30:00.250Z\",\"date_of_service\":null,\"encounter_type\":\"ambient\",\"status\":null," +
        "\"patient\":null,\"documents\":[{\"document_id\":\"doc_1\",\"schema_type\":\"document\",\"title\":\"Note\",\"status\":null," +
        "\"workflow_variant\":null,\"audio_duration_seconds\":null}]}],\"limit\":50,\"offset\":0,\"total\":1}"
    )
    expect(text).toBe(throughSchema(PublicEncounterListResponse, body))
  })

  it("chooses a union's member by its literal discriminant", () => {
    const transcript = {
      document: {
        document_id: "doc_1",
        encounter_id: "enc_1",
        schema_type: "ambient_transcript",
        created_at: new Date(0),
        updated_at: new Date(0),
        title: null,
        status: "completed",
        workflow_variant: "ambient",
        audio_duration_seconds: 61.5
      }
    }
    expect(JSON.parse(compileJsonWriter(PublicDocumentDetailResponse)!(transcript))).toEqual({
      document: { ...transcript.document, created_at: "1970-01-01T00:00:00.000Z", updated_at: "1970-01-01T00:00:00.000Z" }
    })
    expect(compileJsonWriter(PublicDocumentDetailResponse)!(transcript)).toBe(throughSchema(PublicDocumentDetailResponse, transcript))
  })

  it("a Date that is not a time is refused as the schema refuses it", () => {
    const audio = { audio_url: "https://media.example/a", expires_at: new Date(Number.NaN) }
    const schema = successSchemas.find(([operation]) => operation === "getPublicDocumentAudio")![1]
    expect(() => compileJsonWriter(schema)!(audio)).toThrow()
    expect(throughSchema(schema, audio)).toMatch(/^throws /)
  })

  it("writes an array of flat records (a transcript's turns, as JSON.parse gives them) in one JSON.stringify call", () => {
    const turns = JSON.parse(
      '[{"speaker":"clinician","text":"Any \\"pain\\"?\\n","start":0,"end":5.5},{"speaker":"patient","text":"No.","start":6,"end":7}]'
    ) as ReadonlyArray<unknown>
    const write = compileJsonWriter(Schema.Array(PublicTranscriptTurn))!
    const stringify = vi.spyOn(JSON, "stringify")
    try {
      const text = write(turns)
      expect(stringify.mock.calls.map(([value]) => value)).toEqual([turns])
      expect(text).toBe(throughSchema(Schema.Array(PublicTranscriptTurn), turns))
    } finally {
      stringify.mockRestore()
    }
  })

  it("writes turns that are not exactly flat records of the schema field by field, as the schema encodes them", () => {
    const schema = Schema.Array(PublicTranscriptTurn)
    const turn = { speaker: "patient", text: "No.", start: 6, end: 7 }
    class Turn {
      constructor(readonly speaker: string, readonly text: string, readonly start: number, readonly end: number) {}
      toJSON() {
        return "not this"
      }
    }
    const cases: ReadonlyArray<ReadonlyArray<unknown>> = [
      [{ text: "No.", speaker: "patient", end: 7, start: 6 }],
      [turn, { ...turn, extra: "dropped" }],
      [new Turn("patient", "No.", 6, 7)]
    ]
    for (const turns of cases) expect(written(schema, turns)).toBe(throughSchema(schema, turns))
    const sparse: Array<unknown> = [turn]
    sparse[2] = turn
    expect(written(schema, sparse)).toMatch(/^throws /)
    expect(throughSchema(schema, sparse)).toMatch(/^throws /)
  })

  it("compiles nothing for a schema whose type differs from its encoding other than by timestamps", () => {
    expect(compileJsonWriter(Schema.Struct({ count: Schema.NumberFromString }))).toBeUndefined()
    expect(compileJsonWriter(Schema.Struct({ items: Schema.Array(Schema.Struct({ at: Schema.DateTimeUtcFromString })) }))).toBeUndefined()
    expect(compileJsonWriter(Schema.Record(Schema.String, Schema.String))).toBeUndefined()
    expect(compileJsonWriter(Schema.Struct({ a: Schema.Union([Schema.Struct({ x: Schema.String }), Schema.Struct({ y: Schema.String })]) })))
      .toBeUndefined()
  })
})
