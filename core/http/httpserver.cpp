#include "http/httpserver.h"

#include "http/httpsyntax.h"

#include <QDeadlineTimer>
#include <QHash>
#include <QLoggingCategory>
#include <QMutex>
#include <QSet>
#include <QTimer>

#include <microhttpd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <vector>

Q_LOGGING_CATEGORY(lcHttpServer, "once.http.server")

namespace once {

namespace {

// How often the deadlines of heads and the sockets of requests waiting for their answer
// are looked at: a quarter of a second adds at most that to connectionTimeoutSeconds.
constexpr int SweepIntervalMs = 250;

qint64 nowMs()
{
    return QDeadlineTimer::current().deadline();
}

// One TCP connection: libmicrohttpd's socket context.
struct Connection
{
    MHD_Connection *mhd = nullptr;
    int fd = -1;
    // Since when it has been waiting for a request head (accepted, or its last answer sent);
    // negative while it is not (reading a body, waiting for or sending an answer).
    qint64 waitingForHeadSince = -1;
    bool shutDown = false;
};

// One request: libmicrohttpd's request context, made when the request line arrives.
struct Request
{
    enum class Stage
    {
        Head,     // the first call of the access handler has not come yet
        Body,     // admitted, reading its body
        Decided,  // answered by the Admit, without a body: the answer goes out at the final call
        Waiting,  // delivered, suspended until answer()
        Answered, // answer() gave the answer, the connection resumed to send it
        Gone,     // the client went away while it waited; resumed to be closed
        Done,     // an answer is queued
    };
    Connection *connection = nullptr;
    QByteArray target; // the request-target, raw
    Stage stage = Stage::Head;
    HttpHead head;
    qsizetype bound = 0;
    bool chunked = false;
    qsizetype reserved = 0; // of State::buffered
    QByteArray body;
    quint64 exchange = 0;
    bool announced = false; // requestArrived was emitted
    HttpAnswer answer;
};

} // namespace

struct HttpServer::State
{
    HttpServer *server = nullptr;
    Admit admit;
    HttpServerLimits limits;
    MHD_Daemon *daemon = nullptr;
    quint16 port = 0;

