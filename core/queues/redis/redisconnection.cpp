#include "queues/redis/redisconnection.h"

#include "queues/queuelocation.h"

#include <hiredis/hiredis.h>

#include <cerrno>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace once {

namespace {

constexpr int ConnectTimeoutMs = 5000;
// Longer than any command blocks at the server (the streams issue no XREADGROUP BLOCK;
// BullMQ's marker watch blocks in BZPOPMIN for 1 s at most): any answer slower than this
// is a server or network gone, not a wait.
constexpr int CommandTimeoutMs = 10000;
// A connection cut off silently (packets dropped, no reset) must fail in seconds, so that
// the reconnect runs, not after TCP's retransmissions (minutes): data unacknowledged this
// long ends it, and so do keepalive probes unanswered while it is idle. hiredis 0.14's
// redisEnableKeepAlive fixes the idle time at 15 s.
constexpr int UserTimeoutMs = 5000;
constexpr int KeepAliveIdleSeconds = 5;
constexpr int KeepAliveIntervalSeconds = 2;
constexpr int KeepAliveProbes = 2;

bool setOption(int fd, int level, int name, int value)
{
    return ::setsockopt(fd, level, name, &value, sizeof value) == 0;
}

bool failFast(int fd)
{
    return setOption(fd, SOL_SOCKET, SO_KEEPALIVE, 1) &&
           setOption(fd, IPPROTO_TCP, TCP_KEEPIDLE, KeepAliveIdleSeconds) &&
           setOption(fd, IPPROTO_TCP, TCP_KEEPINTVL, KeepAliveIntervalSeconds) &&
           setOption(fd, IPPROTO_TCP, TCP_KEEPCNT, KeepAliveProbes) &&
           setOption(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, UserTimeoutMs);
}

timeval toTimeval(int ms)
{
    return timeval{ms / 1000, (ms % 1000) * 1000};
}

} // namespace

RedisEndpoint RedisEndpoint::of(const QueueLocation &location, int database)
{
    return RedisEndpoint{
        location.host, location.port,
        location.user, location.password,
        database,      location.brokerName() + QStringLiteral(" at ") + location.displayName()};
}

void RedisConnection::ReplyDeleter::operator()(redisReply *reply) const
{
    freeReplyObject(reply);
}

void RedisConnection::ContextDeleter::operator()(redisContext *context) const
{
    redisFree(context);
}

RedisConnection::RedisConnection(RedisEndpoint endpoint, QList<QByteArrayList> setup)
    : m_endpoint(std::move(endpoint)), m_setup(std::move(setup))
{
}

RedisConnection::~RedisConnection() = default;

QString RedisConnection::describe(const QString &what) const
{
    return QStringLiteral("%1: %2").arg(m_endpoint.label, what.simplified());
}

void RedisConnection::close()
{
    m_context.reset();
}

bool RedisConnection::open(QString *error)
{
    m_context.reset();
    std::unique_ptr<redisContext, ContextDeleter> context(redisConnectWithTimeout(
        m_endpoint.host.toUtf8().constData(), m_endpoint.port, toTimeval(ConnectTimeoutMs)));
    if (!context || context->err) {
        *error = describe(
            QStringLiteral("cannot connect: %1")
                .arg(context ? QString::fromLocal8Bit(context->errstr) : QStringLiteral("out of memory")));
        return false;
    }
    if (redisSetTimeout(context.get(), toTimeval(CommandTimeoutMs)) != REDIS_OK) {
        *error = describe(
            QStringLiteral("cannot set up the connection: %1").arg(QString::fromLocal8Bit(context->errstr)));
        return false;
    }
    if (!failFast(context->fd)) {
        *error = describe(QStringLiteral("cannot set up the connection: %1").arg(qt_error_string(errno)));
        return false;
    }
    m_context = std::move(context);

    QList<QByteArrayList> setup;
    if (!m_endpoint.password.isEmpty()) {
        setup.append(m_endpoint.user.isEmpty()
                         ? QByteArrayList{"AUTH", m_endpoint.password.toUtf8()}
                         : QByteArrayList{"AUTH", m_endpoint.user.toUtf8(), m_endpoint.password.toUtf8()});
    }
    setup.append({"SELECT", QByteArray::number(m_endpoint.database)});
    setup += m_setup;
    const auto replies = exchange(setup, error);
    if (!replies)
        return false;
    for (const Reply &reply : *replies) {
        if (redisreply::isError(reply.get())) {
            *error = describe(QString::fromUtf8(redisreply::errorText(reply.get())));
            m_context.reset();
            return false;
        }
    }
    return true;
}

