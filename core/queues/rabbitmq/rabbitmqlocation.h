#pragma once

#include "queues/queuebackend.h"
#include "queues/queuelocation.h"

#include <QUrl>

namespace once {

// amqp://USER:PASSWORD@HOST[:PORT]/VHOST?queue=NAME[&management=http://HOST:15672]
struct RabbitMqDetails
{
    QString vhost;
    QUrl managementUrl; // RabbitMQ's management HTTP API, without credentials
};
// The details of a location that RabbitMQ's URL parser filled in.
const RabbitMqDetails &rabbitMqDetails(const QueueLocation &location);

// RabbitMQ's registration without its opener: what reads and writes its URLs.
QueueBackend rabbitMqUrlSyntax();

} // namespace once
