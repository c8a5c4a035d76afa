#include "store/migrations.h"

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
    {"CREATE INDEX attempts_event ON attempts(event_id)", "CREATE INDEX attempts_event ON attempts(event_id)"},
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
};

} // namespace

int latestSchemaVersion()
{
    return int(std::size(Migrations));
}

const char *migrationScript(int fromVersion, bool postgres)
{
    const Migration &migration = Migrations[fromVersion];
    return postgres ? migration.postgres : migration.sqlite;
}

} // namespace once
