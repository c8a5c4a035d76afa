#include "sim/partnersimulator.h"

#include "http/httpsyntax.h"
#include "sim/providerimitation.h"

#include <QDateTime>
#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QJsonParseError>
#include <QLoggingCategory>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QPointer>
#include <QRandomGenerator>
#include <QSslServer>
#include <QTcpServer>
#include <QTcpSocket>
#include <QTimer>

#include <deque>
#include <functional>
#include <memory>

namespace {
Q_LOGGING_CATEGORY(lcPartner, "once.core.partnersim")
}

namespace once {

namespace {

using http::equalsCi;
using http::hasToken;

constexpr qsizetype kMaxHeaderBytes = 64 * 1024;
constexpr qint64 kMaxBodyBytes = 1024 * 1024;

QByteArrayView reasonPhrase(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 413:
        return "Content Too Large";
    case 422:
        return "Unprocessable Content";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    default:
        return "Unknown";
    }
}

struct ServerRequest
{
    QByteArray method;
    QByteArray path;
    QByteArray query;
    HttpHeaders headers;
    QByteArray idempotencyKey;
    QByteArray authorization; // only ever echoed back, by the echo-authorization mode
    QByteArray body;
    qint64 contentLength = 0;
    bool keepAlive = true;
};

struct ServerConnection
{
    QPointer<QTcpSocket> socket;
    QByteArray buffer;
    ServerRequest current;
    qsizetype bodyOffset = -1; // >= 0 once the head of `current` has been parsed
    // While a delayed answer is pending, later (pipelined) requests wait in the buffer so
    // that answers leave in request order.
    bool awaiting = false;
    bool closing = false;
};

using ConnectionPtr = std::shared_ptr<ServerConnection>;

struct KeyRecord
{
    QByteArray requestBody;
    QByteArray responseBody;
    QByteArray responseHeaders;
    int status = 0;
    bool inProgress = true;
    qint64 firstSeenMs = 0; // on the simulator's clock
};

} // namespace

struct PartnerSimulator::Private
{
    // The server is a child of the simulator so that moveToThread() takes it (and the
    // client sockets, its children) along.
    explicit Private(PartnerSimulator *owner) : q(owner), server(new QTcpServer(owner)) {}

    ~Private()
    {
        // Silence the sockets before they go so that no handler runs against a
        // half-destroyed simulator.
        const auto sockets = server->findChildren<QTcpSocket *>();
        for (QTcpSocket *socket : sockets) {
            QObject::disconnect(socket, nullptr, nullptr, nullptr);
            socket->abort();
        }
        delete server;
    }

    void setUp();
    void onNewConnection();
    void onReadyRead(const ConnectionPtr &conn);
    void processBuffer(const ConnectionPtr &conn);
    enum class Parse
    {
        Incomplete,
        Ready,
        Bad
    };
    Parse parseRequest(ServerConnection &conn, ServerRequest *request, int *badStatus);
    void handle(const ConnectionPtr &conn, ServerRequest &&request);
    void handleReminder(const ConnectionPtr &conn, ServerRequest &&request);
    void handleLookup(const ConnectionPtr &conn, const ServerRequest &request);
    void respond(ServerConnection &conn, const SimAnswer &answer, bool keepAlive, QByteArrayView moreHeaders = {});
    struct Answer
    {
        bool keepAlive = true;
        bool hostile = false;       // answered the profile's hostile way
        QByteArray authorization;   // the request's, for the echo
    };
    void accept(const ConnectionPtr &conn, const SimSend &send, bool keyed, const SimRequest &request,
                const Answer &answer);
    // A slow partner: the connection waits delayMs (other connections do not), then is
    // answered, and what it sent meanwhile is read.
    void answerAfter(const ConnectionPtr &conn, int delayMs, std::function<void()> answer);
    bool takeHostileTurn();
    void answerHostile(ServerConnection &conn, const Answer &answer, const QByteArray &acceptedBody);
    void respond(ServerConnection &conn, int status, const QByteArray &body, bool keepAlive,
                 QByteArrayView extraHeaders = {}, QByteArrayView contentType = "application/json");
    bool inOutage();
    bool admit();
    struct Second
    {
        qint64 second = 0; // since the simulator was made
        qint64 requests = 0;
        qint64 rateLimited = 0;
        qint64 effects = 0;
    };
    Second &thisSecond();
    bool hit(double rate);
    QByteArray statsJson() const;
    QByteArray effectsJson() const;

