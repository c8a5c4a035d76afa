// SqsQueue against an SQS emulator (scripts/sqs-server, which ctest starts as the Sqs
// fixture; tests/testqueues.h gives each test function a queue of its own). Besides the
// queue's own answers, the tests speak SQS's JSON protocol directly, as a producer of the
// team's own would, to send what once's enqueue never sends and to read what the queue
// declared. The emulators check no signature, so those raw calls are not signed.
#include "http/blockinghttpclient.h"
#include "model/clock.h"
#include "queues/sqs/sqslocation.h"
#include "queues/sqs/sqsqueue.h"
#include "testqueues.h"

#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTest>

using namespace once;

namespace {

constexpr qint64 Hour = 3600 * 1000;

QueueLocation locationOf(const QString &url)
{
    QString error;
    const auto location = QueueLocation::parse(url, &error);
    if (!location)
        qFatal("bad test URL %s: %s", qPrintable(url), qPrintable(error));
    return *location;
}

} // namespace

class TestSqsQueue : public QObject
{
    Q_OBJECT

private slots:
    void init();
    void deliveryLimitFollowsMaxAttempts();
    void retryLongerThanTwelveHoursIsSentOn();
    void earlyCopyDueBeyondTwelveHoursIsSentOn();
    void earlyCopyDueWithinTwelveHoursIsHidden();

private:
    QJsonObject raw(const QByteArray &action, const QJsonObject &body);
    QString rawQueueUrl();
    QueueCounts countsNow();

    TestQueues m_queues;
    std::optional<QueueLocation> m_location;
    std::unique_ptr<SqsQueue> m_queue;
    BlockingHttpClient m_http;
};

void TestSqsQueue::init()
{
    QVERIFY2(m_queues.kind() == QLatin1String("sqs"), "run with ONCE_TEST_QUEUE=sqs (ctest does)");
    m_location = locationOf(m_queues.newUrl());
    QString error;
    m_queue = SqsQueue::connect(*m_location, &error);
    QVERIFY2(m_queue, qPrintable(error));
    QVERIFY2(m_queue->declareTopology({}, &error), qPrintable(error));
}

// One call of SQS's JSON protocol, as any client sends it.
QJsonObject TestSqsQueue::raw(const QByteArray &action, const QJsonObject &body)
{
    HttpRequest request;
    request.url = sqsDetails(*m_location).endpoint;
    request.url.setPath(QStringLiteral("/"));
    request.headers.append({QByteArrayLiteral("Content-Type"), QByteArrayLiteral("application/x-amz-json-1.0")});
    request.headers.append({QByteArrayLiteral("X-Amz-Target"), "AmazonSQS." + action});
    request.body = QJsonDocument(body).toJson(QJsonDocument::Compact);
    const HttpResult result = m_http.send(request);
    if (result.status != HttpResult::Status::Response || result.httpStatus != 200)
        qWarning("%s failed: HTTP %d %s %s", action.constData(), result.httpStatus, qPrintable(result.error),
                 result.body.constData());
    return QJsonDocument::fromJson(result.body).object();
}

QString TestSqsQueue::rawQueueUrl()
{
    return raw("GetQueueUrl", {{QStringLiteral("QueueName"), m_location->name}}).value(QLatin1String("QueueUrl")).toString();
}

QueueCounts TestSqsQueue::countsNow()
{
    QString error;
    const auto counts = m_queue->counts(&error);
    if (!counts)
        qWarning("counts failed: %s", qPrintable(error));
    return counts.value_or(QueueCounts{});
}

// once init --queue --max-attempts N: SQS moves a message to the dead letters after N + 2
// receives (two for crashes), and init run again with another N sets the policy anew.
void TestSqsQueue::deliveryLimitFollowsMaxAttempts()
{
    const auto maxReceiveCount = [this] {
        const QJsonObject attributes = raw("GetQueueAttributes", {{QStringLiteral("QueueUrl"), rawQueueUrl()},
                                                                  {QStringLiteral("AttributeNames"), QJsonArray{QStringLiteral("RedrivePolicy")}}})
                                           .value(QLatin1String("Attributes"))
                                           .toObject();
        const QJsonObject policy = QJsonDocument::fromJson(attributes.value(QLatin1String("RedrivePolicy")).toString().toUtf8()).object();
        return policy.value(QLatin1String("maxReceiveCount")).toVariant().toInt();
    };
    QueueTopology topology;
    topology.maxAttempts = 3;
    QString error;
    QVERIFY2(m_queue->declareTopology(topology, &error), qPrintable(error));
    QCOMPARE(maxReceiveCount(), 5);
    QVERIFY2(m_queue->describeTopology(topology).contains(QLatin1String("received 5 times")),
             qPrintable(m_queue->describeTopology(topology)));
    topology.maxAttempts = 12;
    QVERIFY2(m_queue->declareTopology(topology, &error), qPrintable(error));
    QCOMPARE(maxReceiveCount(), 14);
}

