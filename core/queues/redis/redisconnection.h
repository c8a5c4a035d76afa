#pragma once

#include <QByteArray>
#include <QByteArrayList>
#include <QHash>
#include <QList>
#include <QString>

#include <memory>
#include <optional>
#include <vector>

struct redisContext;
struct redisReply;

namespace once {

struct QueueLocation;

// Where a Redis server is, and how to log in there.
struct RedisEndpoint
{
    QString host;
    int port = 6379;
    QString user;
    QString password; // never printed
    int database = 0;
    QString label; // how errors name the server, "Redis Streams at HOST:PORT/0": no password

    // The server of a queue location, labelled with its broker and display name.
    static RedisEndpoint of(const QueueLocation &location, int database);
};

// One synchronous connection to a Redis server, used from one thread. Each connection
// logs in, selects the database, then sends its owner's setup commands (CLIENT SETNAME,
// SCRIPT LOAD), so that every later call can count on them. After an I/O error or a
// timeout there is no connection, and the next call connects again.
class RedisConnection final
{
    Q_DISABLE_COPY_MOVE(RedisConnection)

public:
    struct ReplyDeleter
    {
        void operator()(redisReply *reply) const;
    };
    using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

    RedisConnection(RedisEndpoint endpoint, QList<QByteArrayList> setup);
    ~RedisConnection();

    bool isOpen() const { return bool(m_context); }
    // Connects afresh; on failure, one line in *error and no connection.
    bool open(QString *error);
    void close();
    // Sends the commands in one round trip, connecting first if there is no connection,
    // and returns their replies in order, error replies included; nullopt when the
    // connection failed.
    std::optional<std::vector<Reply>> pipeline(const QList<QByteArrayList> &commands, QString *error);
    // "LABEL: what", on one line.
    QString describe(const QString &what) const;

private:
    struct ContextDeleter
    {
        void operator()(redisContext *context) const;
    };
    std::optional<std::vector<Reply>> exchange(const QList<QByteArrayList> &commands, QString *error);

    RedisEndpoint m_endpoint;
    QList<QByteArrayList> m_setup;
    std::unique_ptr<redisContext, ContextDeleter> m_context;
};

// Reply accessors that never read past what the server sent.
namespace redisreply {
const redisReply *element(const redisReply *reply, size_t i);
size_t elementCount(const redisReply *reply);
// A string or status reply's bytes; empty for anything else.
QByteArray bytes(const redisReply *reply);
std::optional<qint64> integer(const redisReply *reply);
// Whether there is no reply or an error reply.
bool isError(const redisReply *reply);
// An error reply's text ("NOSCRIPT ...", "WRONGTYPE ..."); "no reply" for none, empty for
// a reply that is no error.
QByteArray errorText(const redisReply *reply);
// A flat [name, value, name, value ...] reply (a hash, entry fields, XINFO) as a map of
// its string and integer values.
QHash<QByteArray, QByteArray> fieldMap(const redisReply *list);
} // namespace redisreply

} // namespace once