    PartnerSimulator *q = nullptr;
    QTcpServer *server = nullptr;
    QRandomGenerator rng{QRandomGenerator::global()->generate()};
    ShardedKeyHash<KeyRecord> records;
    const ProviderImitation *imitation = providerImitation(u"webhook");
    QByteArray token;
    QHash<QByteArray, QByteArray> messageByKey; // effect key -> the simulator's message number
    qint64 nextId = 0;
    bool outageStarted = false;
    QElapsedTimer outageClock;
    QElapsedTimer clock; // since the simulator was made: when each key was first seen
    SimEventsTarget eventsTarget;
    QNetworkAccessManager *events = nullptr; // made when a target is set
    double limitTokens = -1; // the rate limit's bucket; -1: full, not yet used
    qint64 limitAtMs = 0;    // on `clock`, when it was last refilled
    std::deque<Second> seconds; // the last MaxSeconds seconds that saw a send request
    void postEvent(const QByteArray &n, const SimRequest &request);
};

void PartnerSimulator::Private::postEvent(const QByteArray &n, const SimRequest &request)
{
    const bool bounce = eventsTarget.bounceEvery > 0 && n.toLongLong() % eventsTarget.bounceEvery == 0;
    auto event = imitation->deliveryEvent(n, request, bounce, QDateTime::currentMSecsSinceEpoch());
    if (!event)
        return;
    QUrl url = eventsTarget.url;
    if (!event->query.isEmpty())
        url.setQuery(QString::fromUtf8(event->query), QUrl::StrictMode);
    if (eventsTarget.sign)
        imitation->signEvent(*event, url.toEncoded(), eventsTarget.secret, QDateTime::currentMSecsSinceEpoch());
    QNetworkRequest post(url);
    post.setHeader(QNetworkRequest::ContentTypeHeader, event->contentType);
    for (const auto &[name, value] : std::as_const(event->headers))
        post.setRawHeader(name, value);
    ++q->m_stats.eventsPosted;
    QNetworkReply *reply = events->post(post, event->body);
    QObject::connect(reply, &QNetworkReply::finished, q, [this, reply] {
        const int status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
        ++(status >= 200 && status < 300 ? q->m_stats.eventsAccepted : q->m_stats.eventsRefused);
        if (status < 200 || status >= 300)
            qCWarning(lcPartner) << "the events URL answered" << status << reply->readAll().left(300);
        reply->deleteLater();
    });
}

bool PartnerSimulator::Private::hit(double rate)
{
    // Rates of 0 and 1 stay deterministic, which the tests rely on.
    if (rate <= 0.0)
        return false;
    return rate >= 1.0 || rng.generateDouble() < rate;
}

bool PartnerSimulator::Private::admit()
{
    const double rate = q->m_profile.rateLimitPerSecond;
    if (rate <= 0)
        return true;
    const double burst = std::max(1.0, rate);
    const qint64 now = clock.elapsed();
    limitTokens = limitTokens < 0 ? burst : std::min(burst, limitTokens + double(now - limitAtMs) * rate / 1000);
    limitAtMs = now;
    if (limitTokens < 1)
        return false;
    limitTokens -= 1;
    return true;
}

PartnerSimulator::Private::Second &PartnerSimulator::Private::thisSecond()
{
    constexpr size_t MaxSeconds = 600;
    const qint64 second = clock.elapsed() / 1000;
    if (seconds.empty() || seconds.back().second != second) {
        seconds.push_back(Second{second});
        if (seconds.size() > MaxSeconds)
            seconds.pop_front();
    }
    return seconds.back();
}

bool PartnerSimulator::Private::inOutage()
{
    const PartnerFaults &p = q->m_profile;
    if (p.outageAfterRequests <= 0 || p.outageSeconds <= 0)
        return false;
    if (!outageStarted) {
        if (q->m_stats.requests <= p.outageAfterRequests)
            return false;
        outageStarted = true;
        outageClock.start();
        qCInfo(lcPartner) << "outage starts for" << p.outageSeconds << "s";
    }
    const qint64 elapsed = outageClock.elapsed();
    const qint64 window = qint64(p.outageSeconds) * 1000;
    if (p.outageEverySeconds > 0)
        return elapsed % (qint64(p.outageEverySeconds) * 1000) < window;
    return elapsed < window;
}

