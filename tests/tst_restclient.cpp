// once as the client of a REST queue (core/queues/rest: `--queue rest+http://...`), against
// the answers a hostile or broken server may give (tests/threadedfakeserver.h plays it:
// a Retry-After of ages, far more messages than asked for, messages that cannot be
// settled) and against a real `once serve` whose tokens have the roles an operator hands
// out (a worker's consumer token), publishing what its limits must take.
#include "deliveryharness.h"
#include "queues/brokerqueue.h"
#include "queues/queuelocation.h"
#include "sim/partnersimulator.h"
#include "text/jsonvalues.h"
#include "threadedfakeserver.h"

#include <QJsonArray>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>

using namespace once;
using namespace oncetest;

namespace {

const QByteArray FakeToken = "fake-queue-secret-0123456789abcdef";
const QByteArray ProducerToken = "producer-secret-0123456789abcdef";
const QByteArray ConsumerToken = "consumer-secret-0123456789abcdef";
const QByteArray OperatorToken = "operator-secret-0123456789abcdef";

// A consume answer's message as once serve writes it, leased for a minute.
QJsonObject consumedMessage(int n)
{
    const qint64 now = QDateTime::currentMSecsSinceEpoch();
    const QString id = QString::number(n);
    return {{QStringLiteral("id"), QString(id + QStringLiteral(".1"))},
            {QStringLiteral("message_id"), id},
            {QStringLiteral("payload"), QString::fromUtf8(makeReminder(QStringLiteral("fake"), n).line)},
            {QStringLiteral("receive_count"), 1},
            {QStringLiteral("redrive_count"), 0},
            {QStringLiteral("enqueued_at"), formatTime(now - 1000)},
            {QStringLiteral("lease_until"), formatTime(now + 60000)}};
}

QMap<QString, QString> withToken(const QByteArray &token)
{
    return {{QStringLiteral("ONCE_QUEUE_TOKEN"), QString::fromLatin1(token)}};
}

} // namespace

class RestClientTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void cleanup();

    void retryAfterOfAgesIsWaitedFiveMinutesAtMost_data();
    void retryAfterOfAgesIsWaitedFiveMinutesAtMost();
    void consumeTakesNoMoreThanItAskedFor();
    void consumeAnswerOverItsBudgetIsRefusedUnread();
    void messageThatCannotBeSettledIsAMalformedAnswer_data();
    void messageThatCannotBeSettledIsAMalformedAnswer();
    void workerNamesTheQueueThatFails();
    void workerWithAConsumerTokenEndsWhenIdle();
    void enqueueCutsBatchesByTheirSizeAsSent();

private:
    // A RestQueue at the fake server, queue `fake`, its token in the URL.
    std::unique_ptr<BrokerQueue> openFake(QString *error);
    QString fakeDisplayName() const;
    // once serve on a store of its own, with a producer, a consumer and an operator token;
    // false (with a warning) when it did not listen.
    bool startServe();
    QString serveQueueUrl() const { return QStringLiteral("rest+http://127.0.0.1:%1/v1?queue=reminders").arg(m_servePort); }

    ThreadedFakeServer m_fake;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<OnceRunner> m_serveRunner;
    QProcess *m_serve = nullptr;
    quint16 m_servePort = 0;
};

void RestClientTest::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY2(!qEnvironmentVariable("ONCE_BIN").isEmpty(), "ONCE_BIN must name the once binary");
    QVERIFY(m_fake.port() != 0);
}

void RestClientTest::cleanup()
{
    m_fake.setResponder({});
    m_fake.clearRequests();
    m_serveRunner.reset();
    m_serve = nullptr;
    m_dir.reset();
}

std::unique_ptr<BrokerQueue> RestClientTest::openFake(QString *error)
{
    const auto location = QueueLocation::parse(
        QStringLiteral("rest+http://:%1@127.0.0.1:%2/v1?queue=fake").arg(QString::fromLatin1(FakeToken)).arg(m_fake.port()),
        error);
    return location ? openBrokerQueue(*location, QStringLiteral("restclient-test"), 10, error) : nullptr;
}

QString RestClientTest::fakeDisplayName() const
{
    return QStringLiteral("rest+http://127.0.0.1:%1/v1?queue=fake").arg(m_fake.port());
}

