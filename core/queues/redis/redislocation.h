#pragma once

#include "queues/queuebackend.h"
#include "queues/queuelocation.h"

namespace once {

// redis://[[USER]:PASSWORD@]HOST[:PORT]/DB?stream=NAME
struct RedisDetails
{
    int database = 0;
};
// The details of a location that the Redis URL parser filled in.
const RedisDetails &redisDetails(const QueueLocation &location);

// Redis Streams' registration without its opener: what reads and writes its URLs.
QueueBackend redisStreamsUrlSyntax();

} // namespace once
