import { disclosurePartitionLockMigration, disclosurePartitionsMigration } from "./disclosure-partitions.js"
import { ledgerSealsMigration } from "./ledger-seals.js"

/**
 * The schema, as an ordered list of migrations. A migration, once released, never changes:
 * its checksum is recorded when it is applied and start-up refuses a database whose applied
 * migrations differ from these. Later changes (the webhook tables, for one) are new entries
 * with the next version.
 *
 * Ids are `text COLLATE "C"` so that ordering and comparison are bytewise (docs/behaviour.md,
 * tie-breaker); timestamps are `timestamptz` (the API shows milliseconds).
 */
export interface Migration {
  readonly version: number
  readonly name: string
  readonly sql: string
}

const initialSchema = `
CREATE TABLE organizations (
  organization_id text COLLATE "C" PRIMARY KEY,
  name            text NOT NULL,
  approved        boolean NOT NULL DEFAULT false,
  enabled_routes  text[] NOT NULL DEFAULT '{}',
  created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
  api_key_id      text COLLATE "C" PRIMARY KEY,
  -- HMAC-SHA256(digest key, token), lowercase hex. The token itself is never stored.
  digest          text NOT NULL UNIQUE CHECK (digest ~ '^[0-9a-f]{64}$'),
  kind            text NOT NULL CHECK (kind IN ('organization', 'user', 'service')),
  organization_id text COLLATE "C" REFERENCES organizations (organization_id),
  scopes          text[] NOT NULL,
  state           text NOT NULL CHECK (state IN ('active', 'disabled', 'revoked')),
  expires_at      timestamptz,
  label           text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  last_used_at    timestamptz
);
CREATE INDEX api_keys_by_organization ON api_keys (organization_id, created_at);

CREATE TABLE patients (
  patient_id      text COLLATE "C" PRIMARY KEY,
  organization_id text COLLATE "C" NOT NULL REFERENCES organizations (organization_id),
  first_name      text,
  last_name       text,
  date_of_birth   date,
  UNIQUE (organization_id, patient_id)
);

CREATE TABLE encounters (
  encounter_id    text COLLATE "C" PRIMARY KEY,
  organization_id text COLLATE "C" NOT NULL REFERENCES organizations (organization_id),
  data_class      text NOT NULL CHECK (data_class IN ('clinical', 'demo', 'training')),
  created_at      timestamptz NOT NULL,
  updated_at      timestamptz NOT NULL,
  date_of_service timestamptz,
  status          text,
  patient_id      text COLLATE "C",
  -- The patient belongs to the encounter's organization (MATCH SIMPLE: no patient, no check).
  FOREIGN KEY (organization_id, patient_id) REFERENCES patients (organization_id, patient_id)
);
-- Serves the list query in both sort directions (forward and backward index scans).
CREATE INDEX encounters_clinical_list ON encounters (organization_id, created_at, encounter_id)
  WHERE data_class = 'clinical';

CREATE TABLE documents (
  document_id            text COLLATE "C" PRIMARY KEY,
  encounter_id           text COLLATE "C" NOT NULL REFERENCES encounters (encounter_id),
  schema_type            text NOT NULL
    CHECK (schema_type IN ('document', 'ambient_transcript', 'billing', 'encounter_checklist')),
  title                  text,
  status                 text,
  workflow_variant       text CHECK (workflow_variant IN ('ambient', 'phone_call')),
  audio_duration_seconds double precision CHECK (audio_duration_seconds >= 0),
  created_at             timestamptz NOT NULL,
  updated_at             timestamptz NOT NULL,
  content_markdown       text
);
CREATE INDEX documents_by_encounter ON documents (encounter_id, created_at, document_id);

CREATE TABLE transcripts (
  document_id            text COLLATE "C" PRIMARY KEY REFERENCES documents (document_id),
  provider               text NOT NULL,
  audio_duration_seconds double precision CHECK (audio_duration_seconds >= 0)
);

CREATE TABLE transcript_turns (
  document_id   text COLLATE "C" NOT NULL REFERENCES transcripts (document_id),
  ordinal       integer NOT NULL,
  speaker       text NOT NULL,
  text          text NOT NULL,
  start_seconds double precision NOT NULL,
  end_seconds   double precision NOT NULL,
  PRIMARY KEY (document_id, ordinal)
);

-- A recording-backed transcript: where its audio object is kept (never shown to a partner).
CREATE TABLE recordings (
  document_id  text COLLATE "C" PRIMARY KEY REFERENCES documents (document_id),
  storage_key  text COLLATE "C" NOT NULL UNIQUE,
  content_type text NOT NULL
);

-- The objects of the embedded audio storage, so that a fixture load stays one transaction.
CREATE TABLE recording_objects (
  storage_key  text COLLATE "C" PRIMARY KEY,
  content_type text NOT NULL,
  bytes        bytea NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now()
);

-- The accounting of disclosures. No foreign keys: the accounting outlives what it accounts for.
CREATE TABLE disclosure_events (
  event_id        text COLLATE "C" PRIMARY KEY,
  occurred_at     timestamptz NOT NULL,
  organization_id text COLLATE "C" NOT NULL,
  api_key_id      text COLLATE "C" NOT NULL,
  operation_id    text NOT NULL,
  encounter_id    text COLLATE "C" NOT NULL,
  document_id     text COLLATE "C",
  patient_id      text COLLATE "C",
  request_id      text COLLATE "C" NOT NULL
);
CREATE INDEX disclosure_events_export ON disclosure_events (organization_id, occurred_at, event_id);
`

