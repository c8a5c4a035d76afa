#pragma once

#include "queues/brokerqueue.h"
#include "store/ledger.h"
#include "queues/messagequeue.h"
#include "store/storefailure.h"
#include "delivery/partnersender.h"

#include <QObject>

#include <memory>

namespace once {

class Store;

// What one turn of the engine writes, and how much new work it asks for.
struct TurnRequest
{
    QList<LedgerUpdate> updates;
    QList<Attempt> attempts;
    QList<Settlement> settlements;
    int room = 0; // messages to lease; 0 when not consuming
    qint64 leaseMs = 0;
    QString workerId;
    InDoubtPolicy policy = InDoubtPolicy::Resend;
    // A channel whose partner needs another policy than the one above (it holds).
    QHash<QString, InDoubtPolicy> policyByChannel;
    // The partner a claim is for (ClaimRequest::keyWindowMs, partner), likewise.
    struct ClaimPartner
    {
        qint64 keyWindowMs = 0;
        QString name;
        QString profile;
        qint64 expireAfterMs = 0; // the route's or the partner's expire_after; 0: none
    };
    ClaimPartner partner;
    QHash<QString, ClaimPartner> partnerByChannel;
};

struct TurnResult
{
    bool ok = false;
    // PostgreSQL commits the writes before leasing: a turn can fail after them.
    bool writesCommitted = false;
    QString error;
    StoreFailure failure = StoreFailure::None; // what the failed step met: try again, or not
    bool queueFailed = false; // the broker's queue failed (settling or leasing), not the store
    bool queueLost = false;   // ...because its connection was lost (BrokerQueue::connectionLost)
    QList<QueueMessage> leased;
    QList<ClaimRequest> claims;  // the leased messages that parse...
    QList<int> claimedMessages;  // ...at these indexes of leased
    QList<ClaimResult> results;  // one per claim
    QList<QPair<int, QString>> invalid; // index of leased, why it does not parse
};

// The engine's store, on a thread of its own: while a turn waits on the database, the
// engine's thread goes on reading partner answers and starting sends. One turn runs at
// a time, in order; every other store call of the engine queues behind it.
class EngineStore final : public QObject
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(EngineStore)

public:
    // queueUrl: a broker's queue (amqp://, redis://), or empty for the store's own.
    EngineStore(QString storeUrl, QString queueUrl, QString consumerName, int prefetch);
    ~EngineStore() override;

    // Ignore: a second connection of the engine, which the first one's notifications wake.
    enum class Notifications { Listen, Ignore };

    // On the store's thread from here on.
    bool open(QString *error, Notifications notifications = Notifications::Listen);
    void close();
    Store &store() { return *m_store; }
    MessageQueue &queue();
    QString queueDisplayName() const;
    bool usesBroker() const { return m_broker != nullptr; }
    bool brokerConnectionLost() const;
    bool listening() const { return m_listening; }

    // Records outcomes and settles their messages, then leases and claims new work: one
    // durable commit on SQLite (group commit), two on PostgreSQL (where the engine runs
    // the two halves on two connections), and with a broker the outcomes' commit, the
    // broker's acks, then the claims' commit (see the .cpp).
    TurnResult runTurn(const TurnRequest &request);

    // What a worker does with a partner's answer for a key left in doubt with it: records
    // the answer in the key's history (found settles it applied) and, when the partner
    // has no message with the key and resendIfNotFound, puts it back on the queue (the
    // broker's, or the store's) under the same key, audited in the worker's name. Returns
    // whether it was resent; nullopt on an error, the key then left as it was.
    std::optional<bool> settleLookup(const QByteArray &sendKey, const QString &partner, const QString &profile,
                                     const LookupResult &answer, bool resendIfNotFound, const QString &reason,
                                     QString *error);

signals:
    // A PostgreSQL notification on a channel this store listens to.
    void notified(const QString &channel);

private:
    TurnResult runBrokerTurn(const TurnRequest &request);
    bool claimLeased(const TurnRequest &request, TurnResult *turn);
    static void forgetLeases(TurnResult *turn);

    QString m_storeUrl;
    QString m_queueUrl;
    QString m_consumerName;
    int m_prefetch = 0;
    std::unique_ptr<Store> m_store;
    std::unique_ptr<BrokerQueue> m_broker;
    std::unique_ptr<BrokerQueue::MessageWatch> m_brokerWatch; // stopped before m_broker goes
    bool m_listening = false;
};

} // namespace once

Q_DECLARE_METATYPE(once::TurnResult)
