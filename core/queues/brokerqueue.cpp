#include "queues/brokerqueue.h"

#include "queues/queuebackend.h"

namespace once {

std::unique_ptr<BrokerQueue> openBrokerQueue(const QueueLocation &location, const QString &consumerName, int prefetch,
                                             QString *error)
{
    return location.backend->open(location, consumerName, prefetch, error);
}

} // namespace once
