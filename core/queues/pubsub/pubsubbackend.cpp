#include "queues/pubsub/pubsubbackend.h"

#include "queues/pubsub/pubsublocation.h"
#include "queues/pubsub/pubsubqueue.h"

namespace once {

const QueueBackend &pubSubBackend()
{
    static const QueueBackend backend = [] {
        QueueBackend registration = pubSubUrlSyntax();
        // A pull takes what it asks for: neither a consumer name nor a prefetch to pass on.
        registration.open = [](const QueueLocation &location, const QString &, int,
                               QString *error) -> std::unique_ptr<BrokerQueue> {
            return PubSubQueue::connect(location, error);
        };
        return registration;
    }();
    return backend;
}

} // namespace once
