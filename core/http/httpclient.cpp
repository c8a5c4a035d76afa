#include "http/httpclient.h"

#include "http/httpresponseparser.h"
#include "http/httpsyntax.h"

#include <QElapsedTimer>
#include <QHash>
#include <QLoggingCategory>
#include <QPointer>
#include <QSslSocket>
#include <QTcpSocket>
#include <QTimer>

#include <algorithm>
#include <deque>
#include <optional>
#include <vector>

namespace {
Q_LOGGING_CATEGORY(lcHttp, "once.core.http")
}

namespace once {

namespace {

using http::equalsCi;
using http::ResponseParser;

constexpr qint64 kSocketReadBufferBytes = 64 * 1024;

bool isToken(QByteArrayView s)
{
    if (s.isEmpty())
        return false;
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (c <= 32 || c >= 127 || ch == ':' || ch == '(' || ch == ')' || ch == ',' || ch == ';' ||
            ch == '"' || ch == '/' || ch == '[' || ch == ']' || ch == '{' || ch == '}' || ch == '\\' ||
            ch == '<' || ch == '>' || ch == '=' || ch == '?' || ch == '@')
            return false;
    }
    return true;
}

// The alerts that only a handshake in progress can cause, named: the peer's TLS layer
// refused the session, so it never handed our request to the server behind it.
std::optional<QString> handshakeAlertName(QSsl::AlertType type)
{
    switch (type) {
    case QSsl::AlertType::HandshakeFailure:
        return QStringLiteral("handshake failure");
    case QSsl::AlertType::NoCertificate:
    case QSsl::AlertType::CertificateRequired:
        return QStringLiteral("a client certificate is required");
    case QSsl::AlertType::BadCertificate:
        return QStringLiteral("bad certificate");
    case QSsl::AlertType::UnsupportedCertificate:
        return QStringLiteral("unsupported certificate");
    case QSsl::AlertType::CertificateRevoked:
        return QStringLiteral("certificate revoked");
    case QSsl::AlertType::CertificateExpired:
        return QStringLiteral("certificate expired");
    case QSsl::AlertType::CertificateUnknown:
        return QStringLiteral("certificate unknown");
    case QSsl::AlertType::UnknownCa:
        return QStringLiteral("unknown CA");
    case QSsl::AlertType::AccessDenied:
        return QStringLiteral("access denied");
    default:
        return std::nullopt;
    }
}

bool isSafeValue(QByteArrayView s)
{
    return !s.contains('\r') && !s.contains('\n') && !s.contains('\0');
}

struct Pending
{
    QByteArray wire; // the serialized request, written once
    QPointer<QObject> context;
    bool hasContext = false;
    HttpClient::Callback callback;
    QElapsedTimer started;
    int timeoutMs = 0;
    qint64 maxResponseBodyBytes = 0;
    bool headRequest = false;
};

struct Completed
{
    QPointer<QObject> context;
    bool hasContext = false;
    HttpClient::Callback callback;
    HttpResult result;
};

struct Host;

// One pooled socket plus its exchange timer. A plain QObject (no Q_OBJECT needed) so it
// can be the context of the socket connections and be disconnected in one call. It is a
// child of the client, and socket and timer are its children, so that moveToThread() on
// the client takes everything along.
class Connection final : public QObject
{
    Q_DISABLE_COPY_MOVE(Connection)

public:
    enum class State
    {
        Connecting,
        Idle,
        Busy,
        Closed
    };

    Connection(Host *host, bool tls, QObject *parent) : QObject(parent), m_host(host)
    {
        if (tls)
            m_socket = new QSslSocket(this);
        else
            m_socket = new QTcpSocket(this);
        m_timer.setSingleShot(true);
    }

