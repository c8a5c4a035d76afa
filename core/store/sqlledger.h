#pragma once

#include "store/ledger.h"

#include <QHash>
#include <QSet>
#include <QSqlQuery>
#include <QVariant>

#include <optional>

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
    // Also folds the counter shards of ended PostgreSQL connections into one.
    bool purgeFinished(qint64 beforeMs, QString *error) override;

    // Inserts history rows inside the caller's transaction.
    bool insertAttempts(const QList<Attempt> &attempts, QString *error);

    // The condition that finds one key's history rows (of attempts, as `alias`) through
    // their index: under the time the key's ledger row was created, or under 0 (rows
    // written before schema 15, or where the key had no row). It takes the key twice:
    // bindAttemptsOfKey().
    static QString attemptsOfKey(QStringView alias);
    static void bindAttemptsOfKey(QSqlQuery &query, const QByteArray &sendKey);

private:
    bool foldEndedCounterShards(QString *error);

    // A taken key's ledger row, as the claims of one batch leave it.
    struct TakenKey
    {
        QString state;
        QString stateAsRead;
        QVariant ownerMessage; // null once redriven: any message may take the key
        QVariant ownerDelivery;
        QString ownerWorker;
        qint64 claimExpiresAtMs = 0;
        qint64 claimedAtMs = 0; // 0: not known (a key claimed before schema 4)
        int roundSends = 0;
        qint64 firstSentAtMs = 0;
        qint64 createdAtMs = 0; // the key's first claim
        bool sentInDoubt = false; // retrying after a send in doubt (read only where it matters)
        int duplicates = 0;     // deliveries of this batch answered as duplicates
        bool takenOver = false; // by a delivery of this batch
    };

    bool insertClaims(const QList<ClaimRequest> &requests, const QString &workerId, qint64 now,
                      QSet<QByteArray> *inserted, QString *error);
    std::optional<QHash<QByteArray, TakenKey>> readTakenKeys(const QList<QByteArray> &keys, QString *error);
    static Attempt resolveTakenKey(const ClaimRequest &request, const QString &workerId, InDoubtPolicy policy,
                                   qint64 now, TakenKey *row, ClaimResult *result);
    bool writeTakenKeys(const QHash<QByteArray, TakenKey> &rows, qint64 now, QString *error);
    bool noteSendsInDoubt(const QList<ClaimRequest> &requests, const QList<qsizetype> &taken,
                          QHash<QByteArray, TakenKey> *rows, QString *error);
    // Whether the partner may have forgotten the key by the time a resend reaches it
    // (ClaimRequest::keyWindowMs), and the words for it in the key's history.
    static qint64 firstSendAfterMs(const TakenKey &row);
    static bool mayHaveForgotten(const ClaimRequest &request, const TakenKey &row);
    static QString forgottenWhy(const ClaimRequest &request, const TakenKey &row);

    Database &m_db;
};

} // namespace once
