#pragma once

#include "queues/messagequeue.h"
#include "queues/queuelocation.h"

namespace once {

// Fills in what only RabbitMQ's management API knows about a queue (in flight, the oldest
// ready message's age); says why not when it cannot, else returns nothing.
QString rabbitMqManagementProblem(const QueueLocation &where, QueueCounts *counts);

} // namespace once