    Host *m_host = nullptr;
    QTcpSocket *m_socket = nullptr;
    QTimer m_timer{this};
    State m_state = State::Connecting;
    Pending m_pending; // meaningful while Connecting or Busy
    ResponseParser m_parser;
    // A fatal alert about the handshake: in TLS 1.3 a partner refuses our certificate
    // only after we consider the handshake done (and may have written the request).
    QString m_handshakeAlert;
};

struct Host
{
    QString name; // ACE form, used for DNS and TLS peer verification
    quint16 port = 0;
    bool tls = false;
    QByteArray hostHeader;
    std::vector<Connection *> all;
    std::vector<Connection *> idle;
    std::deque<Pending> queue;
    bool dispatching = false;
};

QString schemeName(bool tls)
{
    return tls ? QStringLiteral("https") : QStringLiteral("http");
}

} // namespace

class HttpConnectionPool
{
    Q_DISABLE_COPY_MOVE(HttpConnectionPool)

public:
    explicit HttpConnectionPool(HttpClient *client) : m_client(client) {}
    ~HttpConnectionPool();

    void send(const HttpRequest &request, QObject *context, HttpClient::Callback &&callback);
    int openConnections() const;

private:
    Host *hostFor(const QUrl &url, QString *error);
    bool serialize(const HttpRequest &request, const Host &host, QByteArray *out, QString *error) const;
    void dispatch(Host *host);
    void openConnection(Host *host, Pending &&pending);
    void startExchange(Connection *c);
    void onReady(Connection *c);
    void onReadyRead(Connection *c);
    http::ResponseParser::Progress readResponse(Connection *c);
    void failResponse(Connection *c);
    QString connectError(Connection *c, const QString &why) const;
    void onSocketDown(Connection *c, const QString &why);
    void onTimeout(Connection *c);
    void finishResponse(Connection *c);
    void failExchange(Connection *c, HttpResult::Status status, const QString &error);
    void discard(Connection *c);
    void complete(Pending &&pending, HttpResult &&result);
    void flush();
    QString describe(const Host *host) const;

    HttpClient *m_client = nullptr;
    QHash<QString, Host *> m_hosts;
    // Almost every request of a run goes to the same partner: skip the hash lookup.
    Host *m_lastHost = nullptr;
    QString m_lastHostName;
    int m_lastPort = -1;
    bool m_lastTls = false;
    std::vector<Completed> m_completed;
    bool m_flushScheduled = false;
};

HttpConnectionPool::~HttpConnectionPool()
{
    // Results are only ever delivered from flush(), never from inside a socket signal, so
    // no socket is emitting right now and the connections can be deleted directly.
    for (Host *host : std::as_const(m_hosts)) {
        for (Connection *c : host->all) {
            QObject::disconnect(c->m_socket, nullptr, c, nullptr);
            c->m_timer.stop();
            c->m_socket->abort();
            delete c;
        }
        delete host;
    }
}

int HttpConnectionPool::openConnections() const
{
    int count = 0;
    for (const Host *host : m_hosts)
        count += int(host->all.size());
    return count;
}

QString HttpConnectionPool::describe(const Host *host) const
{
    return host->name % u':' % QString::number(host->port);
}

Host *HttpConnectionPool::hostFor(const QUrl &url, QString *error)
{
    const QString scheme = url.scheme();
    bool tls = false;
    if (scheme == QLatin1String("https")) {
        tls = true;
    } else if (scheme != QLatin1String("http")) {
        *error = QStringLiteral("unsupported URL scheme '%1'").arg(scheme);
        return nullptr;
    }
    const QString name = url.host(QUrl::FullyEncoded);
    if (name.isEmpty()) {
        *error = QStringLiteral("URL has no host");
        return nullptr;
    }
    const int port = url.port(tls ? 443 : 80);
    if (m_lastHost && m_lastPort == port && m_lastTls == tls && m_lastHostName == name)
        return m_lastHost;

    const QString key = schemeName(tls) % u'/' % name % u':' % QString::number(port);
    Host *host = m_hosts.value(key);
    if (!host) {
        if (tls && !QSslSocket::supportsSsl()) {
            *error = QStringLiteral("TLS is not available in this build");
            return nullptr;
        }
        host = new Host;
        host->name = name;
        host->port = quint16(port);
        host->tls = tls;
        if (name.contains(u':')) { // IPv6 literal
            host->hostHeader.append('[').append(name.toLatin1()).append(']');
        } else {
            host->hostHeader = name.toLatin1();
        }
        if (port != (tls ? 443 : 80))
            host->hostHeader.append(':').append(QByteArray::number(port));
        m_hosts.insert(key, host);
    }
    m_lastHost = host;
    m_lastHostName = name;
    m_lastPort = port;
    m_lastTls = tls;
    return host;
}

