#include "serve/queueserver.h"

#include "store/database.h"
#include "operator/operations.h"
#include "partners/partnerprofile.h"
#include "model/reminder.h"
#include "text/strictjson.h"
#include "text/quotedtext.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QLoggingCategory>
#include <QUrlQuery>

#include <algorithm>
#include <cmath>
#include <limits>
#include <variant>

namespace once {

Q_LOGGING_CATEGORY(lcServe, "once.serve")

// One request from its arrival here to its answer, which may come from the store thread
// or a parked consume later.
struct QueueServer::Exchange
{
    quint64 id = 0;
    QByteArray method;
    QByteArray path; // for the log: percent-encoded and cut
    QString tokenName; // empty: no tokens configured
    QElapsedTimer clock;
    bool answered = false;
    bool gone = false; // the client's connection ended before the answer

    bool clientGone() const { return gone; }
};

// What a handler reads of a request.
struct QueueServer::Request
{
    const HttpHead &head;
    const QByteArray &body;

    QUrlQuery query() const { return QUrlQuery(QString::fromLatin1(head.query)); }
};

struct QueueServer::Waiter
{
    ExchangePtr exchange;
    int maxMessages = 1;
    qint64 visibilityMs = 0;
    qint64 deadlineMs = 0;
    QString consumer;
    bool asking = false;
    qint64 askedAtMs = 0;
};

// The routing table: adding an endpoint (GET /metrics, say) is one row here and a
// handler. Permission none: no token needed (health checks of a load balancer).
struct QueueServer::Route
{
    QByteArray method;
    QByteArray path;
    std::optional<ApiPermission> permission;
    Handler handler;
    qsizetype maxBodyBytes = MaxRequestBytes;
    // A provider's delivery webhook: signed by the provider (its profile checks how), in
    // the provider's own content type (Twilio posts a form).
    bool providerSigned = false;
};

namespace {

// POST /v1/partners/NAME/events: every partner's events share one row of the table.
constexpr QByteArrayView EventsPathStart = "/v1/partners/";
constexpr QByteArrayView EventsPathEnd = "/events";
constexpr QByteArrayView EventsRoute = "/v1/partners/{name}/events";

// The partner's name in an events path (percent-decoded), or an empty array.
QByteArray eventsPathName(const QByteArray &path)
{
    if (!path.startsWith(EventsPathStart) || !path.endsWith(EventsPathEnd)
        || path.size() <= EventsPathStart.size() + EventsPathEnd.size())
        return {};
    const QByteArray name = path.mid(EventsPathStart.size(), path.size() - EventsPathStart.size() - EventsPathEnd.size());
    return name.contains('/') ? QByteArray() : QByteArray::fromPercentEncoding(name);
}

} // namespace

std::pair<const QueueServer::Route *, bool> QueueServer::findRoute(const HttpHead &head)
{
    const QByteArray method = head.method == "HEAD" ? QByteArrayLiteral("GET") : head.method;
    const QByteArray path = eventsPathName(head.path).isEmpty() ? head.path : EventsRoute.toByteArray();
    bool pathKnown = false;
    for (const auto &candidate : routes()) {
        if (candidate.path != path)
            continue;
        pathKnown = true;
        if (candidate.method == method)
            return {&candidate, true};
    }
    return {nullptr, pathKnown};
}

const QList<QueueServer::Route> &QueueServer::routes()
{
    static const QList<Route> table{
        {"GET", "/healthz", std::nullopt, &QueueServer::health, 0},
        {"GET", "/readyz", std::nullopt, &QueueServer::ready, 0},
        {"GET", "/metrics", ApiPermission::Read, &QueueServer::metrics, 0},
        {"POST", "/v1/queue/publish", ApiPermission::Publish, &QueueServer::publish},
        {"POST", "/v1/queue/publish_batch", ApiPermission::Publish, &QueueServer::publishBatch, MaxBatchRequestBytes},
        {"POST", "/v1/queue/consume", ApiPermission::Consume, &QueueServer::consume},
        {"POST", "/v1/queue/ack", ApiPermission::Consume, &QueueServer::ack},
        {"POST", "/v1/queue/nack", ApiPermission::Consume, &QueueServer::nack},
        {"POST", "/v1/queue/extend", ApiPermission::Consume, &QueueServer::extend},
        {"POST", "/v1/queue/dead_letter", ApiPermission::Consume, &QueueServer::deadLetter},
        {"GET", "/v1/queue/stats", ApiPermission::Read, &QueueServer::stats, 0},
        {"GET", "/v1/queue/dead_letters", ApiPermission::Read, &QueueServer::deadLetters, 0},
        {"POST", "/v1/queue/dlq/redrive", ApiPermission::Operate, &QueueServer::redrive},
        {"POST", "/v1/queue/dlq/discard", ApiPermission::Operate, &QueueServer::discard},
        // No bearer token: a provider cannot send ours. Its own signature stands in.
        {"POST", EventsRoute.toByteArray(), std::nullopt, &QueueServer::partnerEvents, MaxRequestBytes, true},
    };
    return table;
}

namespace {

constexpr qint64 PollIntervalMs = 250;
// The longest request path a log line shows.
constexpr qsizetype MaxLoggedPathBytes = 200;

// A path as the log shows it: percent-encoded (a %0A stays three characters, a raw
// control byte or escape sequence never reaches the log or a terminal) and cut.
QByteArray pathForLog(const QByteArray &path)
{
    QByteArray logged;
    for (const char c : path.left(MaxLoggedPathBytes)) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte > 0x20 && byte < 0x7f)
            logged += c;
        else
            logged += '%' + QByteArray(1, c).toHex().toUpper();
    }
    if (path.size() > MaxLoggedPathBytes)
        logged += "...";
    return logged;
}

void logRequest(const QByteArray &method, const QByteArray &path, int status, qint64 latencyMs, const QString &tokenName)
{
    // One line per request, with the token's name, never the token.
    qCInfo(lcServe, "%s %s %d %lldms token=%s", pathForLog(method).constData(), path.constData(), status, latencyMs,
           tokenName.isEmpty() ? "-" : qPrintable(tokenName));
}