void PartnerSimulator::Private::onNewConnection()
{
    while (QTcpSocket *socket = server->nextPendingConnection()) {
        socket->setSocketOption(QAbstractSocket::LowDelayOption, 1);
        auto conn = std::make_shared<ServerConnection>();
        conn->socket = socket;
        // The lambdas own the connection state; it goes away with the socket's connections.
        QObject::connect(socket, &QIODevice::readyRead, socket, [this, conn] { onReadyRead(conn); });
        QObject::connect(socket, &QAbstractSocket::disconnected, socket, [conn] {
            conn->closing = true;
            if (conn->socket)
                conn->socket->deleteLater();
        });
        // Over TLS the connection is handed out after its handshake, when the request may
        // have arrived already (its readyRead long gone).
        if (socket->bytesAvailable() > 0)
            QMetaObject::invokeMethod(socket, [this, conn] { onReadyRead(conn); }, Qt::QueuedConnection);
    }
}

void PartnerSimulator::Private::onReadyRead(const ConnectionPtr &conn)
{
    QTcpSocket *socket = conn->socket;
    if (!socket)
        return;
    const qint64 available = socket->bytesAvailable();
    if (available <= 0)
        return;
    if (conn->closing) {
        socket->skip(available);
        return;
    }
    const qsizetype old = conn->buffer.size();
    conn->buffer.resize(old + available);
    const qint64 got = socket->read(conn->buffer.data() + old, available);
    conn->buffer.resize(old + std::max<qint64>(got, 0));
    processBuffer(conn);
}

void PartnerSimulator::Private::processBuffer(const ConnectionPtr &conn)
{
    while (conn->socket && !conn->awaiting && !conn->closing) {
        ServerRequest request;
        int badStatus = 0;
        switch (parseRequest(*conn, &request, &badStatus)) {
        case Parse::Incomplete:
            return;
        case Parse::Bad:
            respond(*conn, badStatus, R"({"error":"malformed request"})", false);
            return;
        case Parse::Ready:
            handle(conn, std::move(request));
            break;
        }
    }
}

