#pragma once

#include "queues/brokerqueue.h"
#include "queues/sqs/awscredentials.h"
#include "queues/sqs/sigv4signer.h"

#include <QHash>
#include <QJsonObject>

#include <memory>

namespace once {

class BlockingHttpClient;

// A Standard queue at Amazon SQS (or an emulator), spoken to with the AWS JSON protocol
// (POST, X-Amz-Target: AmazonSQS.<Action>, application/x-amz-json-1.0), every request
// signed with Signature Version 4 and sent through the project's HTTP client, which never
// sends a request twice on its own.
//
// Topology (declareTopology, once init --queue): the queue QUEUE-dead, then QUEUE with a
// RedrivePolicy to it (maxReceiveCount: QueueTopology::deliveryLimit(), two more than the
// worker's --max-attempts, so a message whose consumers keep dying before they settle it
// ends there, as with RabbitMQ's delivery limit). Run again, init sets the policy anew.
//
// Messages: the payload is the body, or its base64 when SQS could not carry it as text
// (bytes that are not UTF-8, characters XML refuses). Message attributes (SQS allows ten):
//   once-id            the id the ledger knows, kept through retries and redrives (a
//                      message sent by another producer has none: its SQS MessageId is used)
//   once-redrives      how often an operator redrove it
//   once-enqueued-at   when it was first enqueued (ms since the epoch)
//   once-body-encoding "base64" when the body is the payload's base64
//   once-visible-at    not to be leased before (a delay beyond SQS's 15 minutes: a copy
//                      received early is hidden again until then)
//   once-dead-letter   on dead letters once made: JSON with the error class, the last
//                      error, the attempts and their times, the send key and event id
// The delivery number is SQS's ApproximateReceiveCount. A lease is a receive with the
// lease as its visibility timeout; the receipt handle of each delivery is kept here until
// it is settled: ack deletes, a retry changes the visibility to the delay (12 h at most,
// SQS's limit), a dead letter is sent to QUEUE-dead and then deleted here.
class SqsQueue final : public BrokerQueue
{
public:
    static std::unique_ptr<SqsQueue> connect(const QueueLocation &location, QString *error);
    ~SqsQueue() override;

    bool enqueue(const QList<OutgoingMessage> &messages, QString *error) override;
    QList<QueueMessage> lease(int max, qint64 leaseMs, const QString &workerId, QString *error) override;
    bool settle(const QList<Settlement> &settlements, QString *error) override;
    std::optional<QueueCounts> counts(QString *error) override;

    bool declareTopology(const QueueTopology &topology, QString *error) override;
    QString describeTopology(const QueueTopology &topology) const override;
    std::optional<QList<DeadLetter>> deadLetters(int limit, QString *error) override;
    std::optional<QList<DeadLetter>> redrive(int max, const std::function<bool(const DeadLetter &)> &select,
                                             QString *error) override;
    std::optional<QList<DeadLetter>> discard(int max, const std::function<bool(const DeadLetter &)> &select,
                                             QString *error) override;

private:
    struct Reply
    {
        bool ok = false;
        int httpStatus = 0;  // 0: no answer
        QJsonObject body;
        QString errorType;   // "QueueDoesNotExist", from __type
        QString message;     // one line, for errors
        bool inDoubt = false; // the request went out and no answer came back
    };
    // A received message with what settling and listing it need.
    struct Received
    {
        QueueMessage message;
        QByteArray receiptHandle;
        QString sqsMessageId;
        QJsonObject attributes;        // MessageAttributes, as SQS returns them
        QJsonObject systemAttributes;  // Attributes
    };

    SqsQueue(QueueLocation location, AwsCredentials credentials);

    Reply call(const QByteArray &action, const QJsonObject &body);
    QString describe(const Reply &reply, const QString &what) const;
    // The URL SQS knows the queue by (GetQueueUrl, kept); empty with error set.
    QString queueUrl(const QString &name, QString *error);
    std::optional<QList<Received>> receive(const QString &url, int max, int visibilitySeconds, int waitSeconds, QString *error);
    bool send(const QString &url, const QList<QJsonObject> &entries, QString *error);
    bool deleteMessages(const QString &url, const QList<QByteArray> &receiptHandles, QString *error);
    bool changeVisibility(const QString &url, const QList<QPair<QByteArray, int>> &handles, QString *error);
    // Receives up to limit dead letters (hidden meanwhile), hands each to take (true: it
    // was dealt with and is deleted), then makes the rest visible again.
    enum class Take { List, Redrive, Discard };
    std::optional<QList<DeadLetter>> takeDeadLetters(int max, const std::function<bool(const DeadLetter &)> &select,
                                                     Take take, QString *error);
    static DeadLetter deadLetterOf(const Received &received);

    AwsCredentials m_credentials;
    SigV4Signer m_signer;
    std::unique_ptr<BlockingHttpClient> m_http;
    QHash<QString, QString> m_queueUrls; // queue name -> its URL at SQS
    // Every delivery leased and not yet settled, by message id: what settling it needs
    // (a dead letter is sent on with its body and attributes).
    struct Held
    {
        int delivery = 0;
        QByteArray receiptHandle;
        QByteArray payload;
        QJsonObject attributes;
    };
    QHash<QString, Held> m_held;
    bool m_lastReceiveWasEmpty = false; // the next idle receive waits (long polling)
};

} // namespace once