// The bearer token of an Authorization header (the scheme's name in any case, as RFC
// 9110 says), or an empty array.
QByteArray bearerToken(const QByteArray &authorization)
{
    const qsizetype space = authorization.indexOf(' ');
    if (space < 0 || authorization.left(space).compare("Bearer", Qt::CaseInsensitive) != 0)
        return {};
    return authorization.mid(space + 1).trimmed();
}

// The host a Host header names, lowercase, without its port ("[::1]" keeps its brackets).
QByteArray hostName(const QByteArray &host)
{
    QByteArray name = host.trimmed().toLower();
    if (name.startsWith('[')) {
        const qsizetype close = name.indexOf(']');
        return close < 0 ? name : name.left(close + 1);
    }
    const qsizetype colon = name.indexOf(':');
    return colon < 0 ? name : name.left(colon);
}

bool isJsonContentType(const QByteArray &contentType)
{
    const QByteArray type = contentType.split(';').constFirst().trimmed().toLower();
    return type == "application/json";
}

HttpAnswer httpAnswer(const ApiReply &reply)
{
    HttpAnswer answer;
    answer.status = reply.status;
    const bool text = !reply.textType.isEmpty();
    answer.body = text ? reply.text : QJsonDocument(reply.body).toJson(QJsonDocument::Compact);
    answer.headers.emplaceBack("Content-Type", text ? reply.textType : QByteArrayLiteral("application/json"));
    if (reply.retryAfterSeconds > 0)
        answer.headers.emplaceBack("Retry-After", QByteArray::number(reply.retryAfterSeconds));
    if (reply.status == 401)
        answer.headers.emplaceBack("WWW-Authenticate", "Bearer");
    return answer;
}

ApiError badField(const QString &field, const QString &what)
{
    return apiError(ApiFailure::BadRequest, QStringLiteral("%1 %2").arg(field, what), field);
}

// A whole number in [min, max] from a JSON field; fallback when absent (nullopt: required).
std::variant<qint64, ApiError> integerField(const QJsonObject &object, const QString &field, qint64 min, qint64 max,
                                            std::optional<qint64> fallback, const QString &prefix = {})
{
    const QString name = prefix + field;
    const QJsonValue value = object.value(field);
    if (value.isUndefined() || value.isNull()) {
        if (fallback)
            return *fallback;
        return badField(name, QStringLiteral("is required"));
    }
    const double number = value.toDouble(std::nan(""));
    if (!value.isDouble() || std::floor(number) != number || number < double(min) || number > double(max))
        return badField(name, QStringLiteral("must be a whole number from %1 to %2").arg(min).arg(max));
    return qint64(number);
}

// Whether text can be a key the store keeps as it is: printable (no control character,
// U+0000 among them, which PostgreSQL refuses in text), and no surrogate without its pair
// (which would become '?' on the way to UTF-8, so that two keys became one).
bool isPrintableKey(const QString &text)
{
    for (qsizetype i = 0; i < text.size(); ++i) {
        const QChar c = text.at(i);
        if (c.category() == QChar::Other_Control)
            return false;
        if (c.isHighSurrogate() && i + 1 < text.size() && text.at(i + 1).isLowSurrogate())
            ++i;
        else if (c.isSurrogate())
            return false;
    }
    return true;
}

// The first number in a JSON value that Qt's reading may have changed: a whole number
// beyond 2^53, which a double holds only approximately (12345678901234567890 would be
// written back as 12345678901234567000). Returns its path, or an empty string.
QString inexactNumber(const QJsonValue &value, const QString &path)
{
    constexpr double ExactLimit = 9007199254740992.0; // 2^53
    if (value.isDouble()) {
        const double number = value.toDouble();
        return std::abs(number) > ExactLimit && std::floor(number) == number ? path : QString();
    }
    if (value.isArray()) {
        const QJsonArray array = value.toArray();
        for (qsizetype i = 0; i < array.size(); ++i)
            if (QString found = inexactNumber(array.at(i), QStringLiteral("%1[%2]").arg(path).arg(i)); !found.isEmpty())
                return found;
    }
    if (value.isObject()) {
        const QJsonObject object = value.toObject();
        for (auto it = object.begin(); it != object.end(); ++it)
            if (QString found = inexactNumber(it.value(), path + QLatin1Char('.') + it.key()); !found.isEmpty())
                return found;
    }
    return {};
}

// One message of a publish: its payload validated as `once enqueue` validates a line.
// producer: whose idempotency key it is (the token's name).
std::variant<PublishEntry, ApiError> publishEntry(const QJsonObject &object, const QString &prefix, const QString &producer)
{
    const QString payloadField = prefix + QStringLiteral("payload");
    const QJsonValue payload = object.value(QStringLiteral("payload"));
    QByteArray bytes;
    // A string is taken byte for byte (what a producer signs or hashes stays the same);
    // an object is written compactly.
    if (payload.isString())
        bytes = payload.toString().toUtf8();
    else if (payload.isObject()) {
        // An object is written anew, so a number it could not hold exactly is refused
        // rather than stored changed.
        if (const QString inexact = inexactNumber(payload, payloadField); !inexact.isEmpty())
            return apiError(ApiFailure::BadReminder,
                            QStringLiteral("%1 is a whole number beyond 2^53, which would not be kept exactly; send it as "
                                           "a string, or send the payload as its JSON text")
                                .arg(inexact),
                            inexact);
        bytes = QJsonDocument(payload.toObject()).toJson(QJsonDocument::Compact);
    } else
        return badField(payloadField, QStringLiteral("is required: a reminder as a JSON object (or its text)"));
    if (bytes.size() > MaxMessageBytes)
        return apiError(ApiFailure::TooLarge,
                        QStringLiteral("%1 is %2 bytes, over the 256 KiB limit").arg(payloadField).arg(bytes.size()),
                        payloadField);
    const auto parsed = parseReminder(bytes);
    if (!parsed.reminder)
        return apiError(ApiFailure::BadReminder, parsed.error, payloadField);
    const auto delay = integerField(object, QStringLiteral("delay_seconds"), 0, MaxDelaySeconds, 0, prefix);
    if (const auto *error = std::get_if<ApiError>(&delay))
        return *error;
    PublishEntry entry;
    entry.message = OutgoingMessage{parsed.reminder->payload, parsed.reminder->sendKey, parsed.reminder->eventId,
                                    std::get<qint64>(delay) * 1000, 0};
    const QJsonValue key = object.value(QStringLiteral("idempotency_key"));
    if (!key.isUndefined() && !key.isNull()) {
        if (!key.isString() || key.toString().isEmpty() || key.toString().size() > 256 || !isPrintableKey(key.toString()))
            return badField(prefix + QStringLiteral("idempotency_key"),
                            QStringLiteral("must be printable text of 1 to 256 characters"));
        entry.idempotencyKey = key.toString();
        entry.producer = producer;
    }
    return entry;
}

