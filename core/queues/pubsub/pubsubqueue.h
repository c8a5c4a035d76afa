#pragma once

#include "queues/brokerqueue.h"

#include <QHash>
#include <QJsonObject>

#include <memory>

namespace once {

class BlockingHttpClient;
class GoogleCredentials;

// A Google Cloud Pub/Sub subscription (or the emulator's), spoken to through the REST v1
// API with the project's HTTP client: :pull (never a blocking empty pull:
// returnImmediately), :acknowledge, :modifyAckDeadline, :publish.
//
// Topology (declareTopology, once init --queue): the topic TOPIC and TOPIC-dead, the
// subscription SUBSCRIPTION-dead on TOPIC-dead (so the dead letters can be listed), and
// SUBSCRIPTION on TOPIC with the lease as its ack deadline and a dead-letter policy to
// TOPIC-dead (QueueTopology::deliveryLimit() delivery attempts, at least Pub/Sub's 5: a
// message whose consumers keep dying before they settle it ends there, as with RabbitMQ's
// delivery limit) and the worker's --lease as its ack deadline. Run again, it updates both.
//
// Messages: data is the payload (base64 on the wire, any bytes); attributes:
//   once-id            the id the ledger knows, kept through retries and redrives (a
//                      message from another publisher has none: its messageId is used)
//   once-redrives      how often an operator redrove it
//   once-enqueued-at   when it was first enqueued (ms since the epoch)
//   once-visible-at    not to be leased before: Pub/Sub delays nothing, so a delayed
//                      enqueue, and a retry longer than the 600 s an ack deadline may
//                      last, is published with it
//   once-hold          on such a copy: its first delivery, if early, is held with its ack
//                      deadline (up to 600 s); a copy delivered early again is published
//                      anew and acknowledged, so holding spends at most one of the
//                      delivery attempts the dead-letter policy counts, and none of the
//                      delivery numbers the ledger sees
//   once-receives      the deliveries of earlier copies (a re-published retry)
//   once-dead-letter   on dead letters once made: the account (deadletteraccount.h)
// The delivery number is Pub/Sub's deliveryAttempt (there with a dead-letter policy)
// plus once-receives. The ack id of each delivery is kept here until it is settled.
class PubSubQueue final : public BrokerQueue
{
public:
    static std::unique_ptr<PubSubQueue> connect(const QueueLocation &location, QString *error);
    ~PubSubQueue() override;

    bool enqueue(const QList<OutgoingMessage> &messages, QString *error) override;
    QList<QueueMessage> lease(int max, qint64 leaseMs, const QString &workerId, QString *error) override;
    bool settle(const QList<Settlement> &settlements, QString *error) override;
    std::optional<QueueCounts> counts(QString *error) override;

    bool declareTopology(const QueueTopology &topology, QString *error) override;
    QString describeTopology(const QueueTopology &topology) const override;
    // The dead-letter policy's maxDeliveryAttempts for topology: Pub/Sub takes 5 to 100.
    static int deliveryAttempts(const QueueTopology &topology);
    std::optional<QList<DeadLetter>> deadLetters(int limit, QString *error) override;
    std::optional<QList<DeadLetter>> redrive(int max, const std::function<bool(const DeadLetter &)> &select,
                                             QString *error) override;
    std::optional<QList<DeadLetter>> discard(int max, const std::function<bool(const DeadLetter &)> &select,
                                             QString *error) override;

private:
    struct Reply
    {
        bool ok = false;
        int httpStatus = 0; // 0: no answer
        QJsonObject body;
        QString status;     // "NOT_FOUND", "ALREADY_EXISTS", from error.status
        QString message;    // one line, for errors
    };
    struct Received
    {
        QueueMessage message;
        QByteArray ackId;
        QString pubSubMessageId;
        QJsonObject attributes;
        int deliveryAttempt = 1; // of this copy
    };
    // What settling a leased delivery needs: a retry or a dead letter publishes it again.
    struct Held
    {
        int delivery = 0;
        QByteArray ackId;
        QByteArray payload;
        QJsonObject attributes;
    };
    enum class Take { List, Redrive, Discard };

    PubSubQueue(QueueLocation location, std::unique_ptr<GoogleCredentials> credentials);

    Reply call(const QByteArray &method, const QString &path, const QJsonObject &body = {});
    QString describe(const Reply &reply, const QString &what) const;
    int ackDeadlineSeconds(qint64 ms) const;
    qint64 subscriptionAckDeadlineMs();
    QString topicPath(const QString &topic) const;
    QString subscriptionPath(const QString &subscription) const;
    bool needTopic(QString *error) const;
    bool publish(const QString &topic, const QList<QJsonObject> &messages, QString *error);
    std::optional<QList<Received>> pull(const QString &subscription, int max, QString *error);
    bool acknowledge(const QString &subscription, const QList<QByteArray> &ackIds, QString *error);
    bool modifyDeadline(const QString &subscription, const QList<QByteArray> &ackIds, int seconds, QString *error);
    std::optional<QList<DeadLetter>> takeDeadLetters(int max, const std::function<bool(const DeadLetter &)> &select,
                                                     Take take, QString *error);
    static DeadLetter deadLetterOf(const Received &received);

    std::unique_ptr<GoogleCredentials> m_credentials; // none at an emulator
    std::unique_ptr<BlockingHttpClient> m_http;
    QHash<QString, Held> m_held; // by message id
    QHash<QString, qint64> m_dueAtMs; // retries and early copies this process holds back, by message id
    qint64 m_subscriptionAckDeadlineMs = 0; // 0: not read yet
};

} // namespace once