bool RestClientTest::startServe()
{
    m_dir = std::make_unique<QTemporaryDir>();
    m_serveRunner = std::make_unique<OnceRunner>(qEnvironmentVariable("ONCE_BIN"),
                                                 QStringLiteral("sqlite:") + m_dir->filePath(QStringLiteral("served.db")));
    if (!m_serveRunner->run({QStringLiteral("init")}).exitedWith(0))
        return false;
    const QString tokensFile = m_dir->filePath(QStringLiteral("tokens"));
    QFile tokens(tokensFile);
    if (!tokens.open(QIODevice::WriteOnly))
        return false;
    tokens.write("orders-producer " + ProducerToken + " producer\nreminder-worker " + ConsumerToken
                 + " consumer\noncall " + OperatorToken + " operator\n");
    tokens.close();
    m_servePort = m_serveRunner->startServe({QStringLiteral("--tokens"), tokensFile}, &m_serve);
    return m_servePort != 0;
}

// A 429 or 503 whose Retry-After asks for ages (a number of seconds past any clock, or a
// maintenance page's date in 9999) stops consuming for five minutes at most, says so once
// with what was asked, and asks nothing meanwhile; a modest one is waited as asked.
void RestClientTest::retryAfterOfAgesIsWaitedFiveMinutesAtMost_data()
{
    QTest::addColumn<int>("status");
    QTest::addColumn<QByteArray>("retryAfter");
    QTest::addColumn<QByteArray>("body");
    QTest::addColumn<QString>("said");
    QTest::newRow("429 for 10^12 s") << 429 << QByteArray("1000000000000")
                                     << QByteArray(R"({"error":{"code":"rate_limited","message":"slow down"}})")
                                     << QStringLiteral("consuming nothing for 300 s (it asked for 86400 s; a queue is "
                                                       "waited 300 s at most)");
    QTest::newRow("503 until 9999") << 503 << QByteArray("Fri, 31 Dec 9999 23:59:59 GMT")
                                    << QByteArray("<html><body>Back soon</body></html>")
                                    << QStringLiteral("consuming nothing for 300 s (it asked for 86400 s; a queue is "
                                                      "waited 300 s at most)");
    QTest::newRow("429 for 7 s") << 429 << QByteArray("7") << QByteArray(R"({"error":{"code":"rate_limited"}})")
                                 << QStringLiteral("consuming nothing for 7 s (said once");
}

void RestClientTest::retryAfterOfAgesIsWaitedFiveMinutesAtMost()
{
    QFETCH(int, status);
    QFETCH(QByteArray, retryAfter);
    QFETCH(QByteArray, body);
    QFETCH(QString, said);
    m_fake.setResponder([=](const SeenRequest &) {
        return Answer{Answer::Kind::Respond, status, body, {{"Retry-After", retryAfter}}, 0};
    });
    QString error;
    const auto queue = openFake(&error);
    QVERIFY2(queue, qPrintable(error));
    QTest::ignoreMessage(QtWarningMsg, QRegularExpression(QRegularExpression::escape(said)));
    QVERIFY(queue->lease(10, 30000, QStringLiteral("w"), &error).isEmpty());
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QCOMPARE(m_fake.requestCount(), qsizetype(1));
    // Waiting: nothing is asked, and nothing said again.
    QTest::failOnWarning(QRegularExpression(QStringLiteral("asks to wait")));
    QVERIFY(queue->lease(10, 30000, QStringLiteral("w"), &error).isEmpty());
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QCOMPARE(m_fake.requestCount(), qsizetype(1));
}