ApiError keyReusedError(const QString &prefix)
{
    return apiError(ApiFailure::KeyReused,
                    QStringLiteral("this idempotency key was used within 24 hours for a different message (payload or "
                                   "delay); nothing was published: a new message needs a new key"),
                    prefix + QStringLiteral("idempotency_key"));
}

QJsonObject publishResultJson(const PublishResult &result)
{
    QJsonObject json{{QStringLiteral("message_id"), result.messageId}};
    if (result.duplicate)
        json.insert(QStringLiteral("duplicate"), true);
    return json;
}

// ack, nack, extend and dead_letter name a delivery by the id consume gave: a message id
// with its receive count names no lease, as anyone could count.
std::variant<DeliveryId, ApiError> deliveryField(const QJsonObject &body)
{
    const QJsonValue value = body.value(QStringLiteral("message_id"));
    if (!value.isString() || value.toString().isEmpty())
        return badField(QStringLiteral("message_id"), QStringLiteral("is required: the id consume returned"));
    if (const auto id = DeliveryId::parse(value.toString()))
        return *id;
    return badField(QStringLiteral("message_id"),
                    QStringLiteral("is not a delivery id consume returned (the message's \"id\", such as "
                                   "\"41.1.9f0c...\", not its message_id)"));
}

// Who consumes and settles: the token's name. Leases are bound to it.
QString consumerName(const QString &tokenName)
{
    return QStringLiteral("http:") + (tokenName.isEmpty() ? QStringLiteral("anonymous") : tokenName);
}

// Text the store cannot keep: PostgreSQL refuses U+0000 in any text column. The payload
// is stored as bytes and checked as a reminder, so only the request's other strings are
// looked at. Returns the field's name, or an empty string.
QString fieldWithNul(const QJsonValue &value, const QString &name)
{
    if (value.isString())
        return value.toString().contains(QChar(0)) ? name : QString();
    if (value.isArray()) {
        const QJsonArray array = value.toArray();
        for (qsizetype i = 0; i < array.size(); ++i)
            if (const QString field = fieldWithNul(array.at(i), QStringLiteral("%1[%2]").arg(name).arg(i)); !field.isEmpty())
                return field;
    }
    if (value.isObject()) {
        const QJsonObject object = value.toObject();
        for (auto it = object.begin(); it != object.end(); ++it) {
            if (it.key() == QLatin1String("payload"))
                continue;
            const QString member = name.isEmpty() ? it.key() : name + QLatin1Char('.') + it.key();
            if (it.key().contains(QChar(0)))
                return name.isEmpty() ? QStringLiteral("body") : name;
            if (const QString field = fieldWithNul(it.value(), member); !field.isEmpty())
                return field;
        }
    }
    return {};
}

} // namespace

QueueServer::QueueServer(QueueService *service, const QString &queueName, std::optional<ApiTokens> tokens,
                         Options options, QObject *parent)
    : QObject(parent), m_service(service), m_queueName(queueName), m_tokens(std::move(tokens)),
      m_options(std::move(options))
{
    m_pollTimer.setInterval(PollIntervalMs);
    connect(&m_pollTimer, &QTimer::timeout, this, &QueueServer::pollWaiters);
    connect(service, &QueueService::published, this, &QueueServer::pollWaiters);
}

QueueServer::~QueueServer() = default;

bool QueueServer::listen(const QHostAddress &host, quint16 port,
                         const std::optional<std::pair<QByteArray, QByteArray>> &tlsPem, QString *error)
{
    // Names a Host header may give. On loopback only this machine's names: a web page the
    // operator opens elsewhere could resolve its own name to 127.0.0.1 (DNS rebinding)
    // and read what this server answers.
    m_hosts.clear();
    for (const auto &name : std::as_const(m_options.allowedHosts))
        m_hosts.append(hostName(name.toUtf8()));
    if (host.isLoopback() || !m_hosts.isEmpty()) {
        const QByteArray literal = host.toString().toLower().toUtf8();
        m_hosts.append(host.protocol() == QAbstractSocket::IPv6Protocol ? '[' + literal + ']' : literal);
        if (host.isLoopback())
            m_hosts << QByteArrayLiteral("localhost") << QByteArrayLiteral("127.0.0.1") << QByteArrayLiteral("[::1]");
    }
    m_http = std::make_unique<HttpServer>([this](const HttpHead &head) { return admit(head); }, m_options.limits.http);
    connect(m_http.get(), &HttpServer::requestArrived, this, &QueueServer::handle);
    connect(m_http.get(), &HttpServer::exchangeEnded, this, &QueueServer::ended);
    return m_http->listen(host, port, tlsPem, error);
}

quint16 QueueServer::serverPort() const
{
    return m_http ? m_http->serverPort() : 0;
}

