#pragma once

#include "queues/queuebackend.h"
#include "queues/queuelocation.h"

#include <QUrl>

namespace once {

// sqs://REGION/ACCOUNT/QUEUE[?endpoint=http(s)://HOST:PORT]: the queue QUEUE of the AWS
// account ACCOUNT in REGION, at https://sqs.REGION.amazonaws.com unless endpoint names
// another (an emulator, a VPC endpoint). Its dead letters are the queue QUEUE-dead.
struct SqsDetails
{
    QString region;
    QString account;
    QUrl endpoint; // where the API is: scheme, host, port (and a path, for a proxy)
};
// The details of a location that the SQS URL parser filled in.
const SqsDetails &sqsDetails(const QueueLocation &location);

// The queue where SQS moves, and once puts, the dead letters of a queue.
QString sqsDeadLetterQueueName(const QString &queueName);

// Amazon SQS's registration without its opener: what reads and writes its URLs.
QueueBackend sqsUrlSyntax();

} // namespace once