PartnerSimulator::Private::Parse
PartnerSimulator::Private::parseRequest(ServerConnection &conn, ServerRequest *request, int *badStatus)
{
    QByteArray &buf = conn.buffer;
    if (conn.bodyOffset < 0) {
        // Tolerate CRLFs between requests (RFC 9112 2.2).
        qsizetype start = 0;
        while (start < buf.size() && (buf.at(start) == '\r' || buf.at(start) == '\n'))
            ++start;
        if (start > 0)
            buf.remove(0, start);
        const qsizetype headEnd = buf.indexOf("\r\n\r\n");
        if (headEnd < 0) {
            if (buf.size() > kMaxHeaderBytes) {
                *badStatus = 431;
                return Parse::Bad;
            }
            return Parse::Incomplete;
        }
        if (headEnd > kMaxHeaderBytes) {
            *badStatus = 431;
            return Parse::Bad;
        }
        ServerRequest &r = conn.current;
        r = ServerRequest();
        const QByteArrayView head(buf.constData(), headEnd);
        qsizetype lineEnd = head.indexOf("\r\n");
        const QByteArrayView requestLine = lineEnd < 0 ? head : head.first(lineEnd);
        const qsizetype sp1 = requestLine.indexOf(' ');
        const qsizetype sp2 = sp1 < 0 ? -1 : requestLine.indexOf(' ', sp1 + 1);
        if (sp1 <= 0 || sp2 <= sp1 + 1) {
            *badStatus = 400;
            return Parse::Bad;
        }
        const QByteArrayView version = requestLine.sliced(sp2 + 1);
        if (version != "HTTP/1.1" && version != "HTTP/1.0") {
            *badStatus = 400;
            return Parse::Bad;
        }
        r.method = requestLine.first(sp1).toByteArray();
        QByteArrayView target = requestLine.sliced(sp1 + 1, sp2 - sp1 - 1);
        const qsizetype query = target.indexOf('?');
        if (query >= 0) {
            r.query = target.sliced(query + 1).toByteArray();
            target = target.first(query);
        }
        r.path = target.toByteArray();
        const bool http10 = version == "HTTP/1.0";
        bool connectionClose = false;
        bool connectionKeepAlive = false;

        qsizetype pos = lineEnd < 0 ? head.size() : lineEnd + 2;
        while (pos < head.size()) {
            lineEnd = head.indexOf("\r\n", pos);
            if (lineEnd < 0)
                lineEnd = head.size();
            const QByteArrayView line = head.sliced(pos, lineEnd - pos);
            pos = lineEnd + 2;
            const qsizetype colon = line.indexOf(':');
            if (colon <= 0) {
                *badStatus = 400;
                return Parse::Bad;
            }
            const QByteArrayView name = line.first(colon).trimmed();
            const QByteArrayView value = line.sliced(colon + 1).trimmed();
            r.headers.append({name.toByteArray(), value.toByteArray()});
            if (equalsCi(name, "content-length")) {
                bool ok = false;
                r.contentLength = value.toLongLong(&ok);
                if (!ok || r.contentLength < 0) {
                    *badStatus = 400;
                    return Parse::Bad;
                }
                if (r.contentLength > kMaxBodyBytes) {
                    *badStatus = 413;
                    return Parse::Bad;
                }
            } else if (equalsCi(name, "idempotency-key")) {
                r.idempotencyKey = value.toByteArray();
            } else if (equalsCi(name, "authorization")) {
                r.authorization = value.toByteArray();
            } else if (equalsCi(name, "connection")) {
                connectionClose = connectionClose || hasToken(value, "close");
                connectionKeepAlive = connectionKeepAlive || hasToken(value, "keep-alive");
            } else if (equalsCi(name, "transfer-encoding")) {
                *badStatus = 501; // no client of this simulator streams request bodies
                return Parse::Bad;
            }
        }
        r.keepAlive = http10 ? connectionKeepAlive && !connectionClose : !connectionClose;
        conn.bodyOffset = headEnd + 4;
    }

    const qsizetype total = conn.bodyOffset + conn.current.contentLength;
    if (buf.size() < total)
        return Parse::Incomplete;
    *request = std::move(conn.current);
    request->body = buf.mid(conn.bodyOffset, request->contentLength);
    conn.current = ServerRequest();
    conn.bodyOffset = -1;
    if (buf.size() == total)
        buf.resize(0); // keeps the capacity for the next request on this connection
    else
        buf.remove(0, total);
    return Parse::Ready;
}

namespace {

SimRequest simRequest(const ServerRequest &request)
{
    return SimRequest{request.method, request.path, request.query, request.headers, request.body};
}

} // namespace

void PartnerSimulator::Private::handle(const ConnectionPtr &conn, ServerRequest &&request)
{
    const QByteArray &path = request.path;
    const SimRequest asked = simRequest(request);
    if (imitation->isLookup(asked)) {
        handleLookup(conn, request);
        return;
    }
    if (imitation->isSend(asked)) {
        if (request.method == "POST")
            handleReminder(conn, std::move(request));
        else
            respond(*conn, 405, R"({"error":"method not allowed"})", request.keepAlive, "Allow: POST\r\n");
        return;
    }
    const bool get = request.method == "GET";
    if (path == "/stats" || path == "/effects" || path == "/health") {
        if (!get)
            respond(*conn, 405, R"({"error":"method not allowed"})", request.keepAlive, "Allow: GET\r\n");
        else if (path == "/stats")
            respond(*conn, 200, statsJson(), request.keepAlive);
        else if (path == "/effects")
            respond(*conn, 200, effectsJson(), request.keepAlive);
        else
            respond(*conn, 200, "ok", request.keepAlive, {}, "text/plain");
        return;
    }
    respond(*conn, 404, R"({"error":"not found"})", request.keepAlive);
}

void PartnerSimulator::Private::handleLookup(const ConnectionPtr &conn, const ServerRequest &request)
{
    const SimRequest asked = simRequest(request);
    if (inOutage()) {
        respond(*conn, imitation->failure(503, "outage"), request.keepAlive, imitation->retryHeaders(1));
        return;
    }
    if (const auto refused = imitation->refuseCredentials(asked, token)) {
        respond(*conn, *refused, request.keepAlive);
        return;
    }
    const QByteArray key = imitation->lookupKey(asked);
    respond(*conn, imitation->lookupAnswer(key.isEmpty() ? QByteArray() : messageByKey.value(key)), request.keepAlive);
}