// libmicrohttpd's thread: everything that can refuse a request without its body. The
// route, token and rate are looked at again on the server's thread (the route and token
// without the rate), which is cheaper than carrying them across.
HttpServer::Admission QueueServer::admit(const HttpHead &head)
{
    QElapsedTimer clock;
    clock.start();
    QString tokenName;
    const auto refuse = [&](const ApiError &error, int retryAfter = 0) -> HttpServer::Admission {
        ApiReply reply = ApiReply::failed(error);
        if (retryAfter > 0)
            reply.retryAfterSeconds = retryAfter;
        logRequest(head.method, pathForLog(head.path), reply.status, clock.elapsed(), tokenName);
        return httpAnswer(reply);
    };
    const QByteArray host = head.header("Host");
    if (!m_hosts.isEmpty() && !host.isEmpty() && !m_hosts.contains(hostName(host)))
        return refuse(apiError(ApiFailure::UnknownHost,
                               QStringLiteral("this server does not answer to the host %1 (once serve --allowed-host)")
                                   .arg(quotedForError(QString::fromLatin1(host)))));
    // A browser names the page's origin on a request from another site; no producer or
    // worker sends one. Refused before the body, so a page cannot publish, consume or
    // discard through the browser of someone on this machine or network.
    const QByteArray fetchSite = head.header("Sec-Fetch-Site").toLower();
    if (head.headerCount("Origin") > 0 || (!fetchSite.isEmpty() && fetchSite != "none" && fetchSite != "same-origin"))
        return refuse(apiError(ApiFailure::Forbidden, QStringLiteral("requests from web pages are refused")));
    const auto [route, pathKnown] = findRoute(head);
    if (!route)
        return refuse(pathKnown ? apiError(ApiFailure::MethodNotAllowed,
                                           QStringLiteral("%1 does not take %2")
                                               .arg(QString::fromLatin1(pathForLog(head.path)),
                                                    QString::fromLatin1(pathForLog(head.method))))
                                : apiError(ApiFailure::NotFound,
                                           QStringLiteral("no endpoint %1").arg(QString::fromLatin1(pathForLog(head.path)))));
    if (route->permission && m_tokens) {
        const QByteArray authorization = head.header("Authorization");
        const ApiToken *token = m_tokens->find(bearerToken(authorization));
        if (!token)
            return refuse(apiError(ApiFailure::Unauthorized, authorization.isEmpty()
                                                                 ? QStringLiteral("send Authorization: Bearer TOKEN")
                                                                 : QStringLiteral("the bearer token is not valid")));
        tokenName = token->name;
        if (!apiRoleAllows(token->role, *route->permission))
            return refuse(apiError(ApiFailure::Forbidden, QStringLiteral("the token %1 may not use %2")
                                                              .arg(token->name, QString::fromLatin1(head.path))));
        int wait = 0;
        {
            QMutexLocker locker(&m_rateMutex);
            wait = m_rateLimiter.take(*token, nowMs());
        }
        if (wait)
            return refuse(apiError(ApiFailure::RateLimited, QStringLiteral("the token %1 is over its rate; try again in %2 s")
                                                                .arg(token->name)
                                                                .arg(wait)),
                          wait);
    }
    if (route->providerSigned && !eventsPartner(head.path))
        return refuse(apiError(ApiFailure::NotFound,
                               QStringLiteral("no partner %1 takes delivery events here (once serve --partners)")
                                   .arg(quotedForError(QString::fromUtf8(eventsPathName(head.path))))));
    // A text/plain or form POST is what a page may send anywhere without asking first.
    if (route->method == "POST" && !route->providerSigned && !isJsonContentType(head.header("Content-Type")))
        return refuse(apiError(ApiFailure::UnsupportedMediaType, QStringLiteral("send Content-Type: application/json")));
    bool lengthGiven = false;
    const qint64 length = head.header("Content-Length").toLongLong(&lengthGiven);
    if (lengthGiven && length > route->maxBodyBytes)
        return refuse(apiError(ApiFailure::TooLarge, QStringLiteral("the request body is over %1 bytes").arg(route->maxBodyBytes),
                               QStringLiteral("body")));
    return route->maxBodyBytes;
}

void QueueServer::handle(quint64 id, const HttpHead &head, const QByteArray &body)
{
    auto exchange = std::make_shared<Exchange>();
    exchange->id = id;
    exchange->method = head.method;
    exchange->path = pathForLog(head.path);
    exchange->clock.start();
    m_open.insert(id, exchange);
    const auto [route, pathKnown] = findRoute(head);
    if (!route) // admitted, so it cannot be; answered all the same
        return fail(exchange, apiError(ApiFailure::NotFound, QStringLiteral("no endpoint")));
    if (route->permission && m_tokens) {
        const ApiToken *token = m_tokens->find(bearerToken(head.header("Authorization")));
        if (!token)
            return fail(exchange, apiError(ApiFailure::Unauthorized, QStringLiteral("the bearer token is not valid")));
        exchange->tokenName = token->name;
    }
    (this->*route->handler)(exchange, Request{head, body});
}

void QueueServer::ended(quint64 id)
{
    if (const auto exchange = m_open.take(id).lock())
        exchange->gone = true;
}

void QueueServer::respond(const ExchangePtr &exchange, const ApiReply &reply)
{
    if (exchange->answered)
        return;
    exchange->answered = true;
    m_open.remove(exchange->id);
    logRequest(exchange->method, exchange->path, reply.status, exchange->clock.elapsed(), exchange->tokenName);
    if (exchange->clientGone() || !m_http)
        return;
    m_http->answer(exchange->id, httpAnswer(reply));
}

bool QueueServer::enterStore(const ExchangePtr &exchange, int timeoutMs)
{
    if (m_storeCallsInFlight >= m_options.limits.maxStoreCallsInFlight) {
        fail(exchange, apiError(ApiFailure::StoreUnavailable,
                                QStringLiteral("the store is not keeping up (%1 requests waiting for it); try again later")
                                    .arg(m_storeCallsInFlight)));
        return false;
    }
    ++m_storeCallsInFlight;
    const int timeout = timeoutMs > 0 ? timeoutMs : m_options.limits.storeTimeoutMs;
    QTimer::singleShot(timeout, this, [this, weak = std::weak_ptr<Exchange>(exchange), timeout] {
        if (const auto late = weak.lock(); late && !late->answered)
            fail(late, apiError(ApiFailure::StoreUnavailable,
                                QStringLiteral("the store did not answer within %1 s; try again later").arg(timeout / 1000.0)));
    });
    return true;
}

void QueueServer::answerFromStore(const ExchangePtr &exchange, std::function<ApiReply(QueueService &)> work, int timeoutMs)
{
    if (!enterStore(exchange, timeoutMs))
        return;
    QPointer<QueueServer> self(this);
    QMetaObject::invokeMethod(m_service, [self, service = m_service, exchange, work = std::move(work)] {
        const ApiReply reply = work(*service);
        QMetaObject::invokeMethod(self, [self, exchange, reply] {
            if (!self)
                return;
            self->leaveStore();
            self->respond(exchange, reply);
        });
    });
}

