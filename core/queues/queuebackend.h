#pragma once

#include <QAnyStringView>
#include <QLatin1StringView>
#include <QList>
#include <QString>
#include <QUrl>

#include <memory>

namespace once {

class BrokerQueue;
struct QueueLocation;

// One kind of queue a team may already run, as users pick it: by its URL's scheme. Each
// backend is a folder under core/queues/ whose registration (a QueueBackend) is listed
// once, in queuebackends.cpp; the CLI's help, the console's Open Queue dialog and the
// test matrix read that list.
struct QueueBackend
{
    QLatin1StringView id;     // the folder's name, as tests and scripts name it: "rabbitmq"
    QLatin1StringView scheme; // the URL scheme: "amqp"
    // More schemes the same backend reads, such as the same API over TLS: "rest+https".
    QList<QLatin1StringView> moreSchemes{};
    QString name;             // for people: "RabbitMQ"
    QString urlSyntax;        // "amqp://USER:PASSWORD@HOST[:PORT]/VHOST?queue=NAME"
    QString exampleUrl;       // a URL to start from, without a password
    QString urlNotes;         // what else its URLs may say, in a sentence; may be empty
    QString queueWord;        // what the backend calls a queue in a sentence: "queue", "stream"
    QLatin1StringView nameParameter; // the URL's query item that names the queue: "queue";
                                     // empty when the path ends with it (SQS)

    // Fills the location from a URL of this scheme; false with a one-line error.
    bool (*parse)(const QUrl &url, QueueLocation *location, QString *error) = nullptr;
    // The URL without its password, reading back as the same queue.
    QString (*displayUrl)(const QueueLocation &location) = nullptr;
    // Where the backend keeps the dead letters.
    QString (*deadLetterName)(const QueueLocation &location) = nullptr;
    // Connects. consumerName names this process's consumer (the worker id); prefetch is
    // how many deliveries the backend may hand it ahead of its acks (the worker's
    // concurrency).
    std::unique_ptr<BrokerQueue> (*open)(const QueueLocation &location, const QString &consumerName, int prefetch,
                                         QString *error) = nullptr;

    // The scheme and the more schemes, in that order.
    QList<QLatin1StringView> schemes() const { return QList<QLatin1StringView>{scheme} + moreSchemes; }
};

// Every registered backend, in the order help texts list them.
const QList<const QueueBackend *> &queueBackends();
const QueueBackend *queueBackendForScheme(QAnyStringView scheme);
const QueueBackend *queueBackendForId(QAnyStringView id);
// The backend a URL names by its scheme, also when the rest of it does not parse.
const QueueBackend *queueBackendOfUrl(QStringView url);
// "amqp://... or redis://...": every backend's URL syntax, for help texts.
QString queueUrlSyntaxes(const QString &separator = QStringLiteral(" or "));

} // namespace once
