#pragma once

#include "inspector.h"

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

// Operator decisions: redrive and discard dead letters, resolve in-doubt events. Each
// is one transaction and leaves a line in the audit log.
class Operations final
{
public:
    Operations(Database &db, SqlQueue &queue, SqlLedger &ledger, const QString &actor = currentUserName())
        : m_db(db), m_queue(queue), m_ledger(ledger), m_actor(actor)
    {
    }

    // Puts dead letters back on the queue unchanged (same payload, so the same send key
    // and event id) and reopens their keys with a fresh attempt budget. Returns how many
    // moved; letters already gone (another operator) are skipped.
    std::optional<int> redrive(const QList<DeadLetter> &letters, QString *error);
    std::optional<int> discard(const QList<DeadLetter> &letters, QString *error);
    // The same for dead letters at a broker, as BrokerQueue::deadLetters listed them. The
    // keys are reopened before the broker moves the messages, so a worker that takes a
    // redriven message at once finds its key open.
    std::optional<int> redrive(BrokerQueue &queue, const QList<DeadLetter> &letters, QString *error);
    std::optional<int> discard(BrokerQueue &queue, const QList<DeadLetter> &letters, QString *error);
    // In-doubt decisions. Resend queues the stored payload again under the same key.
    bool resend(const QByteArray &sendKey, QString *error);
    bool resend(BrokerQueue &queue, const QByteArray &sendKey, QString *error);
    bool markDelivered(const QByteArray &sendKey, QString *error);

    // Records whether a partner (named as partnerName() names it) honours Idempotency-Key;
    // Unknown forgets what was recorded.
    bool setPartnerPolicy(const QString &partner, KeyHonouring honoursKey, QString *error);

    bool audit(const QString &action, const QString &detail, qint64 count, QString *error);

private:
    bool resendThrough(const QByteArray &sendKey, const std::function<bool(const OutgoingMessage &, QString *)> &put,
                       QString *error);
    std::optional<QByteArray> inDoubtPayload(const QByteArray &sendKey, QString *error);
    bool refuseIfAnswered2xx(const QByteArray &sendKey, QString *error);

    Database &m_db;
    SqlQueue &m_queue;
    SqlLedger &m_ledger;
    QString m_actor;
};

} // namespace once
