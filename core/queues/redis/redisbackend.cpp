#include "queues/redis/redisbackend.h"

#include "queues/redis/redislocation.h"
#include "queues/redis/redisstreamqueue.h"

namespace once {

const QueueBackend &redisStreamsBackend()
{
    static const QueueBackend backend = [] {
        QueueBackend registration = redisStreamsUrlSyntax();
        // A stream's consumer group hands out entries one read at a time: no prefetch.
        registration.open = [](const QueueLocation &location, const QString &consumerName, int,
                               QString *error) -> std::unique_ptr<BrokerQueue> {
            return RedisStreamQueue::connect(location, consumerName, error);
        };
        return registration;
    }();
    return backend;
}

} // namespace once
