#pragma once

#include "queues/queuebackend.h"

namespace once {

// A REST queue (once serve's API, docs/http-api.md) as a queue backend: rest+http:// and
// rest+https:// URLs, opened as a RestQueue.
const QueueBackend &restQueueBackend();

} // namespace once
