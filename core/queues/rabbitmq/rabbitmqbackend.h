#pragma once

#include "queues/queuebackend.h"

namespace once {

// RabbitMQ (AMQP 0-9-1) as a queue backend: amqp:// URLs, opened as a RabbitMqQueue.
const QueueBackend &rabbitMqBackend();

} // namespace once
