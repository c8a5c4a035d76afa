#pragma once

#include "queues/queuebackend.h"

namespace once {

// Redis Streams as a queue backend: redis:// URLs, opened as a RedisStreamQueue.
const QueueBackend &redisStreamsBackend();

} // namespace once