void PartnerSimulator::Private::handleReminder(const ConnectionPtr &conn, ServerRequest &&request)
{
    PartnerStats &stats = q->m_stats;
    const PartnerFaults &profile = q->m_profile;
    ++stats.requests;
    ++thisSecond().requests;
    const SimRequest asked = simRequest(request);

    // A provider's rate limit stands in front of everything else, its outages too.
    if (!admit()) {
        ++stats.rateLimited;
        ++thisSecond().rateLimited;
        respond(*conn, imitation->failure(429, "rate limit exceeded"), request.keepAlive, imitation->retryHeaders(1));
        return;
    }
    ++stats.admitted;
    if (inOutage()) {
        respond(*conn, imitation->failure(503, "outage"), request.keepAlive, imitation->retryHeaders(1));
        return;
    }
    if (const auto refused = imitation->refuseCredentials(asked, token)) {
        respond(*conn, *refused, request.keepAlive);
        return;
    }
    if (profile.refuseStatus >= 400 && profile.refuseStatus < 500) {
        respond(*conn,
                imitation->failure(profile.refuseStatus,
                                   profile.refuseStatus == 401 ? "invalid or expired token" : "refused"),
                request.keepAlive);
        return;
    }
    if (hit(profile.failRate)) {
        const SimAnswer failure = imitation->failure(503, "temporarily unavailable");
        if (profile.failLatencyMs <= 0) {
            respond(*conn, failure, request.keepAlive);
            return;
        }
        answerAfter(conn, profile.failLatencyMs,
                    [this, conn, failure, keepAlive = request.keepAlive] { respond(*conn, failure, keepAlive); });
        return;
    }
    if (hit(profile.throttleRate)) {
        respond(*conn, imitation->failure(429, "rate limited"), request.keepAlive,
                imitation->retryHeaders(profile.retryAfterSeconds));
        return;
    }
    const auto read = imitation->readSend(asked);
    if (const SimAnswer *malformed = std::get_if<SimAnswer>(&read)) {
        respond(*conn, *malformed, request.keepAlive);
        return;
    }
    const SimSend send = std::get<SimSend>(read);
    // A hostile answer is decided here, once per request; the modes that apply the effect
    // misbehave where the simulator would otherwise answer 200 (a first send or a replay).
    const Answer answer{request.keepAlive, takeHostileTurn(), request.authorization};
    if (answer.hostile && !hostileModeAppliesEffect(profile.hostile)) {
        answerHostile(*conn, answer, {});
        return;
    }

    const QByteArray &key = send.idempotencyKey;
    const bool keyed = imitation->idempotent() && profile.idempotent && !key.isEmpty();
    if (keyed) {
        // A key kept longer than the provider's window is forgotten: its request is a new one.
        const qint64 window = profile.keyWindowMs >= 0 ? profile.keyWindowMs : imitation->keyWindowMs();
        const KeyRecord *replayed = std::as_const(records).find(key);
        if (replayed && window > 0 && clock.elapsed() - replayed->firstSeenMs > window)
            replayed = nullptr;
        if (replayed) {
            ++stats.duplicateRequests;
            if (replayed->inProgress) {
                respond(*conn, imitation->keyInProgress(), request.keepAlive);
            } else if (replayed->requestBody != request.body) {
                respond(*conn, imitation->keyReused(), request.keepAlive);
            } else if (answer.hostile) {
                answerHostile(*conn, answer, replayed->responseBody);
            } else {
                const QByteArray headers = replayed->responseHeaders + "Idempotent-Replayed: true\r\n";
                respond(*conn, replayed->status, replayed->responseBody, request.keepAlive, headers);
            }
            return;
        }
        KeyRecord record;
        record.requestBody = request.body;
        record.firstSeenMs = clock.elapsed();
        records.insert(key, std::move(record));
    }

    if (profile.latencyMs <= 0) {
        accept(conn, send, keyed, asked, answer);
        return;
    }
    answerAfter(conn, profile.latencyMs, [this, conn, send, keyed, asked, answer] { accept(conn, send, keyed, asked, answer); });
}

