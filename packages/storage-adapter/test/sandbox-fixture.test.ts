import type { OperationId, Scope } from "@clinical-api/domain"
import { describe, expect, it } from "@effect/vitest"
import { Ajv2020 } from "ajv/dist/2020.js"
import addFormatsModule from "ajv-formats"
import { readFileSync } from "node:fs"
import {
  type ClinicalEncounterFixture,
  type FixtureAmbientTranscript,
  type FixtureDocument,
  type FixtureEncounter,
  buildWav,
  generateSandboxFixture,
  readableTestToken,
  sandboxFixturePath,
  serializeFixture,
  tokenChecksum
} from "../scripts/generate-sandbox-fixture.js"

// ajv-formats is CommonJS: under NodeNext its default import is the module object.
const addFormats = addFormatsModule.default

/** The data files the format and the key rules are checked against, all in this repository. */
const dataFile = {
  schema: new URL("../src/fixture/fixture.schema.json", import.meta.url),
  example: new URL("../fixtures/example.fixture.json", import.meta.url),
  keyVectors: new URL("../../domain/test/vectors/key-vectors.json", import.meta.url)
} as const
const readDataFile = (name: keyof typeof dataFile): string => readFileSync(dataFile[name], "utf8")

const committedText = readFileSync(sandboxFixturePath, "utf8")
const committed = JSON.parse(committedText) as ClinicalEncounterFixture
const documentsOf = (fixture: ClinicalEncounterFixture): Array<FixtureDocument> =>
  fixture.encounters.flatMap((encounter) => encounter.documents)
const transcriptsOf = (fixture: ClinicalEncounterFixture): Array<FixtureAmbientTranscript> =>
  documentsOf(fixture).filter((document): document is FixtureAmbientTranscript => document.schema_type === "ambient_transcript")
const countBy = <T>(items: ReadonlyArray<T>, key: (item: T) => string): Record<string, number> => {
  const counts: Record<string, number> = {}
  for (const item of items) counts[key(item)] = (counts[key(item)] ?? 0) + 1
  return counts
}

const ALL_ROUTES: ReadonlyArray<OperationId> = [
  "listPublicEncounters",
  "getPublicEncounter",
  "getPublicDocument",
  "getPublicDocumentTranscript",
  "getPublicDocumentAudio"
]
const ALL_SCOPES: ReadonlyArray<Scope> = ["encounters:read", "patients:read", "documents:read", "recordings:read"]

const compileFixtureValidator = () => {
  const ajv = new Ajv2020({ allErrors: true })
  addFormats(ajv)
  return ajv.compile(JSON.parse(readDataFile("schema")))
}

/** encounter_type as docs/behaviour.md ("Resources") derives it: first match wins. */
const encounterTypeOf = (encounter: FixtureEncounter): string | null => {
  const documents = encounter.documents
  const transcripts = documents.filter((document) => document.schema_type === "ambient_transcript")
  if (transcripts.some((document) => document.workflow_variant === "phone_call")) return "phone_call"
  if (transcripts.length > 0) return "ambient"
  if (documents.some((document) => document.schema_type === "document")) return "clinical_documentation"
  if (documents.some((document) => document.schema_type === "billing")) return "billing"
  if (documents.some((document) => document.schema_type === "encounter_checklist")) return "checklist"
  return null
}

interface WavInfo {
  readonly audioFormat: number
  readonly channels: number
  readonly sampleRate: number
  readonly bitsPerSample: number
  readonly durationSeconds: number
}

/** Parses the canonical 44-byte PCM header and checks that the chunk sizes add up. */
const readWav = (bytes: Buffer): WavInfo => {
  expect(bytes.toString("ascii", 0, 4)).toBe("RIFF")
  expect(bytes.readUInt32LE(4)).toBe(bytes.length - 8)
  expect(bytes.toString("ascii", 8, 12)).toBe("WAVE")
  expect(bytes.toString("ascii", 12, 16)).toBe("fmt ")
  expect(bytes.toString("ascii", 36, 40)).toBe("data")
  const dataLength = bytes.readUInt32LE(40)
  expect(dataLength).toBe(bytes.length - 44)
  const sampleRate = bytes.readUInt32LE(24)
  const blockAlign = bytes.readUInt16LE(32)
  expect(bytes.readUInt32LE(28)).toBe(sampleRate * blockAlign)
  return {
    audioFormat: bytes.readUInt16LE(20),
    channels: bytes.readUInt16LE(22),
    sampleRate,
    bitsPerSample: bytes.readUInt16LE(34),
    durationSeconds: dataLength / blockAlign / sampleRate
  }
}

