import { loadFixture } from "@clinical-api/storage-adapter"
import { Console, Effect, FileSystem } from "effect"
import { Argument, Command } from "effect/cli"
import { digestKeySetting, onDatabase, sandboxKeyNote } from "./database.js"
import { refuse } from "./failure.js"
import { groupCommand } from "./group.js"

const fileArgument = Argument.String("FILE").pipe(
  Argument.withDescription("A fixture in the clinical-encounter-fixture/v1 format (JSON).")
)

export const fixturesLoadCommand = Command.make("load", { file: fileArgument }, ({ file }) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs
      .readFileString(file, "utf8")
      .pipe(Effect.mapError((error) => refuse(`cannot read ${file}: ${error.message}`)))
    const setting = yield* digestKeySetting
    const report = yield* onDatabase(loadFixture(text, { digestKey: setting.digestKey }))
    yield* Console.log(
      `Loaded ${file}: ${report.organizations} organizations, ${report.apiKeys} API keys, ${report.patients} patients, ` +
        `${report.encounters} encounters, ${report.documents} documents, ${report.transcripts} transcripts, ` +
        `${report.recordings} recordings (${report.recordingObjects} with audio).`
    )
    yield* sandboxKeyNote(setting)
  })
).pipe(
  Command.withDescription(
    "Validate a fixture (schema, then every reference) and load it in one transaction: all of it or nothing. " +
      "A refused fixture prints the JSON path of the first offending value and exits 1. API key tokens are stored " +
      "only as digests (API_KEY_DIGEST_KEY, as the service computes them); ids already stored refuse the file."
  )
)

export const fixturesCommand = groupCommand("fixtures", "Load fixture files (sandbox and test data).").pipe(
  Command.withSubcommands([fixturesLoadCommand])
)
