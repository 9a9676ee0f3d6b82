import {
  ApiKeyId,
  computeApiKeyDigest,
  DocumentId,
  EncounterId,
  type MemoryDataSet,
  OrganizationId,
  PatientId,
  type StoredDocument,
  type StoredEncounter
} from "@clinical-api/domain"
import type { Redacted } from "effect"
import type { ApiKeyKind, ApiKeyState, DataClass, OperationId, Scope, SchemaType, WorkflowVariant } from "@clinical-api/domain"

/** The fixture format (docs/fixture-format.md), as far as these tests use it. */
export interface FixtureDocument {
  readonly format: "clinical-encounter-fixture/v1"
  readonly organizations: ReadonlyArray<{
    readonly organization_id: string
    readonly name: string
    readonly approved: boolean
    readonly enabled_routes: ReadonlyArray<OperationId>
  }>
  readonly api_keys: ReadonlyArray<{
    readonly label?: string
    readonly token: string
    readonly organization_id: string | null
    readonly kind: ApiKeyKind
    readonly scopes: ReadonlyArray<Scope>
    readonly state: ApiKeyState
    readonly expires_at: string | null
  }>
  readonly patients: ReadonlyArray<{
    readonly patient_id: string
    readonly organization_id: string
    readonly first_name?: string | null
    readonly last_name?: string | null
    readonly date_of_birth?: string | null
  }>
  readonly encounters: ReadonlyArray<FixtureEncounter>
}

export interface FixtureEncounter {
  readonly encounter_id: string
  readonly organization_id: string
  readonly created_at: string
  readonly updated_at: string
  readonly date_of_service?: string | null
  readonly status?: string | null
  readonly patient_id?: string | null
  readonly data_class: DataClass
  readonly documents: ReadonlyArray<FixtureDocumentRecord>
}

export interface FixtureDocumentRecord {
  readonly document_id: string
  readonly schema_type: SchemaType
  readonly title?: string | null
  readonly status?: string | null
  readonly workflow_variant?: WorkflowVariant | null
  readonly created_at: string
  readonly updated_at: string
  readonly content_markdown?: string | null
  readonly audio_duration_seconds?: number | null
  readonly transcript?: {
    readonly provider: string
    readonly audio_duration_seconds?: number | null
    readonly turns: ReadonlyArray<{ readonly speaker: string; readonly text: string; readonly start: number; readonly end: number }>
  } | null
  readonly recording?: { readonly content_type: string; readonly data_base64?: string; readonly missing?: boolean } | null
}

const storageKeyOf = (documentId: string) => `recordings/${documentId}`

/** The in-memory data set a fixture describes; tokens are kept only as their digest. */
export const dataSetFromFixture = (fixture: FixtureDocument, digestKey: Redacted.Redacted<string>): MemoryDataSet => {
  const patients = new Map(fixture.patients.map((patient) => [patient.patient_id, patient]))
  const documents: Array<StoredDocument> = []
  const transcripts: Array<MemoryDataSet["transcripts"][number]> = []
  const audioObjects: Array<string> = []
  const encounters: Array<StoredEncounter> = fixture.encounters.map((encounter) => {
    const stored = encounter.documents.map((document): StoredDocument => ({
      documentId: DocumentId.make(document.document_id),
      encounterId: EncounterId.make(encounter.encounter_id),
      schemaType: document.schema_type,
      title: document.title ?? null,
      status: document.status ?? null,
      workflowVariant: document.workflow_variant ?? null,
      audioDurationSeconds: document.audio_duration_seconds ?? null,
      createdAt: new Date(document.created_at),
      updatedAt: new Date(document.updated_at),
      contentMarkdown: document.content_markdown ?? null,
      recording: document.recording == null
        ? null
        : { storageKey: storageKeyOf(document.document_id), contentType: document.recording.content_type }
    }))
    documents.push(...stored)
    for (const document of encounter.documents) {
      if (document.transcript != null) {
        transcripts.push({
          documentId: DocumentId.make(document.document_id),
          transcript: {
            provider: document.transcript.provider,
            audio_duration_seconds: document.transcript.audio_duration_seconds ?? null,
            turns: document.transcript.turns
          }
        })
      }
      if (document.recording != null && document.recording.missing !== true) audioObjects.push(storageKeyOf(document.document_id))
    }
    const patient = encounter.patient_id == null ? undefined : patients.get(encounter.patient_id)
    return {
      encounterId: EncounterId.make(encounter.encounter_id),
      organizationId: OrganizationId.make(encounter.organization_id),
      dataClass: encounter.data_class,
      createdAt: new Date(encounter.created_at),
      updatedAt: new Date(encounter.updated_at),
      dateOfService: encounter.date_of_service == null ? null : new Date(encounter.date_of_service),
      status: encounter.status ?? null,
      patient: patient === undefined
        ? null
        : {
          patient_id: PatientId.make(patient.patient_id),
          first_name: patient.first_name ?? null,
          last_name: patient.last_name ?? null,
          date_of_birth: patient.date_of_birth ?? null
        },
      documents: stored.map(({ audioDurationSeconds, createdAt, documentId, schemaType, status, title, workflowVariant }) => ({
        documentId,
        schemaType,
        title,
        status,
        workflowVariant,
        audioDurationSeconds,
        createdAt
      }))
    }
  })
  return {
    organizations: fixture.organizations.map((organization) => ({
      organizationId: OrganizationId.make(organization.organization_id),
      name: organization.name,
      approved: organization.approved,
      enabledRoutes: organization.enabled_routes
    })),
    apiKeys: fixture.api_keys.map((key, index) => ({
      digest: computeApiKeyDigest(digestKey, key.token),
      record: {
        apiKeyId: ApiKeyId.make(`key_${index}`),
        organizationId: key.organization_id === null ? null : OrganizationId.make(key.organization_id),
        kind: key.kind,
        scopes: key.scopes,
        state: key.state,
        expiresAt: key.expires_at === null ? null : new Date(key.expires_at),
        label: key.label ?? null
      }
    })),
    encounters,
    documents,
    transcripts,
    audioObjects
  }
}
