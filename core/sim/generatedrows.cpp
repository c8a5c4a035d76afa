#include "sim/generatedrows.h"

#include <QStringList>

#include <algorithm>
#include <iterator>
#include <numeric>
#include <random>

namespace once {

namespace {

constexpr qint64 DayMs = 24LL * 3600 * 1000;
// `once worker`'s defaults: a retryable failure is sent MaxAttempts times, the k-th retry
// waiting BackoffBaseMs * 2^(k-1); a send without an answer waits SendTimeoutMs; a claim
// lasts LeaseMs.
constexpr int MaxAttempts = 8;
constexpr qint64 BackoffBaseMs = 1000;
constexpr qint64 SendTimeoutMs = 10000;
constexpr qint64 LeaseMs = 60000;
constexpr qint64 SampleIntervalMs = 5000; // how often a worker samples the queue
// The modulus of the hashes: a prime below 2^31, so that products of two residues fit
// in 64-bit integers in both dialects.
constexpr qint64 Prime = 2147483647;
// Users are drawn as rank = users * x^2 for x uniform in [0, 1), x with this many bits:
// low ranks (frequent users, shuffled below) get many events, high ranks few.
constexpr qint64 UserDrawBits = 20;

const char *const PartnerHost = "partner.example.com:443";

// The workers that claimed the events, as `once worker` names itself (host:pid); the
// generator registers them (LedgerGenerator::insertWorkers).
const char *const Workers[] = {"reminders-1:41872", "reminders-2:41877", "reminders-3:40211", "reminders-4:39950"};

// What reminders are about: the id's prefix and the message's body.
struct Kind
{
    const char *name;
    const char *body;
};
const Kind Kinds[] = {
    {"appointment", "Your appointment is tomorrow at 10:00"},
    {"payment", "Your payment of 42.00 EUR is due on Friday"},
    {"delivery", "Your parcel arrives today between 14:00 and 16:00"},
    {"renewal", "Your subscription renews in 7 days"},
    {"checkup", "Time for your yearly check-up: book a slot"},
    {"class", "Your yoga class starts in one hour"},
};

// How dead events died, and how often (weights out of ten), in PartnerSender's words.
struct Failure
{
    const char *errorClass;
    int httpStatus; // 0: no answer
    const char *error;
    bool retryable; // sent MaxAttempts times before it died; else once
    int weight;
};
const Failure Failures[] = {
    {"http-5xx", 503, "HTTP 503: upstream unavailable", true, 6},
    {"rejected", 400, "HTTP 400: destination is not a valid address", false, 2},
    {"rate-limited", 429, "HTTP 429: too many requests", true, 1},
    {"connect-failed", 0, "could not connect to partner.example.com:443: Connection refused", true, 1},
};

// The ledger's states as the staged rows number them (state_no).
enum StateNo { Applied, InDoubt, Dead, Retrying, Claimed, StateCount };
const char *const StateNames[StateCount] = {"applied", "in_doubt", "dead", "retrying", "claimed"};

QString number(qint64 value)
{
    return QString::number(value);
}

QString quoted(const QString &text)
{
    return QLatin1Char('\'') + text + QLatin1Char('\'');
}

QString quoted(const char *text)
{
    return quoted(QLatin1String(text));
}

QString text(const QString &value)
{
    return QStringLiteral("CAST(%1 AS TEXT)").arg(value);
}

// "CASE expression WHEN 0 THEN values[0] WHEN 1 THEN ... END"
QString caseOf(const QString &expression, const QStringList &values)
{
    QString sql = QStringLiteral("CASE ") + expression;
    for (qsizetype i = 0; i < values.size(); ++i)
        sql += QStringLiteral(" WHEN %1 THEN %2").arg(number(i), values.at(i));
    return sql + QStringLiteral(" END");
}

// One value per ledger state, in StateNo order.
QString byState(const QString &applied, const QString &inDoubt, const QString &dead, const QString &retrying,
                const QString &claimed)
{
    return caseOf(QStringLiteral("state_no"), {applied, inDoubt, dead, retrying, claimed});
}

// One value per kind of failure, from Failures.
template <typename Value> QString byFailure(Value value)
{
    QStringList values;
    for (const Failure &failure : Failures)
        values << value(failure);
    return caseOf(QStringLiteral("failure_no"), values);
}

const QString Null = QStringLiteral("NULL");

// What the ledger row says of the key's last send, by state (staged once, read by the
// ledger's rows and the history's).
QString lastHttpStatus()
{
    return byState(QStringLiteral("200"), Null,
                   byFailure([](const Failure &f) { return f.httpStatus ? number(f.httpStatus) : Null; }),
                   QStringLiteral("503"), Null);
}

QString lastErrorClass()
{
    return byState(Null, QStringLiteral("CASE WHEN ran_out = 0 THEN 'in-doubt' END"),
                   byFailure([](const Failure &f) { return quoted(f.errorClass); }), QStringLiteral("'http-5xx'"), Null);
}

QString lastError()
{
    return byState(Null,
                   QStringLiteral("CASE WHEN ran_out = 0 THEN 'no complete response from %1 within %2 ms' END")
                       .arg(QLatin1String(PartnerHost), number(SendTimeoutMs)),
                   byFailure([](const Failure &f) { return quoted(f.error); }),
                   QStringLiteral("'HTTP 503: upstream unavailable'"), Null);
}

// The engine's reason in the dead letter: how many attempts it gave up after, if it tried again.
QString deadLetterReason()
{
    return byFailure([](const Failure &f) {
        return quoted(f.retryable ? QStringLiteral("gave up after %1 attempts: %2").arg(number(MaxAttempts), QLatin1String(f.error))
                                  : QLatin1String(f.error));
    });
}

QString failureIsRetryable()
{
    return byFailure([](const Failure &f) { return number(f.retryable ? 1 : 0); }) + QStringLiteral(" = 1");
}

// When send k of an event left: the first just after its claim, each retry after its backoff.
QString sendAt()
{
    return QStringLiteral("first_sent_at + ((1 << CAST(k - 1 AS INTEGER)) - 1) * %1").arg(BackoffBaseMs);
}

const QString Tries = QStringLiteral("tries(k) AS (VALUES (1), (2), (3), (4), (5), (6), (7), (8))");
static_assert(MaxAttempts == 8, "Tries lists one row per attempt");

// Each row is filed under the time its key's ledger row was created, as the engine files
// it (SqlLedger::insertAttempts): the last column of every select below.
const QString AttemptColumns = QStringLiteral(
    "INSERT INTO attempts (send_key, event_id, message_id, delivery, worker_id, at, step, outcome, http_status, "
    "latency_ms, error_class, error, provider_request_id, key_created_at)\n");

// The numbers the SQL is built from, all drawn from the seed: the same seed, the same store.
struct Draws
{
    // Hash k of n is ((n * a + b) % Prime) * ((n * c + d) % Prime) % Prime: a quadratic
    // modulo a prime, which both dialects compute exactly in 64-bit integers.
    struct Hash
    {
        qint64 a = 0, b = 0, c = 0, d = 0;
    };
    Hash hashes[4];
    // Bijections n -> (n * multiplier + offset) mod a modulus, for ids and ranks.
    qint64 userMultiplier = 1, userOffset = 0;         // mod users: which user a rank is
    qint64 rankMultiplier = 1, rankOffset = 0;         // mod ranked events: which state an event has
    qint64 reminderMultiplier = 1, reminderOffset = 0; // mod 2^32
    qint64 eventMultiplier = 1, eventOffset = 0;       // mod 2^40