// A consume answered with 500 messages where 10 were asked for: the first 10 are taken,
// the others are said to come back when their lease ends, and none is given back (a
// nack would count as one of their deliveries).
void RestClientTest::consumeTakesNoMoreThanItAskedFor()
{
    QJsonArray messages;
    for (int i = 1; i <= 500; ++i)
        messages.append(consumedMessage(i));
    m_fake.setResponder([messages](const SeenRequest &) {
        return jsonAnswer(200, {{QStringLiteral("messages"), messages}, {QStringLiteral("message"), messages.first()}});
    });
    QString error;
    const auto queue = openFake(&error);
    QVERIFY2(queue, qPrintable(error));
    QTest::ignoreMessage(QtWarningMsg,
                         QRegularExpression(QRegularExpression::escape(
                             QStringLiteral("the REST queue %1 answered 500 messages to a consume of 10: took the "
                                            "first 10, the other 490 come back when their lease ends")
                                 .arg(fakeDisplayName()))));
    const QList<QueueMessage> leased = queue->lease(10, 30000, QStringLiteral("w"), &error);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QCOMPARE(leased.size(), qsizetype(10));
    QCOMPARE(leased.first().id, QStringLiteral("1"));
    QCOMPARE(leased.last().id, QStringLiteral("10"));
    QVERIFY(leased.last().leaseUntilMs > QDateTime::currentMSecsSinceEpoch());
    const QList<SeenRequest> seen = m_fake.requests();
    QCOMPARE(seen.size(), qsizetype(1));
    QCOMPARE(QJsonDocument::fromJson(seen.first().body).object().value(QStringLiteral("max_messages")).toInt(), 10);
}

// 50,000 messages (56 MB) to a consume of 10: refused before it is read whole, in one
// line naming the queue and the limit, with nothing taken.
void RestClientTest::consumeAnswerOverItsBudgetIsRefusedUnread()
{
    QByteArray answer = "{\"messages\":[";
    const QByteArray filler(700, 'x');
    for (int i = 1; i <= 50000; ++i) {
        if (i > 1)
            answer += ',';
        answer += QJsonDocument(consumedMessage(i)).toJson(QJsonDocument::Compact);
        answer.insert(answer.size() - 1, ",\"filler\":\"" + filler + '"');
    }
    answer += "]}";
    QVERIFY(answer.size() > 50 * 1000 * 1000);
    m_fake.setResponder([answer](const SeenRequest &) { return Answer{Answer::Kind::Respond, 200, answer, {}, 0}; });
    QString error;
    const auto queue = openFake(&error);
    QVERIFY2(queue, qPrintable(error));
    const QList<QueueMessage> leased = queue->lease(10, 30000, QStringLiteral("w"), &error);
    QVERIFY2(leased.isEmpty(), qPrintable(QString::number(leased.size())));
    QVERIFY2(error.contains(QLatin1String("limit")) && error.contains(fakeDisplayName()), qPrintable(error));
    QVERIFY2(!error.contains(QLatin1Char('\n')) && error.size() < 1000, qPrintable(error));
    QVERIFY2(!error.contains(QString::fromLatin1(FakeToken)), qPrintable(error));
}

// A message without what settles it (its id, its receive count) or says how long it is
// ours (lease_until) would never be sent or never be acked: the answer is malformed, in
// one line naming the queue and the field, and nothing is taken.
void RestClientTest::messageThatCannotBeSettledIsAMalformedAnswer_data()
{
    QTest::addColumn<QString>("field");
    QTest::addColumn<QJsonValue>("value"); // undefined: the field is left out
    QTest::addColumn<QString>("said");
    QTest::newRow("no lease_until") << QStringLiteral("lease_until") << QJsonValue(QJsonValue::Undefined)
                                    << QStringLiteral("message 2 of 3 has no valid lease_until");
    QTest::newRow("lease_until not a time") << QStringLiteral("lease_until") << QJsonValue(QStringLiteral("soon"))
                                            << QStringLiteral("message 2 of 3 has no valid lease_until");
    QTest::newRow("no message_id") << QStringLiteral("message_id") << QJsonValue(QJsonValue::Undefined)
                                   << QStringLiteral("message 2 of 3 has no valid message_id");
    // The delivery id is what settles it (its lease's secret): without it, never acked.
    QTest::newRow("no id") << QStringLiteral("id") << QJsonValue(QJsonValue::Undefined)
                           << QStringLiteral("message 2 of 3 has no valid id");
    QTest::newRow("receive_count 0") << QStringLiteral("receive_count") << QJsonValue(0)
                                     << QStringLiteral("message 2 of 3 has no valid receive_count");
    QTest::newRow("messages not a list") << QStringLiteral("messages") << QJsonValue(QStringLiteral("none today"))
                                         << QStringLiteral("no messages list");
}

