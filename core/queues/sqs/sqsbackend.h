#pragma once

#include "queues/queuebackend.h"

namespace once {

// Amazon SQS's registration (queuebackends.cpp lists it).
const QueueBackend &sqsBackend();

} // namespace once