/** The order events were committed in: events of one read share their time, not their order. */
const disclosureRecordingOrder = `
ALTER TABLE disclosure_events ADD COLUMN recorded_seq bigint GENERATED ALWAYS AS IDENTITY;
`

/**
 * The webhook outbox (docs/webhooks.md): subscriptions with their readiness and
 * revision history, signing secrets, events with their exact body bytes, deliveries with
 * their lease, and one record per attempt (never a response body).
 *
 * Signing secrets are stored in clear: the sender must compute HMACs with them, so a digest
 * would not do. They are printed once, at creation or rotation, and never shown again.
 */
const webhookOutbox = `
CREATE TABLE webhook_subscriptions (
  subscription_id text COLLATE "C" PRIMARY KEY,
  organization_id text COLLATE "C" NOT NULL REFERENCES organizations (organization_id),
  endpoint_url    text NOT NULL,
  state           text NOT NULL CHECK (state IN ('disabled', 'active')),
  revision        integer NOT NULL CHECK (revision >= 1),
  -- readiness item -> status (subscription.ts), the current readiness record.
  readiness       jsonb NOT NULL,
  created_at      timestamptz NOT NULL,
  updated_at      timestamptz NOT NULL
);
CREATE INDEX webhook_subscriptions_by_organization ON webhook_subscriptions (organization_id, state);

-- Every change of a subscription, with its provenance and the readiness record it had.
CREATE TABLE webhook_subscription_revisions (
  subscription_id text COLLATE "C" NOT NULL REFERENCES webhook_subscriptions (subscription_id),
  revision        integer NOT NULL,
  change          text NOT NULL
    CHECK (change IN ('created', 'readiness_confirmed', 'readiness_unconfirmed', 'activated', 'readiness_revoked')),
  state           text NOT NULL CHECK (state IN ('disabled', 'active')),
  readiness       jsonb NOT NULL,
  changed_by      text,
  reason          text,
  created_at      timestamptz NOT NULL,
  PRIMARY KEY (subscription_id, revision)
);

CREATE TABLE webhook_signing_secrets (
  secret_seq      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  subscription_id text COLLATE "C" NOT NULL REFERENCES webhook_subscriptions (subscription_id),
  secret          text NOT NULL CHECK (secret ~ '^whsec_[A-Za-z0-9_-]{43}$'),
  created_at      timestamptz NOT NULL
);
-- The sender signs with the newest secret.
CREATE INDEX webhook_signing_secrets_newest ON webhook_signing_secrets (subscription_id, created_at DESC, secret_seq DESC);

CREATE TABLE webhook_events (
  event_id        text COLLATE "C" PRIMARY KEY,
  event_type      text NOT NULL CHECK (event_type IN ('recording.transcript_ready', 'webhook.endpoint_test')),
  organization_id text COLLATE "C" NOT NULL,
  encounter_id    text COLLATE "C",
  document_id     text COLLATE "C",
  -- The exact bytes every attempt sends and signs.
  body            bytea NOT NULL,
  occurred_at     timestamptz NOT NULL,
  created_at      timestamptz NOT NULL,
  -- Publishing the same transcript twice is one event (endpoint tests have neither id).
  UNIQUE (event_type, encounter_id, document_id),
  CHECK ((event_type = 'recording.transcript_ready') = (encounter_id IS NOT NULL AND document_id IS NOT NULL))
);

CREATE TABLE webhook_deliveries (
  delivery_id          text COLLATE "C" PRIMARY KEY,
  event_id             text COLLATE "C" NOT NULL REFERENCES webhook_events (event_id),
  subscription_id      text COLLATE "C" NOT NULL REFERENCES webhook_subscriptions (subscription_id),
  state                text NOT NULL CHECK (state IN ('pending', 'sending', 'succeeded', 'failed', 'cancelled')),
  attempt_count        integer NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
  max_attempts         integer NOT NULL CHECK (max_attempts >= 1),
  -- Attempts made before the last manual redelivery: the retry schedule restarts after it.
  schedule_offset      integer NOT NULL DEFAULT 0 CHECK (schedule_offset >= 0),
  next_attempt_at      timestamptz NOT NULL,
  lease_owner          text,
  lease_expires_at     timestamptz,
  last_attempt_at      timestamptz,
  last_response_status integer,
  last_error_class     text,
  failure_reason       text CHECK (failure_reason IN ('terminal_status', 'attempts_exhausted')),
  created_at           timestamptz NOT NULL,
  updated_at           timestamptz NOT NULL,
  UNIQUE (event_id, subscription_id),
  CHECK ((state = 'sending') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL))
);
-- The lease query: due pending deliveries, and sending ones whose lease has expired.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (lease_expires_at) WHERE state = 'sending';
CREATE INDEX webhook_deliveries_by_subscription ON webhook_deliveries (subscription_id, state);

CREATE TABLE webhook_delivery_attempts (
  delivery_id     text COLLATE "C" NOT NULL REFERENCES webhook_deliveries (delivery_id),
  attempt_number  integer NOT NULL CHECK (attempt_number >= 1),
  worker_id       text NOT NULL,
  started_at      timestamptz NOT NULL,
  -- NULL while the attempt is in flight.
  finished_at     timestamptz,
  duration_ms     integer,
  response_status integer,
  error_class     text,
  PRIMARY KEY (delivery_id, attempt_number)
);
`