void RestClientTest::messageThatCannotBeSettledIsAMalformedAnswer()
{
    QFETCH(QString, field);
    QFETCH(QJsonValue, value);
    QFETCH(QString, said);
    QJsonArray messages;
    for (int i = 1; i <= 3; ++i) {
        QJsonObject message = consumedMessage(i);
        if (i == 2 && field != QLatin1String("messages")) {
            if (value.isUndefined())
                message.remove(field);
            else
                message.insert(field, value);
        }
        messages.append(message);
    }
    const QJsonObject answer{{QStringLiteral("messages"), field == QLatin1String("messages") ? value : QJsonValue(messages)}};
    m_fake.setResponder([answer](const SeenRequest &) { return jsonAnswer(200, answer); });
    QString error;
    const auto queue = openFake(&error);
    QVERIFY2(queue, qPrintable(error));
    const QList<QueueMessage> leased = queue->lease(10, 30000, QStringLiteral("w"), &error);
    QVERIFY2(leased.isEmpty(), qPrintable(QString::number(leased.size())));
    QVERIFY2(error.contains(said) && error.contains(QLatin1String("malformed")) && error.contains(fakeDisplayName()),
             qPrintable(error));
    QVERIFY2(!error.contains(QLatin1Char('\n')), qPrintable(error));
    // Nothing taken, nothing given back.
    QCOMPARE(m_fake.requestCount(), qsizetype(1));
}

// A worker whose REST queue fails says that the queue failed, naming it by its URL
// without the token, not that the store did.
void RestClientTest::workerNamesTheQueueThatFails()
{
    m_fake.setResponder([](const SeenRequest &) {
        return jsonAnswer(500, {{QStringLiteral("error"), QJsonObject{{QStringLiteral("code"), QStringLiteral("internal")},
                                                                      {QStringLiteral("message"), QStringLiteral("disk on fire")}}}});
    });
    QTemporaryDir dir;
    OnceRunner worker(qEnvironmentVariable("ONCE_BIN"), QStringLiteral("sqlite:") + dir.filePath(QStringLiteral("ledger.db")));
    QVERIFY(worker.run({QStringLiteral("init")}).exitedWith(0));
    QProcess *process = worker.start({QStringLiteral("worker"), QStringLiteral("--queue"),
                                      QStringLiteral("rest+http://127.0.0.1:%1/v1?queue=fake").arg(m_fake.port()),
                                      QStringLiteral("--partner"), QStringLiteral("http://127.0.0.1:9/reminders")},
                                     withToken(FakeToken));
    QByteArray err;
    pumpUntil(
        [&] {
            err += process->readAllStandardError();
            return err.contains("disk on fire") || process->state() == QProcess::NotRunning;
        },
        20000);
    process->kill();
    process->waitForFinished(5000);
    err += process->readAllStandardError();
    const QByteArray named = QStringLiteral("the queue %1 failed, retrying: consuming at the REST queue %1: HTTP 500 "
                                            "internal: disk on fire")
                                 .arg(fakeDisplayName())
                                 .toUtf8();
    QVERIFY2(err.contains(named), err.constData());
    QVERIFY2(!err.contains("store write failed"), err.constData());
    QVERIFY2(!err.contains(FakeToken), err.constData());
}

