#include "queues/kafka/kafkabackend.h"

#include "queues/kafka/kafkalocation.h"
#include "queues/kafka/kafkaqueue.h"

namespace once {

const QueueBackend &kafkaBackend()
{
    static const QueueBackend backend = [] {
        QueueBackend registration = kafkaUrlSyntax();
        // The prefetch is each partition's window: how many of its messages may be taken
        // and not yet settled.
        registration.open = [](const QueueLocation &location, const QString &consumerName, int prefetch,
                               QString *error) -> std::unique_ptr<BrokerQueue> {
            return KafkaQueue::connect(location, consumerName, prefetch, error);
        };
        return registration;
    }();
    return backend;
}

} // namespace once
