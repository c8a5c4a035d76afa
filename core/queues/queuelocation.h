#pragma once

#include <QString>

#include <any>
#include <optional>

namespace once {

struct QueueBackend;

// Where the queue lives when a team already runs one (--queue URL). The ledger stays in
// the store; only the queue moves. Which backend reads the URL is decided by its scheme
// (queuebackend.h); each backend's folder says what its URLs look like.
struct QueueLocation
{
    const QueueBackend *backend = nullptr;
    QString host;
    int port = 0;
    QString user;
    QString password; // never printed: see displayName()
    QString name;     // the queue, stream or subscription
    // What only this backend reads from its URL (a RabbitMQ vhost, a Redis database): the
    // backend's folder has the type and the accessor.
    std::any details;

    // Parses a URL of any registered backend; a one-line error that never holds the
    // password when it is not one.
    static std::optional<QueueLocation> parse(const QString &url, QString *error);
    // Whether the text starts with a registered backend's scheme.
    static bool isBrokerUrl(const QString &url);
    // The URL without its password, for logs, the UI and errors.
    QString displayName() const;
    QString brokerName() const; // the backend's name: "RabbitMQ", "Redis Streams"
    // Where the backend keeps the dead letters (queue NAME.dead at RabbitMQ, stream
    // NAME:dead at Redis).
    QString deadLetterName() const;
};

// Queue and stream names become parts of other names (NAME.dead, NAME:delayed), so they
// are kept to what every backend accepts without quoting: ASCII letters, digits, '-',
// '_' and '.', at most 200 characters.
bool isPlainQueueName(const QString &name);

// HOST:PORT as a URL writes it: an IPv6 host in brackets.
QString hostAndPort(const QString &host, int port);

} // namespace once
