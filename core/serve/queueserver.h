#pragma once

#include "serve/apitokens.h"
#include "serve/queueservice.h"

#include <QAbstractHttpServer>
#include <QHostAddress>
#include <QPointer>
#include <QTimer>

#include <memory>
#include <optional>

class QHttpServerRequest;
class QTcpSocket;

namespace once {

// The HTTP face of the store's queue (`once serve`, see docs/http-api.md). Requests are
// checked here (route, token, role, rate, size, fields, reminder validity) on the
// server's thread; everything that touches the store goes to the QueueService on its own
// thread and is answered when it comes back, so the event loop never waits on the store.
// A consume with wait_seconds that finds nothing is parked and tried again on a timer or
// at once when a publish through this server commits: no thread sleeps for a waiter.
//
// Qt 6.4's QHttpServer answers from the route handler only, so this derives from
// QAbstractHttpServer and keeps each request's QHttpServerResponder until its answer is
// ready, with the socket watched: a client that went away is not written to.
class QueueServer final : public QAbstractHttpServer
{
    Q_OBJECT

public:
    // service lives on another thread; tokens: none to serve loopback without auth.
    QueueServer(QueueService *service, const QString &queueName, std::optional<ApiTokens> tokens,
                QObject *parent = nullptr);
    ~QueueServer() override;

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

protected:
    bool handleRequest(const QHttpServerRequest &request, QTcpSocket *socket) override;
    void missingHandler(const QHttpServerRequest &request, QTcpSocket *socket) override;

private:
    struct Exchange;
    struct Waiter;
    using ExchangePtr = std::shared_ptr<Exchange>;
    using Handler = void (QueueServer::*)(const ExchangePtr &, const QHttpServerRequest &);
    struct Route;
    static const QList<Route> &routes();

    void respond(const ExchangePtr &exchange, const ApiReply &reply);
    void fail(const ExchangePtr &exchange, const ApiError &error) { respond(exchange, ApiReply::failed(error)); }
    // Runs work on the service's thread and answers with what it returns.
    void answerFromStore(const ExchangePtr &exchange, std::function<ApiReply(QueueService &)> work);
    std::optional<QJsonObject> jsonBody(const ExchangePtr &exchange, const QHttpServerRequest &request);
    bool checkQueue(const ExchangePtr &exchange, const QJsonValue &queue);
    // The body of a request about one leased delivery (ack, nack, extend, dead_letter), and
    // the delivery it names; nullopt once the request is answered with why not.
    std::optional<std::pair<QJsonObject, DeliveryId>> deliveryRequest(const ExchangePtr &exchange,
                                                                      const QHttpServerRequest &request);

    void health(const ExchangePtr &exchange, const QHttpServerRequest &request);
    void ready(const ExchangePtr &exchange, const QHttpServerRequest &request);
    void metrics(const ExchangePtr &exchange, const QHttpServerRequest &request);
    void publish(const ExchangePtr &exchange, const QHttpServerRequest &request);
    void publishBatch(const ExchangePtr &exchange, const QHttpServerRequest &request);
    void consume(const ExchangePtr &exchange, const QHttpServerRequest &request);
    void ack(const ExchangePtr &exchange, const QHttpServerRequest &request);
    void nack(const ExchangePtr &exchange, const QHttpServerRequest &request);
    void extend(const ExchangePtr &exchange, const QHttpServerRequest &request);
    void deadLetter(const ExchangePtr &exchange, const QHttpServerRequest &request);
    void stats(const ExchangePtr &exchange, const QHttpServerRequest &request);
    void deadLetters(const ExchangePtr &exchange, const QHttpServerRequest &request);
    void redrive(const ExchangePtr &exchange, const QHttpServerRequest &request);
    void discard(const ExchangePtr &exchange, const QHttpServerRequest &request);
    // The body of a redrive or discard, validated; nullopt when it was answered already.
    std::optional<RedriveRequest> redriveRequest(const ExchangePtr &exchange, const QHttpServerRequest &request);
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
    ApiRateLimiter m_rateLimiter;
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
