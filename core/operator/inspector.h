#pragma once

#include "model/deadletter.h"
#include "model/partnerpolicy.h"
#include "model/searchtext.h"
#include "queues/messagequeue.h"
#include "store/ledger.h"
#include "text/jsonvalues.h"

#include <QJsonArray>
#include <QJsonObject>

class QSqlQuery;

#include <functional>
#include <optional>

namespace once {

class Database;

struct DeliveryStats
{
    QueueCounts queue;
    qint64 acked = 0;          // keys applied (a key published twice counts once)
    qint64 inDoubt = 0;        // keys held for an operator
    qint64 claimed = 0;        // keys a worker is sending now
    qint64 retrying = 0;       // keys waiting for a retry
    qint64 deadKeys = 0;       // keys dead-lettered
    qint64 expired = 0;        // keys whose reminder expired before it could be sent
    qint64 duplicatesSuppressed = 0; // keys that had at least one duplicate delivery suppressed
    qint64 duplicateDeliveries = 0;  // deliveries suppressed in all
    qint64 appliedLast5Min = 0;
    qint64 sendsLast5Min = 0;
    qint64 failedSendsLast5Min = 0;
    // Of those, the ones since the window's last accepted send, and when they began: a
    // rate over five minutes reads 3% a few seconds into a total outage, and starves as
    // the breaker holds sends back; "the last 31 failed, since 03:50" does not.
    qint64 failedInARowLast5Min = 0;
    qint64 failingSinceMs = 0; // 0: none failed since the last accepted send
    std::optional<qint64> latenessP50Ms; // accepted send's end - scheduled_at, the last hour's latest 5,000
    std::optional<qint64> latenessP95Ms;
    // Each paused partner, with the keys put back for its pause and waiting for its resume
    // (Inspector::heldForPausedPartners: not those no worker has leased since).
    QList<QPair<PartnerPause, qint64>> pausedPartners;
    // For the alert rules: since when the longest-held key has been in doubt (0: none),
    // and how many reminders were dead-lettered in the last 15 minutes.
    qint64 oldestInDoubtSinceMs = 0;
    qint64 deadLetteredLast15Min = 0;

    QJsonObject toJson() const;
};

// "0: 12 behind (committed 40, end 52); 1: none behind (...)": a partitioned queue's lag,
// for the command line and the console alike.
QString describePartitionLags(const QList<PartitionLag> &partitions);

// An event not in the ledger yet: its message waits in the store's queue and no worker has
// claimed its key. Support must not read "not found" as "never sent".
namespace EventState {
inline constexpr QLatin1String Queued("queued");
} // namespace EventState

struct EventRow
{
    QByteArray sendKey;
    QString eventId;
    QString userId;
    QString reminderId;
    QString destination;
    QString channel;
    QString state;
    qint64 scheduledAtMs = 0;
    qint64 createdAtMs = 0;
    qint64 updatedAtMs = 0;
    qint64 firstSentAtMs = 0;
    qint64 appliedAtMs = 0;
    int sends = 0;
    int duplicates = 0;
    int redrives = 0;
    int lastHttpStatus = 0;
    QString lastErrorClass;
    QString lastError;
    QString providerRequestId;
    QByteArray payload;
    QString claimedBy;          // the worker of the key's current (or last) claim
    qint64 claimedAtMs = 0;     // 0: not known
    qint64 claimExpiresAtMs = 0; // 0: no claim pending (an outcome was recorded)
    qint64 dueAtMs = 0;          // queued: when its message becomes ready (later than createdAtMs for a delay)
    qint64 expiresAtMs = 0;      // when its reminder stops being worth sending, as claimed (schema 23); 0: never
    // Filled by Inspector::event only (a list of events leaves them empty): the partner
    // of the event's latest send and whether it honours Idempotency-Key, as recorded.
    QString partner;
    KeyHonouring partnerHonoursKey = KeyHonouring::Unknown;
    // Filled for a list of events in doubt (Inspector::inDoubt, the console's In doubt
    // page): what the partner said when asked for it (KeyReconciliation::summary()).
    QString reconciliation;
    // Where the row sits in the events list's order, newest first: a message waiting in the
    // queue at QueuedPositions + its queue id, above every ledger row (at its seq). A
    // list's next page starts below the last row's position (EventFilter::below).
    qint64 listPosition = 0;
    static constexpr qint64 QueuedPositions = qint64(1) << 62;

