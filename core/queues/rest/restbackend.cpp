#include "queues/rest/restbackend.h"

#include "queues/rest/restlocation.h"
#include "queues/rest/restqueue.h"

namespace once {

const QueueBackend &restQueueBackend()
{
    static const QueueBackend backend = [] {
        QueueBackend registration = restQueueUrlSyntax();
        // The server names the consumer by its token and hands out what consume asks for:
        // neither a consumer name nor a prefetch to pass on.
        registration.open = [](const QueueLocation &location, const QString &, int,
                               QString *error) -> std::unique_ptr<BrokerQueue> {
            return RestQueue::connect(location, error);
        };
        return registration;
    }();
    return backend;
}

} // namespace once