describe("sandbox fixture: format and determinism", () => {
  it("the committed sandbox.fixture.json validates against fixture.schema.json", () => {
    const validate = compileFixtureValidator()
    const valid = validate(committed)
    expect(validate.errors ?? []).toEqual([])
    expect(valid).toBe(true)
  })

  it("the schema validator does refuse a broken fixture (so the check above can fail)", () => {
    const validate = compileFixtureValidator()
    const [firstKey, ...otherKeys] = committed.api_keys
    expect(firstKey).toBeDefined()
    const broken = { ...committed, api_keys: [{ ...firstKey, state: "paused" }, ...otherKeys] }
    expect(validate(broken)).toBe(false)
    expect(validate.errors?.[0]?.instancePath).toBe("/api_keys/0/state")
  })

  it("the generator is deterministic and its output is the committed file, byte for byte", () => {
    const first = serializeFixture(generateSandboxFixture())
    const second = serializeFixture(generateSandboxFixture())
    expect(second).toBe(first)
    expect(first).toBe(committedText)
    // The seed does drive the data: another seed gives another data set.
    expect(serializeFixture(generateSandboxFixture(7))).not.toBe(first)
  })

  it("the whole file stays small enough to load at start-up (< 2.5 MB)", () => {
    expect(Buffer.byteLength(committedText, "utf8")).toBeLessThan(2.5 * 1024 * 1024)
  })
})

describe("sandbox fixture: API key tokens (docs/behaviour.md, API keys)", () => {
  const keyVectors = JSON.parse(readDataFile("keyVectors")) as {
    readonly well_formed: ReadonlyArray<string>
    readonly malformed: ReadonlyArray<{ readonly token: string; readonly why: string }>
  }

  it("the checksum code reproduces every well-formed token of key-vectors.json", () => {
    expect(keyVectors.well_formed.length).toBeGreaterThan(0)
    for (const token of keyVectors.well_formed) {
      expect(tokenChecksum(token.slice(8, 38))).toBe(token.slice(38))
    }
  })

  it("the checksum code rejects the key-vectors.json token whose checksum does not match", () => {
    const badChecksums = keyVectors.malformed.filter((vector) => vector.why === "checksum does not match")
    expect(badChecksums.length).toBeGreaterThan(0)
    for (const { token } of badChecksums) {
      expect(tokenChecksum(token.slice(8, 38))).not.toBe(token.slice(38))
    }
  })

  it("readable tokens reproduce the tokens of example.fixture.json", () => {
    const example = JSON.parse(readDataFile("example")) as ClinicalEncounterFixture
    const fullAccess = example.api_keys.find((key) => key.label === "riverside full access")
    expect(fullAccess?.token).toBe(readableTestToken("Riverside0full0access0key"))
    for (const { token } of example.api_keys) {
      expect(tokenChecksum(token.slice(8, 38))).toBe(token.slice(38))
    }
  })

  it("every token is a well-formed ce_test_ key (30 base62 + CRC-32 checksum), and no two are equal", () => {
    for (const { token } of committed.api_keys) {
      expect(token).toMatch(/^ce_test_[0-9A-Za-z]{36}$/)
      expect(tokenChecksum(token.slice(8, 38))).toBe(token.slice(38))
    }
    expect(new Set(committed.api_keys.map((key) => key.token)).size).toBe(committed.api_keys.length)
  })

  it("every key has a distinct label, and the fixtures README lists every token", () => {
    const labels = committed.api_keys.map((key) => key.label)
    expect(labels.every((label) => label.length > 0)).toBe(true)
    expect(new Set(labels).size).toBe(labels.length)
    const readme = readFileSync(new URL("../fixtures/README.md", import.meta.url), "utf8")
    for (const { token } of committed.api_keys) expect(readme).toContain(token)
  })
})

