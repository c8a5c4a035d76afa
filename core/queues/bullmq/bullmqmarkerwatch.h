#pragma once

#include "queues/brokerqueue.h"
#include "queues/redis/redisconnection.h"

#include <atomic>
#include <functional>
#include <thread>

namespace once {

// What a Node worker blocks on between jobs: BZPOPMIN on the queue's "marker" sorted set,
// where BullMQ's scripts put a member whenever a job becomes ready (score 0) or a delayed
// one is next due (its due time in ms). On a connection and thread of its own, so the
// worker's own connection never blocks; wake is called when a lease may find a job, at
// once for a ready job, at its due time for a delayed one.
//
// The connection stays unnamed: Queue.getWorkers() lists the named one of each worker.
class BullMqMarkerWatch final : public BrokerQueue::MessageWatch
{
    Q_DISABLE_COPY_MOVE(BullMqMarkerWatch)

public:
    BullMqMarkerWatch(RedisEndpoint endpoint, QByteArray markerKey, std::function<void()> wake);
    ~BullMqMarkerWatch() override;

private:
    void run();

    RedisEndpoint m_endpoint;
    QByteArray m_markerKey;
    std::function<void()> m_wake;
    std::atomic<bool> m_stopping{false};
    std::atomic<qint64> m_clientId{0}; // the blocked connection's CLIENT ID, to unblock it
    std::thread m_thread;
};

} // namespace once
