import { statSync } from "node:fs"
import { type LedgerFinding, type Seal, toHex } from "@clinical-api/domain"
import {
  archiveDisclosures,
  ledgerHead,
  LedgerKeyFromConfig,
  PgClient,
  sealAll,
  verifyExportFileAt,
  verifyLedger,
  writeSealedExport
} from "@clinical-api/storage-adapter"
import { Console, Effect, Option } from "effect"
import { Command, Flag } from "effect/cli"
import { parseInstant, parseOrganizationId } from "./arguments.js"
import { onDatabase } from "./database.js"
import { refuse } from "./failure.js"

/** A seal as `disclosures head` prints it (and as an operator records it elsewhere). */
export const sealJson = (seal: Seal, publicKey: Uint8Array) => ({
  sequence: seal.sequence,
  hash: seal.hash,
  previous_hash: seal.previousHash,
  first: seal.first,
  last: seal.last,
  count: seal.count,
  events_digest: seal.eventsDigest,
  sealed_at: seal.sealedAt,
  complete: seal.complete,
  signature: seal.signature,
  public_key: toHex(publicKey)
})

const describeFinding = (finding: LedgerFinding) => `ledger check failed: ${finding.message}`

const optionalInstant = (name: string, value: Option.Option<string>) =>
  Option.isSome(value) ? parseInstant(name, value.value) : Effect.succeed(null)

const verifyCommand = Command.make(
  "verify",
  {
    organization: Flag.String("organization").pipe(
      Flag.optional,
      Flag.withDescription("Count this organization's events (the whole chain is verified: it covers every organization).")
    ),
    from: Flag.String("from").pipe(Flag.optional, Flag.withDescription("Count events with occurred_at at or after this instant.")),
    to: Flag.String("to").pipe(Flag.optional, Flag.withDescription("Count events with occurred_at before this instant.")),
    file: Flag.String("file").pipe(
      Flag.optional,
      Flag.withDescription("Verify a sealed export (disclosures export --sealed) offline, without the database.")
    ),
    publicKey: Flag.String("public-key").pipe(
      Flag.optional,
      Flag.withDescription("With --file: the ledger's public key (hex) the file must carry (from disclosures head).")
    )
  },
  (input) =>
    Effect.gen(function* () {
      if (Option.isSome(input.file)) {
        const path = input.file.value
        const result = yield* Effect.tryPromise({
          try: () => verifyExportFileAt(path, Option.getOrNull(input.publicKey)),
          catch: (cause) => refuse(`cannot read ${path}: ${String(cause)}`)
        })
        if (result.finding !== null) return yield* refuse(`ledger check failed: ${result.finding}`)
        yield* Console.log(`${result.events} events verified in ${result.seals} seals (public key ${result.publicKey})`)
        return
      }
      const organizationId = Option.isSome(input.organization)
        ? yield* parseOrganizationId(input.organization.value, "--organization")
        : null
      const from = yield* optionalInstant("--from", input.from)
      const to = yield* optionalInstant("--to", input.to)
      const key = yield* LedgerKeyFromConfig
      const result = yield* onDatabase(verifyLedger(key.signer, { organizationId, from, to }))
      if (result.finding !== null) return yield* refuse(describeFinding(result.finding))
      yield* Console.log(
        `${result.counted} events verified` +
          (result.counted !== result.verified ? ` (of ${result.verified} in the chain)` : "") +
          ` in ${result.seals} seals; ${result.unsealed} newer events not yet sealed` +
          (result.archived > 0 ? `; ${result.archived} archived events (verify their files with --file)` : "")
      )
    })
).pipe(
  Command.withDescription(
    "Recompute the disclosure ledger's seal chain (LEDGER_KEY as the service has it) and print the count of events " +
      "verified; exit 1 naming the first event or seal changed, removed or inserted after the fact. With --file, " +
      "verify a sealed export offline."
  )
)

const headCommand = Command.make("head", {}, () =>
  Effect.gen(function* () {
    const key = yield* LedgerKeyFromConfig
    const head = yield* onDatabase(ledgerHead)
    if (head === null) return yield* refuse("no seal yet: the ledger has no sealed event")
    yield* Console.log(JSON.stringify(sealJson(head, key.signer.publicKey)))
  })
).pipe(
  Command.withDescription(
    "Print the newest seal as JSON (sequence, hash, its events' range and digest, signature, public key): record it " +
      "outside the database, like a certificate-transparency tree head."
  )
)

/**
 * `disclosures export --sealed`: seals what has committed first, then writes the sealed export
 * (docs/ledger.md) of the organization's sealed events in [from, to).
 */
export const writeSealedExportCommand = (
  organizationId: string,
  from: Date | null,
  to: Date | null
) =>
  Effect.gen(function* () {
    const key = yield* LedgerKeyFromConfig
    const outcome = yield* onDatabase(
      Effect.gen(function* () {
        const pg = yield* PgClient
        const known = yield* pg.run("cli.ledger.organization", (sql) => sql`SELECT 1 FROM organizations WHERE organization_id = ${organizationId}`)
        if (known.length === 0) return yield* refuse(`No organization "${organizationId}".`)
        yield* sealAll(key.signer)
        return yield* writeSealedExport(key.signer, { organizationId, from, to }, (lines) => Console.log(lines.join("\n")))
      })
    )
    if (outcome.finding !== null) return yield* refuse(describeFinding(outcome.finding))
    if (outcome.unsealed > 0) yield* Console.error(`note: ${outcome.unsealed} events newer than the newest seal were left out`)
  })

const archiveCommand = Command.make(
  "archive",
  {
    before: Flag.String("before").pipe(
      Flag.withDescription("YYYY-MM: archive every month before this one (a month that has ended: at latest the current one).")
    ),
    directory: Flag.String("directory").pipe(
      Flag.withDefault("."),
      Flag.withDescription("Where the files disclosures-YYYY-MM.jsonl are written (default: the current directory).")
    )
  },
  (input) =>
    Effect.gen(function* () {
      const match = /^(\d{4})-(\d{2})$/.exec(input.before)
      const month = match === null ? 0 : Number(match[2])
      if (match === null || month < 1 || month > 12) return yield* refuse(`--before must be a month as YYYY-MM, got ${JSON.stringify(input.before)}`)
      const before = new Date(Date.UTC(Number(match[1]), month - 1, 1))
      const isDirectory = (() => {
        try {
          return statSync(input.directory).isDirectory()
        } catch {
          return false
        }
      })()
      if (!isDirectory) return yield* refuse(`--directory ${input.directory} is not a directory`)
      const key = yield* LedgerKeyFromConfig
      const archived = yield* onDatabase(
        archiveDisclosures(key.signer, { before, directory: input.directory }).pipe(
          Effect.catchTag("ArchiveRefused", (refused) => Effect.fail(refuse(refused.message)))
        )
      )
      if (archived.length === 0) yield* Console.log(`no month before ${input.before} is in the database`)
      for (const month of archived) {
        yield* Console.log(`${month.month}: ${month.events} events in ${month.seals} seals archived to ${month.file} (sha256 ${month.sha256}); partition dropped`)
      }
    })
).pipe(
  Command.withDescription(
    "Archive the disclosure ledger's months before --before: each month's events with their seals are written to " +
      "disclosures-YYYY-MM.jsonl, the file is verified (as disclosures verify --file would), and only then is the " +
      "month's partition detached and dropped, recorded (signed) so that disclosures verify accounts for it. Nothing " +
      "is ever archived automatically; keep the files (six years of accounting of disclosures)."
  )
)

export const ledgerCommands = [verifyCommand, headCommand, archiveCommand] as const