bool HttpConnectionPool::serialize(const HttpRequest &request, const Host &host, QByteArray *out,
                                   QString *error) const
{
    if (!isToken(request.method)) {
        *error = QStringLiteral("invalid HTTP method");
        return false;
    }
    QByteArray target =
        request.url.toEncoded(QUrl::RemoveScheme | QUrl::RemoveAuthority | QUrl::RemoveFragment);
    if (!target.startsWith('/'))
        target.prepend('/'); // "http://host" or "http://host?q=1"
    if (!isSafeValue(target) || target.contains(' ')) {
        *error = QStringLiteral("invalid request target");
        return false;
    }

    qsizetype size =
        request.method.size() + target.size() + host.hostHeader.size() + request.body.size() + 96;
    for (const auto &h : request.headers) {
        // Error texts name the header position only: values may be credentials.
        if (!isToken(h.first) || !isSafeValue(h.second)) {
            *error = QStringLiteral("invalid request header #%1").arg(&h - request.headers.constData() + 1);
            return false;
        }
        size += h.first.size() + h.second.size() + 4;
    }

    QByteArray &wire = *out;
    wire.reserve(size);
    wire.append(request.method).append(' ').append(target).append(" HTTP/1.1\r\nHost: ");
    wire.append(host.hostHeader)
        .append("\r\nContent-Length: ")
        .append(QByteArray::number(request.body.size()));
    wire.append("\r\nConnection: keep-alive\r\n");
    for (const auto &h : request.headers) {
        // The client owns framing and connection management.
        if (equalsCi(h.first, "host") || equalsCi(h.first, "content-length") ||
            equalsCi(h.first, "connection") || equalsCi(h.first, "transfer-encoding"))
            continue;
        wire.append(h.first).append(": ").append(h.second).append("\r\n");
    }
    wire.append("\r\n").append(request.body);
    return true;
}

void HttpConnectionPool::send(const HttpRequest &request, QObject *context, HttpClient::Callback &&callback)
{
    Pending pending;
    pending.started.start();
    pending.context = context;
    pending.hasContext = context != nullptr;
    pending.callback = std::move(callback);
    pending.timeoutMs = request.timeoutMs;
    pending.maxResponseBodyBytes = request.maxResponseBodyBytes;
    pending.headRequest = request.method == "HEAD";

    QString error;
    Host *host = hostFor(request.url, &error);
    if (!host || !serialize(request, *host, &pending.wire, &error)) {
        HttpResult result;
        result.status = HttpResult::Status::NotSent;
        result.error = error;
        complete(std::move(pending), std::move(result));
        return;
    }
    host->queue.push_back(std::move(pending));
    dispatch(host);
}

void HttpConnectionPool::dispatch(Host *host)
{
    // A socket may fail synchronously inside connectToHost() and land here again; the
    // outer loop re-checks capacity on every turn, so the nested call can return at once
    // instead of recursing once per queued request.
    if (host->dispatching)
        return;
    host->dispatching = true;
    while (!host->queue.empty()) {
        if (!host->idle.empty()) {
            Connection *c = host->idle.back();
            host->idle.pop_back();
            // The close of an idle connection may not have been processed yet; a socket
            // that is visibly dead or has unsolicited data must not carry a request.
            if (c->m_socket->state() != QAbstractSocket::ConnectedState ||
                c->m_socket->bytesAvailable() > 0) {
                discard(c);
                continue;
            }
            c->m_pending = std::move(host->queue.front());
            host->queue.pop_front();
            startExchange(c);
        } else if (int(host->all.size()) < m_client->m_maxConnections) {
            Pending pending = std::move(host->queue.front());
            host->queue.pop_front();
            openConnection(host, std::move(pending));
        } else {
            break;
        }
    }
    host->dispatching = false;
}

