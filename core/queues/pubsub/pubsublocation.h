#pragma once

#include "queues/queuebackend.h"
#include "queues/queuelocation.h"

#include <QUrl>

namespace once {

// pubsub://PROJECT/SUBSCRIPTION?topic=TOPIC[&endpoint=HOST:PORT]: the subscription
// SUBSCRIPTION of the Google Cloud project PROJECT, on the topic TOPIC (which enqueue,
// redrive and init need). The API is https://pubsub.googleapis.com unless endpoint= or
// PUBSUB_EMULATOR_HOST (as Google's own clients read it) names an emulator, spoken to
// over plain HTTP without credentials. The dead letters go to the topic TOPIC-dead, read
// through its subscription SUBSCRIPTION-dead.
struct PubSubDetails
{
    QString project;
    QString topic;
    QUrl apiUrl;      // scheme, host and port of the API
    bool emulator = false;
};
const PubSubDetails &pubSubDetails(const QueueLocation &location);

QString pubSubDeadLetterName(const QString &name); // NAME-dead, for the topic and the subscription

// Pub/Sub's registration without its opener: what reads and writes its URLs.
QueueBackend pubSubUrlSyntax();

} // namespace once
