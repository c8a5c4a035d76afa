#pragma once

#include "queues/messagequeue.h"

namespace once {

class Database;

// The queue in the embedded store: a table with visibility-timeout leases. A lease sets
// visible_at to its expiry, so a crashed worker's messages come back by themselves; the
// receive count doubles as the lease token, so a late ack from an expired lease is ignored.
class SqlQueue final : public MessageQueue
{
public:
    explicit SqlQueue(Database &db) : m_db(db) {}

    bool enqueue(const QList<OutgoingMessage> &messages, QString *error) override;
    QList<QueueMessage> lease(int max, qint64 leaseMs, const QString &workerId, QString *error) override;
    bool settle(const QList<Settlement> &settlements, QString *error) override;
    std::optional<QueueCounts> counts(QString *error) override;

    // Inserts inside the caller's transaction, for operations that must move messages
    // and change the ledger in one step (redrive, resend). ids (if given) gets each
    // message's id, in the list's order.
    bool insert(const QList<OutgoingMessage> &messages, QString *error, QStringList *ids = nullptr);

private:
    Database &m_db;
};

} // namespace once