void PartnerSimulator::Private::answerAfter(const ConnectionPtr &conn, int delayMs, std::function<void()> answer)
{
    PartnerStats &stats = q->m_stats;
    conn->awaiting = true;
    stats.peakHeld = std::max(stats.peakHeld, ++stats.held);
    QTimer::singleShot(delayMs, q, [this, conn, answer = std::move(answer)] {
        conn->awaiting = false;
        --q->m_stats.held;
        answer();
        processBuffer(conn);
    });
}

void PartnerSimulator::Private::accept(const ConnectionPtr &conn, const SimSend &send, bool keyed,
                                       const SimRequest &request, const Answer &answer)
{
    // The partner has accepted: the effect happens even if the client has gone meanwhile.
    PartnerStats &stats = q->m_stats;
    const QByteArray n = QByteArray::number(++nextId);
    ++stats.effects;
    ++thisSecond().effects;
    const QByteArray &effectKey = send.effectKey;
    if (!effectKey.isEmpty()) {
        int &count = q->m_effectsByKey[effectKey];
        if (count > 0)
            ++stats.duplicateEffects;
        ++count;
        messageByKey.insert(effectKey, n);
    }
    const SimAnswer accepted = imitation->accepted(n, request);
    if (events)
        postEvent(n, request);
    if (keyed) {
        if (KeyRecord *record = records.find(send.idempotencyKey)) {
            record->inProgress = false;
            record->status = accepted.status;
            record->responseBody = accepted.body;
            record->responseHeaders = accepted.headers;
        }
    }

    if (hit(q->m_profile.dropAfterAcceptRate)) {
        ++stats.dropped;
        if (conn->socket && !conn->closing) {
            conn->closing = true;
            conn->socket->abort();
        }
    } else if (answer.hostile) {
        answerHostile(*conn, answer, accepted.body);
    } else {
        respond(*conn, accepted, answer.keepAlive);
    }
    emit q->effectApplied(effectKey);
}

bool PartnerSimulator::Private::takeHostileTurn()
{
    const PartnerFaults &profile = q->m_profile;
    if (profile.hostile == HostileMode::None
        || (profile.hostileCount > 0 && q->m_stats.hostile >= profile.hostileCount))
        return false;
    ++q->m_stats.hostile;
    return true;
}

void PartnerSimulator::Private::answerHostile(ServerConnection &conn, const Answer &answer,
                                              const QByteArray &acceptedBody)
{
    QTcpSocket *socket = conn.socket;
    if (!socket || conn.closing)
        return;
    const HostileMode mode = q->m_profile.hostile;
    // After an answer without an end, nothing more on this connection can be framed.
    const bool framed = mode == HostileMode::EchoAuthorization || mode == HostileMode::HugeRetryAfter
                        || mode == HostileMode::HostileRequestId;
    if (!framed || !answer.keepAlive)
        conn.closing = true;
    writeHostileAnswer(socket, mode, answer.authorization, acceptedBody);
    if (framed && !answer.keepAlive)
        socket->disconnectFromHost();
}

void PartnerSimulator::Private::respond(ServerConnection &conn, int status, const QByteArray &body,
                                        bool keepAlive, QByteArrayView extraHeaders,
                                        QByteArrayView contentType)
{
    QTcpSocket *socket = conn.socket;
    if (!socket || conn.closing)
        return;
    QByteArray out;
    out.reserve(128 + extraHeaders.size() + body.size());
    out.append("HTTP/1.1 ").append(QByteArray::number(status)).append(' ').append(reasonPhrase(status));
    out.append("\r\nContent-Type: ").append(contentType);
    out.append("\r\nContent-Length: ").append(QByteArray::number(body.size()));
    out.append(keepAlive ? "\r\nConnection: keep-alive\r\n" : "\r\nConnection: close\r\n");
    out.append(extraHeaders).append("\r\n").append(body);
    socket->write(out);
    if (!keepAlive) {
        conn.closing = true;
        socket->disconnectFromHost(); // after the answer has been flushed
    }
}

void PartnerSimulator::Private::respond(ServerConnection &conn, const SimAnswer &answer, bool keepAlive,
                                        QByteArrayView moreHeaders)
{
    respond(conn, answer.status, answer.body, keepAlive, QByteArray(answer.headers + moreHeaders.toByteArray()),
            answer.contentType);
}

