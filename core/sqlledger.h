#pragma once

#include "ledger.h"

#include <QSet>

namespace once {

class Database;

class SqlLedger final : public Ledger
{
public:
    explicit SqlLedger(Database &db) : m_db(db) {}

    QList<ClaimResult> claim(const QList<ClaimRequest> &requests, const QString &workerId, InDoubtPolicy policy,
                             QString *error) override;
    bool record(const QList<LedgerUpdate> &updates, const QList<Attempt> &attempts, QString *error) override;
    bool reopen(const QList<QByteArray> &keys, QString *error) override;
    bool purgeFinished(qint64 beforeMs, QString *error) override;

    // Inserts history rows inside the caller's transaction.
    bool insertAttempts(const QList<Attempt> &attempts, QString *error);

private:
    bool insertClaims(const QList<ClaimRequest> &requests, const QString &workerId, qint64 now,
                      QSet<QByteArray> *inserted, QString *error);
    bool resolveTakenKey(const ClaimRequest &request, const QString &workerId, InDoubtPolicy policy, qint64 now,
                         ClaimResult *result, Attempt *attempt, QString *error);

    Database &m_db;
};

} // namespace once