    QJsonObject toJson() const;
    // For an event in doubt: what is known of its last send, in one line ("claimed by W at
    // T, may have been sent (the claim ran out at T2 without a recorded outcome)").
    // Its times are in UTC unless time words them otherwise (a verdict's local time).
    QString whatIsKnown(const std::function<QString(qint64)> &time = formatTime) const;
};

struct EventFilter
{
    // A search (EventSearch below): user id, destination, reminder id, send key or event id,
    // exactly; "prefix*" for ids and destinations starting so; "body:text" for text anywhere
    // in the message. A search also finds messages waiting in the store's queue.
    QString text;
    QString userId; // exact; the ledger only
    QString state;  // a LedgerState, EventState::Queued, or empty for all
    // What the history says of the partner calls (see Verdict::possibleEffects).
    enum class Calls
    {
        Any,
        SeveralEffects, // two or more calls that may each have acted, at a partner not recorded as honouring the key
        Unanswered,     // a call written and left without an answer, or whose worker died before recording it
    };
    Calls calls = Calls::Any;
    // Only events with something in their history (a claim, a send, an operator's
    // decision) in [sinceMs, untilMs), or, waiting in the queue, enqueued then. 0: open.
    qint64 sinceMs = 0;
    qint64 untilMs = 0;
    // Written: newest written first (listPosition is the row's seq). MostSends: the most
    // partner calls first, newest first among equals; listPosition is then sends << 40 |
    // seq, and messages waiting in the queue (no sends) are not listed.
    enum class Order
    {
        Written,
        MostSends,
    };
    Order order = Order::Written;
    qint64 auditId = 0; // only the events this audit log row's action touched (0: any)
    int limit = 100;
    // Only rows below this list position (EventRow::listPosition of the last row of the
    // page before); 0: from the top.
    qint64 below = 0;
    // The ledger's rows in the order they were written, oldest first, and no queued
    // messages: a list that shows the oldest on top grows downwards as pages arrive.
    bool oldestFirst = false;
    // A search (text, user or audit row) is counted up to one more than this: more reads
    // "more than CountLimit". The whole ledger and its states are counted exactly.
    static constexpr qint64 CountLimit = 100000;
    bool countIsBounded() const
    {
        return !text.trimmed().isEmpty() || !userId.isEmpty() || auditId > 0 || calls != Calls::Any || sinceMs > 0
               || untilMs > 0;
    }
    static constexpr int SendsShift = 40;
};

struct AuditEntry
{
    qint64 id = 0;
    qint64 atMs = 0;
    QString actor;
    QString action;
    QString detail;
    qint64 count = 0;
    int ratePerSecond = 0; // a redrive's pace (0: none given, or not a redrive)
    QString reason{};      // what the operator typed, if anything
    // A redrive's outcome as far as it is known when read: of the letters it moved, how
    // many were delivered since and how many died again; the rest are on their way (or
    // had no send key to follow, as a message that never parsed).
    struct Outcome
    {
        qint64 delivered = 0;
        qint64 diedAgain = 0;
    };
    std::optional<Outcome> outcome{};

    QJsonObject toJson() const;
};

// What became of the letters one redrive put back (the "redriven" rows naming its audit
// row), from each key's history after that row, as far as it has gone.
struct RedriveEndings
{
    qint64 redriven = 0;
    qint64 applied = 0;   // an accepted send, or found applied already (a duplicate)
    qint64 diedAgain = 0;
    qint64 expired = 0;   // settled expired, not sent
    qint64 keysFailed = 0; // keys with a failed send since (throttled answers aside)
    qint64 failedSends = 0;
    QString lastErrorClass; // of the latest failed send

    qint64 settled() const { return applied + diedAgain + expired; }
};

// What the partner answered in a recent window, from the history: whether it is taking
// sends now, as far as the store can tell.
struct PartnerActivity
{
    qint64 sinceMs = 0;
    qint64 sends = 0;       // partner calls made in the window
    qint64 failed = 0;      // of them, not accepted (an error, no answer, a rejection)
    qint64 lastAcceptedAtMs = 0; // the latest accepted send of the last day (0: none)
    qint64 lastSendAtMs = 0;     // the latest send of the last day (0: none)
};

// What reconciliation knows of a key left in doubt: the partner its last send went to,
// when, and what that partner said when asked for it since (the history's reconcile rows).
struct KeyReconciliation
{
    QByteArray sendKey;
    QString partner;        // of the last send; empty when the history does not name one
    QString partnerProfile;
    qint64 lastSentAtMs = 0;
    int lookups = 0;        // questions asked since that send
    qint64 lastLookupAtMs = 0;
    QString lastOutcome;    // found | not-found | lookup-failed; empty: never asked
    QString lastText;       // the history's words for the last answer

