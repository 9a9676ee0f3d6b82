import fc from "fast-check"
import { Redacted } from "effect"
import {
  ApiKeyId,
  apiKeyChecksum,
  computeApiKeyDigest,
  DocumentId,
  EncounterId,
  type MemoryDataSet,
  type OperationId,
  OrganizationId,
  PatientId,
  type Scope,
  type StoredDocument,
  type StoredEncounter
} from "../../src/index.js"

/**
 * The isolation model shared by the domain property test (in-memory adapters) and the HTTP
 * one (PostgreSQL): generated data sets over several organizations, generated keys and
 * requests, and an oracle that says what the answer must be. The oracle is written from the
 * contract and docs/behaviour.md alone, on purpose without any of the domain's rule functions, so
 * that a wrong rule cannot agree with itself.
 */

export const OPERATIONS = [
  "listPublicEncounters",
  "getPublicEncounter",
  "getPublicDocument",
  "getPublicDocumentTranscript",
  "getPublicDocumentAudio"
] as const satisfies ReadonlyArray<OperationId>

const ALL_SCOPES = ["encounters:read", "patients:read", "documents:read", "recordings:read"] as const satisfies ReadonlyArray<Scope>

const REQUIRED: Record<OperationId, ReadonlyArray<Scope>> = {
  listPublicEncounters: ["encounters:read", "patients:read", "documents:read"],
  getPublicEncounter: ["encounters:read", "patients:read", "documents:read"],
  getPublicDocument: ["encounters:read", "documents:read"],
  getPublicDocumentTranscript: ["encounters:read", "documents:read"],
  getPublicDocumentAudio: ["encounters:read", "documents:read", "recordings:read"]
}

export type SchemaType = "document" | "ambient_transcript" | "billing" | "encounter_checklist"

export interface ModelDocument {
  readonly id: string
  readonly schemaType: SchemaType
  readonly workflowVariant: "ambient" | "phone_call" | null
  readonly createdAt: string
  readonly content: string | null
  readonly transcript: ReadonlyArray<{ readonly speaker: string; readonly text: string; readonly start: number; readonly end: number }> | null
  readonly recording: "none" | "present" | "missing"
}

export interface ModelEncounter {
  readonly id: string
  readonly organizationId: string
  readonly dataClass: "clinical" | "demo" | "training"
  readonly createdAt: string
  readonly patientId: string | null
  readonly documents: ReadonlyArray<ModelDocument>
}

export interface ModelKey {
  readonly token: string
  readonly organizationId: string | null
  readonly kind: "organization" | "user" | "service"
  readonly scopes: ReadonlyArray<Scope>
  readonly state: "active" | "disabled" | "revoked"
  readonly expiresAt: string | null
}

export interface ModelOrganization {
  readonly id: string
  readonly approved: boolean
  readonly enabledRoutes: ReadonlyArray<OperationId>
}

export interface ModelDataSet {
  readonly environment: "sandbox" | "production"
  readonly apiKeysEnabled: boolean
  readonly organizations: ReadonlyArray<ModelOrganization>
  readonly patients: ReadonlyArray<{ readonly id: string; readonly organizationId: string }>
  readonly encounters: ReadonlyArray<ModelEncounter>
  readonly keys: ReadonlyArray<ModelKey>
}

/** A request as generated: references into the data set are indices, resolved by `resolveRequest`. */
export interface RequestSpec {
  readonly operation: OperationId
  readonly auth: { readonly kind: "key"; readonly index: number } | { readonly kind: "special"; readonly which: SpecialAuth }
  readonly encounter:
    | { readonly kind: "index"; readonly index: number }
    | { readonly kind: "callerClinical"; readonly index: number }
    | { readonly kind: "raw"; readonly id: string }
  readonly document:
    | { readonly kind: "own"; readonly index: number }
    | { readonly kind: "fitting"; readonly index: number }
    | { readonly kind: "any"; readonly index: number }
    | { readonly kind: "raw"; readonly id: string }
  readonly query: ReadonlyArray<readonly [string, string]>
}

type SpecialAuth = "none" | "basic" | "emptyBearer" | "unknownKey" | "badChecksum" | "innerSpace" | "lowercaseScheme"

export interface ResolvedRequest {
  readonly operation: OperationId
  readonly authorization: string | undefined
  readonly encounterId: string
  readonly documentId: string
  readonly query: ReadonlyArray<readonly [string, string]>
}

// ---------------------------------------------------------------------------------------------
// Generation

/** A well-formed token: 30 base62 characters from a seed, then their CRC-32 checksum. */
export const makeToken = (prefix: "live" | "test", seed: string): string => {
  const random = seed.replace(/[^0-9A-Za-z]/g, "0").padEnd(30, "0").slice(0, 30)
  return `ce_${prefix}_${random}${apiKeyChecksum(random)}`
}

