import { type StoreUnavailable } from "@clinical-api/domain"
import { Effect } from "effect"
import { PgClient } from "../sql/pg-client.js"

/** Partitions are made for the current month and this many after it. */
export const PARTITION_MONTHS_AHEAD = 2

/**
 * Makes the ledger's monthly partitions for the current month and the next two, and those of
 * months the default partition holds events of (moving them in). Returns how many it created
 * (0 too when another process holds the partitioning lock).
 */
export const ensureDisclosurePartitions = (
  now: Date = new Date()
): Effect.Effect<number, StoreUnavailable, PgClient> =>
  Effect.flatMap(PgClient, (client) => {
    const through = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + PARTITION_MONTHS_AHEAD, 1))
    return client
      .run(
        "ledger.partitions.ensure",
        (sql) => sql<Array<{ created: number }>>`
          SELECT disclosure_events_ensure_partitions(${through.toISOString()}::timestamptz) AS created`
      )
      .pipe(Effect.map((rows) => rows[0]?.created ?? 0))
  })

export interface DisclosurePartition {
  readonly name: string
  /** The first instant of its UTC month. */
  readonly monthStart: Date
  readonly monthEnd: Date
}

/** The monthly partitions that exist, oldest first (not the default partition). */
export const disclosurePartitions: Effect.Effect<ReadonlyArray<DisclosurePartition>, StoreUnavailable, PgClient> =
  Effect.flatMap(PgClient, (client) =>
    client
      .run(
        "ledger.partitions.list",
        (sql) => sql<Array<{ name: string; month_start: Date }>>`
          SELECT child.relname AS name,
                 pg_catalog.to_date(pg_catalog.substr(child.relname, 19), 'YYYY_MM')::timestamp AT TIME ZONE 'UTC' AS month_start
          FROM pg_catalog.pg_inherits AS link
          JOIN pg_catalog.pg_class AS child ON child.oid = link.inhrelid
          WHERE link.inhparent = 'public.disclosure_events'::regclass AND child.relname ~ '^disclosure_events_[0-9]{4}_[0-9]{2}$'
          ORDER BY child.relname`
      )
      .pipe(
        Effect.map((rows) =>
          rows.map((row) => {
            const monthStart = new Date(row.month_start)
            const monthEnd = new Date(Date.UTC(monthStart.getUTCFullYear(), monthStart.getUTCMonth() + 1, 1))
            return { name: row.name, monthStart, monthEnd }
          })
        )
      ))
