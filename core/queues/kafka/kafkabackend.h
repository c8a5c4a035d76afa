#pragma once

#include "queues/queuebackend.h"

namespace once {

// Apache Kafka as a queue backend: kafka:// URLs, opened as a KafkaQueue.
const QueueBackend &kafkaBackend();

} // namespace once
