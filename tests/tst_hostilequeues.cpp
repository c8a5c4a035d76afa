// The cloud queues (SQS, Pub/Sub) against an endpoint that answers badly: not JSON, the
// wrong JSON, errors that echo the request or carry control characters, a closed
// connection, a body far too long, messages without the handles that settle them. Each
// must end in no message and, where the call failed, one line that shows no secret; and
// the next good answer must be read as if nothing had happened.
#include "queues/brokerqueue.h"
#include "queues/queuelocation.h"
#include "threadedfakeserver.h"

#include <QJsonArray>
#include <QTest>

#include <algorithm>
#include <atomic>

using namespace once;
using namespace oncetest;

namespace {

constexpr char SecretKey[] = "hostile-test-secret-key-never-shown";

enum class Expect { Error, NoMessages };

} // namespace

class HostileQueuesTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void badAnswerToALease_data();
    void badAnswerToALease();

private:
    std::unique_ptr<BrokerQueue> open(const QString &backend, QString *error);

    ThreadedFakeServer m_server;
};

void HostileQueuesTest::initTestCase()
{
    qputenv("AWS_ACCESS_KEY_ID", "AKIDHOSTILETEST");
    qputenv("AWS_SECRET_ACCESS_KEY", SecretKey);
    QVERIFY(m_server.port() != 0);
}

std::unique_ptr<BrokerQueue> HostileQueuesTest::open(const QString &backend, QString *error)
{
    const QString url = backend == QLatin1String("sqs")
                            ? QStringLiteral("sqs://us-east-1/000000000000/hostile?endpoint=http://127.0.0.1:%1").arg(m_server.port())
                            : QStringLiteral("pubsub://once-test/hostile?topic=hostile-topic&endpoint=127.0.0.1:%1").arg(m_server.port());
    const auto location = QueueLocation::parse(url, error);
    if (!location)
        return nullptr;
    return openBrokerQueue(*location, QStringLiteral("hostile-test"), 10, error);
}

void HostileQueuesTest::badAnswerToALease_data()
{
    QTest::addColumn<QString>("backend");
    QTest::addColumn<QString>("answer");
    QTest::addColumn<int>("expect");
    for (const QString &backend : {QStringLiteral("sqs"), QStringLiteral("pubsub")}) {
        const auto row = [&](const char *answer, Expect expect) {
            QTest::addRow("%s: %s", qPrintable(backend), answer) << backend << QString::fromLatin1(answer) << int(expect);
        };
        row("not JSON", Expect::Error);
        row("a JSON array", Expect::Error);
        row("an error echoing the request", Expect::Error);
        row("an error with control characters", Expect::Error);
        row("a closed connection", Expect::Error);
        row("a body far too long", Expect::Error);
        row("messages without handles", Expect::NoMessages);
        row("messages of the wrong type", Expect::NoMessages);
    }
}

void HostileQueuesTest::badAnswerToALease()
{
    QFETCH(QString, backend);
    QFETCH(QString, answer);
    QFETCH(int, expect);
    const bool sqs = backend == QLatin1String("sqs");
    const QByteArray hostile = answer.toLatin1();
    std::atomic<bool> bad = true; // read on the server's thread
    m_server.setResponder([&, sqs, hostile](const SeenRequest &request) -> Answer {
        // SQS looks the queue up first: that one is answered well.
        if (request.header("X-Amz-Target") == "AmazonSQS.GetQueueUrl")
            return jsonAnswer(200, {{QStringLiteral("QueueUrl"),
                                     QStringLiteral("http://127.0.0.1:%1/000000000000/hostile").arg(m_server.port())}});
        if (!bad)
            return jsonAnswer(200, {});
        if (hostile == "not JSON")
            return {Answer::Kind::Respond, 200, "<html><body>all good</body></html>", {}, 0};
        if (hostile == "a JSON array")
            return {Answer::Kind::Respond, 200, "[1, 2, 3]", {}, 0};
        if (hostile == "an error echoing the request") {
            QByteArray echoed = request.method + ' ' + request.path + '\n';
            for (const auto &[name, value] : request.headers)
                echoed += name + ": " + value + '\n';
            return {Answer::Kind::Respond, 500, echoed + '\n' + request.body, {}, 0};
        }
        if (hostile == "an error with control characters")
            return {Answer::Kind::Respond, 503, "\x1b[31mdown\r\nX-Injected: yes\r\n\x07", {}, 0};
        if (hostile == "a closed connection")
            return {Answer::Kind::Close, 0, {}, {}, 0};
        if (hostile == "a body far too long")
            return {Answer::Kind::Respond, 200, "{\"Messages\":[", {}, 40 * 1024 * 1024};
        if (hostile == "messages without handles")
            return sqs ? jsonAnswer(200, {{QStringLiteral("Messages"), QJsonArray{QJsonObject{{QStringLiteral("Body"), QStringLiteral("{}")}}}}})
                       : jsonAnswer(200, {{QStringLiteral("receivedMessages"),
                                           QJsonArray{QJsonObject{{QStringLiteral("message"),
                                                                   QJsonObject{{QStringLiteral("data"), QStringLiteral("e30=")}}}}}}});
        // messages of the wrong type
        return sqs ? jsonAnswer(200, {{QStringLiteral("Messages"), QStringLiteral("none today")}})
                   : jsonAnswer(200, {{QStringLiteral("receivedMessages"), QJsonObject{{QStringLiteral("x"), 1}}}});
    });

    QString error;
    const auto queue = open(backend, &error);
    QVERIFY2(queue, qPrintable(error));
    const QList<QueueMessage> leased = queue->lease(10, 30000, QStringLiteral("hostile-test"), &error);
    QVERIFY2(leased.isEmpty(), qPrintable(leased.value(0).id));
    if (Expect(expect) == Expect::Error) {
        QVERIFY2(!error.isEmpty(), "a failed call said nothing");
        const bool control = std::any_of(error.cbegin(), error.cend(), [](QChar c) { return c.category() == QChar::Other_Control; });
        QVERIFY2(!control, qPrintable(error));
        QVERIFY2(!error.contains(QLatin1String(SecretKey)), qPrintable(error));
        QVERIFY2(!error.contains(QLatin1String("Signature=")), qPrintable(error));
        QVERIFY2(error.size() < 1000, qPrintable(error));
    } else {
        QVERIFY2(error.isEmpty(), qPrintable(error));
    }

    // The next good answer is read as if nothing had happened.
    bad = false;
    error.clear();
    QVERIFY(queue->lease(10, 30000, QStringLiteral("hostile-test"), &error).isEmpty());
    QVERIFY2(error.isEmpty(), qPrintable(error));
    m_server.setResponder({});
}

QTEST_GUILESS_MAIN(HostileQueuesTest)

#include "tst_hostilequeues.moc"
