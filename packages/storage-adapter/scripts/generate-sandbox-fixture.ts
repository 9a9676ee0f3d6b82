/**
 * Generates `fixtures/sandbox.fixture.json`, the data set the sandbox service starts with
 * (format `clinical-encounter-fixture/v1`, docs/fixture-format.md).
 *
 *   pnpm exec tsx packages/storage-adapter/scripts/generate-sandbox-fixture.ts
 *
 * The output is a pure function of SANDBOX_SEED: a seeded PRNG drives every choice, and
 * nothing reads the clock or Math.random, so regenerating gives the committed file byte
 * for byte (the sandbox-fixture test checks it).
 */
import { writeFileSync } from "node:fs"
import { resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { crc32 } from "node:zlib"
import type { OperationId, Scope } from "@clinical-api/domain"

// ---------------------------------------------------------------------------------------
// Fixture shape (mirrors fixture.schema.json)
// ---------------------------------------------------------------------------------------

export const FIXTURE_FORMAT = "clinical-encounter-fixture/v1"

export type ApiKeyKind = "organization" | "user" | "service"
export type ApiKeyState = "active" | "disabled" | "revoked"
export type DataClass = "clinical" | "demo" | "training"
export type WorkflowVariant = "ambient" | "phone_call"

export interface FixtureOrganization {
  readonly organization_id: string
  readonly name: string
  readonly approved: boolean
  readonly enabled_routes: ReadonlyArray<OperationId>
}

export interface FixtureApiKey {
  readonly label: string
  readonly token: string
  readonly organization_id: string | null
  readonly kind: ApiKeyKind
  readonly scopes: ReadonlyArray<Scope>
  readonly state: ApiKeyState
  readonly expires_at: string | null
}

export interface FixturePatient {
  readonly patient_id: string
  readonly organization_id: string
  readonly first_name: string | null
  readonly last_name: string | null
  readonly date_of_birth: string | null
}

export interface FixtureTranscriptTurn {
  readonly speaker: string
  readonly text: string
  readonly start: number
  readonly end: number
}

export interface FixtureTranscript {
  readonly provider: string
  readonly audio_duration_seconds: number | null
  readonly turns: ReadonlyArray<FixtureTranscriptTurn>
}

export type FixtureRecording =
  | { readonly content_type: string; readonly data_base64: string }
  | { readonly content_type: string; readonly missing: true }

interface FixtureDocumentBase {
  readonly document_id: string
  readonly title: string | null
  readonly status: string | null
  readonly workflow_variant: WorkflowVariant | null
  readonly created_at: string
  readonly updated_at: string
}

export interface FixtureClinicalDocument extends FixtureDocumentBase {
  readonly schema_type: "document"
  readonly content_markdown: string | null
}

export interface FixtureAmbientTranscript extends FixtureDocumentBase {
  readonly schema_type: "ambient_transcript"
  readonly audio_duration_seconds: number | null
  readonly transcript: FixtureTranscript | null
  readonly recording: FixtureRecording | null
}

export interface FixtureSummaryOnlyDocument extends FixtureDocumentBase {
  readonly schema_type: "billing" | "encounter_checklist"
}

export type FixtureDocument = FixtureClinicalDocument | FixtureAmbientTranscript | FixtureSummaryOnlyDocument

export interface FixtureEncounter {
  readonly encounter_id: string
  readonly organization_id: string
  readonly created_at: string
  readonly updated_at: string
  readonly date_of_service: string | null
  readonly status: string | null
  readonly patient_id: string | null
  readonly data_class: DataClass
  readonly documents: ReadonlyArray<FixtureDocument>
}

export interface ClinicalEncounterFixture {
  readonly format: typeof FIXTURE_FORMAT
  readonly organizations: ReadonlyArray<FixtureOrganization>
  readonly api_keys: ReadonlyArray<FixtureApiKey>
  readonly patients: ReadonlyArray<FixturePatient>
  readonly encounters: ReadonlyArray<FixtureEncounter>
}

// ---------------------------------------------------------------------------------------
// Seeded randomness
// ---------------------------------------------------------------------------------------

export const SANDBOX_SEED = 20260501

interface Random {
  /** Uniform in [0, 1). */
  readonly next: () => number
  /** Uniform integer in [min, max], both included. */
  readonly int: (min: number, max: number) => number
  readonly chance: (probability: number) => boolean
  readonly pick: <T>(items: ReadonlyArray<T>) => T
  readonly weighted: <T>(entries: ReadonlyArray<readonly [T, number]>) => T
  readonly shuffle: <T>(items: ReadonlyArray<T>) => Array<T>
}

/** mulberry32: small, fast and identical on every platform (32-bit integer arithmetic only). */
const createRandom = (seed: number): Random => {
  let state = seed >>> 0
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (min: number, max: number): number => min + Math.floor(next() * (max - min + 1))
  const at = <T>(items: ReadonlyArray<T>, index: number): T => {
    const item = items[index]
    if (item === undefined) throw new Error(`index ${index} outside a list of ${items.length}`)
    return item
  }
  return {
    next,
    int,
    chance: (probability) => next() < probability,
    pick: (items) => at(items, int(0, items.length - 1)),
    weighted: (entries) => {
      const total = entries.reduce((sum, [, weight]) => sum + weight, 0)
      let threshold = next() * total
      for (const [value, weight] of entries) {
        threshold -= weight
        if (threshold < 0) return value
      }
      return at(entries, entries.length - 1)[0]
    },
    shuffle: (items) => {
      const copy = [...items]
      for (let index = copy.length - 1; index > 0; index--) {
        const other = int(0, index)
        const held = at(copy, index)
        copy[index] = at(copy, other)
        copy[other] = held
      }
      return copy
    }
  }
}

const roundTo = (value: number, decimals: number): number => {
  const factor = 10 ** decimals
  return Math.round(value * factor) / factor
}

// ---------------------------------------------------------------------------------------
// API-key tokens (docs/behaviour.md, "API keys")
// ---------------------------------------------------------------------------------------

export const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/** CRC-32 (IEEE) of the ASCII bytes of the 30 random characters, base62, most significant first, zero-padded to 6. */
export const tokenChecksum = (random30: string): string => {
  let remaining = crc32(Buffer.from(random30, "ascii"))
  let digits = ""
  for (let position = 0; position < 6; position++) {
    digits = BASE62.charAt(remaining % 62) + digits
    remaining = Math.floor(remaining / 62)
  }
  return digits
}

/**
 * A sandbox token whose 30 "random" characters are readable: the words (joined by `0`),
 * padded with `0`, ending in `1`. `Riverside0full0access0key` gives
 * `ce_test_Riverside0full0access0key00001` + checksum, as in example.fixture.json.
 */
export const readableTestToken = (words: string): string => {
  const body = words.padEnd(29, "0") + "1"
  if (body.length !== 30 || !/^[0-9A-Za-z]{30}$/.test(body)) {
    throw new Error(`key words "${words}" do not make 30 base62 characters`)
  }
  return `ce_test_${body}${tokenChecksum(body)}`
}

// ---------------------------------------------------------------------------------------
// Organizations and keys
// ---------------------------------------------------------------------------------------

const ALL_ROUTES: ReadonlyArray<OperationId> = [
  "listPublicEncounters",
  "getPublicEncounter",
  "getPublicDocument",
  "getPublicDocumentTranscript",
  "getPublicDocumentAudio"
]
const ALL_SCOPES: ReadonlyArray<Scope> = ["encounters:read", "patients:read", "documents:read", "recordings:read"]

interface OrganizationPlan {
  readonly organization: FixtureOrganization
  /** Short code used in the readable ids (`enc_rv_0001`). */
  readonly code: string
  /** The clinic as its staff say it on the phone. */
  readonly spokenName: string
  readonly clinicians: ReadonlyArray<string>
  readonly regularPatientCount: number
  readonly hasDemoPatient: boolean
  readonly pediatric: boolean
  readonly encounterCount: number
  readonly demoCount: number
  readonly trainingCount: number
  readonly tieGroups: ReadonlyArray<number>
  readonly visitWeights: ReadonlyArray<readonly [VisitTypeKey, number]>
}

const ORGANIZATION_PLANS: ReadonlyArray<OrganizationPlan> = [
  {
    organization: {
      organization_id: "org_riverside",
      name: "Riverside Family Practice",
      approved: true,
      enabled_routes: ALL_ROUTES
    },
    code: "rv",
    spokenName: "Riverside Family Practice",
    clinicians: ["Priya Patel", "Michael Nguyen", "Elena Alvarez"],
    regularPatientCount: 33,
    hasDemoPatient: true,
    pediatric: false,
    encounterCount: 190,
    demoCount: 10,
    trainingCount: 6,
    tieGroups: [2, 3, 2, 2, 3, 2, 2, 3, 2, 2],
    visitWeights: [
      ["cough", 3],
      ["hypertension_follow_up", 3],
      ["diabetes_follow_up", 3],
      ["back_pain", 2],
      ["medication_refill_call", 2],
      ["lab_results_call", 1.5]
    ]
  },
  {
    organization: {
      organization_id: "org_harbor",
      name: "Harbor Pediatrics",
      approved: true,
      enabled_routes: ALL_ROUTES
    },
    code: "hb",
    spokenName: "Harbor Pediatrics",
    clinicians: ["Sarah Whitfield", "Kofi Mensah"],
    regularPatientCount: 14,
    hasDemoPatient: false,
    pediatric: true,
    encounterCount: 60,
    demoCount: 3,
    trainingCount: 2,
    tieGroups: [2, 3, 2],
    visitWeights: [
      ["pediatric_fever", 5],
      ["pediatric_asthma_follow_up", 3]
    ]
  },
  {
    organization: {
      organization_id: "org_lakeside",
      name: "Lakeside Clinic",
      approved: true,
      // Approved, but transcripts and audio are not enabled: route_not_allowed on those two.
      enabled_routes: ["listPublicEncounters", "getPublicEncounter", "getPublicDocument"]
    },
    code: "lk",
    spokenName: "Lakeside Clinic",
    clinicians: ["Laura Chen", "David Okoro"],
    regularPatientCount: 8,
    hasDemoPatient: false,
    pediatric: false,
    encounterCount: 30,
    demoCount: 1,
    trainingCount: 1,
    tieGroups: [2],
    visitWeights: [
      ["cough", 2],
      ["hypertension_follow_up", 2],
      ["diabetes_follow_up", 2],
      ["back_pain", 1],
      ["medication_refill_call", 1]
    ]
  },
  {
    organization: {
      organization_id: "org_summit",
      name: "Summit Orthopedics",
      // Every route enabled, but not approved: organization_not_allowlisted.
      approved: false,
      enabled_routes: ALL_ROUTES
    },
    code: "sm",
    spokenName: "Summit Orthopedics",
    clinicians: ["Marcus Reyes"],
    regularPatientCount: 4,
    hasDemoPatient: false,
    pediatric: false,
    encounterCount: 20,
    demoCount: 1,
    trainingCount: 0,
    tieGroups: [2],
    visitWeights: [
      ["knee_pain", 4],
      ["back_pain", 2]
    ]
  }
]

interface KeyPlan {
  readonly label: string
  readonly words: string
  readonly organizationId: string | null
  readonly kind?: ApiKeyKind
  readonly scopes?: ReadonlyArray<Scope>
  readonly state?: ApiKeyState
  readonly expiresAt?: string
}

/** The first key is the one the start-up banner prints: Riverside, full access, never expires. */
const KEY_PLANS: ReadonlyArray<KeyPlan> = [
  { label: "riverside full access", words: "Riverside0full0access0key", organizationId: "org_riverside" },
  {
    label: "riverside without recordings:read (missing_scope on audio)",
    words: "Riverside0no0recordings0key",
    organizationId: "org_riverside",
    scopes: ["encounters:read", "patients:read", "documents:read"]
  },
  {
    label: "riverside encounters:read only (missing_scope everywhere)",
    words: "Riverside0encounters0only0key",
    organizationId: "org_riverside",
    scopes: ["encounters:read"]
  },
  { label: "riverside disabled (disabled_key)", words: "Riverside0disabled0key", organizationId: "org_riverside", state: "disabled" },
  { label: "riverside revoked (revoked_key)", words: "Riverside0revoked0key", organizationId: "org_riverside", state: "revoked" },
  {
    label: "riverside expired (expired_key)",
    words: "Riverside0expired0key",
    organizationId: "org_riverside",
    expiresAt: "2026-06-30T00:00:00.000Z"
  },
  {
    label: "riverside revoked and expired (revoked_key wins)",
    words: "Riverside0revoked0expired0key",
    organizationId: "org_riverside",
    state: "revoked",
    expiresAt: "2026-03-31T00:00:00.000Z"
  },
  {
    label: "riverside user key (org_scope_only_required)",
    words: "Riverside0user0key",
    organizationId: "org_riverside",
    kind: "user"
  },
  {
    label: "service key without organization (org_scope_only_required)",
    words: "Platform0service0key",
    organizationId: null,
    kind: "service"
  },
  {
    label: "riverside full access, expires 2099-12-31",
    words: "Riverside0expires0in02099",
    organizationId: "org_riverside",
    expiresAt: "2099-12-31T23:59:59.000Z"
  },
  { label: "harbor full access", words: "Harbor0full0access0key", organizationId: "org_harbor" },
  {
    label: "lakeside full access (transcript and audio routes not enabled: route_not_allowed)",
    words: "Lakeside0full0access0key",
    organizationId: "org_lakeside"
  },
  {
    label: "summit full access (organization not approved: organization_not_allowlisted)",
    words: "Summit0full0access0key",
    organizationId: "org_summit"
  }
]

const buildApiKeys = (): Array<FixtureApiKey> =>
  KEY_PLANS.map((plan) => ({
    label: plan.label,
    token: readableTestToken(plan.words),
    organization_id: plan.organizationId,
    kind: plan.kind ?? "organization",
    scopes: plan.scopes ?? ALL_SCOPES,
    state: plan.state ?? "active",
    expires_at: plan.expiresAt ?? null
  }))

// ---------------------------------------------------------------------------------------
// Patients
// ---------------------------------------------------------------------------------------

const ADULT_FIRST_NAMES = [
  "Ada", "Jun", "Marisol", "Thomas", "Grace", "Devon", "Fatima", "Robert", "Linh", "Samuel",
  "Beatriz", "Harold", "Keisha", "Omar", "Ruth", "Carlos", "Ingrid", "Walter", "Aisha", "Patrick",
  "Yuki", "Denise", "Rajesh", "Margaret", "Tyrone", "Elif", "Gerald", "Hannah", "Mateo", "Joan",
  "Kwame", "Svetlana", "Luis", "Nadia", "Franklin", "Rosa", "Anil", "Colleen", "Ibrahim", "Dorothy",
  "Victor", "Mei", "Earl", "Priscilla", "Hamza", "Wendy", "Stanley", "Lucia", "Desmond", "Noor"
]
const CHILD_FIRST_NAMES = [
  "Maya", "Eli", "Zoe", "Mateo", "Amara", "Leo", "Isla", "Kai", "Nora", "Jonah",
  "Ava", "Theo", "Lila", "Ezra", "Mila", "Felix", "Aria", "Rowan", "Sofia", "Miles"
]
const LAST_NAMES = [
  "Moreno", "Park", "Okafor", "Lindqvist", "Haddad", "Brennan", "Nakamura", "Delgado", "Whitaker", "Osei",
  "Kowalski", "Tran", "Fitzgerald", "Abernathy", "Castillo", "Mbeki", "Sorensen", "Gupta", "Holloway", "Reyes",
  "Ivanova", "Chowdhury", "Gallagher", "Adeyemi", "Bianchi", "Yilmaz", "Dubois", "Kim", "Santos", "Novak",
  "Harrington", "Ferreira", "Oyelaran", "MacLeod", "Petrov", "Alvarado", "Schmidt", "Nwosu", "Takahashi", "Rossi",
  "Bergstrom", "Quintero", "Ahmed", "Lachance", "Mwangi", "OConnell", "Vasquez", "Hoang", "Jablonski", "Ortega",
  "Sato", "Greene", "Ibarra", "Kaur", "Fontaine", "Ekwueme", "Larsen", "Medina", "Zhou", "Barnes"
]

interface PatientProfile {
  readonly patient: FixturePatient
  readonly isDemoPatient: boolean
}

const isoDate = (epochMs: number): string => new Date(epochMs).toISOString().slice(0, 10)
const DAY_MS = 86_400_000
const utc = (year: number, month: number, day: number): number => Date.UTC(year, month - 1, day)

const buildPatients = (random: Random): Array<PatientProfile> => {
  const adultNames = random.shuffle(ADULT_FIRST_NAMES)
  const childNames = random.shuffle(CHILD_FIRST_NAMES)
  const lastNames = random.shuffle(LAST_NAMES)
  const takeFrom = (names: Array<string>): string => {
    const name = names.shift()
    if (name === undefined) throw new Error("name bank exhausted")
    return name
  }
  const profiles: Array<PatientProfile> = []
  for (const plan of ORGANIZATION_PLANS) {
    const organizationId = plan.organization.organization_id
    for (let index = 1; index <= plan.regularPatientCount; index++) {
      const bornFrom = plan.pediatric ? utc(2010, 1, 1) : utc(1941, 1, 1)
      const bornTo = plan.pediatric ? utc(2025, 6, 30) : utc(2004, 12, 31)
      const dateOfBirth = isoDate(bornFrom + random.int(0, Math.floor((bornTo - bornFrom) / DAY_MS)) * DAY_MS)
      profiles.push({
        isDemoPatient: false,
        patient: {
          patient_id: `pat_${plan.code}_${String(index).padStart(3, "0")}`,
          organization_id: organizationId,
          first_name: takeFrom(plan.pediatric ? childNames : adultNames),
          last_name: takeFrom(lastNames),
          date_of_birth: dateOfBirth
        }
      })
    }
    if (plan.hasDemoPatient) {
      profiles.push({
        isDemoPatient: true,
        patient: {
          patient_id: `pat_${plan.code}_demo`,
          organization_id: organizationId,
          first_name: "Demo",
          last_name: "Patient",
          date_of_birth: "1980-01-01"
        }
      })
    }
  }
  // Partial demographics, as real intake data has: a few unknown dates of birth and names.
  const regular = profiles.filter((profile) => !profile.isDemoPatient)
  const withGaps = random.shuffle(regular.map((_, index) => index)).slice(0, 8)
  return profiles.map((profile) => {
    const gapRank = withGaps.indexOf(regular.indexOf(profile))
    if (gapRank < 0) return profile
    const patient = profile.patient
    // ranks 0-4: date of birth unknown; 5-6: first name unknown; 7: last name unknown.
    if (gapRank <= 4) return { ...profile, patient: { ...patient, date_of_birth: null } }
    if (gapRank <= 6) return { ...profile, patient: { ...patient, first_name: null } }
    return { ...profile, patient: { ...patient, last_name: null } }
  })
}

// ---------------------------------------------------------------------------------------
// Visit types: dialogue banks and note templates
// ---------------------------------------------------------------------------------------

type VisitTypeKey =
  | "cough"
  | "hypertension_follow_up"
  | "diabetes_follow_up"
  | "back_pain"
  | "knee_pain"
  | "pediatric_fever"
  | "pediatric_asthma_follow_up"
  | "medication_refill_call"
  | "lab_results_call"

/** C: clinician, P: patient, G: parent or guardian. */
type SpeakerCode = "C" | "P" | "G"
type DialogueBlock = ReadonlyArray<readonly [SpeakerCode, string]>

interface NoteTemplate {
  readonly subjective: string
  readonly exam: ReadonlyArray<string>
  readonly assessment: ReadonlyArray<string>
  readonly plan: ReadonlyArray<string>
}

interface VisitType {
  readonly label: string
  readonly phoneCall: boolean
  readonly pediatric: boolean
  readonly opening: DialogueBlock
  /** Exchanges in conversational order; a transcript keeps an ordered subset of them. */
  readonly exchanges: ReadonlyArray<DialogueBlock>
  readonly closing: DialogueBlock
  readonly note: NoteTemplate
  readonly billingCodes: ReadonlyArray<string>
}

const ADULT_HISTORY: ReadonlyArray<DialogueBlock> = [
  [["C", "Before we get into it, are you on any medications right now?"], ["P", "Just a multivitamin and the cholesterol pill, atorvastatin."]],
  [["C", "Any allergies to medications?"], ["P", "Penicillin gives me a rash."]],
  [["C", "Anything new in your family history since last time?"], ["P", "My brother was just diagnosed with type two diabetes."]],
  [["C", "Any hospital stays or emergency room visits since I last saw you?"], ["P", "No, nothing like that."]]
]

const PEDIATRIC_HISTORY: ReadonlyArray<DialogueBlock> = [
  [["C", "Any other medical problems, or medicines given regularly?"], ["G", "No, healthy otherwise. Just the ibuprofen this week."]],
  [["C", "Any allergies to medicines?"], ["G", "None that we know of."]],
  [["C", "How has sleep been?"], ["G", "Up a couple of times a night, which is unusual."]]
]

const VISIT_TYPES: { readonly [K in VisitTypeKey]: VisitType } = {
  cough: {
    label: "Cough",
    phoneCall: false,
    pediatric: false,
    opening: [
      ["C", "Hi, I'm Dr. {doctor}. What brings you in today?"],
      ["P", "I've had this cough for about two weeks and it's not getting better."]
    ],
    exchanges: [
      [["C", "Is the cough dry, or are you bringing anything up?"], ["P", "Mostly dry, but in the mornings there's some yellowish phlegm."]],
      [["C", "Any fever or chills?"], ["P", "I felt warm the first few days, maybe a hundred point five, but nothing since."]],
      [["C", "Any shortness of breath or wheezing?"], ["P", "A little winded on the stairs, which isn't normal for me."]],
      [["C", "Any chest pain when you cough or take a deep breath?"], ["P", "Just sore muscles from coughing so much."]],
      [["C", "Has anyone at home been sick?"], ["P", "My daughter had a cold right before this started."]],
      [["C", "Have you tried anything for it so far?"], ["P", "Cough drops, and some over-the-counter cough syrup at night. It helps me sleep a bit."]],
      [["C", "Do you smoke or vape?"], ["P", "No, I quit about ten years ago."]],
      [["C", "Any history of asthma or allergies?"], ["P", "Seasonal allergies in the spring, no asthma."]],
      [["C", "Is it worse at night or when you lie down?"], ["P", "Yes, definitely worse at night."]],
      [["C", "Okay, let me have a listen. Take a deep breath in and out through your mouth."], ["P", "Okay."]],
      [["C", "Your lungs sound clear, no crackles, and your oxygen level is ninety-eight percent, which is reassuring."], ["P", "That's good to hear."]],
      [["C", "This looks like a post-viral cough. It can linger for three to eight weeks after a cold."], ["P", "That long? I was hoping for an antibiotic."]],
      [["C", "Antibiotics won't help a viral cough, but honey at night and an inhaler can calm the airways."], ["P", "Okay, I can try that."]],
      [["C", "Use the inhaler two puffs up to every four hours when the coughing fits start."], ["P", "Got it."]]
    ],
    closing: [
      ["C", "If you get a fever again, cough up blood, or have trouble breathing, call us or go to urgent care."],
      ["P", "Will do. Thank you, doctor."],
      ["C", "Let's check back in three weeks if it's not clearly improving."]
    ],
    note: {
      subjective:
        "presents with a cough of about two weeks following a cold. Felt feverish early on (Tmax 100.5 F), afebrile since. Mostly dry cough with scant yellow morning sputum, worse at night. Mild dyspnea on stairs. No hemoptysis or pleuritic chest pain. Sick contact at home. Former smoker, quit 10 years ago.",
      exam: [
        "General: well appearing, speaking full sentences",
        "HEENT: mild pharyngeal erythema, no exudate",
        "Lungs: clear to auscultation bilaterally, no wheezes or crackles",
        "Neck: no cervical lymphadenopathy"
      ],
      assessment: ["Post-viral cough (R05.1). No clinical signs of pneumonia."],
      plan: [
        "Honey and warm fluids; dextromethorphan at bedtime as needed",
        "Albuterol HFA 2 puffs every 4 hours as needed for coughing fits",
        "Return precautions reviewed: recurrent fever, hemoptysis, worsening dyspnea",
        "Follow up in 3 weeks if not improving; chest X-ray at that point"
      ]
    },
    billingCodes: ["99213", "99214"]
  },
  hypertension_follow_up: {
    label: "Hypertension follow-up",
    phoneCall: false,
    pediatric: false,
    opening: [
      ["C", "Good to see you again. We're following up on your blood pressure today. How have things been?"],
      ["P", "Pretty good overall. I've been taking the lisinopril every morning."]
    ],
    exchanges: [
      [["C", "Have you been checking your blood pressure at home?"], ["P", "Most days. It's usually around one thirty-five over eighty-five."]],
      [["C", "Any headaches, or dizziness when you stand up?"], ["P", "A little dizzy once or twice when I got up too fast."]],
      [["C", "Any chest pain, palpitations, or shortness of breath?"], ["P", "No, nothing like that."]],
      [["C", "Any swelling in your ankles?"], ["P", "Some in the evenings if I've been on my feet all day."]],
      [["C", "Any dry cough? Some people get that with lisinopril."], ["P", "No cough."]],
      [["C", "How is cutting back on salt going?"], ["P", "Better. I stopped adding salt at the table, but we still eat out a couple of times a week."]],
      [["C", "Are you getting any exercise?"], ["P", "I walk the dog about twenty minutes most mornings."]],
      [["C", "How much alcohol do you drink in a typical week?"], ["P", "Maybe two or three beers on the weekend."]],
      [["C", "Are you sleeping okay? Any snoring?"], ["P", "I do snore, apparently. I wake up tired some days."]],
      [["C", "Your reading today is one forty-two over eighty-eight. Let me recheck it in a few minutes."], ["P", "I always get a bit nervous here."]],
      [["C", "The repeat is one thirty-six over eighty-four, and your heart and lungs sound normal."], ["P", "Okay, that's a bit better."]],
      [["C", "I'd like to check your kidney function and potassium since you're on lisinopril."], ["P", "Sure, I can do the blood work today."]],
      [["C", "We're close to goal. Let's keep the same dose and keep working on the salt and exercise."], ["P", "Sounds reasonable."]],
      [["C", "Given the snoring and tiredness, I'd also like to refer you for a sleep study."], ["P", "My partner will be happy to hear that."]]
    ],
    closing: [
      ["C", "Keep logging your home readings and bring the log next time. Let's see you in three months."],
      ["P", "Thank you, see you then."]
    ],
    note: {
      subjective:
        "here for hypertension follow-up on lisinopril 10 mg daily, adherent. Home readings around 135/85. Occasional orthostatic lightheadedness. No chest pain, palpitations or dyspnea. Mild evening ankle swelling. Reduced dietary sodium, walks 20 minutes most days. Reports snoring and daytime fatigue.",
      exam: [
        "Repeat BP after 5 minutes: 136/84",
        "Cardiovascular: regular rate and rhythm, no murmurs",
        "Lungs: clear bilaterally",
        "Extremities: trace bilateral ankle edema"
      ],
      assessment: ["Essential hypertension (I10), near goal on current therapy.", "Snoring with daytime fatigue, rule out obstructive sleep apnea."],
      plan: [
        "Continue lisinopril 10 mg daily",
        "Basic metabolic panel today (potassium, creatinine)",
        "Referral for home sleep study",
        "Continue home BP log; follow up in 3 months"
      ]
    },
    billingCodes: ["99214"]
  },
  diabetes_follow_up: {
    label: "Diabetes follow-up",
    phoneCall: false,
    pediatric: false,
    opening: [
      ["C", "Hi, we're here to go over your diabetes today. How have your sugars been?"],
      ["P", "Up and down. Mornings are usually around one fifty."]
    ],
    exchanges: [
      [["C", "Are you taking the metformin twice a day with meals?"], ["P", "Yes, though I sometimes forget the evening dose."]],
      [["C", "Any stomach upset or diarrhea from it?"], ["P", "It was bad at first, but it's settled down."]],
      [["C", "Any low sugars, shaky or sweaty spells?"], ["P", "No, never below eighty that I've seen."]],
      [["C", "Any increased thirst, or getting up at night to urinate?"], ["P", "I get up once a night, maybe twice."]],
      [["C", "Any numbness or tingling in your feet?"], ["P", "Sometimes my toes feel a bit numb at night."]],
      [["C", "When was your last eye exam?"], ["P", "It's been over a year, I think."]],
      [["C", "Tell me about a typical day of eating."], ["P", "Cereal in the morning, a sandwich for lunch, and dinner is usually rice or pasta with some meat."]],
      [["C", "Your A1C came back at seven point eight, up from seven point two in the spring."], ["P", "I figured. The holidays were rough."]],
      [["C", "Let me take a look at your feet. Can you take off your shoes and socks?"], ["P", "Sure."]],
      [["C", "Pulses are good and the skin looks healthy, but the sensation is reduced in both big toes."], ["P", "Is that bad?"]],
      [["C", "It's early nerve change. Good sugar control is the best way to keep it from progressing."], ["P", "Okay."]],
      [["C", "I'd like to add a once-weekly injection, which also helps with weight and protects the heart."], ["P", "An injection? I'm not great with needles."]],
      [["C", "It's a very small needle, and our nurse will show you how to use the pen before you leave."], ["P", "All right, I'll give it a try."]],
      [["C", "I'm also putting in referrals to the eye doctor and to our diabetes educator."], ["P", "That would help, thanks."]]
    ],
    closing: [
      ["C", "We'll repeat the A1C in three months. Call us if the new medicine gives you nausea you can't manage."],
      ["P", "Will do."]
    ],
    note: {
      subjective:
        "here for type 2 diabetes follow-up on metformin 1000 mg twice daily, occasionally misses the evening dose. Fasting glucose around 150. No hypoglycemia. Nocturia once or twice nightly. Intermittent numbness of the toes at night. Last retinal exam more than a year ago.",
      exam: [
        "Feet: dorsalis pedis pulses 2+ bilaterally, no ulcers or calluses",
        "Monofilament: decreased sensation at both great toes",
        "Cardiovascular: regular rate and rhythm"
      ],
      assessment: ["Type 2 diabetes mellitus with hyperglycemia (E11.65), A1C 7.8% (previously 7.2%).", "Early peripheral neuropathy (E11.42)."],
      plan: [
        "Continue metformin; start semaglutide 0.25 mg weekly, pen teaching by nursing today",
        "Referral to ophthalmology for diabetic eye exam",
        "Referral to diabetes self-management education",
        "Repeat A1C in 3 months"
      ]
    },
    billingCodes: ["99214", "99215"]
  },
  back_pain: {
    label: "Low back pain",
    phoneCall: false,
    pediatric: false,
    opening: [
      ["C", "What's going on with your back?"],
      ["P", "I hurt it lifting boxes in the garage on Saturday. It's been killing me since."]
    ],
    exchanges: [
      [["C", "Where exactly is the pain?"], ["P", "Low back, mostly on the right side, right about here."]],
      [["C", "Does the pain travel down either leg?"], ["P", "Sometimes to the back of my right thigh, but not past the knee."]],
      [["C", "Any numbness, tingling, or weakness in your legs?"], ["P", "No."]],
      [["C", "Any trouble controlling your bladder or bowels?"], ["P", "No, nothing like that."]],
      [["C", "Any fever, weight loss, or history of cancer?"], ["P", "No."]],
      [["C", "What makes it better or worse?"], ["P", "Sitting for a long time makes it worse. Lying on my side with a pillow helps."]],
      [["C", "Have you taken anything for it?"], ["P", "Ibuprofen, two tablets three times a day. It takes the edge off."]],
      [["C", "What kind of work do you do?"], ["P", "I work in a warehouse, so I'm on my feet and lifting a lot."]],
      [["C", "I'm going to have you bend forward, and then lean back."], ["P", "Ow. Leaning back is worse."]],
      [["C", "Lie back on the table and I'll raise your right leg. Tell me if it sends pain down the leg."], ["P", "It just pulls in my back a bit."]],
      [["C", "Strength and reflexes in your legs are normal. This looks like a lumbar muscle strain."], ["P", "So no X-ray?"]],
      [["C", "Imaging usually doesn't help in the first six weeks unless there are warning signs, and you don't have any."], ["P", "Okay, that makes sense."]],
      [["C", "Keep moving as much as you can. Bed rest actually slows recovery."], ["P", "Can I go back to work?"]],
      [["C", "Yes, on light duty for two weeks. I'll write a note limiting lifting to twenty pounds."], ["P", "That would be great."]],
      [["C", "I'm also sending a referral to physical therapy."], ["P", "Okay."]]
    ],
    closing: [
      ["C", "If you develop leg weakness, or numbness in the groin area, go to the emergency room right away."],
      ["P", "Understood. Thanks, doctor."]
    ],
    note: {
      subjective:
        "presents with acute right-sided low back pain after lifting boxes 3 days ago. Occasional radiation to the posterior right thigh, not below the knee. No numbness, weakness, bowel or bladder dysfunction, fever, weight loss or history of malignancy. Worse with prolonged sitting. Partial relief with ibuprofen 400 mg three times daily. Works in a warehouse.",
      exam: [
        "Lumbar spine: right paraspinal tenderness, no midline tenderness",
        "Range of motion: pain with extension more than flexion",
        "Straight leg raise: negative bilaterally",
        "Neuro: strength 5/5 and reflexes 2+ symmetric in the lower extremities"
      ],
      assessment: ["Acute lumbar strain (S39.012A) without red flags."],
      plan: [
        "Stay active; avoid bed rest",
        "Ibuprofen 600 mg three times daily with food for up to 10 days",
        "Work note: light duty, lifting limit 20 lb for 2 weeks",
        "Referral to physical therapy",
        "Red flags reviewed: leg weakness, saddle anesthesia, incontinence"
      ]
    },
    billingCodes: ["99213"]
  },
  knee_pain: {
    label: "Knee pain",
    phoneCall: false,
    pediatric: false,
    opening: [
      ["C", "I'm Dr. {doctor}. I understand you're here about your left knee?"],
      ["P", "Yes, it's been aching for a few months and now it's swelling."]
    ],
    exchanges: [
      [["C", "Did you injure it, or did it come on gradually?"], ["P", "Gradually. I don't remember any specific injury."]],
      [["C", "Is the pain worse with stairs, or after sitting for a while?"], ["P", "Both. Going down stairs is the worst."]],
      [["C", "Does the knee ever lock, catch, or give way?"], ["P", "It catches sometimes when I squat."]],
      [["C", "How long are you stiff in the morning?"], ["P", "Maybe ten or fifteen minutes, then it loosens up."]],
      [["C", "What have you tried so far?"], ["P", "Ice, a knee sleeve, and naproxen when it flares."]],
      [["C", "Any pain in other joints?"], ["P", "My right hip aches a little, but nothing like the knee."]],
      [["C", "What activities are you missing out on because of it?"], ["P", "I used to play pickleball twice a week. I had to stop."]],
      [["C", "I'm going to press along the joint line. Tell me where it's tender."], ["P", "Right there, on the inside."]],
      [["C", "There's a small effusion and some crepitus, and your ligaments feel stable."], ["P", "What does that mean?"]],
      [["C", "Your X-rays show narrowing on the inner side of the knee, which fits with osteoarthritis."], ["P", "So it's arthritis. I didn't think I was old enough for that."]],
      [["C", "It's very common, and there's a lot we can do before we ever talk about surgery."], ["P", "Good, I'd like to avoid surgery."]],
      [["C", "Physical therapy to strengthen the quadriceps is the most effective first step."], ["P", "I can do that."]],
      [["C", "We could also do a steroid injection today for the swelling, if you'd like."], ["P", "Let's try it. Will it hurt?"]],
      [["C", "You'll feel some pressure. Most people say it's less than they expected."], ["P", "Okay, let's do it."]]
    ],
    closing: [
      ["C", "Ice it tonight and take it easy for forty-eight hours. We'll see you in six weeks."],
      ["P", "Thanks for explaining everything."]
    ],
    note: {
      subjective:
        "presents with several months of gradual-onset left knee pain, now with swelling. Worse descending stairs and after prolonged sitting. Intermittent catching with squatting, no locking or giving way. Morning stiffness 10-15 minutes. Partial relief with ice, a knee sleeve and naproxen. Has stopped playing pickleball.",
      exam: [
        "Left knee: small effusion, medial joint line tenderness, crepitus with flexion",
        "Ligaments: stable to varus and valgus stress, negative Lachman",
        "X-ray (3 views): medial compartment joint space narrowing with osteophytes"
      ],
      assessment: ["Primary osteoarthritis of the left knee (M17.12)."],
      plan: [
        "Intra-articular triamcinolone 40 mg injection, left knee, performed today after consent",
        "Referral to physical therapy for quadriceps strengthening",
        "Naproxen 500 mg twice daily with food as needed",
        "Follow up in 6 weeks"
      ]
    },
    billingCodes: ["99204", "20610"]
  },
  pediatric_fever: {
    label: "Fever",
    phoneCall: false,
    pediatric: true,
    opening: [
      ["C", "Hi there, I'm Dr. {doctor}. What's been going on?"],
      ["G", "The fever started Tuesday night and got up to a hundred and two point four."]
    ],
    exchanges: [
      [["C", "What have you been giving for the fever?"], ["G", "Children's ibuprofen every six to eight hours. It brings it down for a while."]],
      [["C", "When the fever comes down, is the energy back to normal?"], ["G", "Mostly, yes. Playing a bit, watching cartoons."]],
      [["C", "How is eating and drinking going?"], ["G", "Not much food, but drinking juice and water okay."]],
      [["C", "How many wet diapers or trips to the bathroom today?"], ["G", "Three or four so far today."]],
      [["C", "Any cough, runny nose, or sore throat?"], ["G", "Runny nose and a little cough."]],
      [["C", "Any ear pulling, vomiting, diarrhea, or rash?"], ["G", "No vomiting. Some pulling at the right ear last night."]],
      [["C", "Does anyone at daycare or at home have anything similar?"], ["G", "Half the daycare class has been out this week."]],
      [["C", "Are the vaccines up to date?"], ["G", "Yes, we had the last ones at the checkup."]],
      [["C", "Can you show me where it hurts, buddy?"], ["P", "My ear hurts."]],
      [["C", "I'm going to look in your ears with my little flashlight. You can hold the sticker."], ["P", "Okay."]],
      [["C", "The right eardrum is red and bulging. The left one looks normal, and the lungs are clear."], ["G", "So it's an ear infection?"]],
      [["C", "Yes, a right ear infection on top of a cold. I'll prescribe amoxicillin twice a day for ten days."], ["G", "Okay. Should we keep giving ibuprofen?"]],
      [["C", "Yes, for pain and fever, dosed by today's weight. I'll print the dosing chart for you."], ["G", "Thank you, that helps."]],
      [["C", "The fever should improve within two to three days of starting the antibiotic."], ["G", "And if it doesn't?"]]
    ],
    closing: [
      ["C", "Call us if the fever lasts more than seventy-two hours on the antibiotic, or if there's trouble breathing or fewer wet diapers."],
      ["G", "We will. Thanks so much."]
    ],
    note: {
      subjective:
        "brought in by parent for fever since Tuesday, Tmax 102.4 F, responsive to ibuprofen. Rhinorrhea and mild cough. Tugging at the right ear overnight. Decreased appetite, drinking well, 3-4 voids today. No vomiting, diarrhea or rash. Daycare exposure. Immunizations up to date.",
      exam: [
        "General: alert, interactive, well hydrated",
        "Right TM: erythematous and bulging; left TM: normal",
        "Nose: clear rhinorrhea",
        "Lungs: clear bilaterally, no retractions"
      ],
      assessment: ["Acute otitis media, right ear (H66.91).", "Viral upper respiratory infection."],
      plan: [
        "Amoxicillin 90 mg/kg/day divided twice daily for 10 days",
        "Ibuprofen weight-based dosing for pain and fever; dosing chart provided",
        "Return precautions: fever beyond 72 hours on antibiotics, respiratory distress, decreased urine output"
      ]
    },
    billingCodes: ["99213"]
  },
  pediatric_asthma_follow_up: {
    label: "Asthma follow-up",
    phoneCall: false,
    pediatric: true,
    opening: [
      ["C", "Hi, we're checking in on the asthma today. How has breathing been?"],
      ["G", "Much better since we started the daily inhaler."]
    ],
    exchanges: [
      [["C", "How many times a week is the rescue inhaler needed?"], ["G", "Maybe once a week, usually after soccer."]],
      [["C", "Any nighttime coughing or waking up short of breath?"], ["G", "Only once this month, when there was a cold."]],
      [["C", "Are you using the spacer with your inhaler?"], ["P", "Yes, I count to ten breaths."]],
      [["C", "That's perfect. Do you rinse your mouth after the daily inhaler?"], ["P", "Sometimes I forget."]],
      [["C", "Any trips to urgent care or the ER since the last visit?"], ["G", "No, none."]],
      [["C", "Any triggers you've noticed, like pets, smoke, or cold air?"], ["G", "Cold air for sure, and visiting grandma's cat."]],
      [["C", "Does anyone smoke at home or in the car?"], ["G", "No."]],
      [["C", "Does the school nurse have a rescue inhaler on hand?"], ["G", "Yes, we dropped one off in September."]],
      [["C", "Let me listen to your chest. Big breaths in and out."], ["P", "Like this?"]],
      [["C", "Great job. No wheezing today, and your peak flow is at ninety percent of your best."], ["G", "That's good news."]],
      [["C", "Let's keep the same daily dose through the winter, then talk about stepping down in the spring."], ["G", "Okay, that works."]],
      [["C", "Before soccer, two puffs of the rescue inhaler fifteen minutes before practice can prevent symptoms."], ["P", "Okay."]],
      [["C", "I'll update the asthma action plan with the new doses."], ["G", "Can you send a copy to the school?"]],
      [["C", "Yes, we'll send it today. The flu shot is also due, we can give it before you leave."], ["G", "Sure, let's get it done."]]
    ],
    closing: [
      ["C", "Keep up the great work. Follow up in three months, sooner if the rescue inhaler is needed more than twice a week."],
      ["G", "Thank you."]
    ],
    note: {
      subjective:
        "here for asthma follow-up on fluticasone 44 mcg 2 puffs twice daily with spacer. Rescue albuterol about once weekly, mostly after soccer. One night-time awakening this month during a cold. No urgent care or ED visits. Triggers: cold air, cats. No smoke exposure.",
      exam: [
        "General: no respiratory distress",
        "Lungs: clear, good air movement, no wheezes",
        "Peak flow: 90% of personal best"
      ],
      assessment: ["Mild persistent asthma (J45.30), well controlled."],
      plan: [
        "Continue fluticasone 44 mcg 2 puffs twice daily; rinse mouth after use",
        "Albuterol 2 puffs 15 minutes before exercise and as needed",
        "Asthma action plan updated; copy to school nurse",
        "Influenza vaccine given today",
        "Follow up in 3 months"
      ]
    },
    billingCodes: ["99213", "90686"]
  },
  medication_refill_call: {
    label: "Medication refill",
    phoneCall: true,
    pediatric: false,
    opening: [
      ["C", "Hi, this is the nurse line at {clinic}, calling back about your refill request."],
      ["P", "Oh, thanks for calling back. I'm almost out of my blood pressure pills."]
    ],
    exchanges: [
      [["C", "Can you confirm your date of birth for me?"], ["P", "{dob}"]],
      [["C", "Which medication do you need refilled?"], ["P", "Amlodipine, the five milligram."]],
      [["C", "How many pills do you have left?"], ["P", "About four days' worth."]],
      [["C", "Are you taking it once a day as prescribed?"], ["P", "Yes, every morning."]],
      [["C", "Any side effects, like ankle swelling or flushing?"], ["P", "A little ankle swelling at the end of the day, but it's mild."]],
      [["C", "Have you been checking your blood pressure at home?"], ["P", "It's been about one thirty over eighty."]],
      [["C", "Which pharmacy would you like us to send it to?"], ["P", "The one on Main Street, same as always."]],
      [["C", "I see you're due for a follow-up visit and blood work with Dr. {doctor}."], ["P", "I know, I've been putting it off."]],
      [["C", "I'll send a ninety-day supply today, and the front desk will call you to schedule."], ["P", "Perfect, thank you."]],
      [["C", "Any other medications you need while I have you?"], ["P", "No, I refilled the others last month."]]
    ],
    closing: [
      ["C", "It should be ready at the pharmacy this afternoon. Have a good day."],
      ["P", "You too, bye."]
    ],
    note: {
      subjective:
        "called requesting a refill of amlodipine 5 mg daily; about 4 days remaining. Adherent. Home BP around 130/80. Mild end-of-day ankle swelling, no other side effects. Overdue for follow-up visit and labs.",
      exam: ["Telephone encounter: no examination performed"],
      assessment: ["Essential hypertension (I10), stable per home readings."],
      plan: [
        "Amlodipine 5 mg daily, 90-day supply sent to preferred pharmacy",
        "Front desk to schedule follow-up visit with labs within 4 weeks"
      ]
    },
    billingCodes: ["99441"]
  },
  lab_results_call: {
    label: "Lab results",
    phoneCall: true,
    pediatric: false,
    opening: [
      ["C", "Hi, this is Dr. {doctor}'s nurse at {clinic}. I'm calling with your lab results."],
      ["P", "Oh good, I was wondering about those."]
    ],
    exchanges: [
      [["C", "Before I go over them, can you confirm your date of birth?"], ["P", "{dob}"]],
      [["C", "Your blood count and kidney function are normal."], ["P", "That's a relief."]],
      [["C", "Your LDL cholesterol is one sixty-two, which is higher than we'd like."], ["P", "Is that bad?"]],
      [["C", "It raises the long-term risk of heart disease, so Dr. {doctor} recommends starting a statin."], ["P", "I was hoping diet would be enough."]],
      [["C", "Diet helps and you should keep at it, but at this level medication is recommended."], ["P", "Okay. Are there side effects?"]],
      [["C", "Most people have none. Some get muscle aches. If that happens, call us and we can adjust."], ["P", "All right."]],
      [["C", "Your thyroid test was normal, and your vitamin D was a little low."], ["P", "Should I take a supplement?"]],
      [["C", "Yes, two thousand units of vitamin D3 daily, over the counter."], ["P", "I can pick that up."]],
      [["C", "Which pharmacy should we send the statin to?"], ["P", "The one by the grocery store on Fifth."]],
      [["C", "We'll repeat the cholesterol and liver tests in three months."], ["P", "Okay. Should I fast for that?"]],
      [["C", "Yes, nothing but water after midnight."], ["P", "Got it."]]
    ],
    closing: [
      ["C", "Do you have any other questions for me?"],
      ["P", "No, that's everything. Thank you for calling."]
    ],
    note: {
      subjective:
        "reached by telephone to review results of recent labs. CBC and BMP within normal limits. LDL 162 mg/dL. TSH normal. 25-OH vitamin D 24 ng/mL.",
      exam: ["Telephone encounter: no examination performed"],
      assessment: ["Hyperlipidemia (E78.5).", "Vitamin D insufficiency (E55.9)."],
      plan: [
        "Start atorvastatin 20 mg daily; counseled on myalgias",
        "Vitamin D3 2000 IU daily",
        "Fasting lipid panel and liver panel in 3 months"
      ]
    },
    billingCodes: ["99441", "99442"]
  }
}

// ---------------------------------------------------------------------------------------
// Transcripts
// ---------------------------------------------------------------------------------------

const SPEAKER_LABELS: { readonly [S in SpeakerCode]: string } = { C: "clinician", P: "patient", G: "parent" }
const MONTH_NAMES = [
  "January", "February", "March", "April", "May", "June",
  "July", "August", "September", "October", "November", "December"
]

interface DialogueContext {
  readonly doctor: string
  readonly clinic: string
  readonly dateOfBirth: string | null
}

const spokenDateOfBirth = (dateOfBirth: string | null): string => {
  if (dateOfBirth === null) return "I'm not sure you have it on file. I gave it at my first visit."
  const [year, month, day] = dateOfBirth.split("-").map(Number)
  return `Sure, it's ${MONTH_NAMES[(month ?? 1) - 1]} ${day}, ${year}.`
}

const fillPlaceholders = (text: string, context: DialogueContext): string =>
  text
    .replaceAll("{doctor}", context.doctor.split(" ").at(-1) ?? context.doctor)
    .replaceAll("{clinic}", context.clinic)
    .replaceAll("{dob}", spokenDateOfBirth(context.dateOfBirth))

const buildTranscriptTurns = (
  random: Random,
  visit: VisitType,
  context: DialogueContext
): Array<FixtureTranscriptTurn> => {
  const targetTurns = random.int(6, 40)
  const middle = [...(visit.pediatric ? PEDIATRIC_HISTORY : visit.phoneCall ? [] : ADULT_HISTORY), ...visit.exchanges]
  // At least one exchange, so even the shortest transcript has six turns.
  let budget = Math.max(2, targetTurns - visit.opening.length - visit.closing.length)
  const kept = new Set<number>()
  for (const index of random.shuffle(middle.map((_, position) => position))) {
    const block = middle[index]
    if (block !== undefined && block.length <= budget) {
      kept.add(index)
      budget -= block.length
    }
  }
  const lines = [
    ...visit.opening,
    ...middle.filter((_, index) => kept.has(index)).flat(),
    ...visit.closing
  ]
  let clock = roundTo(0.3 + random.next() * 2, 2)
  return lines.map(([speaker, template]) => {
    const text = fillPlaceholders(template, context)
    const words = text.split(/\s+/).length
    // Conversational speech runs around 2.5 words a second.
    const spoken = Math.max(0.6, (words / 2.5) * (0.85 + random.next() * 0.35))
    const start = clock
    const end = roundTo(start + spoken, 2)
    clock = roundTo(end + 0.2 + random.next() * 1.6, 2)
    return { speaker: SPEAKER_LABELS[speaker], text, start, end }
  })
}

// ---------------------------------------------------------------------------------------
// Audio: tiny valid WAV files
// ---------------------------------------------------------------------------------------

const WAV_SAMPLE_RATE = 8000

/** PCM WAV, mono, 8 kHz: a soft tone with short fades, or silence when frequencyHz is null. */
export const buildWav = (options: {
  readonly bitsPerSample: 8 | 16
  readonly durationSeconds: number
  readonly frequencyHz: number | null
}): Buffer => {
  const sampleCount = Math.round(options.durationSeconds * WAV_SAMPLE_RATE)
  const bytesPerSample = options.bitsPerSample / 8
  const dataLength = sampleCount * bytesPerSample
  const wav = Buffer.alloc(44 + dataLength)
  wav.write("RIFF", 0, "ascii")
  wav.writeUInt32LE(36 + dataLength, 4)
  wav.write("WAVE", 8, "ascii")
  wav.write("fmt ", 12, "ascii")
  wav.writeUInt32LE(16, 16)
  wav.writeUInt16LE(1, 20) // PCM
  wav.writeUInt16LE(1, 22) // mono
  wav.writeUInt32LE(WAV_SAMPLE_RATE, 24)
  wav.writeUInt32LE(WAV_SAMPLE_RATE * bytesPerSample, 28)
  wav.writeUInt16LE(bytesPerSample, 32)
  wav.writeUInt16LE(options.bitsPerSample, 34)
  wav.write("data", 36, "ascii")
  wav.writeUInt32LE(dataLength, 40)
  const fadeSamples = Math.round(0.05 * WAV_SAMPLE_RATE)
  for (let index = 0; index < sampleCount; index++) {
    const fade = Math.min(1, index / fadeSamples, (sampleCount - 1 - index) / fadeSamples)
    const level =
      options.frequencyHz === null ? 0 : 0.2 * fade * Math.sin((2 * Math.PI * options.frequencyHz * index) / WAV_SAMPLE_RATE)
    const offset = 44 + index * bytesPerSample
    if (options.bitsPerSample === 8) wav.writeUInt8(128 + Math.round(level * 127), offset)
    else wav.writeInt16LE(Math.round(level * 32767), offset)
  }
  return wav
}

const TONES_HZ = [262, 330, 392, 440, 523]

const buildRecordingAudio = (random: Random): Buffer => {
  const bitsPerSample = random.chance(0.6) ? 8 : 16
  // 8-bit: up to 1.5 s (12 kB); 16-bit: up to 0.9 s (14.4 kB). Keeps the fixture small.
  const durationSeconds = bitsPerSample === 8 ? random.int(5, 15) / 10 : random.int(5, 9) / 10
  const frequencyHz = random.chance(0.75) ? random.pick(TONES_HZ) : null
  return buildWav({ bitsPerSample, durationSeconds, frequencyHz })
}

// ---------------------------------------------------------------------------------------
// Notes
// ---------------------------------------------------------------------------------------

/** Completed months of age on the given instant, or null when the date of birth is unknown. */
const ageInMonths = (dateOfBirth: string | null, onEpochMs: number): number | null => {
  if (dateOfBirth === null) return null
  const [birthYear = 0, birthMonth = 1, birthDay = 1] = dateOfBirth.split("-").map(Number)
  const on = new Date(onEpochMs)
  const months = (on.getUTCFullYear() - birthYear) * 12 + (on.getUTCMonth() + 1 - birthMonth)
  return Math.max(0, on.getUTCDate() < birthDay ? months - 1 : months)
}

const ageDescription = (months: number | null): string => {
  if (months === null) return "Patient"
  if (months < 24) return `${Math.max(months, 1)}-month-old`
  return `${Math.floor(months / 12)}-year-old`
}

/** A plausible weight for a child of that age (growth-chart ballpark), give or take 10%. */
const childWeightKg = (random: Random, months: number | null): number => {
  if (months === null) return random.int(12, 40)
  const typical = months < 12 ? 3.5 + 0.6 * months : 8 + 2.2 * (months / 12)
  return roundTo(typical * (0.9 + random.next() * 0.2), 1)
}

const vitalsLine = (random: Random, visit: VisitType, months: number | null): string => {
  if (visit.phoneCall) return "Vitals: not obtained (telephone encounter)"
  const temperature = (visit.label === "Fever" ? 100.4 + random.int(0, 18) / 10 : 97.6 + random.int(0, 12) / 10).toFixed(1)
  const heartRate = visit.pediatric ? random.int(88, 130) : random.int(62, 94)
  const oxygen = random.int(96, 100)
  if (visit.pediatric) {
    return `Vitals: Temp ${temperature} F, HR ${heartRate}, RR ${random.int(18, 28)}, SpO2 ${oxygen}%, weight ${childWeightKg(random, months)} kg`
  }
  const systolic = visit.label === "Hypertension follow-up" ? random.int(134, 152) : random.int(112, 138)
  const diastolic = random.int(70, 92)
  return `Vitals: BP ${systolic}/${diastolic}, HR ${heartRate}, Temp ${temperature} F, RR ${random.int(12, 18)}, SpO2 ${oxygen}% on room air`
}

const renderSoapNote = (
  random: Random,
  visit: VisitType,
  clinician: string,
  dateOfBirth: string | null,
  serviceInstant: number
): string => {
  const note = visit.note
  const months = ageInMonths(dateOfBirth, serviceInstant)
  const serviceDate = iso(serviceInstant)
  const title = visit.phoneCall ? `Telephone encounter: ${visit.label.toLowerCase()}` : `Progress note: ${visit.label}`
  return [
    `# ${title}`,
    "",
    `**Date of service:** ${serviceDate.slice(0, 10)}  `,
    `**Clinician:** ${clinician}, MD`,
    "",
    "## Subjective",
    "",
    `${ageDescription(months)} ${note.subjective}`,
    "",
    "## Objective",
    "",
    `- ${vitalsLine(random, visit, months)}`,
    ...note.exam.map((line) => `- ${line}`),
    "",
    "## Assessment",
    "",
    ...note.assessment.map((line, index) => `${index + 1}. ${line}`),
    "",
    "## Plan",
    "",
    ...note.plan.map((line) => `- ${line}`),
    ""
  ].join("\n")
}

// ---------------------------------------------------------------------------------------
// Encounters and documents
// ---------------------------------------------------------------------------------------

const iso = (epochMs: number): string => new Date(epochMs).toISOString()
const MINUTE_MS = 60_000

const WINDOW_START = utc(2026, 1, 5)
const WINDOW_DAYS = Math.floor((utc(2026, 10, 30) - WINDOW_START) / DAY_MS)

/** A weekday between 13:00 and 23:00 UTC (clinic hours across US time zones). */
const clinicInstant = (random: Random): number => {
  for (;;) {
    const day = WINDOW_START + random.int(0, WINDOW_DAYS) * DAY_MS
    const weekday = new Date(day).getUTCDay()
    if (weekday === 0 || weekday === 6) continue
    return day + random.int(13 * 60, 23 * 60 - 1) * MINUTE_MS + random.int(0, 59_999)
  }
}

type EncounterStatus = "scheduled" | "in_progress" | "signed" | "cancelled" | null

interface EncounterContext {
  readonly random: Random
  readonly plan: OrganizationPlan
  readonly encounterId: string
  readonly createdAt: number
  readonly status: EncounterStatus
  readonly visit: VisitType
  readonly clinician: string
  readonly patient: FixturePatient | null
  readonly dateOfService: number | null
}

interface DocumentDraft {
  readonly document: FixtureDocument
  readonly updatedAt: number
}

/** When a document was last touched: up to maxDelayMinutes after its creation. */
const lastUpdate = (random: Random, createdAt: number, maxDelayMinutes: number): number =>
  createdAt + random.int(0, maxDelayMinutes) * MINUTE_MS + (maxDelayMinutes === 0 ? 0 : random.int(0, 59_999))

const buildTranscriptDocument = (context: EncounterContext, createdAt: number, finalized: boolean): DocumentDraft => {
  const { random, visit } = context
  const workflowVariant: WorkflowVariant | null = visit.phoneCall ? "phone_call" : random.chance(0.08) ? null : "ambient"
  const dialogue: DialogueContext = {
    doctor: context.clinician,
    clinic: context.plan.spokenName,
    dateOfBirth: context.patient?.date_of_birth ?? null
  }
  const turns = buildTranscriptTurns(random, visit, dialogue)
  const lastEnd = turns.at(-1)?.end ?? 0
  const recordedSeconds = roundTo(lastEnd + 0.5 + random.next() * 4, 2)
  const status = finalized ? "completed" : random.weighted<string>([["processing", 3], ["failed", 1]])
  // A failed job never measured the audio; one still processing sometimes has.
  const audioDurationSeconds = finalized || (status === "processing" && random.chance(0.5)) ? recordedSeconds : null
  const recordingRoll = random.next()
  const recording: FixtureRecording | null =
    recordingRoll < 0.3
      ? { content_type: "audio/wav", data_base64: buildRecordingAudio(random).toString("base64") }
      : recordingRoll < 0.38
        ? { content_type: "audio/wav", missing: true }
        : null
  const processingMinutes = Math.ceil(recordedSeconds / 60) + random.int(2, 15)
  const updatedAt = createdAt + processingMinutes * MINUTE_MS + random.int(0, 59_999)
  const title = random.chance(0.06)
    ? null
    : visit.phoneCall
      ? `Phone call: ${visit.label.toLowerCase()}`
      : random.pick(["Visit recording", `Ambient recording: ${visit.label.toLowerCase()}`])
  return {
    updatedAt,
    document: {
      document_id: `${context.encounterId.replace(/^enc_/, "doc_")}_transcript`,
      schema_type: "ambient_transcript",
      title,
      status,
      workflow_variant: workflowVariant,
      created_at: iso(createdAt),
      updated_at: iso(updatedAt),
      audio_duration_seconds: audioDurationSeconds,
      transcript: finalized
        ? {
            provider: visit.phoneCall ? "telephony-asr-1.9" : "scribe-asr-3.2",
            audio_duration_seconds: audioDurationSeconds,
            turns
          }
        : null,
      recording
    }
  }
}

const buildNoteDocument = (context: EncounterContext, createdAt: number, status: string): DocumentDraft => {
  const { random, visit } = context
  // A draft nobody has started yet has no text; so do a few signed legacy notes.
  const empty = status === "draft" ? random.chance(0.35) : random.chance(0.04)
  const updated = lastUpdate(random, createdAt, status === "draft" ? 30 : 60 * 30)
  const title = random.chance(0.05)
    ? null
    : visit.phoneCall
      ? "Telephone encounter note"
      : random.pick([`${visit.label} - progress note`, "SOAP note", `Office visit note: ${visit.label.toLowerCase()}`])
  return {
    updatedAt: updated,
    document: {
      document_id: `${context.encounterId.replace(/^enc_/, "doc_")}_note`,
      schema_type: "document",
      title,
      status,
      workflow_variant: null,
      created_at: iso(createdAt),
      updated_at: iso(updated),
      content_markdown: empty
        ? null
        : renderSoapNote(random, visit, context.clinician, context.patient?.date_of_birth ?? null, context.dateOfService ?? context.createdAt)
    }
  }
}

const buildBillingDocument = (context: EncounterContext, createdAt: number): DocumentDraft => {
  const { random, visit } = context
  const status = random.weighted<string>([["pending", 2], ["submitted", 3], ["coded", 2]])
  const updated = lastUpdate(random, createdAt, 60 * 48)
  const code = random.pick(visit.billingCodes)
  return {
    updatedAt: updated,
    document: {
      document_id: `${context.encounterId.replace(/^enc_/, "doc_")}_billing`,
      schema_type: "billing",
      title: random.chance(0.5) ? `Charge capture (CPT ${code})` : "Billing summary",
      status,
      workflow_variant: null,
      created_at: iso(createdAt),
      updated_at: iso(updated)
    }
  }
}

const buildChecklistDocument = (context: EncounterContext, createdAt: number, status: string): DocumentDraft => {
  const { random } = context
  const updated = lastUpdate(random, createdAt, status === "open" ? 0 : 45)
  return {
    updatedAt: updated,
    document: {
      document_id: `${context.encounterId.replace(/^enc_/, "doc_")}_checklist`,
      schema_type: "encounter_checklist",
      title: context.status === "scheduled" ? "Pre-visit checklist" : random.pick(["Rooming checklist", "Visit checklist"]),
      status,
      workflow_variant: null,
      created_at: iso(createdAt),
      updated_at: iso(updated)
    }
  }
}

/** Which documents an encounter has, by its lifecycle status. */
const buildDocuments = (context: EncounterContext): Array<DocumentDraft> => {
  const { random, visit, createdAt } = context
  // The transcript and the checklist usually start with the encounter; sometimes at the
  // very same instant, which exercises the document_id tie-breaker of the document order.
  const transcriptAt = random.chance(0.4) ? createdAt : createdAt + random.int(0, 5) * MINUTE_MS + random.int(0, 59_999)
  const noteAt = transcriptAt + random.int(12, 75) * MINUTE_MS + random.int(0, 59_999)
  const billingAt = noteAt + random.int(60, 60 * 48) * MINUTE_MS
  const drafts: Array<DocumentDraft> = []
  const withChecklist = (status: string) => drafts.push(buildChecklistDocument(context, createdAt, status))
  switch (context.status) {
    case "cancelled":
      if (random.chance(0.5)) withChecklist("open")
      return drafts
    case "scheduled":
      if (random.chance(0.8)) withChecklist("open")
      return drafts
    case "in_progress":
      if (!visit.phoneCall && random.chance(0.5)) withChecklist("completed")
      drafts.push(buildTranscriptDocument(context, transcriptAt, random.chance(0.55)))
      if (random.chance(0.4)) drafts.push(buildNoteDocument(context, noteAt, "draft"))
      return drafts
    case "signed": {
      if (!visit.phoneCall && random.chance(0.4)) withChecklist("completed")
      if (random.chance(0.88)) drafts.push(buildTranscriptDocument(context, transcriptAt, random.chance(0.93)))
      drafts.push(buildNoteDocument(context, noteAt, random.chance(0.1) ? "amended" : "signed"))
      if (random.chance(visit.phoneCall ? 0.3 : 0.6)) drafts.push(buildBillingDocument(context, billingAt))
      return drafts
    }
    case null: {
      // Imported from older systems: whatever was captured, in several shapes.
      const shape = random.weighted<string>([
        ["note", 3],
        ["transcript", 2],
        ["transcript+note", 3],
        ["billing", 1],
        ["billing+checklist", 1],
        ["checklist", 1]
      ])
      if (shape.includes("checklist")) withChecklist("completed")
      if (shape.includes("transcript")) drafts.push(buildTranscriptDocument(context, transcriptAt, random.chance(0.8)))
      if (shape.includes("note")) drafts.push(buildNoteDocument(context, noteAt, "signed"))
      if (shape.includes("billing")) drafts.push(buildBillingDocument(context, billingAt))
      return drafts
    }
  }
}

const pickStatus = (random: Random): EncounterStatus =>
  random.weighted<EncounterStatus>([
    ["signed", 60],
    ["in_progress", 14],
    ["scheduled", 9],
    [null, 14],
    ["cancelled", 3]
  ])

/** Sorted creation instants, with the planned groups of exactly equal created_at. */
const creationInstants = (random: Random, plan: OrganizationPlan): Array<number> => {
  const instants = Array.from({ length: plan.encounterCount }, () => clinicInstant(random)).sort((a, b) => a - b)
  const taken = new Set<number>()
  for (const size of plan.tieGroups) {
    for (;;) {
      const first = random.int(0, plan.encounterCount - size)
      const span = Array.from({ length: size + 2 }, (_, offset) => first - 1 + offset)
      if (span.some((index) => taken.has(index))) continue
      span.forEach((index) => taken.add(index))
      const instant = instants[first] ?? 0
      for (let offset = 1; offset < size; offset++) instants[first + offset] = instant
      break
    }
  }
  return instants
}

/**
 * Encounters in creation order, except that each group of equal created_at is written in an
 * order that is neither ascending nor descending by id, so a store returning rows in
 * insertion order cannot pass for one that applies the encounter_id tie-breaker.
 */
const scrambleTies = (encounters: Array<FixtureEncounter>): Array<FixtureEncounter> => {
  const ordered: Array<FixtureEncounter> = []
  let start = 0
  while (start < encounters.length) {
    let end = start + 1
    while (end < encounters.length && encounters[end]?.created_at === encounters[start]?.created_at) end++
    const group = encounters.slice(start, end)
    ordered.push(...group.slice(1), ...group.slice(0, 1))
    start = end
  }
  return ordered
}

const buildEncounters = (random: Random, profiles: ReadonlyArray<PatientProfile>): Array<FixtureEncounter> => {
  const encounters: Array<FixtureEncounter> = []
  for (const plan of ORGANIZATION_PLANS) {
    const organizationId = plan.organization.organization_id
    const orgProfiles = profiles.filter((profile) => profile.patient.organization_id === organizationId)
    const regularPatients = orgProfiles.filter((profile) => !profile.isDemoPatient).map((profile) => profile.patient)
    const demoPatient = orgProfiles.find((profile) => profile.isDemoPatient)?.patient ?? null
    // Every patient is seen at least once; the rest of the visits go to random patients.
    const patientQueue = random.shuffle([
      ...regularPatients,
      ...Array.from({ length: plan.encounterCount - regularPatients.length }, () => random.pick(regularPatients))
    ])
    const classOrder = random.shuffle(Array.from({ length: plan.encounterCount }, (_, index) => index))
    const demoIndexes = new Set(classOrder.slice(0, plan.demoCount))
    const trainingIndexes = new Set(classOrder.slice(plan.demoCount, plan.demoCount + plan.trainingCount))
    const instants = creationInstants(random, plan)
    const orgEncounters = instants.map((createdAt, index): FixtureEncounter => {
      const encounterId = `enc_${plan.code}_${String(index + 1).padStart(4, "0")}`
      const dataClass: DataClass = demoIndexes.has(index) ? "demo" : trainingIndexes.has(index) ? "training" : "clinical"
      const status = pickStatus(random)
      const queuedPatient = patientQueue[index] ?? null
      const patient =
        dataClass === "demo" && demoPatient !== null && random.chance(0.6)
          ? demoPatient
          : random.chance(0.06)
            ? null
            : queuedPatient
      const plannedVisit = random.weighted(plan.visitWeights)
      const patientMonths = ageInMonths(patient?.date_of_birth ?? null, createdAt)
      // Spacers and peak flows need a child old enough to use them; toddlers come in with fevers.
      const visit =
        VISIT_TYPES[plannedVisit === "pediatric_asthma_follow_up" && patientMonths !== null && patientMonths < 48 ? "pediatric_fever" : plannedVisit]
      // Booked ahead for scheduled visits; otherwise the slot the visit was recorded in.
      const slot = (instant: number) => Math.floor(instant / (15 * MINUTE_MS)) * 15 * MINUTE_MS
      const dateOfService =
        status === "scheduled"
          ? slot(createdAt + random.int(1, 21) * DAY_MS)
          : random.chance(status === null ? 0.35 : 0.04)
            ? null
            : slot(createdAt - random.int(0, 10) * MINUTE_MS)
      const context: EncounterContext = {
        random,
        plan,
        encounterId,
        createdAt,
        status,
        visit,
        clinician: random.pick(plan.clinicians),
        patient,
        dateOfService
      }
      const drafts = buildDocuments(context)
      const ownUpdate = createdAt + (status === "scheduled" ? 0 : random.int(0, 90) * MINUTE_MS)
      const updatedAt = Math.max(ownUpdate, ...drafts.map((draft) => draft.updatedAt))
      const documents = drafts
        .map((draft) => draft.document)
        .sort((a, b) => (a.created_at === b.created_at ? (a.document_id < b.document_id ? -1 : 1) : a.created_at < b.created_at ? -1 : 1))
      return {
        encounter_id: encounterId,
        organization_id: organizationId,
        created_at: iso(createdAt),
        updated_at: iso(updatedAt),
        date_of_service: dateOfService === null ? null : iso(dateOfService),
        status,
        patient_id: patient?.patient_id ?? null,
        data_class: dataClass,
        documents
      }
    })
    encounters.push(...scrambleTies(orgEncounters))
  }
  return encounters
}

// ---------------------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------------------

export const generateSandboxFixture = (seed: number = SANDBOX_SEED): ClinicalEncounterFixture => {
  const random = createRandom(seed)
  const profiles = buildPatients(random)
  return {
    format: FIXTURE_FORMAT,
    organizations: ORGANIZATION_PLANS.map((plan) => plan.organization),
    api_keys: buildApiKeys(),
    patients: profiles.map((profile) => profile.patient),
    encounters: buildEncounters(random, profiles)
  }
}

/** The committed file's exact text: two-space JSON with a final newline. */
export const serializeFixture = (fixture: ClinicalEncounterFixture): string => `${JSON.stringify(fixture, null, 2)}\n`

export const sandboxFixturePath = fileURLToPath(new URL("../fixtures/sandbox.fixture.json", import.meta.url))

const invokedDirectly = process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href

if (invokedDirectly) {
  const fixture = generateSandboxFixture()
  const text = serializeFixture(fixture)
  writeFileSync(sandboxFixturePath, text)
  const documents = fixture.encounters.flatMap((encounter) => encounter.documents)
  console.log(
    `wrote ${sandboxFixturePath} (${(text.length / 1024).toFixed(0)} KiB): ` +
      `${fixture.organizations.length} organizations, ${fixture.api_keys.length} keys, ` +
      `${fixture.patients.length} patients, ${fixture.encounters.length} encounters, ${documents.length} documents`
  )
}
