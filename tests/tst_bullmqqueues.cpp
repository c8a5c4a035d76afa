// The BullMQ queues on a real Redis (the Redis fixture; ONCE_TEST_REDIS_URL_FILE names
// the file with its URL), filled by BullMQ 6.7.0 itself (tests/producers/bullmq-states.js):
// once finds them and counts each state as BullMQ's own Queue.getJobCounts() does.
#include "queues/bullmq/bullmqqueues.h"

#include <QCoreApplication>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTest>
#include <QUrl>

using namespace once;

class TestBullMqQueues : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void cleanupTestCase();
    void findsAndCountsQueuesAsBullMqDoes();
    void aQueueNobodyMadeCountsNothing();
    void aWrongPasswordIsOneLineWithoutIt();

private:
    // Fills the queue through BullMQ and returns what BullMQ then says of it.
    QJsonObject fill(const BullMqQueueName &queue, bool pause);
    static void compare(const BullMqCounts &ours, const QJsonObject &bullmq);

    QString m_url;
    RedisEndpoint m_endpoint;
    QString m_tag; // in every queue name this run makes
};

void TestBullMqQueues::initTestCase()
{
    QFile file(qEnvironmentVariable("ONCE_TEST_REDIS_URL_FILE"));
    QVERIFY2(file.open(QIODevice::ReadOnly),
             "set ONCE_TEST_REDIS_URL_FILE to the url file of scripts/redis-server start DIR (ctest does)");
    m_url = QString::fromUtf8(file.readAll().trimmed());
    const QUrl url(m_url);
    m_endpoint = RedisEndpoint{url.host(),
                               url.port(6379),
                               url.userName(),
                               url.password(),
                               url.path().mid(1).toInt(),
                               QStringLiteral("Redis at %1:%2").arg(url.host()).arg(url.port())};
    m_tag = QStringLiteral("tst-%1").arg(QCoreApplication::applicationPid());
}

void TestBullMqQueues::cleanupTestCase()
{
    RedisConnection redis(m_endpoint, {});
    QString error;
    for (const char *pattern : {"bull:", "team:"}) {
        const QByteArray match = pattern + m_tag.toUtf8() + '*';
        QByteArray cursor = "0";
        do {
            const auto replies = redis.pipeline({{"SCAN", cursor, "MATCH", match, "COUNT", "1000"}}, &error);
            QVERIFY2(replies, qPrintable(error));
            const redisReply *reply = replies->front().get();
            cursor = redisreply::bytes(redisreply::element(reply, 0));
            const redisReply *keys = redisreply::element(reply, 1);
            for (size_t i = 0; i < redisreply::elementCount(keys); ++i)
                QVERIFY(redis.pipeline({{"DEL", redisreply::bytes(redisreply::element(keys, i))}}, &error));
        } while (cursor != "0");
    }
}

QJsonObject TestBullMqQueues::fill(const BullMqQueueName &queue, bool pause)
{
    QProcess node;
    node.setWorkingDirectory(qEnvironmentVariable("ONCE_TEST_PRODUCERS"));
    QStringList arguments{QStringLiteral("bullmq-states.js"),
                          QStringLiteral("--url"),
                          m_url,
                          QStringLiteral("--queue"),
                          queue.name,
                          QStringLiteral("--prefix"),
                          queue.prefix};
    if (pause)
        arguments.append(QStringLiteral("--pause"));
    node.start(QStringLiteral("node"), arguments);
    if (!node.waitForFinished(60000) || node.exitCode() != 0) {
        qWarning("%s %s", qPrintable(node.errorString()), node.readAllStandardError().constData());
        return {};
    }
    return QJsonDocument::fromJson(node.readAllStandardOutput()).object();
}

void TestBullMqQueues::compare(const BullMqCounts &ours, const QJsonObject &bullmq)
{
    const QJsonObject counts = bullmq.value(QStringLiteral("counts")).toObject();
    QCOMPARE(counts.size(), 7); // every state getJobCounts() reports, each checked below
    QCOMPARE(ours.waiting, counts.value(QStringLiteral("waiting")).toInteger());
    QCOMPARE(ours.active, counts.value(QStringLiteral("active")).toInteger());
    QCOMPARE(ours.delayed, counts.value(QStringLiteral("delayed")).toInteger());
    QCOMPARE(ours.prioritized, counts.value(QStringLiteral("prioritized")).toInteger());
    QCOMPARE(ours.completed, counts.value(QStringLiteral("completed")).toInteger());
    QCOMPARE(ours.failed, counts.value(QStringLiteral("failed")).toInteger());
    QCOMPARE(ours.waitingChildren, counts.value(QStringLiteral("waiting-children")).toInteger());
    QCOMPARE(ours.paused, bullmq.value(QStringLiteral("paused")).toBool());
    QCOMPARE(ours.version, bullmq.value(QStringLiteral("version")).toString());
}

