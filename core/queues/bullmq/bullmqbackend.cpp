#include "queues/bullmq/bullmqbackend.h"

#include "queues/bullmq/bullmqlocation.h"
#include "queues/bullmq/bullmqqueue.h"

namespace once {

const QueueBackend &bullMqBackend()
{
    static const QueueBackend backend = [] {
        QueueBackend registration = bullMqUrlSyntax();
        // moveToActive hands out one job a call; the worker asks for as many as it has room.
        registration.open = [](const QueueLocation &location, const QString &consumerName, int,
                               QString *error) -> std::unique_ptr<BrokerQueue> {
            return BullMqQueue::connect(location, consumerName, error);
        };
        return registration;
    }();
    return backend;
}

} // namespace once
