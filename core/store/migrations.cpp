#include "store/migrations.h"

#include <QRegularExpression>

#include <iterator>

namespace once {

namespace {

// Each entry upgrades the schema by one version, in both dialects side by side, so a
// store of either kind at version N has the same tables and columns. Never edit a
// shipped entry: add one.
struct Migration
{
    const char *sqlite;
    const char *postgres;
};

// The workers on a store, written by each worker itself: the console lists them all,
// including headless ones on other machines, and calls one gone when its heartbeat stops.
// The same text in both dialects.
const char *const WorkersTable = R"sql(
CREATE TABLE workers (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid BIGINT NOT NULL,
    version TEXT,
    partner TEXT,
    concurrency INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    stopped_at BIGINT,
    applied BIGINT NOT NULL DEFAULT 0,
    duplicates BIGINT NOT NULL DEFAULT 0,
    retries BIGINT NOT NULL DEFAULT 0,
    dead_lettered BIGINT NOT NULL DEFAULT 0,
    held BIGINT NOT NULL DEFAULT 0,
    in_flight INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX workers_heartbeat ON workers(heartbeat_at);
)sql";

// honours_key: 'yes' or 'no' (a partner with no row is unknown). The same text in both dialects.
const char *const PartnersTable = R"sql(
CREATE TABLE partners (
    url TEXT PRIMARY KEY,
    honours_key TEXT NOT NULL,
    set_by TEXT NOT NULL,
    set_at BIGINT NOT NULL
);
)sql";

// The same text in both dialects.
const char *const WorkersPartnerHealth = R"sql(
ALTER TABLE workers ADD COLUMN breaker TEXT NOT NULL DEFAULT 'closed';
ALTER TABLE workers ADD COLUMN failures BIGINT NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN consecutive_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN failing_since BIGINT;
ALTER TABLE workers ADD COLUMN last_failure_at BIGINT;
ALTER TABLE workers ADD COLUMN last_error_class TEXT;
)sql";

// The same text in both dialects.
const char *const WorkersStoreLoss = R"sql(
ALTER TABLE workers ADD COLUMN store_lost_at BIGINT;
ALTER TABLE workers ADD COLUMN store_back_at BIGINT;
)sql";

// The same text in both dialects.
const char *const WorkersInDoubtPolicy = R"sql(
ALTER TABLE workers ADD COLUMN last_http_status INTEGER;
ALTER TABLE workers ADD COLUMN in_doubt_policy TEXT;
ALTER TABLE workers ADD COLUMN in_doubt_configured TEXT;
)sql";

const char *const SendsNamePartners = R"sql(
ALTER TABLE attempts ADD COLUMN partner TEXT;
ALTER TABLE attempts ADD COLUMN partner_profile TEXT;
ALTER TABLE workers ADD COLUMN failing_partner TEXT;
ALTER TABLE workers ADD COLUMN partners TEXT;
)sql";

const char *const PartnerEventsOnce = R"sql(
CREATE TABLE partner_events (
    partner TEXT NOT NULL,
    event_id TEXT NOT NULL,
    send_key TEXT NOT NULL,
    kind TEXT NOT NULL,
    received_at BIGINT NOT NULL,
    PRIMARY KEY (partner, event_id)
);
CREATE INDEX partner_events_received ON partner_events(received_at);
CREATE INDEX ledger_provider_request ON ledger(provider_request_id);
)sql";

// A paused partner: workers send it nothing until it is resumed (once partners NAME
// --pause). A row paused without a recorded answer on its key holds honours_key
// 'unknown'. The same text in both dialects.
const char *const PartnersPause = R"sql(
ALTER TABLE partners ADD COLUMN paused_at BIGINT;
ALTER TABLE partners ADD COLUMN paused_by TEXT;
ALTER TABLE partners ADD COLUMN pause_reason TEXT;
)sql";

// A reminder's expiry as its claim worked it out (its expires_at, else its scheduled time
// plus its partner's or route's expire_after): dead letters and the console tell from it
// whether a redrive would still be worth sending. PostgreSQL's IF NOT EXISTS lets a store
// that a test set back a version take it again; SQLite's migrations run in one
// transaction with the version, so a store has the column exactly when it says 23.
const char *const LedgerExpiresAtSqlite = R"sql(
ALTER TABLE ledger ADD COLUMN expires_at BIGINT;
)sql";
const char *const LedgerExpiresAtPostgres = R"sql(
ALTER TABLE ledger ADD COLUMN IF NOT EXISTS expires_at BIGINT;
)sql";

