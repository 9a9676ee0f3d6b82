/**
 * Migration 9, the disclosure ledger's seals (docs/ledger.md). Every event gets the id of the
 * transaction that recorded it (`xid8`, existing rows the migration's own): the chain orders
 * events by (recorded_xid, recorded_seq) and seals only those below its snapshot's xmin, all of
 * whose transactions have ended, so an event committing late can never land before a seal.
 * Seals are append-only: a trigger refuses UPDATE, DELETE and TRUNCATE to everyone (the owner
 * could drop it, which `disclosures verify` would then catch as a changed or removed seal).
 */
export const ledgerSealsSql = `
ALTER TABLE disclosure_events ADD COLUMN recorded_xid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX disclosure_events_chain ON disclosure_events (recorded_xid, recorded_seq);

CREATE TABLE disclosure_seals (
  sequence       bigint PRIMARY KEY CHECK (sequence >= 1),
  previous_hash  text NOT NULL CHECK (previous_hash ~ '^[0-9a-f]{64}$'),
  first_xid      xid8 NOT NULL,
  first_seq      bigint NOT NULL,
  last_xid       xid8 NOT NULL,
  last_seq       bigint NOT NULL,
  event_count    integer NOT NULL CHECK (event_count >= 1),
  events_digest  text NOT NULL,
  -- Per event in chain order: recorded_seq (8 bytes) and the first 16 bytes of its SHA-256.
  event_index    bytea NOT NULL,
  sealed_at      timestamptz NOT NULL,
  -- It took every event sealable at its snapshot (not the first part of a backlog).
  complete       boolean NOT NULL,
  signature      text NOT NULL,
  seal_hash      text NOT NULL UNIQUE
);

CREATE FUNCTION disclosure_seals_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'disclosure_seals is append-only';
END $$;
CREATE TRIGGER disclosure_seals_no_update BEFORE UPDATE OR DELETE ON disclosure_seals
  FOR EACH ROW EXECUTE FUNCTION disclosure_seals_append_only();
CREATE TRIGGER disclosure_seals_no_truncate BEFORE TRUNCATE ON disclosure_seals
  FOR EACH STATEMENT EXECUTE FUNCTION disclosure_seals_append_only();
`

export const ledgerSealsMigration = { version: 9, name: "disclosure_seals", sql: ledgerSealsSql } as const