std::optional<std::vector<RedisConnection::Reply>>
RedisConnection::exchange(const QList<QByteArrayList> &commands, QString *error)
{
    for (const QByteArrayList &command : commands) {
        std::vector<const char *> argv;
        std::vector<size_t> argvlen;
        for (const QByteArray &argument : command) {
            argv.push_back(argument.constData());
            argvlen.push_back(size_t(argument.size()));
        }
        redisAppendCommandArgv(m_context.get(), int(argv.size()), argv.data(), argvlen.data());
    }
    std::vector<Reply> replies;
    replies.reserve(size_t(commands.size()));
    for (qsizetype i = 0; i < commands.size(); ++i) {
        void *reply = nullptr;
        if (redisGetReply(m_context.get(), &reply) != REDIS_OK) {
            const bool timedOut = errno == EAGAIN || errno == EWOULDBLOCK;
            *error = describe(
                timedOut
                    ? QStringLiteral("no answer within %1 s").arg(CommandTimeoutMs / 1000)
                    : QStringLiteral("connection lost: %1").arg(QString::fromLocal8Bit(m_context->errstr)));
            // The connection is unusable after an I/O error; the next call reconnects.
            m_context.reset();
            return std::nullopt;
        }
        replies.emplace_back(static_cast<redisReply *>(reply));
    }
    return replies;
}

std::optional<std::vector<RedisConnection::Reply>>
RedisConnection::pipeline(const QList<QByteArrayList> &commands, QString *error)
{
    if (!m_context && !open(error))
        return std::nullopt;
    return exchange(commands, error);
}

namespace redisreply {

const redisReply *element(const redisReply *reply, size_t i)
{
    return reply && reply->type == REDIS_REPLY_ARRAY && i < reply->elements ? reply->element[i] : nullptr;
}

size_t elementCount(const redisReply *reply)
{
    return reply && reply->type == REDIS_REPLY_ARRAY ? reply->elements : 0;
}

QByteArray bytes(const redisReply *reply)
{
    if (!reply || (reply->type != REDIS_REPLY_STRING && reply->type != REDIS_REPLY_STATUS))
        return {};
    return QByteArray(reply->str, qsizetype(reply->len));
}

std::optional<qint64> integer(const redisReply *reply)
{
    if (reply && reply->type == REDIS_REPLY_INTEGER)
        return reply->integer;
    return std::nullopt;
}

bool isError(const redisReply *reply)
{
    return !reply || reply->type == REDIS_REPLY_ERROR;
}

QByteArray errorText(const redisReply *reply)
{
    if (!reply)
        return QByteArrayLiteral("no reply");
    return reply->type == REDIS_REPLY_ERROR ? QByteArray(reply->str, qsizetype(reply->len)) : QByteArray();
}

QHash<QByteArray, QByteArray> fieldMap(const redisReply *list)
{
    QHash<QByteArray, QByteArray> fields;
    for (size_t i = 0; i + 1 < elementCount(list); i += 2) {
        const redisReply *value = element(list, i + 1);
        fields.insert(bytes(element(list, i)),
                      value->type == REDIS_REPLY_INTEGER ? QByteArray::number(value->integer) : bytes(value));
    }
    return fields;
}

} // namespace redisreply

} // namespace once