std::optional<std::pair<QJsonObject, DeliveryId>> QueueServer::deliveryRequest(const ExchangePtr &exchange,
                                                                              const Request &request)
{
    const auto body = jsonBody(exchange, request);
    if (!body || !checkQueue(exchange, body->value(QStringLiteral("queue"))))
        return std::nullopt;
    const auto delivery = deliveryField(*body);
    if (const auto *error = std::get_if<ApiError>(&delivery)) {
        fail(exchange, *error);
        return std::nullopt;
    }
    return std::pair{*body, std::get<DeliveryId>(delivery)};
}

// Strict first: Qt's parser keeps the last of two members with one name and turns an
// unpaired surrogate into '?', so what the server read could differ from what a proxy or
// the client's own log read in the same bytes (strictjson.h lists what it refuses).
std::optional<QJsonObject> QueueServer::jsonBody(const ExchangePtr &exchange, const Request &request)
{
    if (const QString problem = strictJsonProblem(request.body); !problem.isEmpty()) {
        fail(exchange, badField(QStringLiteral("body"), QStringLiteral("must be one JSON object: ") + problem));
        return std::nullopt;
    }
    QJsonParseError parseError;
    const QJsonDocument document = QJsonDocument::fromJson(request.body, &parseError);
    if (parseError.error != QJsonParseError::NoError || !document.isObject()) {
        fail(exchange, badField(QStringLiteral("body"), QStringLiteral("must be a JSON object")));
        return std::nullopt;
    }
    if (const QString field = fieldWithNul(document.object(), {}); !field.isEmpty()) {
        fail(exchange, badField(field, QStringLiteral("must not contain U+0000")));
        return std::nullopt;
    }
    return document.object();
}

bool QueueServer::checkQueue(const ExchangePtr &exchange, const QJsonValue &queue)
{
    if (!queue.isString() || queue.toString().isEmpty()) {
        fail(exchange, badField(QStringLiteral("queue"), QStringLiteral("is required")));
        return false;
    }
    if (queue.toString() != m_queueName) {
        fail(exchange, apiError(ApiFailure::UnknownQueue, QStringLiteral("no queue named %1 here").arg(queue.toString())));
        return false;
    }
    return true;
}

void QueueServer::health(const ExchangePtr &exchange, const Request &)
{
    respond(exchange, ApiReply::ok({{QStringLiteral("status"), QStringLiteral("ok")}}));
}

void QueueServer::ready(const ExchangePtr &exchange, const Request &)
{
    answerFromStore(exchange, [](QueueService &service) { return service.readiness(); },
                    m_options.limits.readinessTimeoutMs);
}

void QueueServer::metrics(const ExchangePtr &exchange, const Request &)
{
    answerFromStore(exchange, [](QueueService &service) { return service.metrics(); });
}

void QueueServer::publish(const ExchangePtr &exchange, const Request &request)
{
    const auto body = jsonBody(exchange, request);
    if (!body || !checkQueue(exchange, body->value(QStringLiteral("queue"))))
        return;
    auto entry = publishEntry(*body, {}, exchange->tokenName);
    if (const auto *error = std::get_if<ApiError>(&entry))
        return fail(exchange, *error);
    queuePublish(exchange, {std::get<PublishEntry>(entry)}, [](const QList<PublishResult> &results) {
        return results.first().keyReused ? ApiReply::failed(keyReusedError({}))
                                          : ApiReply::ok(publishResultJson(results.first()));
    });
}

void QueueServer::publishBatch(const ExchangePtr &exchange, const Request &request)
{
    const auto body = jsonBody(exchange, request);
    if (!body || !checkQueue(exchange, body->value(QStringLiteral("queue"))))
        return;
    const QJsonValue messages = body->value(QStringLiteral("messages"));
    if (!messages.isArray() || messages.toArray().isEmpty() || messages.toArray().size() > MaxBatchMessages)
        return fail(exchange, badField(QStringLiteral("messages"),
                                       QStringLiteral("must be an array of 1 to %1 messages").arg(MaxBatchMessages)));
    // Every entry answers for itself: a bad one is reported in its place, the others go.
    const QJsonArray array = messages.toArray();
    QList<std::optional<ApiError>> errors(array.size());
    QList<PublishEntry> entries;
    for (qsizetype i = 0; i < array.size(); ++i) {
        const QString prefix = QStringLiteral("messages[%1].").arg(i);
        if (!array.at(i).isObject()) {
            errors[i] = badField(prefix.chopped(1), QStringLiteral("must be an object"));
            continue;
        }
        auto entry = publishEntry(array.at(i).toObject(), prefix, exchange->tokenName);
        if (const auto *error = std::get_if<ApiError>(&entry))
            errors[i] = *error;
        else
            entries.append(std::get<PublishEntry>(entry));
    }
    const auto answer = [exchange, errors](const QList<PublishResult> &results) {
        QJsonArray rows;
        qsizetype next = 0;
        int accepted = 0;
        for (qsizetype i = 0; i < errors.size(); ++i) {
            std::optional<ApiError> error = errors.at(i);
            if (!error && results.at(next).keyReused)
                error = keyReusedError(QStringLiteral("messages[%1].").arg(i));
            if (error) {
                QJsonObject row = error->toJson();
                row.insert(QStringLiteral("status"), error->status);
                rows.append(row);
            } else {
                rows.append(publishResultJson(results.at(next)));
                ++accepted;
            }
            if (!errors.at(i))
                ++next;
        }
        return ApiReply::ok({{QStringLiteral("results"), rows},
                             {QStringLiteral("accepted"), accepted},
                             {QStringLiteral("rejected"), int(errors.size()) - accepted}});
    };
    if (entries.isEmpty())
        return respond(exchange, answer({}));
    queuePublish(exchange, entries, answer);
}

void QueueServer::queuePublish(const ExchangePtr &exchange, const QList<PublishEntry> &entries, PublishAnswer answer)
{
    if (!enterStore(exchange, 0))
        return;
    if (m_outgoing.isEmpty())
        QMetaObject::invokeMethod(this, &QueueServer::handOffPublishes, Qt::QueuedConnection);
    m_outgoing.append({exchange, std::move(answer)});
    m_outgoingEntries.append(entries);
}