    // "not asked yet", "not found at postmark at T (asked 2 times)", for the In doubt page.
    QString summary() const;
};

QJsonObject attemptToJson(const Attempt &attempt);

// The query of a page of dead letters (Inspector::deadLetters), with the values to bind
// in order, the limit last: one place for it, so that a test can ask the store for its
// plan (which index it walks).
QString deadLetterPageSql(const DeadLetterFilter &filter, bool postgres, QVariantList *values);

// Read-only questions about a store, for `once stats`, `history`, `events`, `dlq`,
// `in-doubt` and the console. Never writes.
class Inspector final
{
public:
    Inspector(Database &db, MessageQueue &queue) : m_db(db), m_queue(queue) {}

    std::optional<DeliveryStats> stats(QString *error);
    // Finds an event by send key or event id.
    std::optional<EventRow> event(const QString &keyOrEventId, QString *error);
    std::optional<QList<Attempt>> attempts(const QByteArray &sendKey, QString *error);
    std::optional<QList<EventRow>> events(const EventFilter &filter, QString *error);
    std::optional<qint64> countEvents(const EventFilter &filter, QString *error);
    // Messages in the store's queue that a filter lists (no worker has claimed their key).
    std::optional<qint64> countQueued(const EventFilter &filter, QString *error);
    // A page of dead letters (the filter's order, cursor and limit).
    std::optional<QList<DeadLetter>> deadLetters(const DeadLetterFilter &filter, QString *error);
    // One letter with its payload, by message id (an error when it is gone).
    std::optional<DeadLetter> deadLetter(const QString &id, QString *error);
    // Fills each letter's keyState and expiresAtMs from its key's ledger row, in one read
    // for the lot (a page); where the row records no expiry, from the letter's payload
    // (its own expires_at), when the letter carries it. A broker's letters too.
    bool noteKeyStates(QList<DeadLetter> *letters, QString *error);
    // The letters a filter takes (its cursor and limit aside), counted by error class;
    // firstSentBeforeMs: the moment DeadLetterTally::firstSentBefore counts up to.
    std::optional<DeadLetterCounts> countDeadLetters(const DeadLetterFilter &filter, qint64 firstSentBeforeMs,
                                                     QString *error);
    std::optional<QList<EventRow>> inDoubt(QString *error);
    // Of each key (in doubt), what reconciliation knows; the keys in their order.
    std::optional<QList<KeyReconciliation>> reconciliation(const QList<QByteArray> &keys, QString *error);
    // Fills each row's reconciliation (rows of events in doubt).
    bool describeReconciliation(QList<EventRow> &rows, QString *error);
    // The latest entries, each redrive with its outcome so far.
    std::optional<QList<AuditEntry>> auditLog(int limit, QString *error);
    std::optional<RedriveEndings> redriveEndings(qint64 auditId, QString *error);
    // The entries written in [sinceMs, untilMs], oldest first, at most limit, each redrive
    // with its outcome so far: what operators did during an incident.
    std::optional<QList<AuditEntry>> auditLogBetween(qint64 sinceMs, qint64 untilMs, int limit, QString *error);
    // Every partner the store knows: those with a recorded policy and those workers send to.
    std::optional<QList<PartnerPolicy>> partners(QString *error);
    // What the store records of one partner (named as partnerName() names it).
    std::optional<KeyHonouring> recordedKeyHonouring(const QString &partner, QString *error);
    // The partners an operator has paused (a few rows: workers read it twice a second).
    std::optional<QList<PartnerPause>> pausedPartners(QString *error);
    // For each paused partner, the keys put back because of its pause and still waiting
    // (retrying, their last put-back "partner-paused"). Reminders not yet leased since the
    // pause are not counted: the store knows their channel, not the partner it routes to.
    std::optional<QList<QPair<PartnerPause, qint64>>> heldForPausedPartners(QString *error);
    std::optional<PartnerActivity> partnerActivity(qint64 sinceMs, QString *error);

private:
    std::optional<QList<AuditEntry>> readAudit(QSqlQuery &query, QString *error);

    Database &m_db;
    MessageQueue &m_queue;
};

} // namespace once
