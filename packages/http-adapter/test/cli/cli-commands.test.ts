import { readFile, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import {
  ApiKeyId,
  ApiKeyStore,
  computeApiKeyDigest,
  DisclosureEventId,
  DisclosureRecorder,
  DocumentId,
  EncounterId,
  OrganizationId,
  parseApiKeyToken,
  PatientId,
  RequestId
} from "@clinical-api/domain"
import { ApiKeyStoreLive, DisclosureRecorderLive } from "@clinical-api/storage-adapter"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect, Option, Redacted, Schema } from "effect"
import { SANDBOX_DIGEST_KEY } from "../../src/config.js"
import {
  type CliDatabase,
  type CliResult,
  EXAMPLE_FIXTURE,
  freshDatabase,
  jsonLines,
  onTestDatabase,
  plain,
  runInProcess,
  tableCounts
} from "./support/cli-harness.js"

/**
 * The operator command line, in-process through the same program `pnpm cli` runs, on one
 * fresh database for the file. The scenarios build on each other in order.
 */

let database: CliDatabase
const cli = (...args: Array<string>) => runInProcess(args, database.env)
const cliWith = (env: Record<string, string>, ...args: Array<string>) => runInProcess(args, { ...database.env, ...env })

const PRODUCTION_DIGEST_KEY = "production-digest-key-0123456789abcdefghijklmnopqrstuvwxyz"
const productionEnv = { PUBLIC_API_ENVIRONMENT: "production", API_KEY_DIGEST_KEY: PRODUCTION_DIGEST_KEY }

/** A refusal: exit status 1, one line on stderr, nothing on stdout. */
const expectRefused = (result: CliResult, fragment: string | RegExp) => {
  const lines = plain(result.stderr)
    .split("\n")
    .filter((line) => line.trim() !== "")
  expect({ code: result.code, lines: lines.length, stdout: result.stdout }).toEqual({ code: 1, lines: 1, stdout: "" })
  expect(lines[0]).toMatch(fragment)
}

const expectOk = (result: CliResult) => {
  expect(result.stderr.includes("error"), result.stderr).toBe(false)
  expect(result.code).toBe(0)
}

const onlyLine = (result: CliResult) => {
  const lines = jsonLines(result.stdout)
  expect(lines).toHaveLength(1)
  return lines[0] ?? {}
}

/** Everything an operator command could change, as the CLI itself lists it, plus the fixture tables. */
const snapshot = async () => ({
  organizations: (await cli("organizations", "list", "--json")).stdout,
  keys: jsonLines((await cli("keys", "list", "--json")).stdout).map(({ expired: _expired, ...key }) => key),
  counts: await tableCounts(database.env)
})

beforeAll(async () => {
  database = await freshDatabase()
  console.info(`CLI suite on ${database.label}`)
}, 60_000)

afterAll(async () => {
  await database?.drop()
})