void QueueServer::handOffPublishes()
{
    QList<OutgoingPublish> outgoing;
    outgoing.swap(m_outgoing);
    QList<QList<PublishEntry>> requests;
    requests.swap(m_outgoingEntries);
    QPointer<QueueServer> self(this);
    m_service->publish(requests, [self, outgoing](const QList<QList<PublishResult>> &results,
                                                  const std::optional<ApiError> &failure) {
        QMetaObject::invokeMethod(self, [self, outgoing, results, failure] {
            if (!self)
                return;
            for (qsizetype i = 0; i < outgoing.size(); ++i) {
                self->leaveStore();
                self->respond(outgoing[i].exchange,
                              failure ? ApiReply::failed(*failure) : outgoing[i].answer(results.at(i)));
            }
        });
    });
}

void QueueServer::consume(const ExchangePtr &exchange, const Request &request)
{
    const auto body = jsonBody(exchange, request);
    if (!body || !checkQueue(exchange, body->value(QStringLiteral("queue"))))
        return;
    const auto max = integerField(*body, QStringLiteral("max_messages"), 1, MaxConsumeMessages, 1);
    const auto visibility = integerField(*body, QStringLiteral("visibility_timeout"), 1, MaxVisibilitySeconds,
                                         DefaultVisibilitySeconds);
    const auto wait = integerField(*body, QStringLiteral("wait_seconds"), 0, MaxWaitSeconds, 0);
    for (const auto *field : {&max, &visibility, &wait})
        if (const auto *error = std::get_if<ApiError>(field))
            return fail(exchange, *error);
    auto waiter = std::make_shared<Waiter>();
    waiter->exchange = exchange;
    waiter->maxMessages = int(std::get<qint64>(max));
    waiter->visibilityMs = std::get<qint64>(visibility) * 1000;
    waiter->deadlineMs = nowMs() + std::get<qint64>(wait) * 1000;
    waiter->consumer = consumerName(exchange->tokenName);
    m_waiters.append(waiter);
    tryWaiter(waiter);
    if (!m_pollTimer.isActive())
        m_pollTimer.start();
}

void QueueServer::pollWaiters()
{
    const auto waiters = m_waiters;
    for (const auto &waiter : waiters)
        tryWaiter(waiter);
}

void QueueServer::tryWaiter(const std::shared_ptr<Waiter> &waiter)
{
    if (waiter->asking) {
        // A stalled store: answered now, and what it leases later is handed back.
        if (nowMs() - waiter->askedAtMs > m_options.limits.storeTimeoutMs) {
            m_waiters.removeOne(waiter);
            fail(waiter->exchange, apiError(ApiFailure::StoreUnavailable,
                                            QStringLiteral("the store did not answer within %1 s; try again later")
                                                .arg(m_options.limits.storeTimeoutMs / 1000.0)));
        }
        return;
    }
    if (waiter->exchange->answered || waiter->exchange->clientGone()) {
        m_waiters.removeOne(waiter);
        return;
    }
    if (m_storeCallsInFlight >= m_options.limits.maxStoreCallsInFlight) {
        m_waiters.removeOne(waiter);
        enterStore(waiter->exchange, 0); // answers why
        return;
    }
    ++m_storeCallsInFlight;
    waiter->asking = true;
    waiter->askedAtMs = nowMs();
    QPointer<QueueServer> self(this);
    QMetaObject::invokeMethod(m_service, [self, service = m_service, waiter] {
        const ApiReply reply = service->consume(waiter->maxMessages, waiter->visibilityMs, waiter->consumer);
        QMetaObject::invokeMethod(self, [self, waiter, reply] {
            if (!self)
                return;
            self->leaveStore();
            waiter->asking = false;
            const QJsonArray messages = reply.body.value(QStringLiteral("messages")).toArray();
            const bool abandoned = waiter->exchange->answered || waiter->exchange->clientGone();
            if (reply.status == 200 && messages.isEmpty() && nowMs() < waiter->deadlineMs && !abandoned)
                return; // keeps waiting: the timer or the next publish asks again
            self->m_waiters.removeOne(waiter);
            if (self->m_waiters.isEmpty())
                self->m_pollTimer.stop();
            if (abandoned && !messages.isEmpty()) {
                // Leased for a client that left, or was told the store did not answer,
                // while we looked: back on the queue at once.
                for (const auto &message : messages) {
                    const auto id = DeliveryId::parse(message.toObject().value(QStringLiteral("id")).toString());
                    if (id)
                        QMetaObject::invokeMethod(self->m_service, [service = self->m_service, id, consumer = waiter->consumer] {
                            service->nack(*id, consumer, 0);
                        });
                }
            }
            self->respond(waiter->exchange, reply);
        });
    });
}

void QueueServer::ack(const ExchangePtr &exchange, const Request &request)
{
    const auto leased = deliveryRequest(exchange, request);
    if (!leased)
        return;
    const auto &[body, delivery] = *leased;
    answerFromStore(exchange, [id = delivery, consumer = consumerName(exchange->tokenName)](QueueService &service) {
        return service.ack(id, consumer);
    });
}

void QueueServer::nack(const ExchangePtr &exchange, const Request &request)
{
    const auto leased = deliveryRequest(exchange, request);
    if (!leased)
        return;
    const auto &[body, delivery] = *leased;
    const auto delay = integerField(body, QStringLiteral("delay_seconds"), 0, MaxVisibilitySeconds, 0);
    if (const auto *error = std::get_if<ApiError>(&delay))
        return fail(exchange, *error);
    answerFromStore(exchange, [id = delivery, consumer = consumerName(exchange->tokenName),
                               delayMs = std::get<qint64>(delay) * 1000](QueueService &service) {
        return service.nack(id, consumer, delayMs);
    });
}

void QueueServer::extend(const ExchangePtr &exchange, const Request &request)
{
    const auto leased = deliveryRequest(exchange, request);
    if (!leased)
        return;
    const auto &[body, delivery] = *leased;
    const auto visibility = integerField(body, QStringLiteral("visibility_timeout"), 1, MaxVisibilitySeconds, std::nullopt);
    if (const auto *error = std::get_if<ApiError>(&visibility))
        return fail(exchange, *error);
    answerFromStore(exchange, [id = delivery, consumer = consumerName(exchange->tokenName),
                               ms = std::get<qint64>(visibility) * 1000](QueueService &service) {
        return service.extend(id, consumer, ms);
    });
}

