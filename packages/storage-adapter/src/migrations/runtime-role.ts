import { type StoreUnavailable } from "@clinical-api/domain"
import { Data, Effect } from "effect"
import { PgClient } from "../sql/pg-client.js"

/** The role the service and the webhook worker connect as, unless `DATABASE_RUNTIME_ROLE` names another. */
export const RUNTIME_ROLE_DEFAULT = "clinical_api_runtime"

/**
 * Everything the runtime role may do, table by table (docs/operations.md, "Two database roles").
 * Reading, inserting disclosure events, and the webhook outbox and delivery queue; never an
 * UPDATE, DELETE or TRUNCATE of the disclosure ledger. A table added by a later migration that
 * the service or the worker uses gets its line here: the grants are remade after every run.
 */
export const runtimePrivileges: ReadonlyArray<readonly [table: string, privileges: string]> = [
  ["schema_migrations", "SELECT"],
  ["organizations", "SELECT"],
  ["api_keys", "SELECT"],
  ["patients", "SELECT"],
  ["encounters", "SELECT"],
  ["encounter_daily_counts", "SELECT"],
  ["documents", "SELECT"],
  ["transcripts", "SELECT"],
  ["transcript_turns", "SELECT"],
  ["recordings", "SELECT"],
  ["recording_objects", "SELECT"],
  ["disclosure_events", "SELECT, INSERT"],
  // The sealer (docs/ledger.md) appends seals; a seal is never changed.
  ["disclosure_seals", "SELECT, INSERT"],
  // What disclosures archive took out of the database (migration 10): verify reads it.
  ["disclosure_archives", "SELECT"],
  ["webhook_subscriptions", "SELECT"],
  ["webhook_subscription_revisions", "SELECT"],
  ["webhook_signing_secrets", "SELECT"],
  ["webhook_events", "SELECT, INSERT"],
  // The worker's lease, attempts and outcomes (SELECT ... FOR UPDATE needs UPDATE too).
  ["webhook_deliveries", "SELECT, INSERT, UPDATE"],
  ["webhook_delivery_attempts", "SELECT, INSERT, UPDATE"]
]

/** The runtime role cannot be set up as configured; the migration changed nothing. */
export class RuntimeRoleRefused extends Data.TaggedError("RuntimeRoleRefused")<{ readonly message: string }> {}

const ROLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/

/** A role name as `DATABASE_RUNTIME_ROLE` may give it: a plain identifier, so it is quoted safely below. */
export const isRuntimeRoleName = (name: string): boolean => ROLE_NAME.test(name)

/**
 * Creates the runtime role if it does not exist (NOLOGIN: the operator gives it a password and
 * LOGIN, or grants it to a login role), then makes its table privileges exactly
 * `runtimePrivileges`: everything revoked from it and from PUBLIC first, so a privilege
 * granted by hand or by an older build does not survive. Runs inside the migration's
 * transaction, under its lock; refuses the migrating role itself, whose own rights it would revoke.
 */
export const grantRuntimeRole = (role: string): Effect.Effect<void, RuntimeRoleRefused | StoreUnavailable, PgClient> =>
  Effect.gen(function* () {
    if (!isRuntimeRoleName(role)) {
      return yield* new RuntimeRoleRefused({
        message: `DATABASE_RUNTIME_ROLE must be a plain identifier (letters, digits, _; at most 63), got ${JSON.stringify(role)}`
      })
    }
    const client = yield* PgClient
    const [self] = yield* client.run(
      "migrate.runtimeRole.self",
      (sql) => sql<Array<{ same: boolean }>>`SELECT current_user = ${role} AS same`
    )
    if (self?.same === true) {
      return yield* new RuntimeRoleRefused({
        message: `the runtime role ${role} is the role running the migrations: connect as the owner (DATABASE_OWNER_URL) and let DATABASE_URL name the runtime role`
      })
    }
    const quoted = `"${role}"`
    yield* client.run("migrate.runtimeRole.create", (sql) =>
      sql.unsafe(`
        DO $$ BEGIN
          IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '${role}') THEN
            -- Another database of the cluster may be creating it at the same moment.
            BEGIN CREATE ROLE ${quoted} NOLOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END;
          END IF;
        END $$`).simple())
    const tables = runtimePrivileges.map(([table]) => table)
    const statements = [
      `REVOKE ALL ON ALL TABLES IN SCHEMA public FROM ${quoted}`,
      `REVOKE ALL ON ${tables.join(", ")} FROM PUBLIC`,
      `GRANT USAGE ON SCHEMA public TO ${quoted}`,
      // Identity columns need none; a sequence-backed default would need USAGE (nextval, never setval).
      `GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO ${quoted}`,
      ...runtimePrivileges.map(([table, privileges]) => `GRANT ${privileges} ON ${table} TO ${quoted}`),
      // The sealer makes the ledger's monthly partitions ahead (migration 10): the function is the owner's.
      `DO $$ BEGIN
         IF to_regprocedure('disclosure_events_ensure_partitions(timestamptz)') IS NOT NULL THEN
           GRANT EXECUTE ON FUNCTION disclosure_events_ensure_partitions(timestamptz) TO ${quoted};
         END IF;
       END $$`
    ]
    yield* client.run("migrate.runtimeRole.grant", (sql) => sql.unsafe(statements.join(";\n")).simple())
  })

/** What the connected role could do to the disclosure ledger beyond reading and inserting. */
export const ledgerRewriteRights = Effect.gen(function* () {
  const client = yield* PgClient
  const [row] = yield* client.run(
    "ledger.rewriteRights",
    (sql) => sql<Array<{ role: string; update: boolean; delete: boolean; truncate: boolean; owner: boolean }>>`
      SELECT current_user AS role,
             has_table_privilege(current_user, 'disclosure_events', 'UPDATE') AS update,
             has_table_privilege(current_user, 'disclosure_events', 'DELETE') AS delete,
             has_table_privilege(current_user, 'disclosure_events', 'TRUNCATE') AS truncate,
             pg_has_role(current_user, c.relowner, 'USAGE') AS owner
      FROM pg_class c WHERE c.oid = 'disclosure_events'::regclass`
  )
  const rights = row === undefined
    ? []
    : (["update", "delete", "truncate", "owner"] as const).filter((right) => row[right])
  return { role: row?.role ?? "", rights: rights.map((right) => right === "owner" ? "OWNER" : right.toUpperCase()) }
})