    mutable QMutex mutex; // guards everything below
    QHash<quint64, Request *> exchanges;
    QSet<Connection *> connections;
    qsizetype buffered = 0;
    quint64 nextExchange = 1;
    bool stopping = false;
    bool starting = false;
    QString startError;
};

namespace {

using State = HttpServer::State;

void logMessage(void *cls, const char *format, va_list args)
{
    auto *state = static_cast<State *>(cls);
    // While the daemon starts its messages are about the address, the port and the TLS
    // material, never a client's; they become listen()'s error. Once it runs, a message may
    // hold a request's target (a token in a query), so only the message's format is logged.
    QMutexLocker lock(&state->mutex);
    if (state->starting) {
        char text[512];
        std::vsnprintf(text, sizeof text, format, args);
        const QString message = QString::fromLocal8Bit(text).trimmed();
        state->startError += state->startError.isEmpty() ? message : QStringLiteral("; ") + message;
        return;
    }
    lock.unlock();
    qCDebug(lcHttpServer, "libmicrohttpd: %s", QByteArray(format).trimmed().constData());
}

void onConnection(void *cls, MHD_Connection *mhd, void **socketContext, MHD_ConnectionNotificationCode code)
{
    auto *state = static_cast<State *>(cls);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        auto *connection = new Connection;
        connection->mhd = mhd;
        if (const MHD_ConnectionInfo *info = MHD_get_connection_info(mhd, MHD_CONNECTION_INFO_CONNECTION_FD))
            connection->fd = info->connect_fd;
        connection->waitingForHeadSince = nowMs();
        *socketContext = connection;
        QMutexLocker lock(&state->mutex);
        state->connections.insert(connection);
        return;
    }
    auto *connection = static_cast<Connection *>(*socketContext);
    if (!connection)
        return;
    *socketContext = nullptr;
    {
        // Under the lock, so that sweep() never shuts down a descriptor libmicrohttpd has
        // closed (it closes it after this call) and may have given to another connection.
        QMutexLocker lock(&state->mutex);
        state->connections.remove(connection);
    }
    delete connection;
}

void *onRequestLine(void *cls, const char *target, MHD_Connection *mhd)
{
    Q_UNUSED(cls);
    auto *request = new Request;
    request->target = target ? QByteArray(target) : QByteArray();
    if (const MHD_ConnectionInfo *info = MHD_get_connection_info(mhd, MHD_CONNECTION_INFO_SOCKET_CONTEXT))
        request->connection = static_cast<Connection *>(info->socket_context);
    return request;
}

void postExchangeEnded(State *state, quint64 exchange)
{
    HttpServer *server = state->server;
    QMetaObject::invokeMethod(
        server, [server, exchange] { Q_EMIT server->exchangeEnded(exchange); }, Qt::QueuedConnection);
}

void onRequestCompleted(void *cls, MHD_Connection *mhd, void **context, MHD_RequestTerminationCode code)
{
    Q_UNUSED(mhd);
    Q_UNUSED(code);
    auto *state = static_cast<State *>(cls);
    auto *request = static_cast<Request *>(*context);
    if (!request)
        return;
    *context = nullptr;
    {
        QMutexLocker lock(&state->mutex);
        state->buffered -= request->reserved;
        if (request->exchange != 0 && state->exchanges.remove(request->exchange) && request->announced &&
            !state->stopping) {
            postExchangeEnded(state, request->exchange);
        }
        if (request->connection)
            request->connection->waitingForHeadSince = nowMs();
    }
    delete request;
}

void freeBody(void *cls)
{
    delete static_cast<QByteArray *>(cls);
}

// Queues `answer`; closing the connection after it when asked, for HTTP/1.0, and when a
// body was announced but is not read (libmicrohttpd closes then anyway).
MHD_Result queueAnswer(MHD_Connection *mhd, const Request &request, const HttpAnswer &answer, bool close)
{
    auto *body = new QByteArray(answer.body);
    MHD_Response *response = MHD_create_response_from_buffer_with_free_callback_cls(
        size_t(body->size()), const_cast<char *>(body->constData()), &freeBody, body);
    if (!response) {
        delete body;
        return MHD_NO;
    }
    for (const auto &[name, value] : answer.headers) {
        if (name.compare("Content-Length", Qt::CaseInsensitive) == 0)
            continue;
        if (!http::isToken(name) || !http::isFieldValue(value) ||
            MHD_add_response_header(response, name.constData(), value.constData()) != MHD_YES) {
            qCWarning(lcHttpServer, "an answer's header %s was left out: not a valid header",
                      name.constData());
        }
    }
    if (close || answer.close || request.head.version == "HTTP/1.0")
        MHD_add_response_header(response, "Connection", "close");
    int status = answer.status;
    if (status < 200 || status > 599) {
        qCWarning(lcHttpServer, "an answer's status %d is not one HTTP allows here: sent as 500", status);
        status = 500;
    }
    const MHD_Result queued = MHD_queue_response(mhd, unsigned(status), response);
    MHD_destroy_response(response);
    return queued;
}

HttpAnswer refusal(int status, const char *text)
{
    HttpAnswer answer;
    answer.status = status;
    answer.headers = {{"Content-Type", "text/plain; charset=utf-8"}};
    answer.body = QByteArray(text) + '\n';
    answer.close = true;
    return answer;
}

struct CollectedHeaders
{
    QList<std::pair<QByteArray, QByteArray>> *headers = nullptr;
    bool folded = false;
};

// libmicrohttpd 0.9.75 joins a folded header line (obs-fold, a line that begins with a space
// or a tab) onto the header's name, with no space, in a copy of the name, and keeps the value
// where the first line had it: "Transfer-Encoding:\r\n chunked" becomes a header named
// "Transfer-Encodingchunked" with an empty value, where a proxy that replaces the fold with
// a space (RFC 9112 5.2) reads a chunked request. A value read in place follows its name,
// the colon (overwritten with a NUL) and optional spaces; a folded one does not.
bool valueFollowsName(const char *key, size_t keySize, const char *value)
{
    const char *colon = key + keySize;
    if (!value || value <= colon || *colon != '\0' || value - colon > 64 * 1024)
        return false;
    for (const char *c = colon + 1; c < value; ++c) {
        if (*c != ' ' && *c != '\t')
            return false;
    }
    return true;
}

MHD_Result collectHeader(void *cls, MHD_ValueKind kind, const char *key, size_t keySize, const char *value,
                         size_t valueSize)
{
    Q_UNUSED(kind);
    auto *collected = static_cast<CollectedHeaders *>(cls);
    if (!valueFollowsName(key, keySize, value))
        collected->folded = true;
    collected->headers->append({QByteArray(key, qsizetype(keySize)),
                                value ? QByteArray(value, qsizetype(valueSize)) : QByteArray()});
    return MHD_YES;
}

MHD_Result onHead(State *state, MHD_Connection *mhd, Request *request, const char *method,
                  const char *version)
{
    HttpHead &head = request->head;
    head.method = method;
    head.version = version;
    const qsizetype question = request->target.indexOf('?');
    head.path = question < 0 ? request->target : request->target.left(question);
    head.query = question < 0 ? QByteArray() : request->target.mid(question + 1);
    CollectedHeaders collected{&head.headers};
    MHD_get_connection_values_n(mhd, MHD_HEADER_KIND, &collectHeader, &collected);
    if (const MHD_ConnectionInfo *info = MHD_get_connection_info(mhd, MHD_CONNECTION_INFO_CLIENT_ADDRESS)) {
        head.peer = QHostAddress(info->client_addr);
        // An IPv4 client of a dual-stack socket arrives as ::ffff:a.b.c.d: one address, one form.
        bool v4 = false;
        const quint32 address = head.peer.toIPv4Address(&v4);
        if (v4)
            head.peer = QHostAddress(address);
    }
    if (request->connection) {
        QMutexLocker lock(&state->mutex);
        request->connection->waitingForHeadSince = -1;
    }
    request->stage = Request::Stage::Done;

    if (headSize(head) > state->limits.headBytes)
        return queueAnswer(mhd, *request, refusal(431, "Request Header Fields Too Large"), true);
    const char *problem = collected.folded ? "a header line folded (obs-fold)" : framingProblem(head);
    if (problem) {
        qCDebug(lcHttpServer, "a request from %s refused: %s", qPrintable(head.peer.toString()), problem);
        return queueAnswer(mhd, *request, refusal(400, "Bad Request"), true);
    }
    const bool chunked = head.headerCount("Transfer-Encoding") == 1;
    const qsizetype length = chunked ? 0 : head.header("Content-Length").toLongLong();
    const bool announced = chunked || length > 0;

    HttpServer::Admission admission;
    try {
        admission = state->admit(head);
    } catch (...) {
        // An exception must not unwind through libmicrohttpd's C frames.
        qCWarning(lcHttpServer, "the server's admission check failed with an exception: answered 500");
        admission = refusal(500, "Internal Server Error");
    }
    if (const auto *answer = std::get_if<HttpAnswer>(&admission)) {
        if (announced)
            return queueAnswer(mhd, *request, *answer, true);
        // libmicrohttpd closes the connection after any answer queued with the head (it
        // cannot know that no body follows); one queued at the final call keeps it open.
        request->answer = *answer;
        request->stage = Request::Stage::Decided;
        return MHD_YES;
    }
    const qsizetype bound = std::max<qsizetype>(0, std::get<qsizetype>(admission));
    if (length > bound)
        return queueAnswer(mhd, *request, refusal(413, "Content Too Large"), true);
    if (length > 0) {
        QMutexLocker lock(&state->mutex);
        if (state->buffered + length > state->limits.bufferedBodyBytes) {
            lock.unlock();
            HttpAnswer busy = refusal(503, "Service Unavailable: too many bodies being read");
            busy.headers.append({QByteArray("Retry-After"), QByteArray("1")});
            return queueAnswer(mhd, *request, busy, true);
        }
        state->buffered += length;
        request->reserved = length;
    }
    request->bound = bound;
    request->chunked = chunked;
    if (length > 0)
        request->body.reserve(length);
    request->stage = Request::Stage::Body;
    return MHD_YES;
}

MHD_Result onBodyBytes(State *state, Request *request, const char *data, size_t *size)
{
    const auto bytes = qsizetype(*size);
    if (request->chunked) {
        if (request->body.size() + bytes > request->bound) {
            qCDebug(lcHttpServer,
                    "a chunked body from %s went past its bound of %lld bytes: connection closed",
                    qPrintable(request->head.peer.toString()), qlonglong(request->bound));
            return MHD_NO;
        }
        QMutexLocker lock(&state->mutex);
        if (state->buffered + bytes > state->limits.bufferedBodyBytes) {
            qCDebug(lcHttpServer, "a chunked body from %s went past the bodies' buffer: connection closed",
                    qPrintable(request->head.peer.toString()));
            return MHD_NO;
        }
        state->buffered += bytes;
        request->reserved += bytes;
    }
    request->body.append(data, bytes);
    *size = 0;
    return MHD_YES;
}

MHD_Result onBodyComplete(State *state, MHD_Connection *mhd, Request *request)
{
    quint64 exchange = 0;
    {
        QMutexLocker lock(&state->mutex);
        if (state->stopping)
            return MHD_NO;
        exchange = state->nextExchange++;
        request->exchange = exchange;
        request->stage = Request::Stage::Waiting;
        state->exchanges.insert(exchange, request);
        // Under the lock: the destructor resumes every waiting request before it stops the
        // daemon, which must not find one suspended.
        MHD_suspend_connection(mhd);
    }
    HttpServer *server = state->server;
    QMetaObject::invokeMethod(
        server,
        [state, server, exchange] {
            HttpHead head;
            QByteArray body;
            {
                QMutexLocker lock(&state->mutex);
                Request *waiting = state->exchanges.value(exchange);
                if (!waiting)
                    return; // gone before it could be announced
                waiting->announced = true;
                head = waiting->head;
                body = waiting->body;
            }
            Q_EMIT server->requestArrived(exchange, head, body);
        },
        Qt::QueuedConnection);
    return MHD_YES;
}

MHD_Result onResumed(State *state, MHD_Connection *mhd, Request *request)
{
    QMutexLocker lock(&state->mutex);
    switch (request->stage) {
    case Request::Stage::Answered: {
        const HttpAnswer answer = request->answer;
        request->stage = Request::Stage::Done;
        lock.unlock();
        return queueAnswer(mhd, *request, answer, false);
    }
    case Request::Stage::Waiting:
        if (state->stopping)
            return MHD_NO;
        MHD_suspend_connection(mhd); // woken without an answer: wait on
        return MHD_YES;
    case Request::Stage::Gone:
    case Request::Stage::Head:
    case Request::Stage::Body:
    case Request::Stage::Decided:
    case Request::Stage::Done:
        return MHD_NO;
    }
    return MHD_NO;
}

MHD_Result onAccess(void *cls, MHD_Connection *mhd, const char *url, const char *method, const char *version,
                    const char *uploadData, size_t *uploadSize, void **context)
{
    Q_UNUSED(url); // unescaped by libmicrohttpd; the raw target came with the request line
    auto *state = static_cast<State *>(cls);
    auto *request = static_cast<Request *>(*context);
    if (!request)
        return MHD_NO;
    switch (request->stage) {
    case Request::Stage::Head:
        return onHead(state, mhd, request, method, version);
    case Request::Stage::Body:
        if (*uploadSize != 0)
            return onBodyBytes(state, request, uploadData, uploadSize);
        return onBodyComplete(state, mhd, request);
    case Request::Stage::Decided:
        request->stage = Request::Stage::Done;
        return queueAnswer(mhd, *request, request->answer, false);
    case Request::Stage::Waiting:
    case Request::Stage::Answered:
    case Request::Stage::Gone:
    case Request::Stage::Done:
        return onResumed(state, mhd, request);
    }
    return MHD_NO;
}

} // namespace