// Alerts that reach people (once watch): the thresholds every console and watcher on the
// store evaluate alike (a partner's own under its name, the store's under ''); each
// alert's life as an incident, with what operators wrote on it; and the lease that lets
// one watcher of several notify.
const char *const AlertsAndIncidentsSqlite = R"sql(
CREATE TABLE IF NOT EXISTS alert_thresholds (
    rule TEXT NOT NULL,
    partner TEXT NOT NULL DEFAULT '',
    value BIGINT NOT NULL,
    set_by TEXT NOT NULL,
    set_at BIGINT NOT NULL,
    PRIMARY KEY (rule, partner)
);
CREATE TABLE IF NOT EXISTS incidents (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    rule TEXT NOT NULL,
    partner TEXT NOT NULL DEFAULT '',
    severity TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    resolved_at BIGINT,
    resolved_by TEXT,
    last_seen_at BIGINT NOT NULL,
    peak_value BIGINT NOT NULL DEFAULT 0,
    threshold BIGINT NOT NULL DEFAULT 0,
    summary TEXT NOT NULL DEFAULT '',
    details TEXT NOT NULL DEFAULT '{}',
    acked_at BIGINT,
    acked_by TEXT,
    notified_firing_at BIGINT,
    notified_resolved_at BIGINT,
    reminded_at BIGINT
);
CREATE UNIQUE INDEX IF NOT EXISTS incidents_open ON incidents(rule, partner) WHERE resolved_at IS NULL;
CREATE INDEX IF NOT EXISTS incidents_started ON incidents(started_at);
CREATE TABLE IF NOT EXISTS incident_notes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    incident_id BIGINT NOT NULL,
    at BIGINT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    note TEXT
);
CREATE INDEX IF NOT EXISTS incident_notes_incident ON incident_notes(incident_id, id);
CREATE TABLE IF NOT EXISTS leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
)sql";

const char *const AlertsAndIncidentsPostgres = R"sql(
CREATE TABLE IF NOT EXISTS alert_thresholds (
    rule TEXT NOT NULL,
    partner TEXT NOT NULL DEFAULT '',
    value BIGINT NOT NULL,
    set_by TEXT NOT NULL,
    set_at BIGINT NOT NULL,
    PRIMARY KEY (rule, partner)
);
CREATE TABLE IF NOT EXISTS incidents (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    rule TEXT NOT NULL,
    partner TEXT NOT NULL DEFAULT '',
    severity TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    resolved_at BIGINT,
    resolved_by TEXT,
    last_seen_at BIGINT NOT NULL,
    peak_value BIGINT NOT NULL DEFAULT 0,
    threshold BIGINT NOT NULL DEFAULT 0,
    summary TEXT NOT NULL DEFAULT '',
    details TEXT NOT NULL DEFAULT '{}',
    acked_at BIGINT,
    acked_by TEXT,
    notified_firing_at BIGINT,
    notified_resolved_at BIGINT,
    reminded_at BIGINT
);
CREATE UNIQUE INDEX IF NOT EXISTS incidents_open ON incidents(rule, partner) WHERE resolved_at IS NULL;
CREATE INDEX IF NOT EXISTS incidents_started ON incidents(started_at);
CREATE TABLE IF NOT EXISTS incident_notes (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    incident_id BIGINT NOT NULL,
    at BIGINT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    note TEXT
);
CREATE INDEX IF NOT EXISTS incident_notes_incident ON incident_notes(incident_id, id);
CREATE TABLE IF NOT EXISTS leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
)sql";

// The counters: "state:<state>" for each ledger state, "duplicate_keys" (keys with at
// least one duplicate delivery turned away) and "duplicate_deliveries" (their sum). A
// counter's value is the sum of its shards.
//
// SQLite has one writer at a time: one shard, kept by row triggers. PostgreSQL runs many
// writers at once: each connection keeps a shard of its own (its backend pid), so that
// no two transactions ever wait on the same counter row, and statement triggers add a
// whole multi-row statement's changes at once.
const char *const LedgerTotalsSqlite = R"sql(
CREATE TABLE ledger_totals (
    counter TEXT NOT NULL,
    shard BIGINT NOT NULL,
    n BIGINT NOT NULL,
    PRIMARY KEY (counter, shard)
) WITHOUT ROWID
/
INSERT INTO ledger_totals (counter, shard, n)
SELECT 'state:' || state, 0, COUNT(*) FROM ledger GROUP BY state
UNION ALL SELECT 'duplicate_keys', 0, COUNT(*) FROM ledger WHERE duplicates > 0
UNION ALL SELECT 'duplicate_deliveries', 0, COALESCE(SUM(duplicates), 0) FROM ledger WHERE duplicates > 0
/
CREATE TRIGGER ledger_totals_insert AFTER INSERT ON ledger
BEGIN
    INSERT INTO ledger_totals (counter, shard, n) VALUES ('state:' || NEW.state, 0, 1)
        ON CONFLICT (counter, shard) DO UPDATE SET n = n + 1;
    INSERT INTO ledger_totals (counter, shard, n)
        SELECT 'duplicate_keys', 0, 1 WHERE NEW.duplicates > 0
        UNION ALL SELECT 'duplicate_deliveries', 0, NEW.duplicates WHERE NEW.duplicates > 0
        ON CONFLICT (counter, shard) DO UPDATE SET n = n + excluded.n;
