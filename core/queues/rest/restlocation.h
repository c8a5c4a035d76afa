#pragma once

#include "queues/queuebackend.h"
#include "queues/queuelocation.h"

#include <QUrl>

namespace once {

// rest+http://HOST[:PORT]/PATH?queue=NAME, or rest+https://...[&ca=FILE]: PATH is where the API's
// endpoints begin (/v1 for once serve: /v1/queue/consume).
struct RestDetails
{
    QUrl apiUrl; // http(s)://HOST:PORT/PATH, without credentials
    // &ca=FILE (rest+https only): a PEM file of the CAs trusted instead of the system's,
    // for a server whose certificate is its own (once serve --tls-cert) or a private CA's.
    QString caFile;
};
// The details of a location that the REST queue's URL parser filled in.
const RestDetails &restDetails(const QueueLocation &location);

// The REST queue's registration without its opener: what reads and writes its URLs.
QueueBackend restQueueUrlSyntax();

} // namespace once
