/**
 * Migration 10, the disclosure ledger partitioned by month of `occurred_at` (docs/ledger.md,
 * "Partitions and archives"). The existing events move, unchanged (their `recorded_xid` and
 * `recorded_seq` too, so the chain verifies as before), into the partitions of their months.
 *
 * Partitions are made by `disclosure_events_ensure_partitions`, which the service's sealer calls
 * at start and every hour as the runtime role (SECURITY DEFINER: the partitions are the owner's,
 * and the runtime role gets no privilege on them) and `disclosures archive` as the owner. An event
 * of a month with no partition yet lands in the DEFAULT partition, so no request ever fails on
 * it; the next call moves it into its month's new partition.
 *
 * Archives (`disclosures archive`) are recorded in `disclosure_archives`, append-only like the
 * seals, and signed with the ledger key: they tell `disclosures verify` which sealed events left
 * the database on purpose.
 */
export const disclosurePartitionsSql = `
ALTER TABLE disclosure_events RENAME TO disclosure_events_unpartitioned;
ALTER INDEX disclosure_events_pkey RENAME TO disclosure_events_unpartitioned_pkey;
ALTER INDEX disclosure_events_export RENAME TO disclosure_events_unpartitioned_export;
ALTER INDEX disclosure_events_chain RENAME TO disclosure_events_unpartitioned_chain;

CREATE TABLE disclosure_events (
  event_id          text COLLATE "C" NOT NULL,
  occurred_at       timestamptz NOT NULL,
  organization_id   text COLLATE "C" NOT NULL,
  api_key_id        text COLLATE "C" NOT NULL,
  operation_id      text NOT NULL,
  encounter_id      text COLLATE "C" NOT NULL,
  document_id       text COLLATE "C",
  patient_id        text COLLATE "C",
  request_id        text COLLATE "C" NOT NULL,
  recorded_seq      bigint GENERATED ALWAYS AS IDENTITY,
  caller_request_id text COLLATE "C",
  recorded_xid      xid8 NOT NULL DEFAULT pg_current_xact_id(),
  -- A partitioned table's unique keys include its partition key.
  PRIMARY KEY (event_id, occurred_at)
) PARTITION BY RANGE (occurred_at);
CREATE INDEX disclosure_events_export ON disclosure_events (organization_id, occurred_at, event_id);
CREATE INDEX disclosure_events_chain ON disclosure_events (recorded_xid, recorded_seq);
CREATE TABLE disclosure_events_default PARTITION OF disclosure_events DEFAULT;

-- The partition of the UTC month starting at month_start, named disclosure_events_YYYY_MM. Rows
-- of that month already in the default partition move into it (the default is detached
-- meanwhile: a partition cannot be created over rows the default holds).
CREATE FUNCTION disclosure_events_create_partition(month_start timestamptz) RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
  partition_name text := 'disclosure_events_' || to_char(month_start AT TIME ZONE 'UTC', 'YYYY_MM');
  month_end timestamptz := ((month_start AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC';
BEGIN
  IF to_regclass('public.' || partition_name) IS NOT NULL THEN
    RETURN false;
  END IF;
  IF EXISTS (SELECT FROM public.disclosure_events_default WHERE occurred_at >= month_start AND occurred_at < month_end) THEN
    ALTER TABLE public.disclosure_events DETACH PARTITION public.disclosure_events_default;
    EXECUTE format('CREATE TABLE public.%I PARTITION OF public.disclosure_events FOR VALUES FROM (%L) TO (%L)',
      partition_name, month_start, month_end);
    -- PostgreSQL 17 (PGlite) gives partitions the parent's identity column; 15 does not.
    EXECUTE format('INSERT INTO public.%I OVERRIDING SYSTEM VALUE SELECT * FROM public.disclosure_events_default WHERE occurred_at >= %L AND occurred_at < %L',
      partition_name, month_start, month_end);
    DELETE FROM public.disclosure_events_default WHERE occurred_at >= month_start AND occurred_at < month_end;
    ALTER TABLE public.disclosure_events ATTACH PARTITION public.disclosure_events_default DEFAULT;
  ELSE
    EXECUTE format('CREATE TABLE public.%I PARTITION OF public.disclosure_events FOR VALUES FROM (%L) TO (%L)',
      partition_name, month_start, month_end);
  END IF;
  RETURN true;
END $$;

-- The partitions from the current month through the month of through (at most a year ahead),
-- and those of every month the default partition holds rows of. One caller at a time (a
-- transaction-scoped advisory lock, tried: another replica is already doing it). Returns the
-- number of partitions created.
CREATE FUNCTION disclosure_events_ensure_partitions(through timestamptz) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  month_start timestamptz;
  created integer := 0;
  bound timestamptz := LEAST(through, now() + interval '1 year');
BEGIN
  IF NOT pg_try_advisory_xact_lock(7306104510) THEN
    RETURN 0;
  END IF;
  FOR month_start IN
    SELECT months.m FROM (
      SELECT generate_series(date_trunc('month', now() AT TIME ZONE 'UTC'), date_trunc('month', bound AT TIME ZONE 'UTC'),
                             interval '1 month') AT TIME ZONE 'UTC' AS m
      UNION
      SELECT DISTINCT date_trunc('month', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' FROM public.disclosure_events_default
    ) AS months ORDER BY months.m
  LOOP
    IF public.disclosure_events_create_partition(month_start) THEN
      created := created + 1;
    END IF;
  END LOOP;
  RETURN created;
END $$;
REVOKE ALL ON FUNCTION disclosure_events_create_partition(timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION disclosure_events_ensure_partitions(timestamptz) FROM PUBLIC;

SELECT disclosure_events_create_partition(month_start)
FROM (SELECT DISTINCT date_trunc('month', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS month_start
      FROM disclosure_events_unpartitioned) AS months
ORDER BY month_start;
INSERT INTO disclosure_events OVERRIDING SYSTEM VALUE SELECT * FROM disclosure_events_unpartitioned;
SELECT setval(pg_get_serial_sequence('disclosure_events', 'recorded_seq'), max(recorded_seq))
FROM disclosure_events_unpartitioned;
DROP TABLE disclosure_events_unpartitioned;

CREATE TABLE disclosure_archives (
  archive_id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  month_start     timestamptz NOT NULL,
  file_name       text NOT NULL,
  file_sha256     text NOT NULL CHECK (file_sha256 ~ '^[0-9a-f]{64}$'),
  event_count     bigint NOT NULL CHECK (event_count >= 0),
  first_seal      bigint,
  last_seal       bigint,
  -- The archived events of seals that also cover events outside the month, as pairs of
  -- 8-byte big-endian numbers: the seal's sequence and the event's recorded_seq.
  shared_events   bytea NOT NULL,
  archived_at     timestamptz NOT NULL,
  signature       text NOT NULL
);
CREATE TRIGGER disclosure_archives_no_update BEFORE UPDATE OR DELETE ON disclosure_archives
  FOR EACH ROW EXECUTE FUNCTION disclosure_seals_append_only();
CREATE TRIGGER disclosure_archives_no_truncate BEFORE TRUNCATE ON disclosure_archives
  FOR EACH STATEMENT EXECUTE FUNCTION disclosure_seals_append_only();
`

