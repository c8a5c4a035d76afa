#pragma once

#include "http/httpserver.h"
#include "partners/partnersettings.h"
#include "serve/apitokens.h"
#include "serve/queueservice.h"

#include <QElapsedTimer>
#include <QHash>
#include <QHostAddress>
#include <QMutex>
#include <QPointer>
#include <QTimer>

#include <memory>
#include <optional>

namespace once {

// How `once serve` bounds what one client can take (docs/http-api.md, "Limits").
struct QueueServerLimits
{
    HttpServerLimits http;
    // A request that waits this long on the store is answered 503 with Retry-After (the
    // store may still do it later: a publish retried with its idempotency key is safe).
    int storeTimeoutMs = 10000;
    // /readyz waits less: a load balancer's probe must learn of a stalled store quickly.
    int readinessTimeoutMs = 2000;
    // Requests handed to the store and not yet answered by it; past this, new ones are
    // refused at once (503) instead of piling up behind a stalled store.
    int maxStoreCallsInFlight = 2000;
};

// The HTTP face of the store's queue (`once serve`, see docs/http-api.md). HTTP itself is
// libmicrohttpd's (core/http/httpserver.h): it bounds heads, bodies, connections and time
// before anything here runs. A request's head is judged on arrival (Host, origin, content
// type, route, token, role, rate, announced size), so a refused request's body is never
// read; a whole request is then checked here (fields, reminder validity) on the server's
// thread, and everything that touches the store goes to the QueueService on its own
// thread and is answered when it comes back, or with 503 when the store takes too long:
// the event loop never waits on the store. A consume with wait_seconds that finds nothing
// is parked and tried again on a timer or at once when a publish through this server
// commits: no thread sleeps for a waiter.
class QueueServer final : public QObject
{
    Q_OBJECT

public:
    struct Options
    {
        QueueServerLimits limits;
        // Host names (with or without a port) a request may name besides the listening
        // address's own; a server on loopback also takes "localhost". Empty on a
        // non-loopback address: any host.
        QStringList allowedHosts;
        // The partners whose delivery events this server takes (POST
        // /v1/partners/NAME/events), each checked by its profile's signature; none: no
        // events are taken.
        PartnersConfig partners;
    };

    // service lives on another thread; tokens: none to serve loopback without auth.
    QueueServer(QueueService *service, const QString &queueName, std::optional<ApiTokens> tokens, Options options,
                QObject *parent = nullptr);
    ~QueueServer() override;

    // tlsPem: the certificate (chain) and key, PEM; nullopt: plain HTTP.
    bool listen(const QHostAddress &host, quint16 port, const std::optional<std::pair<QByteArray, QByteArray>> &tlsPem,
                QString *error);
    quint16 serverPort() const;

    // The largest request bodies: a batch of reminders, anything else.
    static constexpr qsizetype MaxBatchRequestBytes = 8 * 1024 * 1024;
    static constexpr qsizetype MaxRequestBytes = 1024 * 1024;
    static constexpr int MaxBatchMessages = 500;
    static constexpr int MaxConsumeMessages = 100;
    static constexpr int MaxWaitSeconds = 20;
    static constexpr qint64 MaxVisibilitySeconds = 12 * 3600;
    static constexpr qint64 DefaultVisibilitySeconds = 30;
    static constexpr int DefaultDeadLetterPage = 100;
    static constexpr int MaxDeadLetterPage = 1000;

private:
    struct Exchange;
    struct Waiter;
    struct Request;
    using ExchangePtr = std::shared_ptr<Exchange>;
    using Handler = void (QueueServer::*)(const ExchangePtr &, const Request &);
    struct Route;
    static const QList<Route> &routes();
    // The route a method and path name, or whether the path exists under another method
    // (a HEAD is a GET without its body).
    static std::pair<const Route *, bool> findRoute(const HttpHead &head);

    // On libmicrohttpd's thread, as each request's head arrives.
    HttpServer::Admission admit(const HttpHead &head);
    void handle(quint64 id, const HttpHead &head, const QByteArray &body);
    void ended(quint64 id);