END
/
CREATE TRIGGER ledger_totals_state AFTER UPDATE OF state ON ledger WHEN OLD.state IS NOT NEW.state
BEGIN
    INSERT INTO ledger_totals (counter, shard, n) VALUES ('state:' || OLD.state, 0, -1), ('state:' || NEW.state, 0, 1)
        ON CONFLICT (counter, shard) DO UPDATE SET n = n + excluded.n;
END
/
CREATE TRIGGER ledger_totals_duplicates AFTER UPDATE OF duplicates ON ledger
WHEN OLD.duplicates IS NOT NEW.duplicates
BEGIN
    INSERT INTO ledger_totals (counter, shard, n)
        VALUES ('duplicate_keys', 0, (NEW.duplicates > 0) - (OLD.duplicates > 0)),
               ('duplicate_deliveries', 0, NEW.duplicates - OLD.duplicates)
        ON CONFLICT (counter, shard) DO UPDATE SET n = n + excluded.n;
END
/
CREATE TRIGGER ledger_totals_delete AFTER DELETE ON ledger
BEGIN
    INSERT INTO ledger_totals (counter, shard, n)
        VALUES ('state:' || OLD.state, 0, -1), ('duplicate_keys', 0, -(OLD.duplicates > 0)),
               ('duplicate_deliveries', 0, -OLD.duplicates)
        ON CONFLICT (counter, shard) DO UPDATE SET n = n + excluded.n;
END
)sql";

const char *const LedgerTotalsPostgres = R"sql(
CREATE TABLE ledger_totals (
    counter TEXT NOT NULL,
    shard BIGINT NOT NULL,
    n BIGINT NOT NULL,
    PRIMARY KEY (counter, shard)
)
/
INSERT INTO ledger_totals (counter, shard, n)
SELECT 'state:' || state, 0, COUNT(*) FROM ledger GROUP BY state
UNION ALL SELECT 'duplicate_keys', 0, COUNT(*) FROM ledger WHERE duplicates > 0
UNION ALL SELECT 'duplicate_deliveries', 0, COALESCE(SUM(duplicates), 0) FROM ledger WHERE duplicates > 0
/
CREATE FUNCTION ledger_totals_add(changes_counter TEXT[], changes_n BIGINT[]) RETURNS void LANGUAGE sql AS $$
    INSERT INTO ledger_totals (counter, shard, n)
    SELECT c, pg_backend_pid(), SUM(d) FROM unnest(changes_counter, changes_n) AS changes(c, d)
    GROUP BY c HAVING SUM(d) <> 0
    ON CONFLICT (counter, shard) DO UPDATE SET n = ledger_totals.n + excluded.n
$$
/
CREATE FUNCTION ledger_totals_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ledger_totals_add(array_agg(c), array_agg(d)) FROM (
        SELECT 'state:' || state AS c, 1::BIGINT AS d FROM new_rows
        UNION ALL SELECT 'duplicate_keys', 1 FROM new_rows WHERE duplicates > 0
        UNION ALL SELECT 'duplicate_deliveries', duplicates FROM new_rows WHERE duplicates > 0) changes;
    RETURN NULL;
END
$$
/
CREATE FUNCTION ledger_totals_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ledger_totals_add(array_agg(c), array_agg(d)) FROM (
        SELECT 'state:' || state AS c, 1::BIGINT AS d FROM new_rows
        UNION ALL SELECT 'state:' || state, -1 FROM old_rows
        UNION ALL SELECT 'duplicate_keys', 1 FROM new_rows WHERE duplicates > 0
        UNION ALL SELECT 'duplicate_keys', -1 FROM old_rows WHERE duplicates > 0
        UNION ALL SELECT 'duplicate_deliveries', duplicates FROM new_rows WHERE duplicates > 0
        UNION ALL SELECT 'duplicate_deliveries', -duplicates FROM old_rows WHERE duplicates > 0) changes;
    RETURN NULL;
