#pragma once

#include <QString>
#include <QUrl>

#include <optional>

namespace once {

// Where the queue lives when a team already runs a broker (--queue URL). The ledger
// stays in the store; only the queue moves.
//   amqp://USER:PASSWORD@HOST[:PORT]/VHOST?queue=NAME[&management=http://HOST:15672]
//   redis://[[USER]:PASSWORD@]HOST[:PORT]/DB?stream=NAME
struct QueueLocation
{
    enum class Kind { RabbitMq, Redis };

    Kind kind = Kind::RabbitMq;
    QString host;
    int port = 0;
    QString user;
    QString password; // never printed: see displayName()
    QString vhost;    // RabbitMQ
    int database = 0; // Redis
    QString name;     // the queue (RabbitMQ) or stream (Redis)
    QUrl managementUrl; // RabbitMQ's management HTTP API, without credentials

    static std::optional<QueueLocation> parse(const QString &url, QString *error);
    static bool isBrokerUrl(const QString &url);
    // The URL without its password, for logs, the UI and errors.
    QString displayName() const;
    QString brokerName() const; // "RabbitMQ", "Redis Streams"
    // Where the broker keeps the dead letters: queue NAME.dead (RabbitMQ), stream
    // NAME:dead (Redis).
    QString deadLetterName() const;
};

} // namespace once
