#include "enginestore.h"

#include "failpoint.h"
#include "store.h"

#include <QSqlDriver>

namespace once {

EngineStore::EngineStore(QString storeUrl) : m_storeUrl(std::move(storeUrl)) {}

EngineStore::~EngineStore() = default;

bool EngineStore::open(QString *error)
{
    m_store = Store::open(m_storeUrl, error);
    if (!m_store)
        return false;
    Database &database = m_store->database();
    if (database.listen(Channel::Queue)) {
        m_listening = true;
        connect(database.connection().driver(), &QSqlDriver::notification, this,
                [this](const QString &channel) { emit notified(channel); });
    }
    return true;
}

void EngineStore::close()
{
    m_store.reset();
}

TurnResult EngineStore::runTurn(const TurnRequest &request)
{
    TurnResult turn;
    Database &database = m_store->database();
    Transaction batch(database);
    const bool writes = !request.updates.isEmpty() || !request.attempts.isEmpty() || !request.settlements.isEmpty();
    bool ok = batch.begin(&turn.error);
    if (ok && (!request.updates.isEmpty() || !request.attempts.isEmpty())) {
        ok = m_store->ledger().record(request.updates, request.attempts, &turn.error);
        failpoint("after-record");
    }
    ok = ok && m_store->queue().settle(request.settlements, &turn.error);
    // On PostgreSQL, other workers' transactions run beside this one: commit the outcomes
    // before leasing and claiming, so that the row locks of one step are not held while
    // the next waits on another worker's (two short transactions, no lock cycles).
    if (ok && database.isPostgres() && writes) {
        ok = batch.commit(&turn.error) && batch.begin(&turn.error);
        turn.writesCommitted = ok;
    }
    if (ok && request.room > 0) {
        turn.leased = m_store->queue().lease(request.room, request.leaseMs, request.workerId, &turn.error);
        ok = turn.error.isEmpty();
    }
    if (ok && !turn.leased.isEmpty()) {
        failpoint("after-consume");
        for (int i = 0; i < turn.leased.size(); ++i) {
            const QueueMessage &message = turn.leased.at(i);
            auto parsed = parseReminder(message.payload);
            if (!parsed.reminder) {
                turn.invalid.append({i, parsed.error});
                continue;
            }
            turn.claims.append(ClaimRequest{std::move(*parsed.reminder), message.id, message.delivery, message.leaseUntilMs});
            turn.claimedMessages.append(i);
        }
        if (!turn.claims.isEmpty()) {
            turn.results = m_store->ledger().claim(turn.claims, request.workerId, request.policy, &turn.error);
            ok = turn.results.size() == turn.claims.size();
        }
    }
    turn.ok = ok && batch.commit(&turn.error);
    if (!turn.ok) {
        // The leases and claims were rolled back: those messages stay on the queue.
        turn.leased.clear();
        turn.claims.clear();
        turn.claimedMessages.clear();
        turn.results.clear();
        turn.invalid.clear();
    }
    return turn;
}

} // namespace once