describe("sandbox fixture: references resolve (docs/fixture-format.md loading rules)", () => {
  it("every id is unique across the whole file", () => {
    const ids = [
      ...committed.organizations.map((organization) => organization.organization_id),
      ...committed.patients.map((patient) => patient.patient_id),
      ...committed.encounters.map((encounter) => encounter.encounter_id),
      ...documentsOf(committed).map((document) => document.document_id)
    ]
    expect(new Set(ids).size).toBe(ids.length)
  })

  it("keys, patients and encounters name known organizations; an encounter's patient is in its organization", () => {
    const organizationIds = new Set(committed.organizations.map((organization) => organization.organization_id))
    const patientOrganization = new Map(committed.patients.map((patient) => [patient.patient_id, patient.organization_id]))
    for (const key of committed.api_keys) {
      if (key.organization_id !== null) expect(organizationIds.has(key.organization_id)).toBe(true)
    }
    for (const patient of committed.patients) expect(organizationIds.has(patient.organization_id)).toBe(true)
    for (const encounter of committed.encounters) {
      expect(organizationIds.has(encounter.organization_id)).toBe(true)
      if (encounter.patient_id !== null) {
        expect(patientOrganization.get(encounter.patient_id)).toBe(encounter.organization_id)
      }
    }
  })
})

describe("sandbox fixture: organizations and keys cover every access case", () => {
  const organization = (id: string) => committed.organizations.find((candidate) => candidate.organization_id === id)

  it("four organizations: two approved with all five routes, one approved without transcript/audio, one not approved", () => {
    expect(committed.organizations).toHaveLength(4)
    expect(organization("org_riverside")).toMatchObject({ name: "Riverside Family Practice", approved: true, enabled_routes: ALL_ROUTES })
    expect(organization("org_harbor")).toMatchObject({ name: "Harbor Pediatrics", approved: true, enabled_routes: ALL_ROUTES })
    const partial = organization("org_lakeside")
    expect(partial?.approved).toBe(true)
    expect(partial?.enabled_routes).not.toContain("getPublicDocumentTranscript")
    expect(partial?.enabled_routes).not.toContain("getPublicDocumentAudio")
    expect(partial?.enabled_routes).toContain("listPublicEncounters")
    // organization_not_allowlisted is only reached when the route itself is enabled.
    expect(organization("org_summit")).toMatchObject({ approved: false, enabled_routes: ALL_ROUTES })
  })

  it("the first key, printed by the start-up banner, is Riverside's active full-access organization key", () => {
    expect(committed.api_keys[0]).toMatchObject({
      organization_id: "org_riverside",
      kind: "organization",
      scopes: ALL_SCOPES,
      state: "active",
      expires_at: null
    })
  })

  it("Riverside has keys for missing_scope, disabled_key, revoked_key, expired_key, org_scope_only_required and a far expiry", () => {
    const now = Date.now()
    const riverside = committed.api_keys.filter((key) => key.organization_id === "org_riverside")
    const isFull = (scopes: ReadonlyArray<Scope>) => ALL_SCOPES.every((scope) => scopes.includes(scope))
    const usable = riverside.filter((key) => key.kind === "organization" && key.state === "active")
    expect(usable.some((key) => !key.scopes.includes("recordings:read") && key.scopes.includes("documents:read"))).toBe(true)
    expect(riverside.some((key) => key.state === "disabled" && key.kind === "organization" && isFull(key.scopes))).toBe(true)
    expect(riverside.some((key) => key.state === "revoked" && key.expires_at === null)).toBe(true)
    expect(
      usable.some((key) => key.expires_at !== null && Date.parse(key.expires_at) < now && isFull(key.scopes))
    ).toBe(true)
    expect(riverside.some((key) => key.kind === "user" && key.state === "active" && isFull(key.scopes))).toBe(true)
    expect(
      usable.some((key) => key.expires_at !== null && Date.parse(key.expires_at) > Date.parse("2090-01-01T00:00:00Z"))
    ).toBe(true)
  })

  it("every other organization has an active, unexpiring full-access organization key", () => {
    for (const id of ["org_harbor", "org_lakeside", "org_summit"]) {
      const keys = committed.api_keys.filter(
        (key) =>
          key.organization_id === id &&
          key.kind === "organization" &&
          key.state === "active" &&
          key.expires_at === null &&
          ALL_SCOPES.every((scope) => key.scopes.includes(scope))
      )
      expect(keys, id).toHaveLength(1)
    }
  })
})