const INSTANTS = [
  "2026-01-05T08:00:00.000Z",
  "2026-01-05T08:00:00.000Z",
  "2026-02-10T12:30:00.000Z",
  "2026-03-01T00:00:00.000Z",
  "2026-04-15T16:45:10.250Z",
  "2026-06-30T23:59:59.999Z"
]
const ID_SUFFIXES = ["", "", "", "-x", "_Z", " é", "/s", "%25"]

const subsetOf = <A>(all: ReadonlyArray<A>, fullBias: number) =>
  fc.oneof({ weight: fullBias, arbitrary: fc.constant([...all]) }, { weight: 10 - fullBias, arbitrary: fc.subarray([...all]) })

const documentArb = (encounterId: string, index: number) =>
  fc.record({
    schemaType: fc.constantFrom<SchemaType>("document", "ambient_transcript", "ambient_transcript", "billing", "encounter_checklist"),
    workflowVariant: fc.constantFrom("ambient" as const, "phone_call" as const, null),
    createdAt: fc.constantFrom(...INSTANTS),
    content: fc.option(fc.constantFrom("## Plan\nRest.", "Subjective: cough"), { nil: null }),
    hasTranscript: fc.boolean(),
    recording: fc.constantFrom("none" as const, "present" as const, "missing" as const)
  }).map(({ content, createdAt, hasTranscript, recording, schemaType, workflowVariant }): ModelDocument => {
    const ambient = schemaType === "ambient_transcript"
    return {
      id: `d${index}_${encounterId}`,
      schemaType,
      workflowVariant: ambient ? workflowVariant : null,
      createdAt,
      content: schemaType === "document" ? content : null,
      transcript: ambient && hasTranscript
        ? [{ speaker: "clinician", text: `Hello ${index}`, start: 0, end: 1.5 }, { speaker: "patient", text: "Hi", start: 1.5, end: 2 }]
        : null,
      recording: ambient ? recording : "none"
    }
  })

const ORGANIZATION_IDS = ["org_alpha", "org_beta", "org_gamma"] as const