/**
 * The list's exact `total` without counting hundreds of thousands of index entries per
 * request: clinical encounters per organization and UTC day of `created_at`, kept by
 * statement-level triggers (one aggregated upsert per statement, so a COPY of a million rows
 * stays fast) in the same transaction as the change. The list adds whole days from here and
 * counts the partial days at the edges of its range in the index (encounter-repository.ts).
 */
const encounterDailyCounts = `
CREATE TABLE encounter_daily_counts (
  organization_id text COLLATE "C" NOT NULL,
  day             date NOT NULL,
  -- No CHECK (clinical_count >= 0): an upsert checks the proposed row, whose delta may be negative.
  clinical_count  bigint NOT NULL,
  PRIMARY KEY (organization_id, day)
);

CREATE FUNCTION encounter_daily_counts_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO encounter_daily_counts AS counts (organization_id, day, clinical_count)
  SELECT organization_id, (created_at AT TIME ZONE 'UTC')::date, count(*)
  FROM inserted WHERE data_class = 'clinical' GROUP BY 1, 2
  ON CONFLICT (organization_id, day) DO UPDATE SET clinical_count = counts.clinical_count + excluded.clinical_count;
  RETURN NULL;
END $$;

CREATE FUNCTION encounter_daily_counts_after_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO encounter_daily_counts AS counts (organization_id, day, clinical_count)
  SELECT organization_id, (created_at AT TIME ZONE 'UTC')::date, -count(*)
  FROM deleted WHERE data_class = 'clinical' GROUP BY 1, 2
  ON CONFLICT (organization_id, day) DO UPDATE SET clinical_count = counts.clinical_count + excluded.clinical_count;
  RETURN NULL;
END $$;

CREATE FUNCTION encounter_daily_counts_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO encounter_daily_counts AS counts (organization_id, day, clinical_count)
  SELECT organization_id, day, sum(delta) FROM (
    SELECT organization_id, (created_at AT TIME ZONE 'UTC')::date AS day, -1 AS delta
    FROM before_update WHERE data_class = 'clinical'
    UNION ALL
    SELECT organization_id, (created_at AT TIME ZONE 'UTC')::date AS day, 1 AS delta
    FROM after_update WHERE data_class = 'clinical'
  ) AS changes GROUP BY 1, 2
  ON CONFLICT (organization_id, day) DO UPDATE SET clinical_count = counts.clinical_count + excluded.clinical_count;
  RETURN NULL;
END $$;

CREATE TRIGGER encounter_daily_counts_insert AFTER INSERT ON encounters
  REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION encounter_daily_counts_after_insert();
CREATE TRIGGER encounter_daily_counts_delete AFTER DELETE ON encounters
  REFERENCING OLD TABLE AS deleted FOR EACH STATEMENT EXECUTE FUNCTION encounter_daily_counts_after_delete();
CREATE TRIGGER encounter_daily_counts_update AFTER UPDATE ON encounters
  REFERENCING OLD TABLE AS before_update NEW TABLE AS after_update
  FOR EACH STATEMENT EXECUTE FUNCTION encounter_daily_counts_after_update();
-- TRUNCATE would bypass the row triggers: it clears the counts with the encounters.
CREATE FUNCTION encounter_daily_counts_after_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM encounter_daily_counts;
  RETURN NULL;
END $$;
CREATE TRIGGER encounter_daily_counts_truncate AFTER TRUNCATE ON encounters
  FOR EACH STATEMENT EXECUTE FUNCTION encounter_daily_counts_after_truncate();

INSERT INTO encounter_daily_counts (organization_id, day, clinical_count)
SELECT organization_id, (created_at AT TIME ZONE 'UTC')::date, count(*)
FROM encounters WHERE data_class = 'clinical' GROUP BY 1, 2;
`