describe("sandbox fixture: patients and encounters", () => {
  it("about 60 patients with realistic names and dates of birth, a few with unknown fields", () => {
    expect(committed.patients.length).toBeGreaterThanOrEqual(55)
    expect(committed.patients.length).toBeLessThanOrEqual(65)
    const complete = committed.patients.filter(
      (patient) => patient.first_name !== null && patient.last_name !== null && patient.date_of_birth !== null
    )
    expect(complete.length).toBeGreaterThan(committed.patients.length * 0.8)
    expect(committed.patients.some((patient) => patient.date_of_birth === null)).toBe(true)
    expect(committed.patients.some((patient) => patient.first_name === null)).toBe(true)
    expect(committed.patients.some((patient) => patient.last_name === null)).toBe(true)
    for (const patient of committed.patients) {
      if (patient.date_of_birth !== null) {
        expect(patient.date_of_birth).toMatch(/^\d{4}-\d{2}-\d{2}$/)
        expect(patient.date_of_birth < "2026-01-01").toBe(true)
      }
    }
    const names = complete.map((patient) => `${patient.first_name} ${patient.last_name}`)
    expect(new Set(names).size).toBe(names.length)
  })

  it("about 300 encounters, most in the main organization, created across 2026-01..2026-10", () => {
    const encounters = committed.encounters
    expect(encounters.length).toBeGreaterThanOrEqual(280)
    expect(encounters.length).toBeLessThanOrEqual(320)
    const byOrganization = countBy(encounters, (encounter) => encounter.organization_id)
    expect(byOrganization["org_riverside"] ?? 0).toBeGreaterThan(encounters.length / 2)
    for (const id of ["org_harbor", "org_lakeside", "org_summit"]) expect(byOrganization[id] ?? 0).toBeGreaterThan(0)
    const months = new Set(encounters.map((encounter) => encounter.created_at.slice(0, 7)))
    expect([...months].sort()).toEqual(
      Array.from({ length: 10 }, (_, index) => `2026-${String(index + 1).padStart(2, "0")}`)
    )
  })

  it("timestamps are UTC with milliseconds and updated_at >= created_at, for encounters and documents", () => {
    const utcMillis = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
    for (const encounter of committed.encounters) {
      expect(encounter.created_at).toMatch(utcMillis)
      expect(encounter.updated_at).toMatch(utcMillis)
      expect(encounter.updated_at >= encounter.created_at).toBe(true)
      for (const document of encounter.documents) {
        expect(document.updated_at >= document.created_at).toBe(true)
        expect(document.created_at >= encounter.created_at).toBe(true)
        expect(encounter.updated_at >= document.updated_at).toBe(true)
      }
    }
  })

  it("encounters include null date_of_service, null patient, and the statuses scheduled, in_progress, signed and null", () => {
    const encounters = committed.encounters
    expect(encounters.filter((encounter) => encounter.date_of_service === null).length).toBeGreaterThanOrEqual(5)
    expect(encounters.filter((encounter) => encounter.patient_id === null).length).toBeGreaterThanOrEqual(5)
    const statuses = new Set(encounters.map((encounter) => encounter.status))
    for (const status of ["scheduled", "in_progress", "signed", null]) expect(statuses.has(status)).toBe(true)
  })

  it("about 5% demo and 3% training encounters (demo_training_denied), in the main organization too", () => {
    const encounters = committed.encounters
    const byClass = countBy(encounters, (encounter) => encounter.data_class)
    expect((byClass["demo"] ?? 0) / encounters.length).toBeGreaterThanOrEqual(0.04)
    expect((byClass["demo"] ?? 0) / encounters.length).toBeLessThanOrEqual(0.06)
    expect((byClass["training"] ?? 0) / encounters.length).toBeGreaterThanOrEqual(0.02)
    expect((byClass["training"] ?? 0) / encounters.length).toBeLessThanOrEqual(0.04)
    const riverside = encounters.filter((encounter) => encounter.organization_id === "org_riverside")
    expect(riverside.some((encounter) => encounter.data_class === "demo")).toBe(true)
    expect(riverside.some((encounter) => encounter.data_class === "training")).toBe(true)
  })

  it("groups of encounters share an exact created_at, in file order that is not the tie-breaker order", () => {
    const groups = new Map<string, Array<string>>()
    for (const encounter of committed.encounters) {
      const key = `${encounter.organization_id} ${encounter.created_at}`
      groups.set(key, [...(groups.get(key) ?? []), encounter.encounter_id])
    }
    const ties = [...groups.values()].filter((ids) => ids.length > 1)
    expect(ties.length).toBeGreaterThanOrEqual(8)
    expect(ties.some((ids) => ids.length >= 3)).toBe(true)
    expect(ties.filter((ids) => ids[0]?.startsWith("enc_rv_")).length).toBeGreaterThanOrEqual(5)
    // The file (insertion) order of every tie group differs from ascending encounter_id.
    for (const ids of ties) expect(ids).not.toEqual([...ids].sort())
  })

  it("each encounter has at most 4 documents, a few have none, and every encounter_type can be derived in Riverside", () => {
    const counts = committed.encounters.map((encounter) => encounter.documents.length)
    expect(Math.max(...counts)).toBe(4)
    const empty = counts.filter((count) => count === 0).length
    expect(empty).toBeGreaterThanOrEqual(3)
    expect(empty).toBeLessThan(committed.encounters.length * 0.1)
    const riversideTypes = new Set(
      committed.encounters.filter((encounter) => encounter.organization_id === "org_riverside").map(encounterTypeOf)
    )
    for (const type of ["ambient", "phone_call", "clinical_documentation", "billing", "checklist", null]) {
      expect(riversideTypes.has(type), String(type)).toBe(true)
    }
  })
})

