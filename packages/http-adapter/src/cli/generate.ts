import { defaultGenerateOptions, generateDataSet } from "@clinical-api/storage-adapter"
import { Console, Effect } from "effect"
import { Command, Flag } from "effect/cli"
import { digestKeySetting, onDatabase, sandboxKeyNote } from "./database.js"
import { refuse } from "./failure.js"
import { printJsonLine } from "./output.js"

const count = (name: string, fallback: number, description: string) =>
  Flag.Int(name).pipe(Flag.withDefault(fallback), Flag.withDescription(description))

const fraction = (name: string, fallback: number, description: string) =>
  Flag.Finite(name).pipe(Flag.withDefault(fallback), Flag.withDescription(description))

const inRange = (option: string, value: number, min: number, max: number) =>
  Number.isFinite(value) && value >= min && value <= max
    ? Effect.succeed(value)
    : Effect.fail(refuse(`--${option} ${value} is out of range (${min} to ${max})`))

export const generateCommand = Command.make(
  "generate",
  {
    organizations: count("organizations", defaultGenerateOptions.organizations, "Organizations to create (org_gen_001 ...)."),
    encounters: count("encounters", defaultGenerateOptions.encounters, "Encounters in all."),
    seed: count("seed", defaultGenerateOptions.seed, "Seed: the same seed gives the same data (tokens excepted)."),
    bigShare: fraction(
      "big-organization-share",
      defaultGenerateOptions.bigOrganizationShare,
      "Share of the encounters held by org_gen_001; the others share the rest evenly."
    ),
    demoShare: fraction("demo-share", defaultGenerateOptions.demoShare, "Share of demo encounters."),
    trainingShare: fraction("training-share", defaultGenerateOptions.trainingShare, "Share of training encounters."),
    transcriptShare: fraction(
      "transcript-share",
      defaultGenerateOptions.transcriptShare,
      "Share of encounters with an ambient transcript (20 to 200 turns)."
    ),
    recordingShare: fraction(
      "recording-share",
      defaultGenerateOptions.recordingShare,
      "Share of transcripts with a recording (each with a small audio object in the embedded storage)."
    )
  },
  (input) =>
    Effect.gen(function*() {
      const organizations = yield* inRange("organizations", input.organizations, 1, 999)
      const encounters = yield* inRange("encounters", input.encounters, organizations, 100_000_000)
      const seed = yield* inRange("seed", input.seed, 0, 1_000_000)
      const bigOrganizationShare = yield* inRange("big-organization-share", input.bigShare, 0, 1)
      const demoShare = yield* inRange("demo-share", input.demoShare, 0, 1)
      const trainingShare = yield* inRange("training-share", input.trainingShare, 0, 1)
      if (demoShare + trainingShare > 1) return yield* refuse("--demo-share and --training-share add up to more than 1")
      const transcriptShare = yield* inRange("transcript-share", input.transcriptShare, 0, 1)
      const recordingShare = yield* inRange("recording-share", input.recordingShare, 0, 1)
      const setting = yield* digestKeySetting
      const report = yield* onDatabase(
        generateDataSet({
          organizations,
          encounters,
          seed,
          bigOrganizationShare,
          demoShare,
          trainingShare,
          transcriptShare,
          recordingShare,
          digestKey: setting.digestKey,
          environment: setting.environment === "production" ? "live" : "test",
          onProgress: (line) => process.stderr.write(`${line}\n`)
        }).pipe(
          Effect.catchTag("GeneratedDataExists", (exists) =>
            Effect.fail(refuse(`the database already holds generated data (${exists.organizationId}); use a fresh database`)))
        )
      )
      yield* Console.error(`loaded in ${report.seconds.toFixed(1)} s: ${JSON.stringify(report.rows)}`)
      yield* sandboxKeyNote(setting)
      yield* Console.error("warning: the tokens are shown this once (only their digests are stored): store them now")
      for (const organization of report.organizations) {
        yield* printJsonLine({
          organization_id: organization.organizationId,
          encounters: organization.encounters,
          api_key_id: organization.apiKeyId,
          token: organization.token
        })
      }
    })
).pipe(
  Command.withDescription(
    "Load a synthetic data set (set-based SQL, one transaction, then VACUUM ANALYZE) into a migrated database " +
      "with no generated data yet, and print one full-access token per organization as JSON Lines."
  )
)