QByteArray PartnerSimulator::Private::statsJson() const
{
    const PartnerStats &s = q->m_stats;
    QJsonObject o;
    o.insert(QLatin1String("requests"), s.requests);
    o.insert(QLatin1String("effects"), s.effects);
    o.insert(QLatin1String("duplicate_requests"), s.duplicateRequests);
    o.insert(QLatin1String("duplicate_effects"), s.duplicateEffects);
    o.insert(QLatin1String("dropped"), s.dropped);
    o.insert(QLatin1String("peak_held"), s.peakHeld);
    o.insert(QLatin1String("hostile"), s.hostile);
    o.insert(QLatin1String("events_posted"), s.eventsPosted);
    o.insert(QLatin1String("events_accepted"), s.eventsAccepted);
    o.insert(QLatin1String("events_refused"), s.eventsRefused);
    o.insert(QLatin1String("rate_limited"), s.rateLimited);
    o.insert(QLatin1String("admitted"), s.admitted);
    QJsonArray perSecond;
    for (const Second &second : seconds)
        perSecond.append(QJsonArray{second.second, second.requests, second.rateLimited, second.effects});
    o.insert(QLatin1String("seconds"), perSecond);
    // The two counts once bench --partner-url reads from any partner that offers them.
    o.insert(QLatin1String("posts"), s.requests);
    o.insert(QLatin1String("keys"), qint64(q->m_effectsByKey.size()));
    return QJsonDocument(o).toJson(QJsonDocument::Compact);
}

QByteArray PartnerSimulator::Private::effectsJson() const
{
    QJsonObject o;
    q->m_effectsByKey.forEach(
        [&o](const QByteArray &key, int effects) { o.insert(QString::fromUtf8(key), effects); });
    return QJsonDocument(o).toJson(QJsonDocument::Compact);
}

PartnerSimulator::PartnerSimulator(const PartnerFaults &profile, QObject *parent)
    : QObject(parent), m_profile(profile), d(std::make_unique<Private>(this))
{
    d->setUp();
}

void PartnerSimulator::Private::setUp()
{
    clock.start();
    // Hundreds of clients may connect in the same instant.
    server->setListenBacklogSize(1024);
    QObject::connect(server, &QTcpServer::newConnection, q, [this] { onNewConnection(); });
    // A QSslServer adds a connection once its handshake is done, after newConnection: it
    // says so with this one. Either call takes every connection waiting.
    QObject::connect(server, &QTcpServer::pendingConnectionAvailable, q, [this] { onNewConnection(); });
}

void PartnerSimulator::setTlsConfiguration(const QSslConfiguration &configuration)
{
    if (d->server->isListening())
        return;
    // A QSslServer hands out a connection once its handshake is done; the rest of the
    // simulator sees the same QTcpSocket interface.
    auto *server = new QSslServer(this);
    server->setSslConfiguration(configuration);
    delete d->server;
    d->server = server;
    d->setUp();
    m_tls = true;
}

PartnerSimulator::~PartnerSimulator() = default;

bool PartnerSimulator::listen(const QHostAddress &address, quint16 port, QString *errorText)
{
    if (d->server->listen(address, port)) {
        qCDebug(lcPartner) << "listening on" << address << d->server->serverPort();
        return true;
    }
    if (errorText)
        *errorText = d->server->errorString();
    return false;
}

quint16 PartnerSimulator::port() const
{
    return d->server->serverPort();
}

bool PartnerSimulator::setProvider(QStringView id)
{
    const ProviderImitation *imitation = providerImitation(id);
    if (!imitation)
        return false;
    d->imitation = imitation;
    return true;
}

QString PartnerSimulator::provider() const
{
    return QString(d->imitation->id());
}

void PartnerSimulator::setExpectedToken(const QByteArray &token)
{
    d->token = token;
}

void PartnerSimulator::setEventsTarget(const SimEventsTarget &target)
{
    d->eventsTarget = target;
    if (target.url.isValid() && !target.url.isEmpty() && !d->events)
        d->events = new QNetworkAccessManager(this);
}

void PartnerSimulator::setProfile(const PartnerFaults &profile)
{
    m_profile = profile;
    // A new profile starts its outage schedule afresh.
    d->outageStarted = false;
}

} // namespace once
