#pragma once

#include "alerting/incidents.h"
#include "delivery/partnersender.h"
#include "operator/inspector.h"
#include "partners/partnerevents.h"

#include <QString>

#include <functional>

#include <optional>

namespace once {

class BrokerQueue;
class Database;
class SqlLedger;
class SqlQueue;

// The OS user running this process; the audit log's "who".
QString currentUserName();

// The audit log's words for which dead letters an action took, the same from the console
// and the command line. Letters picked one by one: their keys, the first few and how many
// more ("keys K1, K2, K3 and 9 more"; a message without a key by its id). Letters taken
// by a filter: the filter ("all error-class=http-5xx since=T until=T").
QString describeLetters(const QList<DeadLetter> &letters);
QString describeFilter(const DeadLetterFilter &filter);
// A redrive's detail in the audit log: the keys when they were named (and the rest of the
// filter), else the filter. The same from `once redrive`, the console and `once serve`.
QString describeRedrive(const DeadLetterFilter &filter, const QList<DeadLetter> &letters);

// The longest reason an operator may give, in characters: a sentence, not a document.
inline constexpr int MaxReasonLength = 500;

// An operator's action as the audit log keeps it: what, on what (the keys, or the filter
// and how many), at what pace, and why, in the operator's own words.
struct AuditAction
{
    QString action; // redrive | discard | resolve-resend | resolve-mark-delivered
    QString detail;
    int ratePerSecond = 0; // a redrive's pace; 0: none
    QString reason;
};

// What became of one delivery event from a provider.
struct PartnerEventRecord
{
    enum class Outcome {
        Recorded,   // in the key's history
        Duplicate,  // the provider's retry of an event recorded before: nothing changed
        UnknownKey, // no key of the ledger: nothing changed
    };
    Outcome outcome = Outcome::UnknownKey;
    QByteArray sendKey;
    bool settled = false; // a delivered event settled the key applied
};

// Operator decisions: redrive and discard dead letters, resolve in-doubt events. Each
// change is one transaction that leaves a row in the audit log and, for every event it
// touched, a row in that event's history naming the audit row (step "operator", the
// operator as its worker, the reason as its error text).
//
// A redrive moves its letters in batches over a while: its audit row is opened first
// (beginAudit) and every batch counts itself into it in its own transaction, so the log
// holds the true count at every moment, also after a crash halfway.
class Operations final
{
public:
    Operations(Database &db, SqlQueue &queue, SqlLedger &ledger, const QString &actor = currentUserName())
        : m_db(db), m_queue(queue), m_ledger(ledger), m_actor(actor)
    {
    }

    const QString &actor() const { return m_actor; }

    // Opens an audit row (with a count the batches add to); returns its id.
    std::optional<qint64> beginAudit(const AuditAction &action, QString *error, qint64 count = 0);
    // Adds a note to an audit row's detail, such as "(cancelled)".
    bool noteInAudit(qint64 auditId, const QString &note, QString *error);

    // Puts dead letters back on the queue unchanged (same payload, so the same send key
    // and event id) and reopens their keys with a fresh attempt budget. Returns how many
    // moved; letters already gone (another operator) are skipped. auditId: the action's
    // row from beginAudit(), which counts them; 0 for none (the queue's own tests).
    std::optional<int> redrive(const QList<DeadLetter> &letters, qint64 auditId, QString *error);
    std::optional<int> discard(const QList<DeadLetter> &letters, qint64 auditId, QString *error);
    // The same for dead letters at a broker, as BrokerQueue::deadLetters listed them. The
    // keys are reopened before the broker moves the messages, so a worker that takes a
    // redriven message at once finds its key open; the history rows follow the move, for
    // the letters the broker did move.
    std::optional<int> redrive(BrokerQueue &queue, const QList<DeadLetter> &letters, qint64 auditId, QString *error);
    std::optional<int> discard(BrokerQueue &queue, const QList<DeadLetter> &letters, qint64 auditId, QString *error);
    // In-doubt decisions, each audited on its own with the operator's reason (may be
    // empty). Resend queues the stored payload again under the same key.
    bool resend(const QByteArray &sendKey, const QString &reason, QString *error);
    bool resend(BrokerQueue &queue, const QByteArray &sendKey, const QString &reason, QString *error);
    bool markDelivered(const QByteArray &sendKey, const QString &reason, QString *error);
    // What the partner said when asked for an in-doubt key (reconciliation): found, the
    // key is settled applied with the provider's message id, as a late 2xx would settle
    // it; not found or unanswered, the key stays in doubt and its history says so.
    bool recordLookup(const QByteArray &sendKey, const QString &partner, const QString &profile,
                      const LookupResult &lookup, QString *error);

    // A provider's delivery event (once serve's events endpoint) in its key's history
    // (step "partner-event", the kind as outcome), once per partner and provider event id.
    // The key is the one the send carried, else found by the provider's message id. A
    // delivered event settles a key not yet applied (in doubt above all) as a late 2xx
    // would; a bounce or failure never unsettles an applied key: the history tells it.
    std::optional<PartnerEventRecord> recordPartnerEvent(const PartnerEvent &event, const QString &partner,
                                                         const QString &profile, const QString &providerName,
                                                         QString *error);

    // Records whether a partner (named as partnerName() names it) honours Idempotency-Key;
    // Unknown forgets what was recorded.
    bool setPartnerPolicy(const QString &partner, KeyHonouring honoursKey, QString *error);
    // Pauses a partner for every worker on the store (they send it nothing until it is
    // resumed and put its reminders back unspent), or resumes it; audited with the reason.
    // Pausing a paused partner keeps its first pause (who and when) and says so.
    bool setPartnerPaused(const QString &partner, bool paused, const QString &reason, QString *error);
    // An alert threshold for the store (partner empty) or one partner; nullopt puts the
    // default back. Audited as alert-threshold.
    bool setAlertThreshold(AlertRule rule, const QString &partner, std::optional<qint64> value, QString *error);
    // Acknowledge, note or resolve an incident, audited as incident-acknowledge and so on.
    bool actOnIncident(qint64 id, Incidents::Action action, const QString &note, QString *error);

    // A finished action in one row (no history rows).
    bool audit(const QString &action, const QString &detail, qint64 count, QString *error);

private:
    bool resendThrough(const QByteArray &sendKey, const QString &reason,
                       const std::function<bool(const OutgoingMessage &, QString *)> &put, QString *error);
    std::optional<QByteArray> inDoubtPayload(const QByteArray &sendKey, QString *error);
    bool settleApplied(const QByteArray &sendKey, qint64 atMs, const QString &providerId, QString *error);
    bool refuseIfAnswered2xx(const QByteArray &sendKey, QString *error);
    // The ledger's key an event names, or an empty array; inside the caller's transaction.
    std::optional<QByteArray> keyOfEvent(const PartnerEvent &event, QString *error);
    // The history rows of an audited action on these letters (those with a key), and the
    // count added to its audit row; inside the caller's transaction.
    bool recordOnLetters(const QList<DeadLetter> &letters, const QString &outcome, qint64 auditId, QString *error);
    // The reason an audit row holds, for its history rows to repeat.
    std::optional<QString> auditReason(qint64 auditId, QString *error);

    Database &m_db;
    SqlQueue &m_queue;
    SqlLedger &m_ledger;
    QString m_actor;
};

} // namespace once