void QueueServer::deadLetter(const ExchangePtr &exchange, const Request &request)
{
    const auto leased = deliveryRequest(exchange, request);
    if (!leased)
        return;
    const auto &[body, delivery] = *leased;
    DeadLetterInfo info;
    const QJsonValue errorClass = body.value(QStringLiteral("error_class"));
    if (!errorClass.isString() || errorClass.toString().isEmpty() || errorClass.toString().size() > 100)
        return fail(exchange, badField(QStringLiteral("error_class"), QStringLiteral("is required: text of 1 to 100 characters")));
    info.errorClass = errorClass.toString();
    const QJsonValue lastError = body.value(QStringLiteral("last_error"));
    if (!lastError.isUndefined() && !lastError.isNull() && (!lastError.isString() || lastError.toString().size() > 4096))
        return fail(exchange, badField(QStringLiteral("last_error"), QStringLiteral("must be text of at most 4096 characters")));
    info.lastError = lastError.toString();
    const auto attempts = integerField(body, QStringLiteral("attempts"), 0, 1000000, 0);
    if (const auto *error = std::get_if<ApiError>(&attempts))
        return fail(exchange, *error);
    info.attempts = int(std::get<qint64>(attempts));
    for (const auto &[field, target] : {std::pair{QStringLiteral("first_attempt_at"), &info.firstAttemptAtMs},
                                        std::pair{QStringLiteral("last_attempt_at"), &info.lastAttemptAtMs}}) {
        const QJsonValue value = body.value(field);
        if (value.isUndefined() || value.isNull())
            continue;
        const auto time = parseRfc3339(value.toString());
        if (!value.isString() || !time)
            return fail(exchange, badField(field, QStringLiteral("must be an RFC 3339 time with an offset")));
        *target = time->utc.toMSecsSinceEpoch();
    }
    answerFromStore(exchange, [id = delivery, consumer = consumerName(exchange->tokenName), info](QueueService &service) {
        return service.deadLetter(id, consumer, info);
    });
}

void QueueServer::stats(const ExchangePtr &exchange, const Request &request)
{
    if (!checkQueue(exchange, request.query().queryItemValue(QStringLiteral("queue"), QUrl::FullyDecoded)))
        return;
    answerFromStore(exchange, [](QueueService &service) { return service.stats(); });
}

namespace {

// The filters of `once dlq` and `once redrive`, from a JSON object (query parameters
// are turned into one first).
std::variant<DeadLetterFilter, ApiError> deadLetterFilter(const QJsonObject &object)
{
    DeadLetterFilter filter;
    const QJsonValue errorClass = object.value(QStringLiteral("error_class"));
    if (!errorClass.isUndefined() && !errorClass.isString())
        return badField(QStringLiteral("error_class"), QStringLiteral("must be text"));
    filter.errorClass = errorClass.toString();
    for (const auto &field : {QStringLiteral("since"), QStringLiteral("until")}) {
        const QJsonValue value = object.value(field);
        if (value.isUndefined())
            continue;
        const auto time = parseRfc3339(value.toString());
        if (!value.isString() || !time)
            return badField(field, QStringLiteral("must be an RFC 3339 time with an offset"));
        (field == QLatin1String("since") ? filter.sinceMs : filter.untilMs) = time->utc.toMSecsSinceEpoch();
    }
    if (filter.sinceMs && filter.untilMs && filter.untilMs < filter.sinceMs)
        return badField(QStringLiteral("until"), QStringLiteral("is before since"));
    const QJsonValue keys = object.value(QStringLiteral("keys"));
    if (!keys.isUndefined()) {
        if (!keys.isArray())
            return badField(QStringLiteral("keys"), QStringLiteral("must be an array of send keys"));
        for (const auto &key : keys.toArray()) {
            if (!key.isString() || key.toString().isEmpty())
                return badField(QStringLiteral("keys"), QStringLiteral("must be an array of send keys"));
            filter.sendKeys.append(key.toString().toLatin1());
        }
    }
    return filter;
}

} // namespace

void QueueServer::deadLetters(const ExchangePtr &exchange, const Request &request)
{
    const QUrlQuery query = request.query();
    if (!checkQueue(exchange, query.queryItemValue(QStringLiteral("queue"), QUrl::FullyDecoded)))
        return;
    QJsonObject fields;
    for (const auto &field : {QStringLiteral("error_class"), QStringLiteral("since"), QStringLiteral("until")})
        if (query.hasQueryItem(field))
            fields.insert(field, query.queryItemValue(field, QUrl::FullyDecoded));
    if (query.hasQueryItem(QStringLiteral("key")))
        fields.insert(QStringLiteral("keys"), QJsonArray::fromStringList(query.allQueryItemValues(QStringLiteral("key"), QUrl::FullyDecoded)));
    auto filter = deadLetterFilter(fields);
    if (const auto *error = std::get_if<ApiError>(&filter))
        return fail(exchange, *error);
    // Paged: a list read whole (a thousand letters of 256 KiB) would be held in memory
    // at once, and again for each client that reads it slowly.
    auto &page = std::get<DeadLetterFilter>(filter);
    page.limit = DefaultDeadLetterPage;
    if (query.hasQueryItem(QStringLiteral("limit"))) {
        bool ok = false;
        const int limit = query.queryItemValue(QStringLiteral("limit")).toInt(&ok);
        if (!ok || limit < 1 || limit > MaxDeadLetterPage)
            return fail(exchange, badField(QStringLiteral("limit"),
                                           QStringLiteral("must be a whole number from 1 to %1 (a page; follow next_after "
                                                          "for the next)")
                                               .arg(MaxDeadLetterPage)));
        page.limit = limit;
    }
    if (query.hasQueryItem(QStringLiteral("after"))
        && !continueAfterCursor(query.queryItemValue(QStringLiteral("after"), QUrl::FullyDecoded), page))
        return fail(exchange, badField(QStringLiteral("after"), QStringLiteral("must be the next_after of a page")));
    answerFromStore(exchange, [filter = std::get<DeadLetterFilter>(filter)](QueueService &service) {
        return service.deadLetters(filter);
    });
}

void QueueServer::redrive(const ExchangePtr &exchange, const Request &request)
{
    if (const auto redrive = redriveRequest(exchange, request))
        runRedrive(exchange, *redrive);
}