export const dataSetArb: fc.Arbitrary<ModelDataSet> = fc.record({
  environment: fc.oneof({ weight: 5, arbitrary: fc.constant("sandbox" as const) }, { weight: 1, arbitrary: fc.constant("production" as const) }),
  apiKeysEnabled: fc.oneof({ weight: 25, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
  organizations: fc.tuple(
    ...ORGANIZATION_IDS.map((id) =>
      fc.record({
        approved: fc.oneof({ weight: 6, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
        enabledRoutes: subsetOf(OPERATIONS, 7)
      }).map(({ approved, enabledRoutes }): ModelOrganization => ({ id, approved, enabledRoutes }))
    )
  ),
  encounterSeeds: fc.array(
    fc.record({
      organization: fc.nat({ max: ORGANIZATION_IDS.length - 1 }),
      dataClass: fc.constantFrom("clinical" as const, "clinical" as const, "clinical" as const, "demo" as const, "training" as const),
      createdAt: fc.constantFrom(...INSTANTS),
      withPatient: fc.boolean(),
      suffix: fc.constantFrom(...ID_SUFFIXES),
      documentCount: fc.nat({ max: 3 })
    }),
    { minLength: 1, maxLength: 10 }
  ),
  keySeeds: fc.array(
    fc.record({
      prefix: fc.constantFrom("test" as const, "test" as const, "live" as const),
      organization: fc.option(fc.nat({ max: ORGANIZATION_IDS.length - 1 }), { nil: null, freq: 8 }),
      kind: fc.constantFrom("organization" as const, "organization" as const, "organization" as const, "user" as const, "service" as const),
      scopes: subsetOf(ALL_SCOPES, 6),
      state: fc.constantFrom("active" as const, "active" as const, "active" as const, "disabled" as const, "revoked" as const),
      expiresAt: fc.constantFrom(null, null, "2000-01-01T00:00:00.000Z", "2999-12-31T00:00:00.000Z")
    }),
    { minLength: 1, maxLength: 6 }
  )
}).chain(({ apiKeysEnabled, encounterSeeds, environment, keySeeds, organizations }) => {
  const encounterIds = encounterSeeds.map((seed, index) => `e${index}${seed.suffix}`)
  return fc.tuple(...encounterSeeds.map((seed, index) =>
    fc.tuple(...Array.from({ length: seed.documentCount }, (_, documentIndex) => documentArb(encounterIds[index] ?? "", documentIndex)))
  )).map((documentsPerEncounter): ModelDataSet => {
    const patients = ORGANIZATION_IDS.map((organizationId, index) => ({ id: `p${index}_${organizationId}`, organizationId }))
    const encounters = encounterSeeds.map((seed, index): ModelEncounter => {
      const organizationId = ORGANIZATION_IDS[seed.organization] ?? ORGANIZATION_IDS[0]
      return {
        id: encounterIds[index] ?? `e${index}`,
        organizationId,
        dataClass: seed.dataClass,
        createdAt: seed.createdAt,
        patientId: seed.withPatient ? `p${seed.organization}_${organizationId}` : null,
        documents: documentsPerEncounter[index] ?? []
      }
    })
    // The first key is always usable, so that deep checks and successes are reached often.
    const usable = (seed: (typeof keySeeds)[number], index: number): (typeof keySeeds)[number] =>
      index === 0 ? { ...seed, kind: "organization", state: "active", scopes: [...ALL_SCOPES], expiresAt: null } : seed
    const keys = keySeeds.map(usable).map((seed, index): ModelKey => ({
      token: makeToken(seed.prefix, `Key${index}seed${seed.kind}${seed.state}`),
      // An organization key is always bound to an organization the data set has (the loader refuses others).
      organizationId: seed.organization === null && seed.kind !== "organization"
        ? null
        : ORGANIZATION_IDS[seed.organization ?? 0] ?? null,
      kind: seed.kind,
      scopes: seed.scopes,
      state: seed.state,
      expiresAt: seed.expiresAt
    }))
    return { environment, apiKeysEnabled, organizations, patients, encounters, keys }
  })
})

const valueOf = <A>(values: ReadonlyArray<A>) => fc.option(fc.constantFrom(...values), { nil: undefined, freq: 2 })

/**
 * A list query: each supported key absent or given (valid values more often than invalid
 * ones), sometimes an unsupported or a repeated key, in any order (the first unsupported
 * key in request order is the one refused).
 */
const listQueryArb: fc.Arbitrary<ReadonlyArray<readonly [string, string]>> = fc.record({
  limit: valueOf(["1", "2", "100", "3", "0", "101", "05", "", "+3"]),
  offset: valueOf(["0", "1", "3", "10000", "10001", "-1", "01"]),
  sort: valueOf(["asc", "desc", "asc", "ASC", "up"]),
  start: valueOf(["2026-02-01T00:00:00Z", "2026-01-05T08:00:00.000Z", "2026-03-01T02:00:00+02:00", "2026-01-05", "yesterday"]),
  end: valueOf(["2026-04-15T16:45:10.250Z", "2026-12-31T00:00:00Z", "2026-01-05T08:00:00Z", "2026-02-01T00:00:00"]),
  extra: fc.option(
    fc.constantFrom<ReadonlyArray<readonly [string, string]>>([["patient_id", "p0"]], [["Limit", "5"]], [["owners", ""]], [["limit", "1"]], [["sort_order", "asc"]]),
    { nil: undefined, freq: 5 }
  )
}).chain(({ end, extra, limit, offset, sort, start }) => {
  const pairs: Array<readonly [string, string]> = []
  if (limit !== undefined) pairs.push(["limit", limit])
  if (offset !== undefined) pairs.push(["offset", offset])
  if (sort !== undefined) pairs.push(["sort_order", sort])
  if (start !== undefined) pairs.push(["start_at", start])
  if (end !== undefined) pairs.push(["end_at", end])
  pairs.push(...(extra ?? []))
  return fc.shuffledSubarray(pairs, { minLength: pairs.length, maxLength: pairs.length })
})

/** A route without query parameters mostly gets none, sometimes one key (supported elsewhere or not). */
const otherQueryArb: fc.Arbitrary<ReadonlyArray<readonly [string, string]>> = fc.oneof(
  { weight: 5, arbitrary: fc.constant([]) },
  { weight: 1, arbitrary: fc.constantFrom<ReadonlyArray<readonly [string, string]>>([["limit", "1"]], [["patient_id", "p0"]], [["", ""]], [["a", "b"], ["c", "d"]]) }
)

const rawIdArb = fc.constantFrom("missing", "E0", "e0 ", "é", "%", "x".repeat(300))

export const requestArb: fc.Arbitrary<RequestSpec> = fc.record({
  operation: fc.constantFrom(...OPERATIONS),
  auth: fc.oneof(
    { weight: 7, arbitrary: fc.constant({ kind: "key" as const, index: 0 }) },
    { weight: 5, arbitrary: fc.nat({ max: 5 }).map((index) => ({ kind: "key" as const, index })) },
    {
      weight: 2,
      arbitrary: fc.constantFrom<SpecialAuth>("none", "basic", "emptyBearer", "unknownKey", "badChecksum", "innerSpace", "lowercaseScheme")
        .map((which) => ({ kind: "special" as const, which }))
    }
  ),
  encounter: fc.oneof(
    { weight: 6, arbitrary: fc.nat({ max: 9 }).map((index) => ({ kind: "callerClinical" as const, index })) },
    { weight: 5, arbitrary: fc.nat({ max: 9 }).map((index) => ({ kind: "index" as const, index })) },
    { weight: 1, arbitrary: rawIdArb.map((id) => ({ kind: "raw" as const, id })) }
  ),
  document: fc.oneof(
    { weight: 6, arbitrary: fc.nat({ max: 3 }).map((index) => ({ kind: "fitting" as const, index })) },
    { weight: 4, arbitrary: fc.nat({ max: 3 }).map((index) => ({ kind: "own" as const, index })) },
    { weight: 2, arbitrary: fc.nat({ max: 30 }).map((index) => ({ kind: "any" as const, index })) },
    { weight: 1, arbitrary: rawIdArb.map((id) => ({ kind: "raw" as const, id })) }
  ),
  listQuery: listQueryArb,
  otherQuery: otherQueryArb
}).map(({ listQuery, otherQuery, ...spec }): RequestSpec => ({
  ...spec,
  query: spec.operation === "listPublicEncounters" ? listQuery : otherQuery
}))

const at = <A>(items: ReadonlyArray<A>, index: number): A | undefined => (items.length === 0 ? undefined : items[index % items.length])

export const resolveRequest = (model: ModelDataSet, spec: RequestSpec): ResolvedRequest => {
  const firstKey = model.keys[0]?.token ?? makeToken("test", "none")
  const authorization = spec.auth.kind === "key"
    ? `Bearer ${at(model.keys, spec.auth.index)?.token ?? firstKey}`
    : {
      none: undefined,
      basic: `Basic ${firstKey}`,
      emptyBearer: "Bearer ",
      unknownKey: `Bearer ${makeToken("test", "Never0stored0anywhere")}`,
      badChecksum: `Bearer ${firstKey.slice(0, -6)}000000`,
      innerSpace: `Bearer ${firstKey.slice(0, 20)} ${firstKey.slice(20)}`,
      lowercaseScheme: `bEaReR \t${firstKey}`
    }[spec.auth.which]
  const keyOrganization = spec.auth.kind === "key" ? at(model.keys, spec.auth.index)?.organizationId : undefined
  const callerClinical = model.encounters.filter((candidate) =>
    candidate.organizationId === keyOrganization && candidate.dataClass === "clinical"
  )
  const encounter = spec.encounter.kind === "index"
    ? at(model.encounters, spec.encounter.index)
    : spec.encounter.kind === "callerClinical"
    ? at(callerClinical, spec.encounter.index) ?? at(model.encounters, spec.encounter.index)
    : undefined
  const encounterId = spec.encounter.kind === "raw" ? spec.encounter.id : encounter?.id ?? "missing"
  const allDocuments = model.encounters.flatMap((candidate) => candidate.documents)
  const fittingTypes: ReadonlyArray<SchemaType> = spec.operation === "getPublicDocument" ? ["document", "ambient_transcript"] : ["ambient_transcript"]
  const own = encounter?.documents ?? []
  const documentId = spec.document.kind === "raw"
    ? spec.document.id
    : spec.document.kind === "own"
    ? at(own, spec.document.index)?.id ?? "missing"
    : spec.document.kind === "fitting"
    ? (at(own.filter((document) => fittingTypes.includes(document.schemaType)), spec.document.index) ?? at(own, spec.document.index))?.id ?? "missing"
    : at(allDocuments, spec.document.index)?.id ?? "missing"
  return { operation: spec.operation, authorization, encounterId, documentId, query: spec.query }
}

// ---------------------------------------------------------------------------------------------
// Adapters' inputs

const RECORDING_BYTES_BASE64 = Buffer.from("RIFF-isolation-audio").toString("base64")
const storageKeyOf = (documentId: string) => `recordings/${documentId}`

/** The fixture (clinical-encounter-fixture/v1) of a model, for the PostgreSQL run. */
export const toFixture = (model: ModelDataSet) => ({
  format: "clinical-encounter-fixture/v1" as const,
  organizations: model.organizations.map((organization) => ({
    organization_id: organization.id,
    name: organization.id,
    approved: organization.approved,
    enabled_routes: organization.enabledRoutes
  })),
  api_keys: model.keys.map((key) => ({
    token: key.token,
    organization_id: key.organizationId,
    kind: key.kind,
    scopes: key.scopes,
    state: key.state,
    expires_at: key.expiresAt
  })),
  patients: model.patients.map((patient) => ({
    patient_id: patient.id,
    organization_id: patient.organizationId,
    first_name: "Pat",
    last_name: patient.organizationId,
    date_of_birth: "1970-01-01"
  })),
  encounters: model.encounters.map((encounter) => ({
    encounter_id: encounter.id,
    organization_id: encounter.organizationId,
    created_at: encounter.createdAt,
    updated_at: encounter.createdAt,
    status: "signed",
    patient_id: encounter.patientId,
    data_class: encounter.dataClass,
    documents: encounter.documents.map((document) => ({
      document_id: document.id,
      schema_type: document.schemaType,
      title: document.id,
      workflow_variant: document.workflowVariant,
      created_at: document.createdAt,
      updated_at: document.createdAt,
      content_markdown: document.content,
      transcript: document.transcript === null ? null : { provider: "asr", turns: document.transcript },
      recording: document.recording === "none"
        ? null
        : document.recording === "missing"
        ? { content_type: "audio/wav", missing: true as const }
        : { content_type: "audio/wav", data_base64: RECORDING_BYTES_BASE64 }
    }))
  }))
})

/** The in-memory data set of a model (tokens kept only as their digest), for the domain run. */
export const toMemoryDataSet = (model: ModelDataSet, digestKey: Redacted.Redacted<string>): MemoryDataSet => {
  const documents: Array<StoredDocument> = model.encounters.flatMap((encounter) =>
    encounter.documents.map((document): StoredDocument => ({
      documentId: DocumentId.make(document.id),
      encounterId: EncounterId.make(encounter.id),
      schemaType: document.schemaType,
      title: document.id,
      status: null,
      workflowVariant: document.workflowVariant,
      audioDurationSeconds: null,
      createdAt: new Date(document.createdAt),
      updatedAt: new Date(document.createdAt),
      contentMarkdown: document.content,
      recording: document.recording === "none" ? null : { storageKey: storageKeyOf(document.id), contentType: "audio/wav" }
    }))
  )
  const encounters = model.encounters.map((encounter): StoredEncounter => ({
    encounterId: EncounterId.make(encounter.id),
    organizationId: OrganizationId.make(encounter.organizationId),
    dataClass: encounter.dataClass,
    createdAt: new Date(encounter.createdAt),
    updatedAt: new Date(encounter.createdAt),
    dateOfService: null,
    status: "signed",
    patient: encounter.patientId === null
      ? null
      : { patient_id: PatientId.make(encounter.patientId), first_name: "Pat", last_name: encounter.organizationId, date_of_birth: "1970-01-01" },
    documents: documents
      .filter((document) => document.encounterId === encounter.id)
      .map(({ audioDurationSeconds, createdAt, documentId, schemaType, status, title, workflowVariant }) => ({
        documentId,
        schemaType,
        title,
        status,
        workflowVariant,
        audioDurationSeconds,
        createdAt
      }))
  }))
  return {
    organizations: model.organizations.map((organization) => ({
      organizationId: OrganizationId.make(organization.id),
      name: organization.id,
      approved: organization.approved,
      enabledRoutes: organization.enabledRoutes
    })),
    apiKeys: model.keys.map((key, index) => ({
      digest: computeApiKeyDigest(digestKey, key.token),
      record: {
        apiKeyId: ApiKeyId.make(`key_${index}`),
        organizationId: key.organizationId === null ? null : OrganizationId.make(key.organizationId),
        kind: key.kind,
        scopes: key.scopes,
        state: key.state,
        expiresAt: key.expiresAt === null ? null : new Date(key.expiresAt),
        label: null
      }
    })),
    encounters,
    documents,
    transcripts: model.encounters.flatMap((encounter) =>
      encounter.documents.flatMap((document) =>
        document.transcript === null
          ? []
          : [{ documentId: DocumentId.make(document.id), transcript: { provider: "asr", audio_duration_seconds: null, turns: document.transcript } }]
      )
    ),
    audioObjects: model.encounters.flatMap((encounter) =>
      encounter.documents.filter((document) => document.recording === "present").map((document) => storageKeyOf(document.id))
    )
  }
}

export const digestKeyFor = (text: string) => Redacted.make(text)

// ---------------------------------------------------------------------------------------------
// The oracle

export type Expected =
  | { readonly kind: "error"; readonly reasonCode: string; readonly field: string | null }
  | {
    readonly kind: "list"
    readonly organizationId: string
    readonly encounterIds: ReadonlyArray<string>
    readonly total: number
    readonly limit: number
    readonly offset: number
  }
  | { readonly kind: "encounter"; readonly organizationId: string; readonly encounter: ModelEncounter }
  | { readonly kind: "document"; readonly organizationId: string; readonly encounter: ModelEncounter; readonly document: ModelDocument }

const refuse = (reasonCode: string, field: string | null = null): Expected => ({ kind: "error", reasonCode, field })

const TOKEN_SHAPE = /^ce_(live|test)_[0-9A-Za-z]{36}$/

/** Known instants of the query candidates: the oracle does not parse dates, it looks them up. */
const QUERY_INSTANTS: Record<string, number | undefined> = {
  "2026-02-01T00:00:00Z": Date.UTC(2026, 1, 1),
  "2026-01-05T08:00:00.000Z": Date.UTC(2026, 0, 5, 8),
  "2026-03-01T02:00:00+02:00": Date.UTC(2026, 2, 1),
  "2026-04-15T16:45:10.250Z": Date.UTC(2026, 3, 15, 16, 45, 10, 250),
  "2026-12-31T00:00:00Z": Date.UTC(2026, 11, 31),
  "2026-01-05T08:00:00Z": Date.UTC(2026, 0, 5, 8)
}

const utf8Compare = (a: string, b: string) => Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"))

const parseBearer = (authorization: string | undefined): string | undefined => {
  if (authorization === undefined) return undefined
  const trimmed = authorization.replace(/^[ \t]+|[ \t]+$/g, "")
  const separator = trimmed.search(/[ \t]/)
  if (separator === -1) return undefined
  if (trimmed.slice(0, separator).toLowerCase() !== "bearer") return undefined
  const token = trimmed.slice(separator).replace(/^[ \t]+/, "")
  return token === "" ? undefined : token
}

export const expectedOutcome = (model: ModelDataSet, request: ResolvedRequest, now: number): Expected => {
  // 1. Authentication.
  const token = parseBearer(request.authorization)
  if (token === undefined) return refuse("missing_bearer")
  if (!model.apiKeysEnabled) return refuse("api_keys_disabled")
  if (model.environment === "production" && token.startsWith("ce_test_")) return refuse("test_prefix_not_allowed")
  if (!TOKEN_SHAPE.test(token) || apiKeyChecksum(token.slice(8, 38)) !== token.slice(38)) return refuse("malformed_token")
  const key = model.keys.find((candidate) => candidate.token === token)
  if (key === undefined) return refuse("invalid_key")
  if (key.state === "disabled") return refuse("disabled_key")
  if (key.state === "revoked") return refuse("revoked_key")
  if (key.expiresAt !== null && now > Date.parse(key.expiresAt)) return refuse("expired_key")
  // 2. Authorization.
  if (key.kind !== "organization" || key.organizationId === null) return refuse("org_scope_only_required")
  const organization = model.organizations.find((candidate) => candidate.id === key.organizationId)
  if (organization === undefined || !organization.enabledRoutes.includes(request.operation)) return refuse("route_not_allowed")
  if (!organization.approved) return refuse("organization_not_allowlisted")
  if (!REQUIRED[request.operation].every((scope) => key.scopes.includes(scope))) return refuse("missing_scope")
  const caller = organization.id

  // 3. Query.
  if (request.operation === "listPublicEncounters") return expectedList(model, caller, request.query)
  const firstKey = request.query[0]
  if (firstKey !== undefined) return refuse("unsupported_filter", firstKey[0])

  // 4. Lookup.
  const encounter = model.encounters.find((candidate) => candidate.id === request.encounterId)
  if (encounter === undefined) return refuse("encounter_not_found")
  if (encounter.organizationId !== caller) return refuse("cross_organization_denied")
  if (encounter.dataClass !== "clinical") return refuse("demo_training_denied")
  if (request.operation === "getPublicEncounter") return { kind: "encounter", organizationId: caller, encounter }
  const document = encounter.documents.find((candidate) => candidate.id === request.documentId)
  if (document === undefined) return refuse("document_not_found")
  switch (request.operation) {
    case "getPublicDocument":
      if (document.schemaType !== "document" && document.schemaType !== "ambient_transcript") return refuse("unsupported_document_type")
      break
    case "getPublicDocumentTranscript":
      if (document.schemaType !== "ambient_transcript") return refuse("unsupported_document_type")
      if (document.transcript === null) return refuse("transcript_not_found")
      break
    case "getPublicDocumentAudio":
      if (document.schemaType !== "ambient_transcript") return refuse("unsupported_document_type")
      if (document.recording === "none") return refuse("audio_not_available_for_document")
      if (document.recording === "missing") return refuse("audio_not_found")
      break
  }
  return { kind: "document", organizationId: caller, encounter, document }
}

const expectedList = (model: ModelDataSet, caller: string, query: ReadonlyArray<readonly [string, string]>): Expected => {
  const supported = ["limit", "offset", "sort_order", "start_at", "end_at"]
  const unsupported = query.find(([key]) => !supported.includes(key))
  if (unsupported !== undefined) return refuse("unsupported_filter", unsupported[0])
  const only = (key: string): string | null | undefined => {
    const values = query.filter(([candidate]) => candidate === key).map(([, value]) => value)
    return values.length === 0 ? null : values.length === 1 ? values[0] : undefined
  }
  const integer = (key: string, fallback: number, min: number, max: number) => {
    const text = only(key)
    if (text === null) return fallback
    if (text === undefined || !/^(0|[1-9][0-9]*)$/.test(text)) return undefined
    const value = Number(text)
    return value >= min && value <= max ? value : undefined
  }
  const limit = integer("limit", 50, 1, 100)
  if (limit === undefined) return refuse("invalid_limit", "limit")
  const offset = integer("offset", 0, 0, 10_000)
  if (offset === undefined) return refuse("invalid_offset", "offset")
  const sort = only("sort_order")
  if (sort === undefined || (sort !== null && sort !== "asc" && sort !== "desc")) return refuse("invalid_sort", "sort_order")
  const instant = (key: string): number | null | undefined => {
    const text = only(key)
    if (text === null) return null
    return text === undefined ? undefined : QUERY_INSTANTS[text]
  }
  const start = instant("start_at")
  if (start === undefined) return refuse("invalid_query", "start_at")
  const end = instant("end_at")
  if (end === undefined) return refuse("invalid_query", "end_at")
  if (start !== null && end !== null && start >= end) return refuse("invalid_query", "start_at")
  const direction = sort === "asc" ? 1 : -1
  const matching = model.encounters
    .filter((encounter) => encounter.organizationId === caller && encounter.dataClass === "clinical")
    .filter((encounter) => {
      const created = Date.parse(encounter.createdAt)
      return (start === null || created >= start) && (end === null || created < end)
    })
    .sort((a, b) => direction * ((Date.parse(a.createdAt) - Date.parse(b.createdAt)) || utf8Compare(a.id, b.id)))
  return {
    kind: "list",
    organizationId: caller,
    encounterIds: matching.slice(offset, offset + limit).map((encounter) => encounter.id),
    total: matching.length,
    limit,
    offset
  }
}

// ---------------------------------------------------------------------------------------------
// What a success may hold

const SHAPES = {
  list: ["items", "limit", "offset", "total"],
  encounterDetail: ["encounter"],
  encounter: ["encounter_id", "organization_id", "created_at", "updated_at", "date_of_service", "encounter_type", "status", "patient", "documents"],
  patient: ["patient_id", "first_name", "last_name", "date_of_birth"],
  documentSummary: ["document_id", "schema_type", "title", "status", "workflow_variant", "audio_duration_seconds"],
  documentDetail: ["document"],
  clinicalDocument: ["document_id", "encounter_id", "schema_type", "content", "created_at", "updated_at", "title", "status", "workflow_variant"],
  content: ["format", "text"],
  transcriptMetadata: ["document_id", "encounter_id", "schema_type", "created_at", "updated_at", "title", "status", "workflow_variant", "audio_duration_seconds"],
  transcriptResponse: ["document_id", "encounter_id", "transcript"],
  transcript: ["provider", "audio_duration_seconds", "turns"],
  turn: ["speaker", "text", "start", "end"],
  audio: ["audio_url", "expires_at"]
} as const

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Date)

/**
 * The violations of isolation or of the contract's shapes in a success body: every key must be
 * one the contract names for that object, and every encounter, patient and document in it must
 * be the caller organization's clinical data that the oracle expected.
 */
export const successViolations = (model: ModelDataSet, expected: Expected, operation: OperationId, body: unknown): Array<string> => {
  const problems: Array<string> = []
  const shape = (value: unknown, allowed: ReadonlyArray<string>, where: string): value is Record<string, unknown> => {
    if (!isRecord(value)) {
      problems.push(`${where} is not an object`)
      return false
    }
    const keys = Object.keys(value)
    for (const key of keys) if (!allowed.includes(key)) problems.push(`${where} has a field outside the contract: ${key}`)
    for (const key of allowed) if (!keys.includes(key)) problems.push(`${where} lacks ${key}`)
    return true
  }
  const organizationOf = new Map(model.encounters.map((encounter) => [encounter.id, encounter]))
  const checkEncounter = (value: unknown, caller: string, where: string) => {
    if (!shape(value, SHAPES.encounter, where)) return
    const stored = organizationOf.get(String(value["encounter_id"]))
    if (stored === undefined) problems.push(`${where} is an encounter that does not exist`)
    else {
      if (stored.organizationId !== caller) problems.push(`${where} belongs to ${stored.organizationId}, not ${caller}`)
      if (stored.dataClass !== "clinical") problems.push(`${where} is ${stored.dataClass} data`)
    }
    if (value["organization_id"] !== caller) problems.push(`${where}.organization_id is ${String(value["organization_id"])}`)
    if (value["patient"] !== null) {
      if (shape(value["patient"], SHAPES.patient, `${where}.patient`)) {
        const patientId = (value["patient"] as Record<string, unknown>)["patient_id"]
        const patient = model.patients.find((candidate) => candidate.id === patientId)
        if (patient?.organizationId !== caller || stored?.patientId !== patientId) problems.push(`${where}.patient ${String(patientId)} is not this encounter's`)
      }
    }
    const documents = value["documents"]
    if (!Array.isArray(documents)) problems.push(`${where}.documents is not an array`)
    else {
      const own = new Set(stored?.documents.map((document) => document.id) ?? [])
      documents.forEach((document: unknown, index) => {
        if (shape(document, SHAPES.documentSummary, `${where}.documents[${index}]`) && !own.has(String(document["document_id"]))) {
          problems.push(`${where}.documents[${index}] is not a document of this encounter`)
        }
      })
      if (documents.length !== own.size) problems.push(`${where}.documents has ${documents.length} of ${own.size} documents`)
    }
  }

  if (expected.kind === "error") return [`a success where ${expected.reasonCode} was expected`]
  const caller = expected.organizationId
  switch (operation) {
    case "listPublicEncounters": {
      if (expected.kind !== "list" || !shape(body, SHAPES.list, "list")) break
      const items = Array.isArray(body["items"]) ? body["items"] : []
      items.forEach((item: unknown, index) => checkEncounter(item, caller, `items[${index}]`))
      const ids = items.map((item: unknown) => (isRecord(item) ? item["encounter_id"] : undefined))
      if (JSON.stringify(ids) !== JSON.stringify(expected.encounterIds)) {
        problems.push(`items ${JSON.stringify(ids)} instead of ${JSON.stringify(expected.encounterIds)}`)
      }
      if (body["total"] !== expected.total) problems.push(`total ${String(body["total"])} instead of ${expected.total}`)
      if (body["limit"] !== expected.limit || body["offset"] !== expected.offset) problems.push("limit or offset differ from the query's")
      break
    }
    case "getPublicEncounter": {
      if (expected.kind !== "encounter" || !shape(body, SHAPES.encounterDetail, "detail")) break
      checkEncounter(body["encounter"], caller, "encounter")
      if (isRecord(body["encounter"]) && body["encounter"]["encounter_id"] !== expected.encounter.id) problems.push("another encounter than the one asked for")
      break
    }
    case "getPublicDocument": {
      if (expected.kind !== "document" || !shape(body, SHAPES.documentDetail, "detail")) break
      const document = body["document"]
      const allowed = expected.document.schemaType === "document" ? SHAPES.clinicalDocument : SHAPES.transcriptMetadata
      if (shape(document, allowed, "document")) {
        if (expected.document.schemaType === "document") shape(document["content"], SHAPES.content, "document.content")
        if (document["document_id"] !== expected.document.id || document["encounter_id"] !== expected.encounter.id) problems.push("another document than the one asked for")
      }
      break
    }
    case "getPublicDocumentTranscript": {
      if (expected.kind !== "document" || !shape(body, SHAPES.transcriptResponse, "transcript response")) break
      if (body["document_id"] !== expected.document.id || body["encounter_id"] !== expected.encounter.id) problems.push("another document than the one asked for")
      const transcript = body["transcript"]
      if (shape(transcript, SHAPES.transcript, "transcript")) {
        const turns = Array.isArray(transcript["turns"]) ? transcript["turns"] : []
        turns.forEach((turn: unknown, index) => shape(turn, SHAPES.turn, `turns[${index}]`))
        if (JSON.stringify(turns) !== JSON.stringify(expected.document.transcript)) problems.push("turns differ from the document's own")
      }
      break
    }
    case "getPublicDocumentAudio": {
      if (expected.kind !== "document") break
      shape(body, SHAPES.audio, "audio")
      break
    }
  }
  if (expected.kind === "list" && operation !== "listPublicEncounters") problems.push("oracle and operation disagree")
  return problems
}

/** How many disclosure events a success records (docs/behaviour.md): one per listed encounter, else one. */
export const expectedDisclosures = (expected: Expected): number =>
  expected.kind === "error" ? 0 : expected.kind === "list" ? expected.encounterIds.length : 1