void HttpConnectionPool::openConnection(Host *host, Pending &&pending)
{
    auto *c = new Connection(host, host->tls, m_client);
    host->all.push_back(c);
    c->m_state = Connection::State::Connecting;
    c->m_pending = std::move(pending);

    QTcpSocket *socket = c->m_socket;
    // Requests are small and latency matters more than packet count.
    socket->setSocketOption(QAbstractSocket::LowDelayOption, 1);
    // What the socket holds before the parser takes it: a partner that sends faster than
    // we read waits in the kernel's buffer, not in ours.
    socket->setReadBufferSize(kSocketReadBufferBytes);
    QObject::connect(socket, &QAbstractSocket::connected, c, [this, c] {
        ++m_client->m_connectionsOpened;
        if (!c->m_host->tls)
            onReady(c);
    });
    if (host->tls) {
        auto *ssl = static_cast<QSslSocket *>(socket);
        ssl->setSslConfiguration(m_client->m_sslConfiguration);
        QObject::connect(ssl, &QSslSocket::encrypted, c, [this, c] { onReady(c); });
        QObject::connect(ssl, &QSslSocket::alertReceived, c,
                         [c](QSsl::AlertLevel level, QSsl::AlertType type, const QString &) {
                             if (level != QSsl::AlertLevel::Fatal)
                                 return;
                             if (const auto name = handshakeAlertName(type))
                                 c->m_handshakeAlert = *name;
                         });
    }
    QObject::connect(socket, &QIODevice::readyRead, c, [this, c] { onReadyRead(c); });
    QObject::connect(socket, &QAbstractSocket::errorOccurred, c, [this, c](QAbstractSocket::SocketError) {
        onSocketDown(c, c->m_socket->errorString());
    });
    QObject::connect(socket, &QAbstractSocket::disconnected, c,
                     [this, c] { onSocketDown(c, QStringLiteral("connection closed by the server")); });
    QObject::connect(&c->m_timer, &QTimer::timeout, c, [this, c] { onTimeout(c); });

    if (c->m_pending.timeoutMs > 0)
        c->m_timer.start(c->m_pending.timeoutMs);
    qCDebug(lcHttp) << "connecting to" << describe(host);
    // Last statement: a synchronous failure may already have discarded c.
    if (host->tls)
        static_cast<QSslSocket *>(socket)->connectToHostEncrypted(host->name, host->port);
    else
        socket->connectToHost(host->name, host->port);
}

void HttpConnectionPool::onReady(Connection *c)
{
    if (c->m_state != Connection::State::Connecting)
        return;
    startExchange(c);
}

void HttpConnectionPool::startExchange(Connection *c)
{
    c->m_state = Connection::State::Busy;
    c->m_parser.reset(c->m_pending.headRequest, c->m_pending.maxResponseBodyBytes);
    if (c->m_pending.timeoutMs > 0)
        c->m_timer.start(c->m_pending.timeoutMs);
    else
        c->m_timer.stop();
    // From here on the request counts as possibly sent: it is written exactly once and
    // never replayed on another connection, whatever happens next.
    const qint64 written = c->m_socket->write(c->m_pending.wire);
    c->m_pending.wire = QByteArray();
    if (written < 0) {
        // write() refused the data outright: not a single byte reached the socket.
        failExchange(
            c, HttpResult::Status::NotSent,
            QStringLiteral("could not write to %1: %2").arg(describe(c->m_host), c->m_socket->errorString()));
    }
}

void HttpConnectionPool::onReadyRead(Connection *c)
{
    switch (c->m_state) {
    case Connection::State::Busy:
        break;
    case Connection::State::Idle: {
        // Unsolicited bytes (e.g. a 408) mean the server is about to drop the connection.
        Host *host = c->m_host;
        discard(c);
        dispatch(host);
        return;
    }
    case Connection::State::Connecting:
    case Connection::State::Closed:
        return;
    }
    switch (readResponse(c)) {
    case ResponseParser::Progress::NeedMore:
        return;
    case ResponseParser::Progress::Done:
        finishResponse(c);
        return;
    case ResponseParser::Progress::Error:
        failResponse(c);
        return;
    }
}