END
$$
/
CREATE FUNCTION ledger_totals_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ledger_totals_add(array_agg(c), array_agg(d)) FROM (
        SELECT 'state:' || state AS c, -1::BIGINT AS d FROM old_rows
        UNION ALL SELECT 'duplicate_keys', -1 FROM old_rows WHERE duplicates > 0
        UNION ALL SELECT 'duplicate_deliveries', -duplicates FROM old_rows WHERE duplicates > 0) changes;
    RETURN NULL;
END
$$
/
CREATE TRIGGER ledger_totals_insert AFTER INSERT ON ledger REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION ledger_totals_on_insert()
/
CREATE TRIGGER ledger_totals_update AFTER UPDATE ON ledger REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION ledger_totals_on_update()
/
CREATE TRIGGER ledger_totals_delete AFTER DELETE ON ledger REFERENCING OLD TABLE AS old_rows
FOR EACH STATEMENT EXECUTE FUNCTION ledger_totals_on_delete()
)sql";

// The counts' triggers write their changes with one statement of their own. Through
// ledger_totals_add(), an SQL function, the server planned that INSERT again on every
// call: with four workers at a 20 ms partner the triggers took half of the time of the
// statements that fired them, and their planning a quarter of that. A PL/pgSQL
// statement is planned once per connection. SQLite has nothing to change.
const char *const LedgerTotalsPlannedOncePostgres = R"sql(
CREATE OR REPLACE FUNCTION ledger_totals_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ledger_totals (counter, shard, n)
    SELECT c, pg_backend_pid(), SUM(d) FROM (
        SELECT 'state:' || state AS c, 1::BIGINT AS d FROM new_rows
        UNION ALL SELECT 'duplicate_keys', 1 FROM new_rows WHERE duplicates > 0
        UNION ALL SELECT 'duplicate_deliveries', duplicates FROM new_rows WHERE duplicates > 0) changes
    GROUP BY c HAVING SUM(d) <> 0
    ON CONFLICT (counter, shard) DO UPDATE SET n = ledger_totals.n + excluded.n;
    RETURN NULL;
END
$$
/
CREATE OR REPLACE FUNCTION ledger_totals_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ledger_totals (counter, shard, n)
    SELECT c, pg_backend_pid(), SUM(d) FROM (
        SELECT 'state:' || state AS c, 1::BIGINT AS d FROM new_rows
        UNION ALL SELECT 'state:' || state, -1 FROM old_rows
        UNION ALL SELECT 'duplicate_keys', 1 FROM new_rows WHERE duplicates > 0
        UNION ALL SELECT 'duplicate_keys', -1 FROM old_rows WHERE duplicates > 0
        UNION ALL SELECT 'duplicate_deliveries', duplicates FROM new_rows WHERE duplicates > 0
        UNION ALL SELECT 'duplicate_deliveries', -duplicates FROM old_rows WHERE duplicates > 0) changes
    GROUP BY c HAVING SUM(d) <> 0
    ON CONFLICT (counter, shard) DO UPDATE SET n = ledger_totals.n + excluded.n;
    RETURN NULL;
END
$$
/
CREATE OR REPLACE FUNCTION ledger_totals_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ledger_totals (counter, shard, n)
    SELECT c, pg_backend_pid(), SUM(d) FROM (
        SELECT 'state:' || state AS c, -1::BIGINT AS d FROM old_rows
        UNION ALL SELECT 'duplicate_keys', -1 FROM old_rows WHERE duplicates > 0
        UNION ALL SELECT 'duplicate_deliveries', -duplicates FROM old_rows WHERE duplicates > 0) changes
    GROUP BY c HAVING SUM(d) <> 0
    ON CONFLICT (counter, shard) DO UPDATE SET n = ledger_totals.n + excluded.n;
    RETURN NULL;
END
$$
/
DROP FUNCTION ledger_totals_add(TEXT[], BIGINT[])
)sql";

// The same text in both dialects.
const char *const DeadLettersKeysetIndexes = R"sql(
CREATE INDEX IF NOT EXISTS dead_letters_dead_at_id ON dead_letters(dead_at, id);
CREATE INDEX IF NOT EXISTS dead_letters_class_dead_at_id ON dead_letters(error_class, dead_at, id);
DROP INDEX IF EXISTS dead_letters_dead_at;
DROP INDEX IF EXISTS dead_letters_class;
)sql";