/**
 * The list's seek (encounter-repository.ts, `pageSeek`) walks an organization's days in the
 * list's order and stops at the first day its offset does not pass entirely. With the count in
 * the key's index that walk is an index-only scan that stops early; with the count only in the
 * table the planner read every day of the range from the heap and sorted them first.
 */
const dailyCountsKeyWithCount = `
CREATE UNIQUE INDEX encounter_daily_counts_key_with_count
  ON encounter_daily_counts (organization_id, day) INCLUDE (clinical_count);
ALTER TABLE encounter_daily_counts DROP CONSTRAINT encounter_daily_counts_pkey;
ALTER TABLE encounter_daily_counts
  ADD CONSTRAINT encounter_daily_counts_pkey PRIMARY KEY USING INDEX encounter_daily_counts_key_with_count;
`

/**
 * A transcript's turns as the transcript route shows them, kept in the transcript's row. Built
 * per read (`json_agg` of `json_build_object` over the turns) they cost PostgreSQL about 0.2 ms
 * of its 0.3 ms per 100-turn transcript, most of the route's work in the database. Statement-level
 * triggers with transition tables rebuild the column of every transcript whose turns a statement
 * inserts, updates, deletes or truncates, in that statement's transaction: in any snapshot the
 * column is what the aggregation over the turns gives. The transcripts are locked first, by
 * themselves, so that under READ COMMITTED the rebuild (a later statement, a later snapshot) also
 * sees the turns a concurrent writer of the same transcript committed meanwhile; NO KEY UPDATE
 * does not wait for the KEY SHARE locks that inserting turns takes through their foreign key.
 */