ResponseParser::Progress HttpConnectionPool::readResponse(Connection *c)
{
    // In pieces, each parsed before the next is read: the parser's buffer never holds
    // more than one piece (and an unfinished line), whatever the socket has buffered.
    constexpr qint64 Piece = 16 * 1024;
    char piece[Piece];
    for (;;) {
        const qint64 got = c->m_socket->read(piece, Piece);
        if (got <= 0)
            return ResponseParser::Progress::NeedMore;
        c->m_parser.feed(QByteArrayView(piece, got));
        const ResponseParser::Progress progress = c->m_parser.parse();
        if (progress != ResponseParser::Progress::NeedMore)
            return progress;
    }
}

void HttpConnectionPool::failResponse(Connection *c)
{
    // The request was written: whatever the partner did with it is unknown to us now.
    // The connection goes (failExchange discards it), so nothing more is read from it.
    const ResponseParser &parser = c->m_parser;
    qCWarning(lcHttp) << "unusable response from" << describe(c->m_host) << parser.error();
    const QString text = parser.tooLarge()
                             ? QStringLiteral("response from %1 not read to its end: %2")
                             : QStringLiteral("invalid response from %1: %2");
    failExchange(c, HttpResult::Status::InDoubt, text.arg(describe(c->m_host), parser.error()));
}

void HttpConnectionPool::finishResponse(Connection *c)
{
    c->m_timer.stop();
    Host *host = c->m_host;
    const bool reuse = c->m_parser.keepAlive() && !c->m_parser.hasTrailingData() &&
                       c->m_socket->bytesAvailable() == 0 &&
                       c->m_socket->state() == QAbstractSocket::ConnectedState;
    HttpResult result = c->m_parser.takeResult();
    result.status = HttpResult::Status::Response;
    Pending pending = std::move(c->m_pending);
    if (reuse) {
        c->m_state = Connection::State::Idle;
        host->idle.push_back(c);
    } else {
        discard(c);
    }
    complete(std::move(pending), std::move(result));
    dispatch(host);
}

void HttpConnectionPool::onSocketDown(Connection *c, const QString &why)
{
    switch (c->m_state) {
    case Connection::State::Closed:
        return;
    case Connection::State::Idle: {
        Host *host = c->m_host;
        qCDebug(lcHttp) << "idle connection to" << describe(host) << "closed:" << why;
        discard(c);
        dispatch(host);
        return;
    }
    case Connection::State::Connecting:
        failExchange(c, HttpResult::Status::NotSent, connectError(c, why));
        return;
    case Connection::State::Busy:
        break;
    }
    if (!c->m_handshakeAlert.isEmpty()) {
        // Written into a session the partner's TLS layer refused: nothing reached the
        // partner's server, so nothing can have taken effect.
        failExchange(c, HttpResult::Status::NotSent,
                     QStringLiteral("TLS handshake with %1 failed: the partner refused it (%2)")
                         .arg(describe(c->m_host), c->m_handshakeAlert));
        return;
    }
    // The answer may have arrived together with the close: use every byte first.
    ResponseParser::Progress progress = readResponse(c);
    if (progress == ResponseParser::Progress::NeedMore)
        progress = c->m_parser.finishAtEof();
    if (progress == ResponseParser::Progress::Done) {
        finishResponse(c);
        return;
    }
    if (progress == ResponseParser::Progress::Error) {
        failResponse(c);
        return;
    }
    failExchange(c, HttpResult::Status::InDoubt,
                 QStringLiteral("connection to %1 lost before a complete response: %2").arg(describe(c->m_host), why));
}

