// The registry of queue backends: one line per backend folder.
#include "queues/queuebackend.h"

#include "queues/bullmq/bullmqbackend.h"
#include "queues/kafka/kafkabackend.h"
#include "queues/pubsub/pubsubbackend.h"
#include "queues/rabbitmq/rabbitmqbackend.h"
#include "queues/redis/redisbackend.h"
#include "queues/rest/restbackend.h"
#include "queues/sqs/sqsbackend.h"

namespace once {

const QList<const QueueBackend *> &queueBackends()
{
    static const QList<const QueueBackend *> backends{
        &rabbitMqBackend(), &redisStreamsBackend(), &restQueueBackend(),
        &sqsBackend(),      &pubSubBackend(),       &bullMqBackend(),
        &kafkaBackend(),
    };
    return backends;
}

} // namespace once