// `once worker --until-idle` with the token a worker is given (role consumer, which may not
// read stats) delivers what was published and ends, deciding from what consume answers;
// `once stats` with that token says the counts are not its to read.
void RestClientTest::workerWithAConsumerTokenEndsWhenIdle()
{
    QVERIFY(startServe());
    OnceRunner other(qEnvironmentVariable("ONCE_BIN"), QStringLiteral("sqlite:") + m_dir->filePath(QStringLiteral("ledger.db")));
    QVERIFY(other.run({QStringLiteral("init")}).exitedWith(0));
    constexpr int Count = 5;
    QByteArray lines;
    for (int i = 0; i < Count; ++i)
        lines += makeReminder(QStringLiteral("idle"), i).line + '\n';
    const QString file = m_dir->filePath(QStringLiteral("idle.jsonl"));
    QFile out(file);
    QVERIFY(out.open(QIODevice::WriteOnly) && out.write(lines) == lines.size());
    out.close();
    const auto enqueue = other.run({QStringLiteral("enqueue"), file, QStringLiteral("--queue"), serveQueueUrl()},
                                   withToken(ProducerToken));
    QVERIFY2(enqueue.exitedWith(0), enqueue.describe().constData());

    PartnerSimulator partner;
    QString error;
    QVERIFY2(partner.listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    const auto worker = other.waitFor(
        other.start({QStringLiteral("worker"), QStringLiteral("--queue"), serveQueueUrl(), QStringLiteral("--partner"),
                     QStringLiteral("http://127.0.0.1:%1/reminders").arg(partner.port()), QStringLiteral("--until-idle"),
                     QStringLiteral("--lease"), QStringLiteral("3"), QStringLiteral("--timeout"), QStringLiteral("2")},
                    withToken(ConsumerToken)),
        30000);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    QCOMPARE(partner.stats().effects, qint64(Count));
    QVERIFY2(!worker.err.contains(ConsumerToken), worker.err.constData());

    const auto stats = other.run({QStringLiteral("stats"), QStringLiteral("--json"), QStringLiteral("--queue"), serveQueueUrl()},
                                 withToken(ConsumerToken));
    QVERIFY2(stats.exitedWith(0), stats.describe().constData());
    const QJsonObject counts = QJsonDocument::fromJson(stats.out).object();
    QVERIFY2(counts.value(QStringLiteral("ready")).isNull()
                 && counts.value(QStringLiteral("queue_unavailable")).toString().contains(QLatin1String("403")),
             stats.out.constData());
    // The operator's token reads them: all acked.
    const auto operatorStats = other.run(
        {QStringLiteral("stats"), QStringLiteral("--json"), QStringLiteral("--queue"), serveQueueUrl()}, withToken(OperatorToken));
    QVERIFY2(operatorStats.exitedWith(0), operatorStats.describe().constData());
    VERIFY_NO_PROBLEMS(statsProblems(QJsonDocument::fromJson(operatorStats.out).object(),
                                     {{QStringLiteral("ready"), 0}, {QStringLiteral("in_flight"), 0}}));
}

// 30 reminders of 240 KB, their text full of quotes (each sent as \\\", twice its size):
// 14 MB as sent, cut into requests the server's 8 MiB limit takes, all enqueued.
void RestClientTest::enqueueCutsBatchesByTheirSizeAsSent()
{
    QVERIFY(startServe());
    OnceRunner other(qEnvironmentVariable("ONCE_BIN"), QStringLiteral("sqlite:") + m_dir->filePath(QStringLiteral("ledger.db")));
    QVERIFY(other.run({QStringLiteral("init")}).exitedWith(0));
    constexpr int Count = 30;
    QByteArray lines;
    for (int i = 0; i < Count; ++i) {
        QJsonObject reminder = QJsonDocument::fromJson(makeReminder(QStringLiteral("quotes"), i).line).object();
        reminder.insert(QStringLiteral("body"), QString(120000, QLatin1Char('"')));
        const QByteArray line = QJsonDocument(reminder).toJson(QJsonDocument::Compact);
        QVERIFY(line.size() > 240000 && line.size() < 256 * 1024);
        lines += line + '\n';
    }
    const QString file = m_dir->filePath(QStringLiteral("quotes.jsonl"));
    QFile out(file);
    QVERIFY(out.open(QIODevice::WriteOnly) && out.write(lines) == lines.size());
    out.close();
    const auto enqueue = other.run({QStringLiteral("enqueue"), file, QStringLiteral("--queue"), serveQueueUrl()},
                                   withToken(ProducerToken), 60000);
    QVERIFY2(enqueue.exitedWith(0) && enqueue.err.contains("enqueued 30, rejected 0"), enqueue.describe().constData());
    const auto stats = other.run({QStringLiteral("stats"), QStringLiteral("--json"), QStringLiteral("--queue"), serveQueueUrl()},
                                 withToken(OperatorToken));
    QVERIFY2(stats.exitedWith(0), stats.describe().constData());
    VERIFY_NO_PROBLEMS(statsProblems(QJsonDocument::fromJson(stats.out).object(), {{QStringLiteral("ready"), Count}}));
    // In as few requests as the limit allows: two.
    const QByteArray log = m_serve->readAllStandardError();
    QCOMPARE(log.count("POST /v1/queue/publish_batch 200"), qsizetype(2));
    QVERIFY2(!log.contains(" 413 "), log.constData());
}

QTEST_GUILESS_MAIN(RestClientTest)

#include "tst_restclient.moc"