HttpServer::HttpServer(Admit admit, HttpServerLimits limits, QObject *parent)
    : QObject(parent), m_state(std::make_unique<State>())
{
    m_state->server = this;
    m_state->admit = std::move(admit);
    m_state->limits = limits;
}

HttpServer::~HttpServer()
{
    if (!m_state->daemon)
        return;
    // libmicrohttpd stops with a panic when a connection is still suspended: every request
    // waiting for its answer is resumed, to be closed, first.
    QList<MHD_Connection *> waiting;
    {
        QMutexLocker lock(&m_state->mutex);
        m_state->stopping = true;
        for (Request *request : std::as_const(m_state->exchanges)) {
            if (request->stage == Request::Stage::Waiting && request->connection) {
                request->stage = Request::Stage::Gone;
                waiting.append(request->connection->mhd);
            }
        }
    }
    for (MHD_Connection *connection : std::as_const(waiting))
        MHD_resume_connection(connection);
    MHD_stop_daemon(m_state->daemon);
}

bool HttpServer::listen(const QHostAddress &host, quint16 port,
                        const std::optional<std::pair<QByteArray, QByteArray>> &tlsPem, QString *error)
{
    if (m_state->daemon) {
        *error = QStringLiteral("the HTTP server listens already");
        return false;
    }
    const HttpServerLimits &limits = m_state->limits;
    if (limits.maxConnections < 1 || limits.connectionTimeoutSeconds < 1 || limits.headBytes < 256 ||
        limits.bufferedBodyBytes < 0) {
        *error = QStringLiteral("the HTTP server's limits are out of range");
        return false;
    }

    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ITC | MHD_USE_ERROR_LOG;
    sockaddr_in v4 = {};
    sockaddr_in6 v6 = {};
    const sockaddr *address = nullptr;
    if (host == QHostAddress::Any || host == QHostAddress::AnyIPv6) {
        flags |= host == QHostAddress::Any ? MHD_USE_DUAL_STACK : MHD_USE_IPv6;
        v6.sin6_family = AF_INET6;
        v6.sin6_port = htons(port);
        v6.sin6_addr = in6addr_any;
        address = reinterpret_cast<const sockaddr *>(&v6);
    } else if (host.protocol() == QAbstractSocket::IPv4Protocol) {
        v4.sin_family = AF_INET;
        v4.sin_port = htons(port);
        v4.sin_addr.s_addr = htonl(host.toIPv4Address());
        address = reinterpret_cast<const sockaddr *>(&v4);
    } else if (host.protocol() == QAbstractSocket::IPv6Protocol) {
        flags |= MHD_USE_IPv6;
        v6.sin6_family = AF_INET6;
        v6.sin6_port = htons(port);
        const Q_IPV6ADDR bytes = host.toIPv6Address();
        std::memcpy(&v6.sin6_addr, &bytes, sizeof bytes);
        v6.sin6_scope_id = host.scopeId().toUInt();
        address = reinterpret_cast<const sockaddr *>(&v6);
    } else {
        *error = QStringLiteral("cannot listen on %1: not an IP address").arg(host.toString());
        return false;
    }
    if (tlsPem)
        flags |= MHD_USE_TLS;
    // The key is handed over as a C string and wiped after the daemon has read it.
    QByteArray certificate = tlsPem ? tlsPem->first : QByteArray();
    QByteArray key = tlsPem ? tlsPem->second : QByteArray();

    QList<MHD_OptionItem> options = {
        {MHD_OPTION_EXTERNAL_LOGGER, intptr_t(&logMessage), m_state.get()},
        {MHD_OPTION_SOCK_ADDR, 0, const_cast<sockaddr *>(address)},
        {MHD_OPTION_CONNECTION_LIMIT, intptr_t(limits.maxConnections), nullptr},
        {MHD_OPTION_CONNECTION_TIMEOUT, intptr_t(limits.connectionTimeoutSeconds), nullptr},
        // Room for the head, the parsed headers and the answer's head: a head that does
        // not fit gets libmicrohttpd's 431 (or 414) before more of it is read.
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, intptr_t(2 * limits.headBytes), nullptr},
        {MHD_OPTION_STRICT_FOR_CLIENT, 1, nullptr},
        {MHD_OPTION_NOTIFY_CONNECTION, intptr_t(&onConnection), m_state.get()},
        {MHD_OPTION_URI_LOG_CALLBACK, intptr_t(&onRequestLine), m_state.get()},
        {MHD_OPTION_NOTIFY_COMPLETED, intptr_t(&onRequestCompleted), m_state.get()},
    };
    if (tlsPem) {
        options.append({MHD_OPTION_HTTPS_MEM_CERT, 0, const_cast<char *>(certificate.constData())});
        options.append({MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char *>(key.constData())});
    }
    options.append({MHD_OPTION_END, 0, nullptr});

    {
        QMutexLocker lock(&m_state->mutex);
        m_state->starting = true;
        m_state->startError.clear();
    }
    MHD_Daemon *daemon = MHD_start_daemon(flags, port, nullptr, nullptr, &onAccess, m_state.get(),
                                          MHD_OPTION_ARRAY, options.data(), MHD_OPTION_END);
    key.fill('\0');
    QString why;
    {
        QMutexLocker lock(&m_state->mutex);
        m_state->starting = false;
        why = m_state->startError;
    }
    const QString where = host.protocol() == QAbstractSocket::IPv6Protocol
                              ? QStringLiteral("[%1]:%2").arg(host.toString()).arg(port)
                              : QStringLiteral("%1:%2").arg(host.toString()).arg(port);
    if (!daemon) {
        *error = QStringLiteral("cannot listen on %1: %2")
                     .arg(where, why.isEmpty() ? QStringLiteral("the HTTP server did not start") : why);
        return false;
    }
    m_state->daemon = daemon;
    if (const MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT))
        m_state->port = info->port;

    auto *timer = new QTimer(this);
    connect(timer, &QTimer::timeout, this, &HttpServer::sweep);
    timer->start(SweepIntervalMs);
    return true;
}