    void respond(const ExchangePtr &exchange, const ApiReply &reply);
    void fail(const ExchangePtr &exchange, const ApiError &error) { respond(exchange, ApiReply::failed(error)); }
    // Runs work on the service's thread and answers with what it returns, or with 503
    // when it has not come back within timeoutMs.
    void answerFromStore(const ExchangePtr &exchange, std::function<ApiReply(QueueService &)> work, int timeoutMs = 0);
    // Counts a call handed to the store; false (answered 503) when too many are waiting.
    bool enterStore(const ExchangePtr &exchange, int timeoutMs);
    void leaveStore() { --m_storeCallsInFlight; }
    std::optional<QJsonObject> jsonBody(const ExchangePtr &exchange, const Request &request);
    bool checkQueue(const ExchangePtr &exchange, const QJsonValue &queue);
    // The body of a request about one leased delivery (ack, nack, extend, dead_letter), and
    // the delivery it names; nullopt once the request is answered with why not.
    std::optional<std::pair<QJsonObject, DeliveryId>> deliveryRequest(const ExchangePtr &exchange, const Request &request);

    void health(const ExchangePtr &exchange, const Request &request);
    void ready(const ExchangePtr &exchange, const Request &request);
    void metrics(const ExchangePtr &exchange, const Request &request);
    void publish(const ExchangePtr &exchange, const Request &request);
    void publishBatch(const ExchangePtr &exchange, const Request &request);
    void consume(const ExchangePtr &exchange, const Request &request);
    void ack(const ExchangePtr &exchange, const Request &request);
    void nack(const ExchangePtr &exchange, const Request &request);
    void extend(const ExchangePtr &exchange, const Request &request);
    void deadLetter(const ExchangePtr &exchange, const Request &request);
    void stats(const ExchangePtr &exchange, const Request &request);
    void deadLetters(const ExchangePtr &exchange, const Request &request);
    void redrive(const ExchangePtr &exchange, const Request &request);
    void discard(const ExchangePtr &exchange, const Request &request);
    void partnerEvents(const ExchangePtr &exchange, const Request &request);
    // The partner a /v1/partners/NAME/events path names, or nullptr.
    const PartnerSettings *eventsPartner(const QByteArray &path) const;
    // The body of a redrive or discard, validated; nullopt when it was answered already.
    std::optional<RedriveRequest> redriveRequest(const ExchangePtr &exchange, const Request &request);
    void runRedrive(const ExchangePtr &exchange, const RedriveRequest &redrive);

    // Publishes are handed to the service once per turn of the event loop, all that were
    // read in that turn together: one wake-up of the store thread and one back for them.
    using PublishAnswer = std::function<ApiReply(const QList<PublishResult> &)>;
    void queuePublish(const ExchangePtr &exchange, const QList<PublishEntry> &entries, PublishAnswer answer);
    void handOffPublishes();

    void pollWaiters();
    void tryWaiter(const std::shared_ptr<Waiter> &waiter);

    QPointer<QueueService> m_service;
    QString m_queueName;
    std::optional<ApiTokens> m_tokens;
    Options m_options;
    QList<QByteArray> m_hosts; // lowercase, as a Host header may name this server; empty: any
    QMutex m_rateMutex;  // admit() runs on libmicrohttpd's thread
    ApiRateLimiter m_rateLimiter;
    std::unique_ptr<HttpServer> m_http;
    QHash<quint64, std::weak_ptr<Exchange>> m_open; // exchanges not yet answered, by id
    int m_storeCallsInFlight = 0;
    QList<std::shared_ptr<Waiter>> m_waiters;
    struct OutgoingPublish
    {
        ExchangePtr exchange;
        PublishAnswer answer;
    };
    QList<OutgoingPublish> m_outgoing;
    QList<QList<PublishEntry>> m_outgoingEntries;
    QTimer m_pollTimer;
};

} // namespace once
