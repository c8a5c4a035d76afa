#include "queues/rabbitmq/rabbitmqbackend.h"

#include "queues/rabbitmq/rabbitmqlocation.h"
#include "queues/rabbitmq/rabbitmqqueue.h"

namespace once {

const QueueBackend &rabbitMqBackend()
{
    static const QueueBackend backend = [] {
        QueueBackend registration = rabbitMqUrlSyntax();
        registration.open = [](const QueueLocation &location, const QString &consumerName, int prefetch,
                               QString *error) -> std::unique_ptr<BrokerQueue> {
            return RabbitMqQueue::connect(location, consumerName, prefetch, error);
        };
        return registration;
    }();
    return backend;
}

} // namespace once