quint16 HttpServer::serverPort() const
{
    return m_state->port;
}

int HttpServer::connectionCount() const
{
    QMutexLocker lock(&m_state->mutex);
    return int(m_state->connections.size());
}

void HttpServer::answer(quint64 exchange, const HttpAnswer &answer)
{
    MHD_Connection *connection = nullptr;
    {
        QMutexLocker lock(&m_state->mutex);
        Request *request = m_state->exchanges.value(exchange);
        if (!request || request->stage != Request::Stage::Waiting || m_state->stopping ||
            !request->connection)
            return;
        request->answer = answer;
        request->stage = Request::Stage::Answered;
        m_state->exchanges.remove(exchange);
        connection = request->connection->mhd;
    }
    // Outside the lock: libmicrohttpd takes its own. The connection stays suspended, and
    // so valid, until this call: nothing else resumes a request no longer Waiting.
    MHD_resume_connection(connection);
}

// What libmicrohttpd does not do itself. It times a connection out only when it is idle,
// so a head sent a byte at a time would hold a slot for ever: a connection still waiting
// for its head after connectionTimeoutSeconds is shut down (libmicrohttpd then reads the
// end of it and closes it). And it does not watch a suspended connection, so a client that
// leaves while its request waits for an answer would go unnoticed until the answer: the
// sockets of waiting requests are polled for the peer's close.
void HttpServer::sweep()
{
    State &state = *m_state;
    const qint64 now = nowMs();
    const qint64 timeoutMs = qint64(state.limits.connectionTimeoutSeconds) * 1000;
    std::vector<pollfd> sockets;
    std::vector<quint64> polled;
    {
        QMutexLocker lock(&state.mutex);
        for (Connection *connection : std::as_const(state.connections)) {
            if (connection->shutDown || connection->waitingForHeadSince < 0 || connection->fd < 0 ||
                now - connection->waitingForHeadSince < timeoutMs) {
                continue;
            }
            connection->shutDown = true;
            ::shutdown(connection->fd, SHUT_RDWR);
        }
        for (auto it = state.exchanges.cbegin(); it != state.exchanges.cend(); ++it) {
            const Request *request = it.value();
            if (request->stage != Request::Stage::Waiting || !request->announced || !request->connection ||
                request->connection->fd < 0) {
                continue;
            }
            sockets.push_back({request->connection->fd, POLLRDHUP, 0});
            polled.push_back(it.key());
        }
    }
    if (sockets.empty())
        return;
    // answer() may resume a request meanwhile, and its descriptor be closed and reused:
    // what is found is acted on only for requests still Waiting, whose descriptors were
    // theirs all along (only a resume lets libmicrohttpd close one).
    if (::poll(sockets.data(), sockets.size(), 0) <= 0)
        return;
    QList<MHD_Connection *> gone;
    QList<quint64> ended;
    {
        QMutexLocker lock(&state.mutex);
        for (size_t i = 0; i < sockets.size(); ++i) {
            if (!(sockets[i].revents & (POLLRDHUP | POLLHUP | POLLERR)))
                continue;
            Request *request = state.exchanges.value(polled[i]);
            if (!request || request->stage != Request::Stage::Waiting)
                continue;
            request->stage = Request::Stage::Gone;
            state.exchanges.remove(polled[i]);
            gone.append(request->connection->mhd);
            ended.append(polled[i]);
        }
    }
    for (MHD_Connection *connection : std::as_const(gone))
        MHD_resume_connection(connection);
    for (const quint64 exchange : std::as_const(ended))
        Q_EMIT exchangeEnded(exchange);
}

} // namespace once