// The same text in both dialects.
const char *const AttemptsWindowIndex = R"sql(
CREATE INDEX IF NOT EXISTS attempts_at_step_outcome ON attempts(at, step, outcome);
DROP INDEX IF EXISTS attempts_at;
)sql";

// A prefix search (LIKE 'prefix%') can use a column's index only when the column compares
// byte by byte: on a database created with another collation (en_US.UTF-8, C.UTF-8, what
// most servers and hosted services default to) it read the whole ledger. The ids and keys
// compare by their bytes from now on, as they do on SQLite. No table is rewritten, but the
// indexes of these columns are built again: about 3 s a million events, once. A database
// whose own collation is C already has nothing to change.
const char *const IdsCompareByBytesPostgres = R"sql(
DO $$
BEGIN
    IF (SELECT datcollate FROM pg_database WHERE datname = current_database()) NOT IN ('C', 'POSIX') THEN
        ALTER TABLE ledger
            ALTER COLUMN send_key TYPE TEXT COLLATE "C",
            ALTER COLUMN event_id TYPE TEXT COLLATE "C",
            ALTER COLUMN user_id TYPE TEXT COLLATE "C",
            ALTER COLUMN reminder_id TYPE TEXT COLLATE "C",
            ALTER COLUMN destination TYPE TEXT COLLATE "C";
    END IF;
END
$$
/
DO $$
BEGIN
    IF (SELECT datcollate FROM pg_database WHERE datname = current_database()) NOT IN ('C', 'POSIX') THEN
        ALTER TABLE queue
            ALTER COLUMN send_key TYPE TEXT COLLATE "C",
            ALTER COLUMN event_id TYPE TEXT COLLATE "C";
    END IF;
END
$$
)sql";

// A key's history was found through attempts(send_key, id): every outcome recorded put
// an entry at a random place in that index (keys begin with their user), and at 10,000
// reminders a second those scattered pages were a third of what each commit wrote and
// read back. The time the key's ledger row was created comes first instead: a turn's
// attempts belong to keys claimed moments ago, so their entries go at the index's end.
// Rows written before, where a key had no ledger row, or by a hand-written INSERT keep
// 0, and a key's history is looked up under both (SqlLedger::attemptsOfKey): filling the
// column for the rows already there would rewrite the whole history table for nothing.
// The same text in both dialects.
const char *const AttemptsByKeyCreation = R"sql(
ALTER TABLE attempts ADD COLUMN key_created_at BIGINT NOT NULL DEFAULT 0;
CREATE INDEX attempts_key_created ON attempts(key_created_at, send_key, id);
DROP INDEX attempts_key;
)sql";

// once serve's idempotency keys belong to the producer (the token's name) that used
// them, and remember a digest of what was published under them: another producer's key
// of the same text is its own, and a key used again with a different payload is refused
// instead of answered as a duplicate. Keys kept from before name no producer (''): they
// still match the publishes of a server without tokens, where '' is every producer's
// name, and no other; they expire within a day. The same text in both dialects.
const char *const PublishKeysByProducer = R"sql(
CREATE TABLE publish_keys_by_producer (
    queue_name TEXT NOT NULL,
    producer TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    request_digest TEXT,
    message_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (queue_name, producer, idempotency_key)
);
INSERT INTO publish_keys_by_producer (queue_name, producer, idempotency_key, request_digest, message_id, created_at)
    SELECT queue_name, '', idempotency_key, NULL, message_id, created_at FROM publish_keys;
DROP TABLE publish_keys;
ALTER TABLE publish_keys_by_producer RENAME TO publish_keys;
CREATE INDEX publish_keys_created ON publish_keys(created_at);
)sql";

