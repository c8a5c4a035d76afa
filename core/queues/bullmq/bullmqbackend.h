#pragma once

#include "queues/queuebackend.h"

namespace once {

// BullMQ as a queue backend: bullmq:// URLs, opened as a BullMqQueue.
const QueueBackend &bullMqBackend();

} // namespace once