// Generous timeouts: without DATABASE_URL every command reopens the embedded PGlite directory.
describe("pnpm cli (in-process, on one fresh database)", { timeout: 120_000 }, () => {
  it("--help on every command and group exits 0 and names the command", async () => {
    const commands = [
      [],
      ["migrate"],
      ["fixtures"],
      ["fixtures", "load"],
      ["organizations"],
      ["organizations", "create"],
      ["organizations", "approve"],
      ["organizations", "unapprove"],
      ["organizations", "enable-route"],
      ["organizations", "disable-route"],
      ["organizations", "list"],
      ["keys"],
      ["keys", "issue"],
      ["keys", "list"],
      ["keys", "disable"],
      ["keys", "enable"],
      ["keys", "revoke"],
      ["keys", "set-expiry"],
      ["disclosures"],
      ["disclosures", "export"]
    ]
    for (const command of commands) {
      const result = await cli(...command, "--help")
      expect({ command, code: result.code }).toEqual({ command, code: 0 })
      const help = plain(result.stdout)
      expect(help).toContain("USAGE")
      expect(help).toContain(command.at(-1) ?? "clinical-api")
    }
    // The root help documents the database choice (and the refusal of the in-memory one).
    const root = plain((await cli("--help")).stdout)
    expect(root).toContain("PGLITE_DATA_DIR")
    expect(root).toContain("in-memory embedded database")
  })

  it("refuses to run on the in-memory embedded database (neither DATABASE_URL nor PGLITE_DATA_DIR)", async () => {
    expectRefused(await runInProcess(["organizations", "list"], {}), /DATABASE_URL.*PGLITE_DATA_DIR/)
    expectRefused(
      await runInProcess(["organizations", "create", "--id", "org_lost", "--name", "Lost"], {}),
      /in-memory embedded database would vanish/
    )
  })

  it("refuses every command but migrate on a schema that is not migrated, and a group without a subcommand", async () => {
    expectRefused(await cli("organizations", "list"), "run `pnpm cli migrate` first")
    expectRefused(await cli("keys"), "keys needs a subcommand")
  })

  it("migrate applies the pending migrations, and a second run applies nothing", async () => {
    const first = await cli("migrate")
    expectOk(first)
    expect(first.stdout).toMatch(/^Applied migration 1 \(initial_schema\)\./m)
    const second = await cli("migrate")
    expectOk(second)
    expect(second.stdout).toMatch(/^No pending migrations; the schema is at version \d+\.$/m)
    expect(second.stdout).not.toContain("Applied")
  })

  it("fixtures load stores the example in one transaction; a broken reference refuses the whole file with its JSON path", async () => {
    const example = JSON.parse(await readFile(EXAMPLE_FIXTURE, "utf8")) as {
      encounters: Array<{ organization_id: string }>
    }
    const broken = structuredClone(example)
    const lastEncounter = broken.encounters.at(-1)
    if (lastEncounter === undefined) throw new Error("the example fixture has no encounter")
    lastEncounter.organization_id = "org_nowhere"
    const brokenFile = join(tmpdir(), `broken-fixture-${process.pid}-${Date.now()}.json`)
    await writeFile(brokenFile, JSON.stringify(broken))
    const brokenPath = `$.encounters[${broken.encounters.length - 1}].organization_id`
    const empty = { organizations: 0, api_keys: 0, patients: 0, encounters: 0, documents: 0, recordings: 0 }

    // Refused on an empty database: nothing stored.
    const refusedFirst = await cli("fixtures", "load", brokenFile)
    expectRefused(refusedFirst, "fixture refused at")
    expect(refusedFirst.stderr).toContain(brokenPath)
    expect(await tableCounts(database.env)).toEqual(empty)

    const loaded = await cli("fixtures", "load", EXAMPLE_FIXTURE)
    expectOk(loaded)
    expect(loaded.stdout).toContain("3 organizations, 7 API keys, 3 patients, 7 encounters")
    const counts = await tableCounts(database.env)
    expect(counts).toMatchObject({ organizations: 3, api_keys: 7, patients: 3, encounters: 7 })

    // Refused again on a loaded database, and the example a second time (its ids are stored): counts unchanged.
    const refusedAgain = await cli("fixtures", "load", brokenFile)
    expectRefused(refusedAgain, brokenPath)
    expectRefused(await cli("fixtures", "load", EXAMPLE_FIXTURE), /fixture refused at \$\..*already stored/)
    expectRefused(await cli("fixtures", "load", join(tmpdir(), "no-such-fixture.json")), "cannot read")
    expect(await tableCounts(database.env)).toEqual(counts)
  })

  it("organizations: create, approve, enable and disable routes, unapprove, list", async () => {
    const created = onlyLine(await cli("organizations", "create", "--id", "org_cli", "--name", "CLI Clinic"))
    expect(created).toEqual({ organization_id: "org_cli", name: "CLI Clinic", approved: false, enabled_routes: [] })

    expect(onlyLine(await cli("organizations", "approve", "org_cli"))).toMatchObject({ approved: true })
    await cli("organizations", "enable-route", "org_cli", "listPublicEncounters")
    const enabled = onlyLine(await cli("organizations", "enable-route", "org_cli", "getPublicEncounter"))
    expect(enabled["enabled_routes"]).toEqual(["listPublicEncounters", "getPublicEncounter"])
    // Enabling twice is idempotent.
    const again = onlyLine(await cli("organizations", "enable-route", "org_cli", "getPublicEncounter"))
    expect(again["enabled_routes"]).toEqual(["listPublicEncounters", "getPublicEncounter"])
    const disabled = onlyLine(await cli("organizations", "disable-route", "org_cli", "listPublicEncounters"))
    expect(disabled["enabled_routes"]).toEqual(["getPublicEncounter"])
    expect(onlyLine(await cli("organizations", "unapprove", "org_cli"))).toMatchObject({ approved: false })

    const listed = jsonLines((await cli("organizations", "list", "--json")).stdout)
    expect(listed.map((organization) => organization["organization_id"])).toEqual([
      "org_cli",
      "org_lakeside",
      "org_pending",
      "org_riverside"
    ])
    expect(listed[0]).toEqual({
      organization_id: "org_cli",
      name: "CLI Clinic",
      approved: false,
      enabled_routes: ["getPublicEncounter"]
    })
    const table = (await cli("organizations", "list")).stdout
    expect(table.split("\n")[0]).toMatch(/^ORGANIZATION\s+APPROVED\s+NAME\s+ENABLED ROUTES$/)
    expect(table).toMatch(/^org_cli\s+no\s+CLI Clinic\s+getPublicEncounter$/m)

    await cli("organizations", "approve", "org_cli")
    await cli("organizations", "enable-route", "org_cli", "listPublicEncounters")
  })

  let issuedKeyId = ""

  it("keys issue prints the token once, well-formed, and the service's ApiKeyStore finds its digest (sandbox digest key)", async () => {
    const result = await cli(
      "keys",
      "issue",
      "--organization",
      "org_cli",
      "--scopes",
      "encounters:read,patients:read,encounters:read",
      "--label",
      "cli partner"
    )
    expectOk(result)
    expect(result.stderr).toMatch(/cannot be shown again/)
    const token = /^token: (\S+)$/m.exec(result.stdout)?.[1] ?? ""
    issuedKeyId = /^api_key_id: (\S+)$/m.exec(result.stdout)?.[1] ?? ""
    expect(parseApiKeyToken(token)).toMatchObject({ environment: "test" })
    expect(issuedKeyId).not.toBe("")

    const found = await onTestDatabase(
      database.env,
      ApiKeyStore.use((store) =>
        store.findByDigest(computeApiKeyDigest(Redacted.make(SANDBOX_DIGEST_KEY), token))
      ).pipe(Effect.provide(ApiKeyStoreLive))
    )
    expect(Option.getOrNull(found)).toEqual({
      apiKeyId: issuedKeyId,
      organizationId: "org_cli",
      kind: "organization",
      scopes: ["encounters:read", "patients:read"],
      state: "active",
      expiresAt: null,
      label: "cli partner"
    })

    // Listed without the token or its digest.
    const listing = await cli("keys", "list", "--organization", "org_cli", "--json")
    expect(listing.stdout).not.toContain(token)
    expect(listing.stdout).not.toContain(computeApiKeyDigest(Redacted.make(SANDBOX_DIGEST_KEY), token))
    expect(jsonLines(listing.stdout)).toEqual([
      expect.objectContaining({ api_key_id: issuedKeyId, state: "active", expires_at: null, label: "cli partner" })
    ])
    const table = (await cli("keys", "list", "--organization", "org_cli")).stdout
    expect(table).toMatch(new RegExp(`^${issuedKeyId}\\s+org_cli\\s+organization\\s+active\\s+encounters:read,patients:read\\s+never\\s+cli partner$`, "m"))
  })

  it("keys issue digests with API_KEY_DIGEST_KEY as the service does, and production makes ce_live_ keys (--json)", async () => {
    const result = await cliWith(
      productionEnv,
      "keys",
      "issue",
      "--organization",
      "org_cli",
      "--scopes",
      "documents:read",
      "--expires-at",
      "2999-01-01T01:00:00+01:00",
      "--json"
    )
    expectOk(result)
    const issued = onlyLine(result)
    const token = String(issued["token"])
    expect(parseApiKeyToken(token)).toMatchObject({ environment: "live" })
    expect(issued).toMatchObject({ organization_id: "org_cli", expires_at: "2999-01-01T00:00:00.000Z", expired: false })
    const found = await onTestDatabase(
      database.env,
      ApiKeyStore.use((store) =>
        Effect.all([
          store.findByDigest(computeApiKeyDigest(Redacted.make(PRODUCTION_DIGEST_KEY), token)),
          store.findByDigest(computeApiKeyDigest(Redacted.make(SANDBOX_DIGEST_KEY), token))
        ])
      ).pipe(Effect.provide(ApiKeyStoreLive))
    )
    expect(found.map(Option.isSome)).toEqual([true, false])
  })

  it("keys disable, enable, set-expiry and revoke change the key's state; a revoked key stays revoked", async () => {
    expect(onlyLine(await cli("keys", "disable", issuedKeyId))).toMatchObject({ api_key_id: issuedKeyId, state: "disabled" })
    expect(onlyLine(await cli("keys", "enable", issuedKeyId))).toMatchObject({ state: "active" })
    expect(onlyLine(await cli("keys", "set-expiry", issuedKeyId, "--at", "2020-01-01T00:00:00Z"))).toMatchObject({
      expires_at: "2020-01-01T00:00:00.000Z",
      expired: true
    })
    expect(onlyLine(await cli("keys", "set-expiry", issuedKeyId, "--never"))).toMatchObject({ expires_at: null, expired: false })
    expect(onlyLine(await cli("keys", "revoke", issuedKeyId))).toMatchObject({ state: "revoked" })
    expectRefused(await cli("keys", "disable", issuedKeyId), "is revoked")
    expectRefused(await cli("keys", "enable", issuedKeyId), "is revoked")
    const stored = jsonLines((await cli("keys", "list", "--organization", "org_cli", "--json")).stdout)
    expect(stored.find((key) => key["api_key_id"] === issuedKeyId)).toMatchObject({ state: "revoked", expires_at: null })
  })

  it("bad arguments exit 1 with one clear line and change nothing", async () => {
    const before = await snapshot()
    const issue = ["keys", "issue", "--organization", "org_cli", "--scopes", "encounters:read"]
    const refusals: Array<{ args: ReadonlyArray<string>; message: string | RegExp; env?: Record<string, string> }> = [
      {
        args: ["organizations", "enable-route", "org_cli", "listEverything"],
        message:
          'error: unknown route "listEverything"; the routes are listPublicEncounters, getPublicEncounter, ' +
          "getPublicDocument, getPublicDocumentTranscript, getPublicDocumentAudio"
      },
      { args: ["organizations", "disable-route", "org_cli", "getpublicencounter"], message: "unknown route" },
      {
        args: ["organizations", "enable-route", "org_unknown", "getPublicEncounter"],
        message: 'No organization "org_unknown"'
      },
      { args: ["organizations", "approve", "org_unknown"], message: 'No organization "org_unknown"' },
      { args: ["organizations", "create", "--id", "org_cli", "--name", "Again"], message: "already exists" },
      { args: ["organizations", "create", "--id", "org_new", "--name", "  "], message: "--name must not be empty" },
      { args: ["organizations", "create", "--id", "org new ", "--name", "Blank"], message: "surrounding blanks" },
      { args: ["organizations", "create", "--name", "No id"], message: "--id" },
      { args: ["keys", "issue", "--organization", "org_cli"], message: "--scopes" },
      {
        args: ["keys", "issue", "--organization", "org_cli", "--scopes", "encounters:write"],
        message: /unknown scope "encounters:write"/
      },
      {
        args: [...issue, "--expires-at", "2026-13-01T00:00:00Z"],
        message: "--expires-at \"2026-13-01T00:00:00Z\" is not an RFC 3339 date-time"
      },
      { args: [...issue, "--expires-at", "2026-05-01 12:00"], message: "is not an RFC 3339" },
      { args: [...issue, "--expires-at", "2001-01-01T00:00:00Z"], message: "is not in the future" },
      { args: [...issue, "--kind", "admin"], message: "unknown key kind" },
      { args: [...issue, "--environment", "staging"], message: "unknown key environment" },
      {
        args: ["keys", "issue", "--organization", "org_unknown", "--scopes", "encounters:read"],
        message: 'No organization "org_unknown"'
      },
      { args: [...issue, "--environment", "test"], message: "test_prefix_not_allowed", env: productionEnv },
      {
        args: issue,
        message: /configuration:.*API_KEY_DIGEST_KEY is required in production/,
        env: { PUBLIC_API_ENVIRONMENT: "production" }
      },
      { args: ["keys", "list", "--organization", "org_unknown"], message: 'No organization "org_unknown"' },
      { args: ["keys", "disable", "key_unknown"], message: 'No API key "key_unknown"' },
      { args: ["keys", "revoke", "key_unknown"], message: 'No API key "key_unknown"' },
      { args: ["keys", "set-expiry", "key_unknown", "--never"], message: 'No API key "key_unknown"' },
      { args: ["keys", "set-expiry", issuedKeyId, "--at", "tomorrow"], message: '--at "tomorrow" is not an RFC 3339' },
      { args: ["keys", "set-expiry", issuedKeyId], message: "give either --at T" },
      { args: ["keys", "set-expiry", issuedKeyId, "--at", "2030-01-01T00:00:00Z", "--never"], message: "not both" },
      { args: ["disclosures", "export", "--organization", "org_unknown"], message: 'No organization "org_unknown"' },
      {
        args: ["disclosures", "export", "--organization", "org_riverside", "--from", "2026-05-01"],
        message: '--from "2026-05-01" is not an RFC 3339'
      },
      {
        args: ["disclosures", "export", "--organization", "org_riverside", "--from", "2026-05-02T00:00:00Z", "--to", "2026-05-01T00:00:00Z"],
        message: "--to must be later than --from"
      },
      { args: ["disclosures", "export"], message: "--organization" },
      { args: ["organizations", "frobnicate"], message: /subcommand|unknown argument/i },
    ]
    for (const { args, env, message } of refusals) {
      const result = await cliWith(env ?? {}, ...args)
      try {
        expectRefused(result, message)
      } catch (error) {
        throw new Error(`${args.join(" ")}: ${String(error)}\nstderr: ${result.stderr}\nstdout: ${result.stdout}`)
      }
    }
    expect(await snapshot()).toEqual(before)
  })

  it("disclosures export writes one JSON object per event of the organization, occurred_at in [from, to), in order", async () => {
    const event = (suffix: string, organizationId: string, occurredAt: string, withDocument: boolean) => ({
      eventId: Schema.decodeSync(DisclosureEventId)(`dsc_${suffix}`),
      occurredAt: new Date(occurredAt),
      organizationId: Schema.decodeSync(OrganizationId)(organizationId),
      apiKeyId: Schema.decodeSync(ApiKeyId)("key_export"),
      operationId: withDocument ? ("getPublicDocument" as const) : ("listPublicEncounters" as const),
      encounterId: Schema.decodeSync(EncounterId)("enc_a1"),
      documentId: withDocument ? Schema.decodeSync(DocumentId)("doc_a1_tr") : null,
      patientId: withDocument ? null : Schema.decodeSync(PatientId)("pat_7f3a"),
      requestId: Schema.decodeSync(RequestId)(`req_${suffix}`),
      callerRequestId: withDocument ? null : `partner-${suffix}`
    })
    await onTestDatabase(
      database.env,
      DisclosureRecorder.use((recorder) =>
        recorder.record([
          event("r1", "org_riverside", "2026-05-01T08:59:59.999Z", false),
          event("r2", "org_riverside", "2026-05-01T09:00:00.000Z", false),
          event("r3", "org_riverside", "2026-05-01T10:30:00.000Z", true),
          event("r4", "org_riverside", "2026-05-01T12:00:00.000Z", false),
          event("l1", "org_lakeside", "2026-05-01T10:00:00.000Z", false)
        ])
      ).pipe(Effect.provide(DisclosureRecorderLive))
    )

    const ranged = await cli(
      "disclosures",
      "export",
      "--organization",
      "org_riverside",
      "--from",
      "2026-05-01T11:00:00+02:00",
      "--to",
      "2026-05-01T12:00:00Z"
    )
    expectOk(ranged)
    const lines = ranged.stdout.trimEnd().split("\n")
    const parsed = lines.map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(parsed).toEqual([
      {
        event_id: "dsc_r2",
        occurred_at: "2026-05-01T09:00:00.000Z",
        organization_id: "org_riverside",
        api_key_id: "key_export",
        operation_id: "listPublicEncounters",
        encounter_id: "enc_a1",
        document_id: null,
        patient_id: "pat_7f3a",
        request_id: "req_r2",
        caller_request_id: "partner-r2"
      },
      {
        event_id: "dsc_r3",
        occurred_at: "2026-05-01T10:30:00.000Z",
        organization_id: "org_riverside",
        api_key_id: "key_export",
        operation_id: "getPublicDocument",
        encounter_id: "enc_a1",
        document_id: "doc_a1_tr",
        patient_id: null,
        request_id: "req_r3",
        caller_request_id: null
      }
    ])

    const all = jsonLines((await cli("disclosures", "export", "--organization", "org_riverside")).stdout)
    expect(all.map((line) => line["event_id"])).toEqual(["dsc_r1", "dsc_r2", "dsc_r3", "dsc_r4"])
    const lakeside = jsonLines((await cli("disclosures", "export", "--organization", "org_lakeside", "--to", "2026-05-01T10:00:00.001Z")).stdout)
    expect(lakeside.map((line) => line["event_id"])).toEqual(["dsc_l1"])
    const none = await cli("disclosures", "export", "--organization", "org_pending")
    expectOk(none)
    expect(none.stdout).toBe("")
  })
})
