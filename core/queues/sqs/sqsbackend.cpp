#include "queues/sqs/sqsbackend.h"

#include "queues/sqs/sqslocation.h"
#include "queues/sqs/sqsqueue.h"

namespace once {

const QueueBackend &sqsBackend()
{
    static const QueueBackend backend = [] {
        QueueBackend registration = sqsUrlSyntax();
        // A receive takes what it asks for, ten at a time: neither a consumer name nor a
        // prefetch to pass on.
        registration.open = [](const QueueLocation &location, const QString &, int,
                               QString *error) -> std::unique_ptr<BrokerQueue> {
            return SqsQueue::connect(location, error);
        };
        return registration;
    }();
    return backend;
}

} // namespace once