void QueueServer::discard(const ExchangePtr &exchange, const Request &request)
{
    if (auto redrive = redriveRequest(exchange, request)) {
        redrive->discard = true;
        runRedrive(exchange, *redrive);
    }
}

std::optional<RedriveRequest> QueueServer::redriveRequest(const ExchangePtr &exchange, const Request &request)
{
    const auto body = jsonBody(exchange, request);
    if (!body || !checkQueue(exchange, body->value(QStringLiteral("queue"))))
        return std::nullopt;
    const auto refuse = [this, &exchange](const ApiError &error) -> std::optional<RedriveRequest> {
        fail(exchange, error);
        return std::nullopt;
    };
    auto filter = deadLetterFilter(*body);
    if (const auto *error = std::get_if<ApiError>(&filter))
        return refuse(*error);
    RedriveRequest redrive;
    redrive.filter = std::get<DeadLetterFilter>(filter);
    const QJsonValue ids = body->value(QStringLiteral("ids"));
    if (!ids.isUndefined()) {
        const QJsonArray array = ids.toArray();
        if (!ids.isArray() || array.isEmpty() || array.size() > 100000)
            return refuse(badField(QStringLiteral("ids"), QStringLiteral("must be an array of 1 to 100000 dead letters' message ids")));
        for (const auto &id : array) {
            if (!id.isString() || id.toString().isEmpty())
                return refuse(badField(QStringLiteral("ids"), QStringLiteral("must be an array of message ids (text)")));
            redrive.ids.append(id.toString());
        }
    }
    const QJsonValue all = body->value(QStringLiteral("all"));
    const QJsonValue dryRun = body->value(QStringLiteral("dry_run"));
    if ((!all.isUndefined() && !all.isBool()) || (!dryRun.isUndefined() && !dryRun.isBool()))
        return refuse(badField(all.isBool() || all.isUndefined() ? QStringLiteral("dry_run") : QStringLiteral("all"),
                               QStringLiteral("must be true or false")));
    redrive.dryRun = dryRun.toBool();
    const auto &f = redrive.filter;
    if (!all.toBool() && redrive.ids.isEmpty() && f.sendKeys.isEmpty() && f.errorClass.isEmpty() && !f.sinceMs && !f.untilMs)
        return refuse(badField(QStringLiteral("all"),
                               QStringLiteral("or a filter is required: choose which dead letters (all, ids, keys, "
                                              "error_class, since, until)")));
    const auto rate = integerField(*body, QStringLiteral("rate"), 0, 1000000, 0);
    if (const auto *error = std::get_if<ApiError>(&rate))
        return refuse(*error);
    redrive.ratePerSecond = int(std::get<qint64>(rate));
    const auto canary = integerField(*body, QStringLiteral("canary"), 0, 1000000, 0);
    if (const auto *error = std::get_if<ApiError>(&canary))
        return refuse(*error);
    redrive.canary = int(std::get<qint64>(canary));
    const auto stopAfter = integerField(*body, QStringLiteral("stop_after_failures"), 0, 1000000, 0);
    if (const auto *error = std::get_if<ApiError>(&stopAfter))
        return refuse(*error);
    redrive.stopAfterFailures = int(std::get<qint64>(stopAfter));
    const QJsonValue includeExpired = body->value(QStringLiteral("include_expired"));
    if (!includeExpired.isUndefined() && !includeExpired.isBool())
        return refuse(badField(QStringLiteral("include_expired"), QStringLiteral("must be true or false")));
    redrive.includeExpired = includeExpired.toBool();
    const QJsonValue reason = body->value(QStringLiteral("reason"));
    const QString reasonText = reason.toString().trimmed();
    if ((!reason.isUndefined() && !reason.isString()) || reasonText.size() > MaxReasonLength
        || std::any_of(reasonText.cbegin(), reasonText.cend(), [](QChar c) { return c.category() == QChar::Other_Control; }))
        return refuse(badField(QStringLiteral("reason"),
                               QStringLiteral("must be one line of at most %1 characters").arg(MaxReasonLength)));
    redrive.reason = reasonText;
    redrive.actor = exchange->tokenName.isEmpty() ? QStringLiteral("once serve (no tokens)") : exchange->tokenName;
    return redrive;
}

const PartnerSettings *QueueServer::eventsPartner(const QByteArray &path) const
{
    const QByteArray name = eventsPathName(path);
    return name.isEmpty() ? nullptr : m_options.partners.find(QString::fromUtf8(name));
}

void QueueServer::partnerEvents(const ExchangePtr &exchange, const Request &request)
{
    const PartnerSettings *partner = eventsPartner(request.head.path);
    const PartnerProfile *profile = partner ? partnerProfile(partner->profile) : nullptr;
    if (!partner || !profile)
        return fail(exchange, apiError(ApiFailure::NotFound, QStringLiteral("no such partner")));
    // The signature first, on this thread: nothing unsigned reaches the store.
    const EventsReading reading = profile->readEvents(*partner, IncomingEvents{request.head, request.body, nowMs()});
    switch (reading.status) {
    case EventsReading::Status::Unauthorized:
        qCWarning(lcServe, "partner %s: delivery events refused: %s", qPrintable(partner->name), qPrintable(reading.error));
        return fail(exchange, apiError(ApiFailure::Unauthorized, reading.error));
    case EventsReading::Status::Malformed:
        return fail(exchange, badField(QStringLiteral("body"), reading.error));
    case EventsReading::Status::Accepted:
        break;
    }
    answerFromStore(exchange, [events = reading.events, name = partner->name, id = QString(profile->id()),
                               provider = profile->name()](QueueService &service) {
        return service.partnerEvents(events, name, id, provider);
    });
}

void QueueServer::runRedrive(const ExchangePtr &exchange, const RedriveRequest &redrive)
{
    QPointer<QueueServer> self(this);
    QMetaObject::invokeMethod(m_service, [self, service = m_service, exchange, redrive] {
        service->redrive(redrive, [self, exchange](const ApiReply &reply) {
            QMetaObject::invokeMethod(self, [self, exchange, reply] {
                if (self)
                    self->respond(exchange, reply);
            });
        });
    });
}

} // namespace once
