#include "brokerqueue.h"

#include "rabbitmqqueue.h"
#include "redisstreamqueue.h"

namespace once {

std::unique_ptr<BrokerQueue> openBrokerQueue(const QueueLocation &location, const QString &consumerName, int prefetch,
                                             QString *error)
{
    if (location.kind == QueueLocation::Kind::RabbitMq)
        return RabbitMqQueue::connect(location, consumerName, prefetch, error);
    return RedisStreamQueue::connect(location, consumerName, error);
}

} // namespace once