    Draws(quint64 seed, qint64 users, qint64 ranked)
    {
        // std::mt19937_64 is specified exactly, so the draws are the same everywhere.
        std::mt19937_64 random(seed);
        const auto below = [&random](qint64 bound) { return bound > 0 ? qint64(random() % quint64(bound)) : 0; };
        const auto coprime = [&below](qint64 modulus) {
            qint64 multiplier = std::max<qint64>(1, below(modulus));
            while (std::gcd(multiplier, modulus) != 1)
                ++multiplier;
            return multiplier;
        };
        for (Hash &hash : hashes)
            hash = {1 + below(Prime - 1), below(Prime), 1 + below(Prime - 1), below(Prime)};
        userMultiplier = coprime(users);
        userOffset = below(users);
        rankMultiplier = ranked > 0 ? coprime(ranked) : 1;
        rankOffset = below(ranked);
        reminderMultiplier = below(1LL << 31) | 1; // odd: a bijection mod 2^32
        reminderOffset = below(1LL << 32);
        eventMultiplier = below(1LL << 23) | 1; // odd, and small enough that n times it fits
        eventOffset = below(1LL << 40);
    }

    QString hash(int k, const QString &n) const
    {
        const Hash &h = hashes[k];
        return QStringLiteral("((%1 * %2 + %3) % %6 * ((%1 * %4 + %5) % %6) % %6)")
            .arg(n, number(h.a), number(h.b), number(h.c), number(h.d), number(Prime));
    }
};

} // namespace

GeneratedRows::GeneratedRows(bool postgres, const LedgerShape &shape) : m_postgres(postgres), m_shape(shape) {}

// The few things SQLite and PostgreSQL spell differently. (Built without QString::arg()
// where the text holds printf's "%08x", which arg() would read as its own "%8".)
QString GeneratedRows::format(const QString &pattern, const QStringList &arguments) const
{
    // printf() and format() agree on "%s" for values of any type.
    return (m_postgres ? QStringLiteral("format(") : QStringLiteral("printf(")) + quoted(pattern) + QStringLiteral(", ")
           + arguments.join(QLatin1String(", ")) + QLatin1Char(')');
}

QString GeneratedRows::hex(const QString &value, int width) const
{
    if (m_postgres)
        return QStringLiteral("lpad(to_hex(%1), %2, '0')").arg(value, number(width));
    return QStringLiteral("printf('%0") + number(width) + QStringLiteral("x', ") + value + QLatin1Char(')');
}

QString GeneratedRows::bytes(const QString &text) const
{
    return m_postgres ? QStringLiteral("convert_to(%1, 'UTF8')").arg(text) : QStringLiteral("CAST(%1 AS BLOB)").arg(text);
}

// makeSendKey: the ids percent-encoded (these have only unreserved characters, which it
// leaves as they are) and the canonical UTC time, joined by ':'.
QString GeneratedRows::sendKey() const
{
    return format(QStringLiteral("%s:%s:%s"), {QStringLiteral("user_id"), QStringLiteral("reminder_id"), QStringLiteral("scheduled")});
}

// The message as producers send it (the demo producer's fields).
QString GeneratedRows::payload() const
{
    QStringList bodies;
    for (const Kind &kind : Kinds)
        bodies << quoted(kind.body);
    return bytes(format(QStringLiteral("{\"user_id\":\"%s\",\"reminder_id\":\"%s\",\"scheduled_at\":\"%s\","
                                       "\"destination\":\"%s\",\"channel\":\"%s\",\"event_id\":\"%s\",\"body\":\"%s\"}"),
                        {QStringLiteral("user_id"), QStringLiteral("reminder_id"), QStringLiteral("scheduled"),
                         QStringLiteral("destination"), QStringLiteral("channel"), QStringLiteral("event_id"),
                         caseOf(QStringLiteral("kind_no"), bodies)}));
}

// Each event n gets three independent hashes, h1 to h3, and everything else follows:
// - its user: a rank drawn with a skew (a few users get many events), shuffled by a
//   bijection so that user numbers say nothing of how frequent they are;
// - its time: the events are spread evenly over the span in claim order, with jitter, so
//   the ledger's order is time order and every user's events are scattered through it;
// - its state: the newest events are claimed, then retrying; the rest are ranked by a
//   bijection of n, and the lowest ranks are dead, then in doubt, then applied, which
//   gives exactly the counts asked for, spread through the whole ledger.
QString GeneratedRows::stage(qint64 first, qint64 last) const
{
    const Draws draws(m_shape.seed, m_shape.users, m_shape.events - m_shape.retrying - m_shape.claimed);
    const qint64 spanMs = m_shape.days * DayMs;
    const qint64 startMs = m_shape.endMs - spanMs;
    const qint64 stepMs = std::max<qint64>(1, spanMs / m_shape.events);
    const qint64 ranked = m_shape.events - m_shape.retrying - m_shape.claimed;
    const QString rank = ranked > 0 ? QStringLiteral("(n * %1 + %2) % %3")
                                          .arg(number(draws.rankMultiplier), number(draws.rankOffset), number(ranked))
                                    : QStringLiteral("0");
    const qint64 userDraws = 1LL << UserDrawBits;
    QString failureNo; // the weights of Failures, over 0..9
    {
        QStringList whens;
        int upTo = 0;
        for (qsizetype i = 0; i < qsizetype(std::size(Failures)); ++i) {
            upTo += Failures[i].weight;
            whens << QStringLiteral("WHEN h2 / 1048576 % 10 < %1 THEN %2").arg(number(upTo), number(i));
        }
        failureNo = QStringLiteral("CASE %1 END").arg(whens.join(QLatin1Char(' ')));
    }
    const QString series =
        m_postgres ? QStringLiteral("series(n) AS (SELECT generate_series(CAST(%1 AS BIGINT), %2))").arg(number(first), number(last))
                   : QStringLiteral("series(n) AS (SELECT %1 UNION ALL SELECT n + 1 FROM series WHERE n < %2)")
                         .arg(number(first), number(last));
    const QString drawn = QStringLiteral("drawn AS (SELECT n, %1 AS h1, %2 AS h2, %3 AS h3 FROM series)")
                              .arg(draws.hash(0, QStringLiteral("n")), draws.hash(1, QStringLiteral("n")),
                                   draws.hash(2, QStringLiteral("n")));
    const QString shaped =
        // Materialized: every column below reads these numbers many times over.
        QStringLiteral("shaped AS MATERIALIZED (SELECT n, h2, h3,\n"
                       " (%1 * (h1 % %2) * (h1 % %2) / %3 * %4 + %5) % %1 AS user_no,\n"
                       " h2 % 10 AS channel_no,\n"
                       " h1 / %2 % %6 AS kind_no,\n"
                       " %7 AS failure_no,\n"
                       " %8 + n * %9 + h3 % %9 AS created_at,\n"
                       " 40 + h3 / 1024 % 1960 AS lateness,\n"
                       " 20 + h2 / 1024 % 380 AS latency,\n")
            .arg(number(m_shape.users), number(userDraws), number(userDraws * userDraws), number(draws.userMultiplier),
                 number(draws.userOffset), number(std::size(Kinds)), failureNo, number(startMs), number(stepMs))
        + QStringLiteral(" CASE WHEN n >= %1 THEN %2 WHEN n >= %3 THEN %4 WHEN %5 < %6 THEN %7 WHEN %5 < %8 THEN %9 "
                         "ELSE %10 END AS state_no,\n")
              .arg(number(m_shape.events - m_shape.claimed), number(Claimed), number(ranked), number(Retrying), rank,
                   number(m_shape.dead), number(Dead), number(m_shape.dead + m_shape.inDoubt), number(InDoubt),
                   number(Applied))
        + QStringLiteral(
            // One event in twenty was published twice, one of those in eight three times.
            " CASE WHEN h3 / 4194304 % 20 = 0 THEN CASE WHEN h3 / 83886080 % 8 = 0 THEN 2 ELSE 1 END ELSE 0 END "
            "AS copies,\n"
            // One applied event in fifty failed once first.
            " CASE WHEN h2 / 67108864 % 50 = 0 THEN 1 ELSE 0 END AS retried,\n"
            // Half the events in doubt lost their worker between claim and send, half
            // sent without getting a complete answer.
            " CASE WHEN h2 / 1048576 % 2 = 0 THEN 1 ELSE 0 END AS ran_out\n"
            " FROM drawn)");
    // sends: the requests that reached (or may have reached) the partner; duplicates: the
    // copies turned away once the key was settled (the newest keys have met none yet).
    const QString sent =
        QStringLiteral("sent AS (SELECT shaped.*, %1 AS sends, %2 AS duplicates FROM shaped)")
            .arg(byState(QStringLiteral("1 + retried"), QStringLiteral("1 - ran_out"),
                         byFailure([](const Failure &f) { return number(f.retryable ? MaxAttempts : 1); }),
                         QStringLiteral("1 + h2 / 67108864 % 3"), QStringLiteral("0")),
                 byState(QStringLiteral("copies"), QStringLiteral("copies"), QStringLiteral("copies"), QStringLiteral("0"),
                         QStringLiteral("0")));
    const QString timed = QStringLiteral(
        "timed AS (SELECT sent.*, (created_at - lateness) / 1000 AS scheduled_s,\n"
        " CASE WHEN sends > 0 THEN created_at + 3 END AS first_sent_at,\n"
        " CASE WHEN sends > 0 THEN created_at + 3 + ((1 << CAST(sends - 1 AS INTEGER)) - 1) * %1 END AS last_send_at\n"
        " FROM sent)")
                              .arg(BackoffBaseMs);

    QStringList kindNames;
    for (const Kind &kind : Kinds)
        kindNames << quoted(kind.name);
    QStringList workers;
    for (const char *worker : Workers)
        workers << quoted(worker);
    QStringList states;
    for (const char *state : StateNames)
        states << quoted(state);
    const QString userNo = text(QStringLiteral("user_no"));
    const QString columns = QStringList{
        QStringLiteral("n"),
        QStringLiteral("'user-' || %1 AS user_id").arg(userNo),
        QStringLiteral("%1 || '-' || %2 AS reminder_id")
            .arg(caseOf(QStringLiteral("kind_no"), kindNames),
                 hex(QStringLiteral("(n * %1 + %2) % 4294967296").arg(number(draws.reminderMultiplier), number(draws.reminderOffset)), 8)),
        QStringLiteral("'evt-' || %1 AS event_id")
            .arg(hex(QStringLiteral("(n * %1 + %2) % 1099511627776").arg(number(draws.eventMultiplier), number(draws.eventOffset)), 10)),
        (m_postgres ? QStringLiteral("to_char(to_timestamp(scheduled_s) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')")
                    : QStringLiteral("strftime('%Y-%m-%dT%H:%M:%SZ', scheduled_s, 'unixepoch')"))
            + QStringLiteral(" AS scheduled"),
        QStringLiteral("scheduled_s * 1000 AS scheduled_at"),
        QStringLiteral("CASE WHEN channel_no < 5 THEN 'email' WHEN channel_no < 9 THEN 'sms' ELSE 'webhook' END AS channel"),
        QStringLiteral("CASE WHEN channel_no < 5 THEN 'user' || %1 || '@example.com' WHEN channel_no < 9 THEN '+1555' || %2 "
                       "ELSE 'https://hooks.example.com/u/' || %1 END AS destination")
            .arg(userNo, m_postgres ? QStringLiteral("lpad(%1, 7, '0')").arg(userNo)
                                    : QStringLiteral("printf('%07d', user_no)")),
        QStringLiteral("kind_no"),
        QStringLiteral("state_no"),
        QStringLiteral("failure_no"),
        QStringLiteral("ran_out"),
        QStringLiteral("duplicates"),
        QStringLiteral("sends"),
        QStringLiteral("created_at"),
        QStringLiteral("first_sent_at"),
        QStringLiteral("last_send_at"),
        QStringLiteral("latency"),
        // When the key last changed: its outcome recorded; for a claim that ran out, when
        // the message's next delivery found it and held the key.
        byState(QStringLiteral("last_send_at + latency"),
                QStringLiteral("CASE WHEN ran_out = 1 THEN created_at + %1 + lateness ELSE first_sent_at + %2 END")
                    .arg(number(LeaseMs + 1000), number(SendTimeoutMs)),
                QStringLiteral("last_send_at + latency"), QStringLiteral("last_send_at + latency"),
                QStringLiteral("created_at"))
            + QStringLiteral(" AS updated_at"),
        QStringLiteral("CASE WHEN state_no = %1 THEN last_send_at + latency END AS applied_at").arg(number(Applied)),
        caseOf(QStringLiteral("h3 / 268435456 % 4"), workers) + QStringLiteral(" AS worker"),
        caseOf(QStringLiteral("state_no"), states) + QStringLiteral(" AS state"),
        lastHttpStatus() + QStringLiteral(" AS last_http_status"),
        lastErrorClass() + QStringLiteral(" AS last_error_class"),
        lastError() + QStringLiteral(" AS last_error"),
    }.join(QLatin1String(",\n "));
    // Concatenated, not arg(): the columns hold printf's "%07d".
    return QStringLiteral("CREATE TEMP TABLE staged AS WITH RECURSIVE ") + series + QStringLiteral(",\n") + drawn
           + QStringLiteral(",\n") + shaped + QStringLiteral(",\n") + sent + QStringLiteral(",\n") + timed
           + QStringLiteral("\nSELECT ") + columns + QStringLiteral("\nFROM timed");
}

// The ledger row as the engine leaves it for each outcome (SqlLedger's claim and record).
QString GeneratedRows::ledgerRows() const
{
    const QString claimExpiresAt = byState(Null, QStringLiteral("CASE WHEN ran_out = 1 THEN created_at + %1 END").arg(LeaseMs),
                                           Null, Null, QStringLiteral("created_at + %1").arg(LeaseMs));
    return QStringLiteral(
               "INSERT INTO ledger (send_key, event_id, user_id, reminder_id, scheduled_at, destination, channel, payload, "
               "state, owner_message, owner_delivery, owner_worker, claim_expires_at, sends, round_sends, duplicates, "
               "redrives, created_at, updated_at, first_sent_at, applied_at, last_http_status, last_error_class, "
               "last_error, provider_request_id, claimed_at)\nSELECT ")
           + QStringList{sendKey(),
                         QStringLiteral("event_id, user_id, reminder_id, scheduled_at, destination, channel"),
                         payload(),
                         QStringLiteral("state"),
                         text(QStringLiteral("n + 1")),
                         // Each try of a message is a delivery of its own.
                         byState(QStringLiteral("sends"), QStringLiteral("1"), QStringLiteral("sends"),
                                 QStringLiteral("sends"), QStringLiteral("1")),
                         QStringLiteral("worker"),
                         claimExpiresAt,
                         QStringLiteral("sends, sends, duplicates, 0, created_at, updated_at, first_sent_at, applied_at, "
                                        "last_http_status, last_error_class, last_error"),
                         QStringLiteral("CASE WHEN state_no = %1 THEN 'req_' || %2 END").arg(number(Applied), text(QStringLiteral("n + 1"))),
                         // Every try takes the claim again.
                         QStringLiteral("CASE WHEN sends > 1 THEN last_send_at - 3 ELSE created_at END")}
                 .join(QLatin1String(",\n "))
           + QStringLiteral("\nFROM staged");
}

// A row for every send: the last one's outcome is the key's; a failure before it was
// transient (it was tried again).
QString GeneratedRows::sendRows() const
{
    const QString failedFirst = QStringLiteral("state_no = %1 AND k < sends").arg(number(Applied));
    const QString outcome =
        QStringLiteral("CASE WHEN k < sends THEN 'transient' ELSE %1 END")
            .arg(byState(QStringLiteral("'applied'"), QStringLiteral("'held'"),
                         QStringLiteral("CASE WHEN %1 THEN 'transient' ELSE 'permanent' END").arg(failureIsRetryable()),
                         QStringLiteral("'transient'"), Null));
    return QStringLiteral("WITH ") + Tries + QLatin1Char('\n') + AttemptColumns + QStringLiteral("SELECT ")
           + QStringList{sendKey(),
                         QStringLiteral("event_id"),
                         text(QStringLiteral("n + 1")),
                         QStringLiteral("k, worker"),
                         sendAt(),
                         QStringLiteral("'send'"),
                         outcome,
                         QStringLiteral("CASE WHEN %1 THEN 503 ELSE last_http_status END").arg(failedFirst),
                         QStringLiteral("CASE WHEN state_no = %1 AND k = sends THEN latency WHEN state_no = %2 THEN %3 "
                                        "ELSE 25 + 6 * k END")
                             .arg(number(Applied), number(InDoubt), number(SendTimeoutMs)),
                         QStringLiteral("CASE WHEN %1 THEN 'http-5xx' ELSE last_error_class END").arg(failedFirst),
                         QStringLiteral("CASE WHEN %1 THEN 'HTTP 503: upstream unavailable' ELSE last_error END").arg(failedFirst),
                         QStringLiteral("CASE WHEN state_no = %1 AND k = sends THEN 'req_' || %2 END")
                             .arg(number(Applied), text(QStringLiteral("n + 1"))),
                         QStringLiteral("created_at")}
                 .join(QLatin1String(",\n "))
           + QStringLiteral("\nFROM staged JOIN tries ON k <= sends");
}

// After every failed send that is tried again, and for a key retrying now, the retry the
// engine scheduled: its delay as the row's latency, and which try comes next.
QString GeneratedRows::retryRows() const
{
    const QString delay = QStringLiteral("(1 << CAST(k - 1 AS INTEGER)) * %1").arg(BackoffBaseMs);
    return QStringLiteral("WITH ") + Tries + QLatin1Char('\n') + AttemptColumns
           + QStringLiteral("SELECT %1, event_id, %2, k, worker, %3 + 25 + 6 * k, 'retry', 'scheduled', NULL, %4, NULL,\n"
                            " 'next try in ' || %5 || ' ms (try ' || %6 || ' of %7)', NULL, created_at\n"
                            "FROM staged JOIN tries ON k < sends OR (state_no = %8 AND k = sends)\n"
                            // Checked once an event, before its tries: most events have none.
                            "WHERE sends > 1 OR state_no = %8")
                 .arg(sendKey(), text(QStringLiteral("n + 1")), sendAt(), delay, text(delay), text(QStringLiteral("k + 1")),
                      number(MaxAttempts), number(Retrying));
}

// Another copy of a message with the same key: its claim finds the key taken, and the
// copy is acknowledged without a send. Copy k of event n is message k * events + n + 1.
QString GeneratedRows::duplicateRows() const
{
    return QStringLiteral("WITH copies(k, step) AS (VALUES (1, 'claim'), (1, 'ack'), (2, 'claim'), (2, 'ack'))\n")
           + AttemptColumns
           + QStringLiteral(
                 "SELECT %1, event_id, %2, 1, worker, updated_at + 1000 * k + CASE step WHEN 'ack' THEN 1 ELSE 0 END, step,\n"
                 " CASE step WHEN 'claim' THEN 'duplicate' ELSE 'acked' END, NULL, NULL, NULL,\n"
                 " CASE WHEN step = 'ack' THEN NULL ELSE %3 END, NULL, created_at\n"
                 "FROM staged JOIN copies ON k <= duplicates WHERE duplicates > 0")
                 .arg(sendKey(), text(QStringLiteral("k * %1 + n + 1").arg(m_shape.events)),
                      byState(QStringLiteral("'already applied'"), QStringLiteral("'held in doubt for an operator'"),
                              QStringLiteral("'dead-lettered; an operator may redrive it'"), Null, Null));
}

// How a key's story ended when no send settled it: dead-lettered, or held in doubt (a
// send with no complete answer, then the message's ack; or a claim whose worker
// vanished, found run out by the message's next delivery, which held it and was acked).
QString GeneratedRows::closingRows() const
{
    return QStringLiteral("WITH closing(k) AS (VALUES (1), (2))\n") + AttemptColumns
           + QStringLiteral(
                 "SELECT %1, event_id, %2, CASE WHEN state_no = %3 THEN sends WHEN ran_out = 1 THEN 2 ELSE 1 END, worker,\n"
                 " updated_at + k - 1,\n"
                 " CASE WHEN state_no = %3 THEN 'dead-letter' WHEN k = 1 THEN 'claim' ELSE 'ack' END,\n"
                 " CASE WHEN state_no = %3 THEN %4 WHEN k = 1 THEN 'held' ELSE 'acked' END,\n"
                 " NULL, NULL, CASE WHEN state_no = %3 THEN %4 WHEN k = 1 THEN 'in-doubt' END,\n"
                 " CASE WHEN state_no = %3 THEN %5 WHEN k = 1 THEN 'the claim of message ' || %2 || ' delivery 1 on ' || "
                 "worker || ' ended without a recorded outcome' END, NULL, created_at\n"
                 "FROM staged JOIN closing ON (state_no = %3 AND k = 1) OR (state_no = %6 AND (k = 2 OR ran_out = 1))\n"
                 "WHERE state_no IN (%3, %6)")
                 .arg(sendKey(), text(QStringLiteral("n + 1")), number(Dead),
                      byFailure([](const Failure &f) { return quoted(f.errorClass); }), deadLetterReason(), number(InDoubt));
}

// Dead letters keep their message's id and payload, and the engine's reason.
QString GeneratedRows::deadLetters() const
{
    return QStringLiteral("INSERT INTO dead_letters (id, payload, send_key, event_id, error_class, last_error, attempts, "
                          "first_attempt_at, last_attempt_at, dead_at, enqueued_at, receive_count, redrive_count)\n"
                          "SELECT %1, %2, %3, event_id, %4, %5, sends, first_sent_at, updated_at, updated_at, scheduled_at, "
                          "sends, 0\nFROM staged WHERE state_no = %6")
        .arg(text(QStringLiteral("n + 1")), payload(), sendKey(), byFailure([](const Failure &f) { return quoted(f.errorClass); }),
             deadLetterReason(), number(Dead));
}

namespace {

QString queueColumns(bool postgres)
{
    // PostgreSQL's identity column takes given ids only when told to.
    return QStringLiteral("INSERT INTO queue (id, payload, send_key, event_id, enqueued_at, visible_at, lease_owner, "
                          "receive_count, redrive_count)%1\n")
        .arg(postgres ? QStringLiteral(" OVERRIDING SYSTEM VALUE") : QString());
}

} // namespace

// The messages of keys retrying (waiting out their backoff) and claimed (leased by a
// worker) are still in the queue, under the id the ledger names.
QString GeneratedRows::messagesInFlight() const
{
    return queueColumns(m_postgres)
           + QStringLiteral("SELECT n + 1, %1, %2, event_id, scheduled_at,\n"
                            " CASE WHEN state_no = %3 THEN created_at + %4 ELSE updated_at + (1 << CAST(sends - 1 AS INTEGER)) * %5 END,\n"
                            " CASE WHEN state_no = %3 THEN worker END, CASE WHEN state_no = %3 THEN 1 ELSE sends END, 0\n"
                            "FROM staged WHERE state_no IN (%6, %3)")
                 .arg(payload(), sendKey(), number(Claimed), number(LeaseMs), number(BackoffBaseMs), number(Retrying));
}

// Messages published for the next minutes, not claimed by any worker yet: staged events
// past the ledger's last, under ids after every other message's.
QString GeneratedRows::messagesWaiting() const
{
    return queueColumns(m_postgres)
           + QStringLiteral("SELECT n + %1, %2, %3, event_id, %4 - 1000 * (n % 600), scheduled_at, NULL, 0, 0 FROM staged")
                 .arg(number(2 * m_shape.events + 1), payload(), sendKey(), number(m_shape.endMs));
}

QString GeneratedRows::queueSamples() const
{
    const Draws draws(m_shape.seed + 1, 1, 1);
    const qint64 samples = m_shape.days * DayMs / SampleIntervalMs;
    const QString series =
        m_postgres ? QStringLiteral("series(n) AS (SELECT generate_series(CAST(0 AS BIGINT), %1))").arg(samples - 1)
                   : QStringLiteral("series(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM series WHERE n < %1)").arg(samples - 1);
    return QStringLiteral("WITH RECURSIVE %1,\n"
                          "drawn AS (SELECT n, %2 AS h FROM series)\n"
                          "INSERT INTO queue_samples (at, ready, in_flight, delayed, dead, oldest_ready_age_ms)\n"
                          "SELECT %3 + n * %4, h % 40, h / 64 % 16, h / 1024 % 25, %5 * n / %6,\n"
                          " CASE WHEN h % 40 > 0 THEN h / 32768 % 4000 END FROM drawn")
        .arg(series, draws.hash(3, QStringLiteral("n")), number(m_shape.endMs - m_shape.days * DayMs),
             number(SampleIntervalMs), number(m_shape.dead), number(samples));
}

QStringList GeneratedRows::workers()
{
    QStringList names;
    for (const char *worker : Workers)
        names << QLatin1String(worker);
    return names;
}

} // namespace once