const Migration Migrations[] = {
    // 1: queue, ledger, history, dead letters, audit log.
    {
        // SQLite: the ledger's indexes are single columns on purpose: every entry also
        // holds the rowid, which is the event list's newest-first order, so
        // "WHERE user_id = ? ORDER BY rowid DESC" needs no sort, and each claim pays for
        // as few and as narrow B-trees as the console's searches allow.
        R"sql(
CREATE TABLE queue (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    payload BLOB NOT NULL,
    send_key TEXT,
    event_id TEXT,
    enqueued_at INTEGER NOT NULL,
    visible_at INTEGER NOT NULL,
    lease_owner TEXT,
    receive_count INTEGER NOT NULL DEFAULT 0,
    redrive_count INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX queue_visible ON queue(visible_at);
CREATE TABLE ledger (
    send_key TEXT PRIMARY KEY,
    event_id TEXT,
    user_id TEXT NOT NULL,
    reminder_id TEXT NOT NULL,
    scheduled_at INTEGER NOT NULL,
    destination TEXT NOT NULL,
    channel TEXT,
    payload BLOB NOT NULL,
    state TEXT NOT NULL,
    owner_message TEXT,
    owner_delivery INTEGER,
    owner_worker TEXT,
    claim_expires_at INTEGER,
    sends INTEGER NOT NULL DEFAULT 0,
    round_sends INTEGER NOT NULL DEFAULT 0,
    duplicates INTEGER NOT NULL DEFAULT 0,
    redrives INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    first_sent_at INTEGER,
    applied_at INTEGER,
    last_http_status INTEGER,
    last_error_class TEXT,
    last_error TEXT,
    provider_request_id TEXT
);
CREATE INDEX ledger_user ON ledger(user_id);
CREATE INDEX ledger_state ON ledger(state);
CREATE INDEX ledger_event ON ledger(event_id);
CREATE INDEX ledger_destination ON ledger(destination);
CREATE INDEX ledger_reminder ON ledger(reminder_id);
CREATE TABLE attempts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    send_key TEXT,
    event_id TEXT,
    message_id TEXT,
    delivery INTEGER,
    worker_id TEXT,
    at INTEGER NOT NULL,
    step TEXT NOT NULL,
    outcome TEXT NOT NULL,
    http_status INTEGER,
    latency_ms INTEGER,
    error_class TEXT,
    error TEXT,
    provider_request_id TEXT
);
CREATE INDEX attempts_key ON attempts(send_key, id);
CREATE INDEX attempts_at ON attempts(at);
CREATE TABLE dead_letters (
    id TEXT PRIMARY KEY,
    payload BLOB NOT NULL,
    send_key TEXT,
    event_id TEXT,
    error_class TEXT NOT NULL,
    last_error TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    first_attempt_at INTEGER,
    last_attempt_at INTEGER,
    dead_at INTEGER NOT NULL,
    enqueued_at INTEGER,
    receive_count INTEGER NOT NULL DEFAULT 0,
    redrive_count INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX dead_letters_class ON dead_letters(error_class, dead_at);
CREATE INDEX dead_letters_dead_at ON dead_letters(dead_at);
CREATE TABLE audit_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    detail TEXT,
    count INTEGER NOT NULL DEFAULT 0
);
)sql",
        // PostgreSQL: times are BIGINT milliseconds (INTEGER is 32 bits here). The
        // ledger has no rowid, so seq gives the event list its newest-first order, and
        // the search indexes end in seq for the same "no sort" reason as above. The
        // queue churns (every message is inserted, updated and deleted), so autovacuum
        // visits it early rather than at a fifth of dead rows.
        R"sql(
CREATE TABLE queue (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    payload BYTEA NOT NULL,
    send_key TEXT,
    event_id TEXT,
    enqueued_at BIGINT NOT NULL,
    visible_at BIGINT NOT NULL,
    lease_owner TEXT,
    receive_count INTEGER NOT NULL DEFAULT 0,
    redrive_count INTEGER NOT NULL DEFAULT 0
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.01);
CREATE INDEX queue_visible ON queue(visible_at);
CREATE TABLE ledger (
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    send_key TEXT PRIMARY KEY,
    event_id TEXT,
    user_id TEXT NOT NULL,
    reminder_id TEXT NOT NULL,
    scheduled_at BIGINT NOT NULL,
    destination TEXT NOT NULL,
    channel TEXT,
    payload BYTEA NOT NULL,
    state TEXT NOT NULL,
    owner_message TEXT,
    owner_delivery INTEGER,
    owner_worker TEXT,
    claim_expires_at BIGINT,
    sends INTEGER NOT NULL DEFAULT 0,
    round_sends INTEGER NOT NULL DEFAULT 0,
    duplicates INTEGER NOT NULL DEFAULT 0,
    redrives INTEGER NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    first_sent_at BIGINT,
    applied_at BIGINT,
    last_http_status INTEGER,
    last_error_class TEXT,
    last_error TEXT,
    provider_request_id TEXT
);
CREATE UNIQUE INDEX ledger_seq ON ledger(seq);
CREATE INDEX ledger_user ON ledger(user_id, seq);
CREATE INDEX ledger_state ON ledger(state, seq);
CREATE INDEX ledger_event ON ledger(event_id);
CREATE INDEX ledger_destination ON ledger(destination, seq);
CREATE INDEX ledger_reminder ON ledger(reminder_id, seq);
CREATE TABLE attempts (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    send_key TEXT,
    event_id TEXT,
    message_id TEXT,
    delivery INTEGER,
    worker_id TEXT,
    at BIGINT NOT NULL,
    step TEXT NOT NULL,
    outcome TEXT NOT NULL,
    http_status INTEGER,
    latency_ms BIGINT,
    error_class TEXT,
    error TEXT,
    provider_request_id TEXT
);
CREATE INDEX attempts_key ON attempts(send_key, id);
CREATE INDEX attempts_at ON attempts(at);
CREATE TABLE dead_letters (
    id TEXT PRIMARY KEY,
    payload BYTEA NOT NULL,
    send_key TEXT,
    event_id TEXT,
    error_class TEXT NOT NULL,
    last_error TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    first_attempt_at BIGINT,
    last_attempt_at BIGINT,
    dead_at BIGINT NOT NULL,
    enqueued_at BIGINT,
    receive_count INTEGER NOT NULL DEFAULT 0,
    redrive_count INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX dead_letters_class ON dead_letters(error_class, dead_at);
CREATE INDEX dead_letters_dead_at ON dead_letters(dead_at);
CREATE TABLE audit_log (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at BIGINT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    detail TEXT,
    count BIGINT NOT NULL DEFAULT 0
);
)sql",
    },
    // 2: queue samples for the console's charts, written by every worker
    {
        R"sql(
CREATE TABLE queue_samples (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    ready INTEGER NOT NULL,
    in_flight INTEGER NOT NULL,
    delayed INTEGER NOT NULL,
    dead INTEGER NOT NULL,
    oldest_ready_age_ms INTEGER
);
CREATE INDEX queue_samples_at ON queue_samples(at);
)sql",
        R"sql(