QString HttpConnectionPool::connectError(Connection *c, const QString &why) const
{
    // A refused certificate says why in the verification errors: every one of them
    // (expired and for another name, say), not only the first.
    if (!c->m_handshakeAlert.isEmpty())
        return QStringLiteral("TLS handshake with %1 failed: the partner refused it (%2)")
            .arg(describe(c->m_host), c->m_handshakeAlert);
    if (c->m_host->tls && c->m_socket->error() == QAbstractSocket::SslHandshakeFailedError) {
        QStringList reasons;
        for (const QSslError &error : static_cast<QSslSocket *>(c->m_socket)->sslHandshakeErrors())
            reasons << error.errorString();
        reasons.removeDuplicates();
        return QStringLiteral("TLS handshake with %1 failed: %2")
            .arg(describe(c->m_host), reasons.isEmpty() ? why : reasons.join(QLatin1String("; ")));
    }
    return QStringLiteral("could not connect to %1: %2").arg(describe(c->m_host), why);
}

void HttpConnectionPool::onTimeout(Connection *c)
{
    if (c->m_state == Connection::State::Connecting) {
        failExchange(c, HttpResult::Status::NotSent,
                     QStringLiteral("could not connect to %1 within %2 ms")
                         .arg(describe(c->m_host), QString::number(c->m_pending.timeoutMs)));
    } else if (c->m_state == Connection::State::Busy) {
        failExchange(c, HttpResult::Status::InDoubt,
                     QStringLiteral("no complete response from %1 within %2 ms")
                         .arg(describe(c->m_host), QString::number(c->m_pending.timeoutMs)));
    }
}

void HttpConnectionPool::failExchange(Connection *c, HttpResult::Status status, const QString &error)
{
    Host *host = c->m_host;
    Pending pending = std::move(c->m_pending);
    discard(c);
    HttpResult result;
    result.status = status;
    result.error = error;
    complete(std::move(pending), std::move(result));
    dispatch(host);
}

void HttpConnectionPool::discard(Connection *c)
{
    Host *host = c->m_host;
    c->m_state = Connection::State::Closed;
    host->all.erase(std::remove(host->all.begin(), host->all.end(), c), host->all.end());
    host->idle.erase(std::remove(host->idle.begin(), host->idle.end(), c), host->idle.end());
    QObject::disconnect(c->m_socket, nullptr, c, nullptr);
    c->m_timer.stop();
    c->m_socket->abort();
    // We are usually inside one of this socket's signals.
    c->deleteLater();
}

void HttpConnectionPool::complete(Pending &&pending, HttpResult &&result)
{
    result.latencyMs = pending.started.elapsed();
    if (!pending.callback || (pending.hasContext && !pending.context))
        return;
    m_completed.push_back(Completed{std::move(pending.context), pending.hasContext,
                                    std::move(pending.callback), std::move(result)});
    if (!m_flushScheduled) {
        // One queued call delivers every result completed in this event-loop turn. Running
        // callbacks from there (never from socket signals or send()) lets a callback call
        // send() or delete the client safely.
        m_flushScheduled = true;
        QMetaObject::invokeMethod(
            m_client, [this] { flush(); }, Qt::QueuedConnection);
    }
}

void HttpConnectionPool::flush()
{
    m_flushScheduled = false;
    std::vector<Completed> batch;
    batch.swap(m_completed);
    const QPointer<HttpClient> alive(m_client);
    for (Completed &done : batch) {
        if (!alive)
            return; // the client was destroyed by an earlier callback: stay silent
        if (done.hasContext && !done.context)
            continue;
        done.callback(done.result);
    }
}

HttpClient::HttpClient(int maxConnectionsPerHost, QObject *parent)
    : QObject(parent), m_maxConnections(std::max(1, maxConnectionsPerHost)),
      m_pool(std::make_unique<HttpConnectionPool>(this))
{
}

HttpClient::~HttpClient() = default;

void HttpClient::send(const HttpRequest &request, QObject *context, Callback onFinished)
{
    m_pool->send(request, context, std::move(onFinished));
}

int HttpClient::openConnections() const
{
    return m_pool->openConnections();
}

} // namespace once
