#pragma once

#include "queues/queuebackend.h"

namespace once {

// Google Cloud Pub/Sub's registration (queuebackends.cpp lists it).
const QueueBackend &pubSubBackend();

} // namespace once