CREATE TABLE queue_samples (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at BIGINT NOT NULL,
    ready BIGINT NOT NULL,
    in_flight BIGINT NOT NULL,
    delayed BIGINT NOT NULL,
    dead BIGINT NOT NULL,
    oldest_ready_age_ms BIGINT
);
CREATE INDEX queue_samples_at ON queue_samples(at);
)sql",
    },
    // 3: the worker registry
    {WorkersTable, WorkersTable},
    // 4: when the current claim of a key was taken, so that an event in doubt can say
    // "claimed at T by W, may have been sent" (a claim has no history row of its own)
    {"ALTER TABLE ledger ADD COLUMN claimed_at INTEGER", "ALTER TABLE ledger ADD COLUMN claimed_at BIGINT"},
    // 5: every delivery's event id finds its event, also a duplicate's, whose id the
    // ledger row (written by the first delivery) does not hold
    {"CREATE INDEX attempts_event ON attempts(event_id)",
     "CREATE INDEX attempts_event ON attempts(event_id)"},
    // 6: whether each partner honours Idempotency-Key, as an operator recorded it, so that
    // every console and `once history` word an event's verdict from the same answer
    {PartnersTable, PartnersTable},
    // 7: an operator action's rate and reason in the audit log, and the history rows it
    // wrote name its audit row: each event's story says which redrive, discard or decision
    // touched it, and each audit row finds the events it touched (a partial index: only
    // operators' rows have one)
    {
        R"sql(
ALTER TABLE audit_log ADD COLUMN rate INTEGER;
ALTER TABLE audit_log ADD COLUMN reason TEXT;
ALTER TABLE attempts ADD COLUMN audit_id INTEGER;
CREATE INDEX attempts_audit ON attempts(audit_id) WHERE audit_id IS NOT NULL;
)sql",
        R"sql(
ALTER TABLE audit_log ADD COLUMN rate INTEGER;
ALTER TABLE audit_log ADD COLUMN reason TEXT;
ALTER TABLE attempts ADD COLUMN audit_id BIGINT;
CREATE INDEX attempts_audit ON attempts(audit_id) WHERE audit_id IS NOT NULL;
)sql",
    },
    // 8: each worker's view of the partner in its heartbeat (its circuit breaker, the
    // spell of failed sends since its last accepted one), so the console raises a
    // partner outage whoever runs the workers
    {WorkersPartnerHealth, WorkersPartnerHealth},
    // 9: `once serve`'s idempotency keys: a publish repeating a key within 24 hours gets
    // the first message's id back and enqueues nothing, also after a restart
    {
        R"sql(
CREATE TABLE publish_keys (
    queue_name TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    message_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (queue_name, idempotency_key)
);
CREATE INDEX publish_keys_created ON publish_keys(created_at);
)sql",
        R"sql(