describe("sandbox fixture: documents, transcripts and recordings", () => {
  const documents = documentsOf(committed)
  const transcripts = transcriptsOf(committed)

  it("mixes all four schema types; only ambient transcripts carry a workflow_variant", () => {
    const byType = countBy(documents, (document) => document.schema_type)
    for (const type of ["ambient_transcript", "document", "billing", "encounter_checklist"]) {
      expect(byType[type] ?? 0, type).toBeGreaterThanOrEqual(20)
    }
    const variants = new Set(transcripts.map((transcript) => transcript.workflow_variant))
    expect(variants).toEqual(new Set(["ambient", "phone_call", null]))
    for (const document of documents) {
      if (document.schema_type !== "ambient_transcript") expect(document.workflow_variant).toBeNull()
    }
    expect(documents.every((document) => document.title === null || document.title.length > 0)).toBe(true)
    expect(documents.some((document) => document.title === null)).toBe(true)
  })

  it("clinical documents hold SOAP-note markdown, a few have null content", () => {
    const notes = documents.filter((document) => document.schema_type === "document")
    const withText = notes.flatMap((note) => (note.content_markdown === null ? [] : [note.content_markdown]))
    expect(notes.length - withText.length).toBeGreaterThanOrEqual(3)
    expect(withText.length).toBeGreaterThan(notes.length * 0.8)
    for (const text of withText) {
      for (const section of ["## Subjective", "## Objective", "## Assessment", "## Plan"]) expect(text).toContain(section)
      expect(text).not.toMatch(/[{}]/)
    }
  })

  it("most ambient transcripts are finalized (6 to 40 chronological turns); some have no final transcript", () => {
    const finalized = transcripts.flatMap((document) => (document.transcript === null ? [] : [document.transcript]))
    const pending = transcripts.filter((document) => document.transcript === null)
    expect(finalized.length).toBeGreaterThan(transcripts.length * 0.7)
    expect(pending.length).toBeGreaterThanOrEqual(5)
    expect(pending.every((document) => document.status !== "completed")).toBe(true)
    for (const transcript of finalized) {
      expect(transcript.provider.length).toBeGreaterThan(0)
      expect(transcript.turns.length).toBeGreaterThanOrEqual(6)
      expect(transcript.turns.length).toBeLessThanOrEqual(40)
      let previousEnd = 0
      for (const turn of transcript.turns) {
        expect(["clinician", "patient", "parent"]).toContain(turn.speaker)
        expect(turn.text.length).toBeGreaterThan(0)
        expect(turn.text).not.toMatch(/[{}]/)
        expect(turn.start).toBeGreaterThanOrEqual(previousEnd)
        expect(turn.end).toBeGreaterThan(turn.start)
        previousEnd = turn.end
      }
      expect(transcript.audio_duration_seconds ?? 0).toBeGreaterThanOrEqual(previousEnd)
    }
    const lengths = new Set(finalized.map((transcript) => transcript.turns.length))
    expect(lengths.has(6) || lengths.has(7)).toBe(true)
    expect([...lengths].some((length) => length >= 36)).toBe(true)
  })

  it("ambient transcripts carry audio_duration_seconds; finalized ones agree with their transcript", () => {
    for (const document of transcripts) {
      if (document.transcript !== null) {
        expect(document.audio_duration_seconds).toBe(document.transcript.audio_duration_seconds)
        expect(document.audio_duration_seconds).toBeGreaterThan(0)
      }
    }
    expect(transcripts.some((document) => document.audio_duration_seconds === null)).toBe(true)
  })

  it("recordings: some with audio bytes, some missing (audio_not_found), the rest not recording-backed", () => {
    const withAudio = transcripts.filter((document) => document.recording !== null && "data_base64" in document.recording)
    const missing = transcripts.filter((document) => document.recording !== null && "missing" in document.recording)
    const none = transcripts.filter((document) => document.recording === null)
    expect(withAudio.length).toBeGreaterThanOrEqual(20)
    expect(missing.length).toBeGreaterThanOrEqual(5)
    expect(none.length).toBeGreaterThan(withAudio.length)
    // Audio without a final transcript (transcript_not_found, audio still served) exists too.
    expect(withAudio.some((document) => document.transcript === null)).toBe(true)
    for (const document of [...withAudio, ...missing]) expect(document.recording?.content_type).toBe("audio/wav")
  })

  it("every recording is a valid 8 kHz mono PCM WAV of 0.5-2 s, under 16 KB", () => {
    const recordings = transcripts.flatMap((document) =>
      document.recording !== null && "data_base64" in document.recording ? [document.recording.data_base64] : []
    )
    const bitDepths = new Set<number>()
    for (const base64 of recordings) {
      const bytes = Buffer.from(base64, "base64")
      expect(bytes.toString("base64")).toBe(base64)
      expect(bytes.length).toBeLessThan(16 * 1024)
      const wav = readWav(bytes)
      expect(wav).toMatchObject({ audioFormat: 1, channels: 1, sampleRate: 8000 })
      expect([8, 16]).toContain(wav.bitsPerSample)
      bitDepths.add(wav.bitsPerSample)
      expect(wav.durationSeconds).toBeGreaterThanOrEqual(0.5)
      expect(wav.durationSeconds).toBeLessThanOrEqual(2)
    }
    expect(bitDepths).toEqual(new Set([8, 16]))
  })

  it("buildWav writes a soft tone within range, and true silence when asked", () => {
    const tone = buildWav({ bitsPerSample: 16, durationSeconds: 0.5, frequencyHz: 440 })
    expect(readWav(tone).durationSeconds).toBe(0.5)
    const samples = Array.from({ length: 4000 }, (_, index) => tone.readInt16LE(44 + index * 2))
    expect(Math.max(...samples.map(Math.abs))).toBeGreaterThan(1000)
    expect(Math.max(...samples.map(Math.abs))).toBeLessThanOrEqual(0.25 * 32767)
    const silence = buildWav({ bitsPerSample: 8, durationSeconds: 1, frequencyHz: null })
    expect(readWav(silence).durationSeconds).toBe(1)
    expect(silence.subarray(44).every((byte) => byte === 128)).toBe(true)
  })
})
