#include "delivery/enginestore.h"

#include "delivery/failpoint.h"
#include "store/store.h"

#include <QLoggingCategory>
#include <QSqlDriver>

#include <algorithm>

namespace once {

Q_LOGGING_CATEGORY(lcEngineStore, "once.core.enginestore")

EngineStore::EngineStore(QString storeUrl, QString queueUrl, QString consumerName, int prefetch)
    : m_storeUrl(std::move(storeUrl)), m_queueUrl(std::move(queueUrl)), m_consumerName(std::move(consumerName)),
      m_prefetch(prefetch)
{
}

EngineStore::~EngineStore() = default;

bool EngineStore::open(QString *error, Notifications notifications)
{
    m_store = Store::open(m_storeUrl, error);
    if (!m_store)
        return false;
    if (!m_queueUrl.isEmpty()) {
        const auto location = QueueLocation::parse(m_queueUrl, error);
        if (!location)
            return false;
        m_broker = openBrokerQueue(*location, m_consumerName, m_prefetch, error);
        if (!m_broker)
            return false;
        // A broker that announces its messages wakes the engine from the watch's thread
        // (a queued signal); the others are polled (see Engine::idleWaitMs).
        if (notifications == Notifications::Listen)
            m_brokerWatch = m_broker->watchMessages([this] { emit notified(Channel::Queue); });
        m_listening = m_brokerWatch != nullptr;
        return true;
    }
    Database &database = m_store->database();
    if (notifications == Notifications::Listen && database.listen(Channel::Queue)) {
        m_listening = true;
        connect(database.connection().driver(), &QSqlDriver::notification, this,
                [this](const QString &channel) { emit notified(channel); });
    }
    return true;
}

void EngineStore::close()
{
    m_brokerWatch.reset();
    m_broker.reset();
    m_store.reset();
}

MessageQueue &EngineStore::queue()
{
    return m_broker ? static_cast<MessageQueue &>(*m_broker) : m_store->queue();
}

QString EngineStore::queueDisplayName() const
{
    return m_broker ? m_broker->location().displayName() : m_store->database().location().displayName();
}

std::optional<bool> EngineStore::settleLookup(const QByteArray &sendKey, const QString &partner, const QString &profile,
                                              const LookupResult &answer, bool resendIfNotFound, const QString &reason,
                                              QString *error)
{
    Operations operations(m_store->database(), m_store->queue(), m_store->ledger(), m_consumerName);
    if (!operations.recordLookup(sendKey, partner, profile, answer, error))
        return std::nullopt;
    if (answer.kind != LookupResult::Kind::NotFound || !resendIfNotFound)
        return false;
    const bool resent = m_broker ? operations.resend(*m_broker, sendKey, reason, error)
                                 : operations.resend(sendKey, reason, error);
    return resent ? std::optional<bool>(true) : std::nullopt;
}

TurnResult EngineStore::runTurn(const TurnRequest &request)
{
    failpoint("turn-start");
    Database &database = m_store->database();
    TurnResult turn;
    if (!database.isStillAtPath(&turn.error)) {
        turn.failure = StoreFailure::Permanent;
        return turn;
    }
    if (m_broker)
        return runBrokerTurn(request);
    Transaction batch(database);
    const bool writes = !request.updates.isEmpty() || !request.attempts.isEmpty() || !request.settlements.isEmpty();
    // On PostgreSQL, other workers' transactions run beside this one: commit the outcomes
    // before leasing and claiming, so that the row locks of one step are not held while
    // the next waits on another worker's (two short transactions, no lock cycles).
    const bool outcomesFirst = database.isPostgres() && writes && request.room > 0;
    // The outcomes' commit need not wait for the disk: nothing leaves the worker on its
    // account, and the claims' commit, which the sends wait for, flushes the server's log
    // up to itself, this one included (a turn that claims nothing leaves that to the
    // server's WAL writer, a fraction of a second later). Should the server fail before
    // then, the outcomes are lost together with their acks (one transaction), and those
    // keys come back in doubt, as after a worker that died before recording.
    const auto wait = outcomesFirst ? Database::CommitWait::Unflushed : Database::CommitWait::Flushed;
    bool ok = batch.begin(&turn.error, wait);
    if (ok && (!request.updates.isEmpty() || !request.attempts.isEmpty())) {
        ok = m_store->ledger().record(request.updates, request.attempts, &turn.error);
        failpoint("after-record");
    }
    ok = ok && m_store->queue().settle(request.settlements, &turn.error);
    if (ok && outcomesFirst) {
        ok = batch.commitAndBegin(&turn.error);
        turn.writesCommitted = ok;
    }
    if (ok && request.room > 0) {
        turn.leased = m_store->queue().lease(request.room, request.leaseMs, request.workerId, &turn.error);
        ok = turn.error.isEmpty();
    }
    if (ok && !turn.leased.isEmpty()) {
        failpoint("after-consume");
        ok = claimLeased(request, &turn);
    }
    turn.ok = ok && batch.commit(&turn.error);
    if (!turn.ok) {
        // The leases and claims were rolled back: those messages stay on the queue.
        forgetLeases(&turn);
        turn.failure = database.lastFailure();
    }
    return turn;
}

bool EngineStore::brokerConnectionLost() const
{
    return m_broker && m_broker->connectionLost();
}

// With a broker the queue is outside the store's transactions, so the order of the steps
// is what keeps a reminder from taking effect twice: outcomes are committed before their
// messages are acked (a crash in between redelivers a message the ledger already knows
// the end of), and every lease is claimed in the ledger before anything is sent.
TurnResult EngineStore::runBrokerTurn(const TurnRequest &request)
{
    TurnResult turn;
    // A broker that fails is one that went away for now; the store says for itself.
    turn.failure = StoreFailure::ConnectionLost;
    const auto storeFailed = [this, &turn] {
        turn.failure = m_store->database().lastFailure();
        return turn;
    };
    if (!request.updates.isEmpty() || !request.attempts.isEmpty()) {
        Transaction outcomes(m_store->database());
        if (!outcomes.begin(&turn.error) || !m_store->ledger().record(request.updates, request.attempts, &turn.error))
            return storeFailed();
        failpoint("after-record");
        if (!outcomes.commit(&turn.error))
            return storeFailed();
    }
    // The outcomes are durable: if settling fails now, the broker redelivers those
    // messages and the ledger answers them as duplicates.
    turn.writesCommitted = true;
    if (std::any_of(request.settlements.cbegin(), request.settlements.cend(),
                    [](const Settlement &settlement) { return settlement.kind == Settlement::Kind::Ack; }))
        failpoint("before-ack");
    if (!m_broker->settle(request.settlements, &turn.error)) {
        turn.queueFailed = true;
        turn.queueLost = m_broker->connectionLost();
        return turn;
    }
    if (request.room > 0) {
        turn.leased = m_broker->lease(request.room, request.leaseMs, request.workerId, &turn.error);
        if (!turn.error.isEmpty()) {
            turn.leased.clear();
            turn.queueFailed = true;
            turn.queueLost = m_broker->connectionLost();
            return turn;
        }
    }
    if (turn.leased.isEmpty()) {
        turn.ok = true;
        turn.failure = StoreFailure::None;
        return turn;
    }
    failpoint("after-consume");
    Transaction claims(m_store->database());
    turn.ok = claims.begin(&turn.error) && claimLeased(request, &turn) && claims.commit(&turn.error);
    turn.failure = turn.ok ? StoreFailure::None : m_store->database().lastFailure();
    if (!turn.ok) {
        // Nothing was claimed: hand the deliveries back rather than hold them unacked.
        QList<Settlement> release;
        for (const auto &message : std::as_const(turn.leased))
            release.append({Settlement::Kind::Retry, message.id, message.delivery, 0, {}});
        QString releaseError;
        if (!m_broker->settle(release, &releaseError))
            qCWarning(lcEngineStore).noquote() << "could not hand back unclaimed deliveries:" << releaseError;
        forgetLeases(&turn);
    }
    return turn;
}

// Parses the leased messages and claims their send keys, inside the caller's transaction.
bool EngineStore::claimLeased(const TurnRequest &request, TurnResult *turn)
{
    for (int i = 0; i < turn->leased.size(); ++i) {
        const QueueMessage &message = turn->leased.at(i);
        auto parsed = parseReminder(message.payload);
        if (!parsed.reminder) {
            turn->invalid.append({i, parsed.error});
            continue;
        }
        const InDoubtPolicy policy = request.policyByChannel.value(parsed.reminder->channel, request.policy);
        const auto partner = request.partnerByChannel.value(parsed.reminder->channel, request.partner);
        const qint64 expiresAtMs = effectiveExpiryMs(*parsed.reminder, partner.expireAfterMs);
        turn->claims.append(ClaimRequest{std::move(*parsed.reminder), message.id, message.delivery,
                                         message.leaseUntilMs, policy, partner.keyWindowMs, partner.name,
                                         partner.profile, expiresAtMs});
        turn->claimedMessages.append(i);
    }
    if (turn->claims.isEmpty())
        return true;
    turn->results = m_store->ledger().claim(turn->claims, request.workerId, request.policy, &turn->error);
    return turn->results.size() == turn->claims.size();
}

void EngineStore::forgetLeases(TurnResult *turn)
{
    turn->leased.clear();
    turn->claims.clear();
    turn->claimedMessages.clear();
    turn->results.clear();
    turn->invalid.clear();
}

} // namespace once