CREATE TABLE publish_keys (
    queue_name TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    message_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (queue_name, idempotency_key)
);
CREATE INDEX publish_keys_created ON publish_keys(created_at);
)sql",
    },
    // 10: the ledger's counts by state and of duplicates, kept by triggers as rows change,
    // so that `once stats` and the console's overview read a few rows instead of counting
    // ten million. Statements are separated by lines holding a lone "/", as the trigger
    // bodies hold semicolons of their own.
    {LedgerTotalsSqlite, LedgerTotalsPostgres},
    // 11: the dead letters' keyset pages walk (dead_at, id), the list's order, through an
    // index of both, so that a page needs no sort of the letters that died in the same
    // span; by class through (error_class, dead_at, id) likewise. Each supersedes the
    // index it extends. IF [NOT] EXISTS: a store made at schema 11 and set back to an older
    // version by a test already has them.
    {DeadLettersKeysetIndexes, DeadLettersKeysetIndexes},
    // 12: the Overview's sends per bucket over a day, `once stats` and the partner's
    // activity count attempts in a window by step and outcome. With those two columns in
    // the index of the window's times the count reads the index alone: at ten million
    // events a day held 436,000 attempts, and looking each row up for its step and
    // outcome made the Overview's day 273 ms. It supersedes the index of times alone.
    {AttemptsWindowIndex, AttemptsWindowIndex},
    // 13: the counts' triggers on PostgreSQL write their changes themselves, planned once
    // per connection instead of on every call.
    {"", LedgerTotalsPlannedOncePostgres},
    // 14: on PostgreSQL the ids and keys compare by their bytes whatever the database's
    // collation, so that a prefix search goes through their indexes. SQLite's already do.
    {"", IdsCompareByBytesPostgres},
    // 15: a key's history is indexed under the time its ledger row was created, then the
    // key, so that recording outcomes appends to the index instead of scattering over it.
    {AttemptsByKeyCreation, AttemptsByKeyCreation},
    // 16: once serve's idempotency keys per producer, with what was published under them.
    {PublishKeysByProducer, PublishKeysByProducer},
    // 17: each worker's last spell without its store in its heartbeat (when it lost the
    // connection, when it had it back), so that a worker that was cut off says so
    {WorkersStoreLoss, WorkersStoreLoss},
    // 18: what each worker does with a send left in doubt (it holds where the store records
    // that its partner does not honour the key, whatever it was started with), and the
    // status of its partner's last failure (a refused credential is told apart).
    {WorkersInDoubtPolicy, WorkersInDoubtPolicy},
    // 19: a worker sends to several partners (--partners): each send names the partner
    // it went to and its profile, and each worker's heartbeat carries every partner's
    // breaker and spell (JSON) and the name of the one failing longest.
    {SendsNamePartners, SendsNamePartners},
    // 20: delivery events from the providers (`once serve`, POST /v1/partners/NAME/events):
    // each event recorded once per partner and provider event id, however often the
    // provider retries its webhook; and a key found by the provider's message id, which
    // is all some events name (Resend's tag carries only a digest of a key with ':').
    {PartnerEventsOnce, PartnerEventsOnce},
    // 21: an operator pauses a partner (maintenance, a complaint, a bill): when, by whom
    // and why, read by every worker on the store each half second, so that they stop
    // sending to it within a second and put its reminders back without spending a try.
    {PartnersPause, PartnersPause},
    // 22: alert thresholds in the store, incidents with their notes, and the watchers'
    // lease (issue: alerts that reach people away from the console).
    {AlertsAndIncidentsSqlite, AlertsAndIncidentsPostgres},
    // 23: each key's expiry, written by its claim; its keys end in state 'expired' when it
    // passes before their send (issue 43). ledger_totals counts that state as any other.
    {LedgerExpiresAtSqlite, LedgerExpiresAtPostgres},
};

} // namespace

int latestSchemaVersion()
{
    return int(std::size(Migrations));
}

QStringList migrationStatements(int fromVersion, bool postgres)
{
    const Migration &migration = Migrations[fromVersion];
    const QString text = QString::fromLatin1(postgres ? migration.postgres : migration.sqlite);
    // A script with trigger bodies, which hold semicolons, separates its statements with
    // lines holding a lone "/".
    static const QRegularExpression slashLine(QStringLiteral("\\n/\\n"));
    QStringList statements = text.contains(slashLine) ? text.split(slashLine) : text.split(QLatin1Char(';'));
    statements.removeIf([](const QString &statement) { return statement.trimmed().isEmpty(); });
    return statements;
}

} // namespace once