export const disclosurePartitionsMigration = { version: 10, name: "disclosure_partitions", sql: disclosurePartitionsSql } as const

/**
 * Migration 11: a month's partition is made with the ledger locked against inserts from before
 * the check of the default partition to the commit. Before, an event of that month inserted by a
 * transaction still open at the check was invisible to it, and the CREATE then failed on the row
 * the default held by its commit (on a fresh database, whose first requests race the first
 * partitions: the current month's events stayed in the default until the next hourly try).
 */
export const disclosurePartitionLockSql = `
CREATE OR REPLACE FUNCTION disclosure_events_create_partition(month_start timestamptz) RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
  partition_name text := 'disclosure_events_' || to_char(month_start AT TIME ZONE 'UTC', 'YYYY_MM');
  month_end timestamptz := ((month_start AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC';
BEGIN
  IF to_regclass('public.' || partition_name) IS NOT NULL THEN
    RETURN false;
  END IF;
  -- The lock the CREATE below takes anyway, taken before the check: inserts in flight commit
  -- first, and their rows are seen by it.
  LOCK TABLE public.disclosure_events IN ACCESS EXCLUSIVE MODE;
  IF EXISTS (SELECT FROM public.disclosure_events_default WHERE occurred_at >= month_start AND occurred_at < month_end) THEN
    ALTER TABLE public.disclosure_events DETACH PARTITION public.disclosure_events_default;
    EXECUTE format('CREATE TABLE public.%I PARTITION OF public.disclosure_events FOR VALUES FROM (%L) TO (%L)',
      partition_name, month_start, month_end);
    -- PostgreSQL 17 (PGlite) gives partitions the parent's identity column; 15 does not.
    EXECUTE format('INSERT INTO public.%I OVERRIDING SYSTEM VALUE SELECT * FROM public.disclosure_events_default WHERE occurred_at >= %L AND occurred_at < %L',
      partition_name, month_start, month_end);
    DELETE FROM public.disclosure_events_default WHERE occurred_at >= month_start AND occurred_at < month_end;
    ALTER TABLE public.disclosure_events ATTACH PARTITION public.disclosure_events_default DEFAULT;
  ELSE
    EXECUTE format('CREATE TABLE public.%I PARTITION OF public.disclosure_events FOR VALUES FROM (%L) TO (%L)',
      partition_name, month_start, month_end);
  END IF;
  RETURN true;
END $$;
`

export const disclosurePartitionLockMigration = {
  version: 11,
  name: "disclosure_partition_lock",
  sql: disclosurePartitionLockSql
} as const
