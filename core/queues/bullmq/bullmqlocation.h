#pragma once

#include "queues/queuebackend.h"
#include "queues/queuelocation.h"

namespace once {

// bullmq://[[USER]:PASSWORD@]HOST[:PORT]/DB?queue=NAME[&prefix=bull]
//     [&stalledInterval=MS][&maxStalledCount=N]
// The last two are BullMQ's worker options of those names: how often the stalled checker
// runs (by default every lease, as BullMQ's defaults of both are 30 s: a job whose worker
// died is put back within two leases), and how many stalls a job survives before it fails.
struct BullMqDetails
{
    int database = 0;
    QString prefix = QStringLiteral("bull");
    qint64 stalledIntervalMs = 0; // 0: the worker's lease
    int maxStalledCount = 1;
};
// The details of a location that the BullMQ URL parser filled in.
const BullMqDetails &bullMqDetails(const QueueLocation &location);

// BullMQ's registration without its opener: what reads and writes its URLs.
QueueBackend bullMqUrlSyntax();

} // namespace once