const transcriptTurnsJson = `
ALTER TABLE transcripts ADD COLUMN turns_json json NOT NULL DEFAULT '[]';

-- One statement for all the transcripts a statement touched: the turns joined with unnest (not
-- filtered with = ANY, which compares each row with every element of a parameter array), and
-- aggregated in the statement's own plan (a SQL function called per transcript was planned,
-- and JIT-compiled, once per call). The generator's one INSERT touches 99,852 transcripts.
CREATE FUNCTION transcript_turns_json_refresh(affected text[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM transcripts t JOIN unnest(affected) AS a (document_id) ON a.document_id = t.document_id
    ORDER BY t.document_id FOR NO KEY UPDATE OF t;
  UPDATE transcripts t SET turns_json = coalesce(turns.json, '[]'::json)
  FROM unnest(affected) AS a (document_id)
  LEFT JOIN LATERAL (
    SELECT json_agg(json_build_object('speaker', tt.speaker, 'text', tt.text,
                                      'start', tt.start_seconds, 'end', tt.end_seconds)
                    ORDER BY tt.start_seconds, tt.ordinal) AS json
    FROM transcript_turns tt WHERE tt.document_id = a.document_id
  ) AS turns ON true
  WHERE t.document_id = a.document_id;
END $$;

-- The transcripts a statement touched, each once: the transition tables hold every turn row
-- (the generator's one INSERT holds millions) and have no statistics to plan a join on.
CREATE FUNCTION transcript_turns_json_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM transcript_turns_json_refresh(ARRAY(SELECT DISTINCT document_id FROM inserted));
  RETURN NULL;
END $$;

CREATE FUNCTION transcript_turns_json_after_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM transcript_turns_json_refresh(ARRAY(SELECT DISTINCT document_id FROM deleted));
  RETURN NULL;
END $$;

CREATE FUNCTION transcript_turns_json_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM transcript_turns_json_refresh(
    ARRAY(SELECT document_id FROM before_update UNION SELECT document_id FROM after_update));
  RETURN NULL;
END $$;

CREATE TRIGGER transcript_turns_json_insert AFTER INSERT ON transcript_turns
  REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION transcript_turns_json_after_insert();
CREATE TRIGGER transcript_turns_json_delete AFTER DELETE ON transcript_turns
  REFERENCING OLD TABLE AS deleted FOR EACH STATEMENT EXECUTE FUNCTION transcript_turns_json_after_delete();
CREATE TRIGGER transcript_turns_json_update AFTER UPDATE ON transcript_turns
  REFERENCING OLD TABLE AS before_update NEW TABLE AS after_update
  FOR EACH STATEMENT EXECUTE FUNCTION transcript_turns_json_after_update();
-- TRUNCATE bypasses the row triggers: every transcript is left without turns.
CREATE FUNCTION transcript_turns_json_after_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE transcripts SET turns_json = '[]' WHERE turns_json::text <> '[]';
  RETURN NULL;
END $$;
CREATE TRIGGER transcript_turns_json_truncate AFTER TRUNCATE ON transcript_turns
  FOR EACH STATEMENT EXECUTE FUNCTION transcript_turns_json_after_truncate();

SELECT transcript_turns_json_refresh(ARRAY(SELECT DISTINCT document_id FROM transcript_turns));
`

/**
 * The transcript route writes a transcript's `turns_json` to the partner as it is, unparsed
 * (encounter-repository.ts): what it can hold must be what the contract promises. The triggers
 * above build it from NOT NULL columns, each turn exactly { speaker, text, start, end }; what
 * float8 allows and the contract does not, a start or an end that is NaN or infinite (which
 * json_build_object writes as a string), is refused here, as is a `turns_json` that is not an
 * array. `json_typeof` reads the first token only.
 */
const transcriptTurnsServable = `
ALTER TABLE transcript_turns ADD CONSTRAINT transcript_turns_finite_times
  CHECK (start_seconds NOT IN ('NaN', 'Infinity', '-Infinity') AND end_seconds NOT IN ('NaN', 'Infinity', '-Infinity'));
ALTER TABLE transcripts ADD CONSTRAINT transcripts_turns_json_array CHECK (json_typeof(turns_json) = 'array');
`

/**
 * The request id an event holds is the service's own (`req_` and 32 hex digits, one per
 * request); the caller's `X-Request-Id`, which any caller may repeat or forge in the service's
 * format, is kept beside it. Events recorded before this held the echoed id in `request_id`.
 */
const disclosureCallerRequestId = `
ALTER TABLE disclosure_events ADD COLUMN caller_request_id text COLLATE "C";
`

export const migrations: ReadonlyArray<Migration> = [
  { version: 1, name: "initial_schema", sql: initialSchema },
  { version: 2, name: "disclosure_recording_order", sql: disclosureRecordingOrder },
  { version: 3, name: "webhook_outbox", sql: webhookOutbox },
  { version: 4, name: "encounter_daily_counts", sql: encounterDailyCounts },
  { version: 5, name: "encounter_daily_counts_key_with_count", sql: dailyCountsKeyWithCount },
  { version: 6, name: "transcript_turns_json", sql: transcriptTurnsJson },
  { version: 7, name: "transcript_turns_servable", sql: transcriptTurnsServable },
  { version: 8, name: "disclosure_caller_request_id", sql: disclosureCallerRequestId },
  ledgerSealsMigration,
  disclosurePartitionsMigration,
  disclosurePartitionLockMigration
]