void TestBullMqQueues::findsAndCountsQueuesAsBullMqDoes()
{
    const BullMqQueueName plain{QStringLiteral("bull"), m_tag + QStringLiteral("-reminders")};
    const BullMqQueueName paused{QStringLiteral("team"), m_tag + QStringLiteral("-paused")};
    const QJsonObject plainSaid = fill(plain, false);
    const QJsonObject pausedSaid = fill(paused, true);
    QVERIFY(!plainSaid.isEmpty() && !pausedSaid.isEmpty());

    // What BullMQ made: every state filled (a count of zero would prove nothing).
    const QJsonObject counts = plainSaid.value(QStringLiteral("counts")).toObject();
    for (const char *state : {"waiting", "active", "delayed", "prioritized", "completed", "failed"})
        QVERIFY2(counts.value(QLatin1String(state)).toInteger() > 0, state);
    QVERIFY(pausedSaid.value(QStringLiteral("paused")).toBool());

    // Keys that end in ":meta" but name no queue, as any other program may make them.
    RedisConnection redis(m_endpoint, {});
    QString error;
    const QByteArray stray = m_tag.toUtf8() + "-stray";
    QVERIFY2(redis.pipeline({{"HSET", "bull:meta", stray, "1"}, {"HSET", ":meta", stray, "1"}}, &error),
             qPrintable(error));

    BullMqQueues queues(m_endpoint);
    const auto found = queues.discover(&error);
    QVERIFY(redis.pipeline({{"HDEL", "bull:meta", stray}, {"HDEL", ":meta", stray}}, &error));
    QVERIFY2(found, qPrintable(error));
    QVERIFY(found->contains(plain));
    QVERIFY(found->contains(paused));
    // Each queue found is one whose meta key is there.
    for (const BullMqQueueName &queue : *found) {
        const QByteArray meta = (queue.prefix + u':' + queue.name + QStringLiteral(":meta")).toUtf8();
        const auto exists = redis.pipeline({{"EXISTS", meta}}, &error);
        QVERIFY2(exists, qPrintable(error));
        QVERIFY2(redisreply::integer(exists->front().get()) == 1, meta.constData());
    }
    QVERIFY(std::is_sorted(found->cbegin(), found->cend(), [](const auto &a, const auto &b) {
        return std::tie(a.prefix, a.name) < std::tie(b.prefix, b.name);
    }));

    const auto plainCounts = queues.counts(plain, &error);
    QVERIFY2(plainCounts, qPrintable(error));
    compare(*plainCounts, plainSaid);
    const auto pausedCounts = queues.counts(paused, &error);
    QVERIFY2(pausedCounts, qPrintable(error));
    compare(*pausedCounts, pausedSaid);
    QVERIFY(pausedCounts->paused);
}

void TestBullMqQueues::aQueueNobodyMadeCountsNothing()
{
    BullMqQueues queues(m_endpoint);
    QString error;
    const auto counts = queues.counts({QStringLiteral("bull"), m_tag + QStringLiteral("-nothing")}, &error);
    QVERIFY2(counts, qPrintable(error));
    QCOMPARE(counts->waiting + counts->active + counts->delayed + counts->prioritized + counts->completed +
                 counts->failed + counts->waitingChildren,
             qint64(0));
    QVERIFY(!counts->paused);
    QVERIFY(counts->version.isEmpty());
}

void TestBullMqQueues::aWrongPasswordIsOneLineWithoutIt()
{
    RedisEndpoint wrong = m_endpoint;
    wrong.password = QStringLiteral("not-the-password-%1").arg(m_tag);
    BullMqQueues queues(wrong);
    QString error;
    QVERIFY(!queues.discover(&error));
    QVERIFY2(!error.isEmpty() && !error.contains(u'\n') && !error.contains(wrong.password),
             qPrintable(error));
    QVERIFY2(error.startsWith(m_endpoint.label), qPrintable(error));
}

QTEST_GUILESS_MAIN(TestBullMqQueues)
#include "tst_bullmqqueues.moc"