// SQS hides a message for 12 h at most: a longer retry is not cut to 12 h (nor left
// visible) but sent on with a delay, and the delivery deleted.
void TestSqsQueue::retryLongerThanTwelveHoursIsSentOn()
{
    QString error;
    OutgoingMessage outgoing;
    outgoing.payload = QByteArrayLiteral("{\"long\":\"retry\"}");
    QVERIFY2(m_queue->enqueue({outgoing}, &error), qPrintable(error));
    QList<QueueMessage> leased;
    QElapsedTimer waited;
    waited.start();
    while (leased.isEmpty() && error.isEmpty() && waited.elapsed() < 10000)
        leased = m_queue->lease(10, 30000, QStringLiteral("test"), &error);
    QVERIFY2(leased.size() == 1, qPrintable(error));
    const QueueMessage message = leased.constFirst();
    Settlement retry;
    retry.kind = Settlement::Kind::Retry;
    retry.messageId = message.id;
    retry.delivery = message.delivery;
    retry.delayMs = 13 * Hour;
    QVERIFY2(m_queue->settle({retry}, &error), qPrintable(error));
    QueueCounts counts;
    QTRY_VERIFY_WITH_TIMEOUT((counts = countsNow()).delayed == 1 && counts.inFlight == 0, 10000);
    QCOMPARE(counts.ready, 0);
    QVERIFY(m_queue->lease(10, 30000, QStringLiteral("test"), &error).isEmpty());
}

// A copy its producer (or a worker's long retry) marked not to be delivered before a time
// more than 12 h away is sent on when received early, not hidden: so a copy is received at
// most twice however long it waits, and the redrive policy never counts a wait.
void TestSqsQueue::earlyCopyDueBeyondTwelveHoursIsSentOn()
{
    const QString url = rawQueueUrl();
    const QJsonObject sent = raw(
        "SendMessage",
        {{QStringLiteral("QueueUrl"), url},
         {QStringLiteral("MessageBody"), QStringLiteral("{\"due\":\"later\"}")},
         {QStringLiteral("MessageAttributes"),
          QJsonObject{{QStringLiteral("once-id"), QJsonObject{{QStringLiteral("DataType"), QStringLiteral("String")},
                                                              {QStringLiteral("StringValue"), QStringLiteral("far-1")}}},
                      {QStringLiteral("once-visible-at"),
                       QJsonObject{{QStringLiteral("DataType"), QStringLiteral("Number")},
                                   {QStringLiteral("StringValue"), QString::number(nowMs() + 13 * Hour)}}}}}});
    QVERIFY2(sent.contains(QLatin1String("MessageId")), QJsonDocument(sent).toJson().constData());
    QString error;
    QVERIFY(m_queue->lease(10, 30000, QStringLiteral("test"), &error).isEmpty());
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QueueCounts counts;
    QTRY_VERIFY_WITH_TIMEOUT((counts = countsNow()).delayed == 1 && counts.inFlight == 0, 10000);
    QCOMPARE(counts.ready, 0);
}

void TestSqsQueue::earlyCopyDueWithinTwelveHoursIsHidden()
{
    const QString url = rawQueueUrl();
    raw("SendMessage",
        {{QStringLiteral("QueueUrl"), url},
         {QStringLiteral("MessageBody"), QStringLiteral("{\"due\":\"soon\"}")},
         {QStringLiteral("MessageAttributes"),
          QJsonObject{{QStringLiteral("once-visible-at"), QJsonObject{{QStringLiteral("DataType"), QStringLiteral("Number")},
                                                                      {QStringLiteral("StringValue"), QString::number(nowMs() + Hour)}}}}}});
    QString error;
    QVERIFY(m_queue->lease(10, 30000, QStringLiteral("test"), &error).isEmpty());
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QueueCounts counts;
    QTRY_VERIFY_WITH_TIMEOUT((counts = countsNow()).inFlight == 1, 10000);
    QCOMPARE(counts.ready + counts.delayed, 0);
}

QTEST_GUILESS_MAIN(TestSqsQueue)

#include "tst_sqsqueue.moc"
