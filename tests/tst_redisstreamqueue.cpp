// RedisStreamQueue against a real Redis server (scripts/redis-server, which ctest starts as
// the Redis fixture; ONCE_TEST_REDIS_URL_FILE names the file with its URL). Each test
// function has a stream of its own. Besides the queue's own answers, the tests look at the
// keys with a plain hiredis connection, which also plays a foreign producer.
#include "store/database.h"
#include "queues/redis/redislocation.h"
#include "queues/redis/redisstreamqueue.h"

#include <QElapsedTimer>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSet>
#include <QTest>

#include <hiredis/hiredis.h>

#include <memory>

using namespace once;

namespace {

constexpr qint64 LongLease = 60000;

struct ReplyDeleter
{
    void operator()(redisReply *reply) const { freeReplyObject(reply); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// A plain connection to the test server, without the queue's logic.
class RawRedis final
{
    Q_DISABLE_COPY_MOVE(RawRedis)

public:
    explicit RawRedis(const QueueLocation &where)
        : m_context(redisConnect(where.host.toUtf8().constData(), where.port))
    {
        if (!m_context || m_context->err)
            qFatal("RawRedis: cannot connect to %s", qPrintable(where.displayName()));
        command({"AUTH", where.password.toUtf8()});
        command({"SELECT", QByteArray::number(redisDetails(where).database)});
    }
    ~RawRedis() { redisFree(m_context); }

    Reply command(const QByteArrayList &arguments)
    {
        std::vector<const char *> argv;
        std::vector<size_t> lengths;
        for (const QByteArray &argument : arguments) {
            argv.push_back(argument.constData());
            lengths.push_back(size_t(argument.size()));
        }
        Reply reply(static_cast<redisReply *>(
            redisCommandArgv(m_context, int(argv.size()), argv.data(), lengths.data())));
        if (!reply)
            qFatal("RawRedis: the connection failed: %s", m_context->errstr);
        return reply;
    }
    qint64 integer(const QByteArrayList &arguments)
    {
        const Reply reply = command(arguments);
        return reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1;
    }
    QByteArray string(const QByteArrayList &arguments)
    {
        const Reply reply = command(arguments);
        return reply->type == REDIS_REPLY_STRING ? QByteArray(reply->str, qsizetype(reply->len))
                                                 : QByteArray();
    }

    // The id of the connection with that CLIENT SETNAME, from CLIENT LIST's
    // "id=7 addr=... name=NAME ..." lines.
    QByteArray clientId(const QByteArray &name)
    {
        for (const QByteArray &line : string({"CLIENT", "LIST"}).split('\n')) {
            if (line.startsWith("id=") && line.contains(QByteArray(" name=" + name + ' ')))
                return line.mid(3, line.indexOf(' ') - 3);
        }
        return {};
    }

private:
    redisContext *m_context = nullptr;
};

// One pending entry, as XPENDING's extended form reports it.
struct PendingEntry
{
    QByteArray consumer;
    qint64 deliveries = 0;
};

QByteArray reminderJson(int n)
{
    const QJsonObject object{
        {QStringLiteral("user_id"), QStringLiteral("user-%1").arg(n)},
        {QStringLiteral("reminder_id"), QStringLiteral("r-%1").arg(n)},
        {QStringLiteral("scheduled_at"), QStringLiteral("2026-12-01T09:00:00Z")},
        {QStringLiteral("destination"), QStringLiteral("+15550100")},
        {QStringLiteral("body"), QStringLiteral("Reminder %1").arg(n)},
    };
    return QJsonDocument(object).toJson(QJsonDocument::Compact);
}

QList<OutgoingMessage> reminders(int count, int first = 0, qint64 delayMs = 0)
{
    QList<OutgoingMessage> messages;
    for (int n = first; n < first + count; ++n)
        messages.append(OutgoingMessage{reminderJson(n), QByteArray(), QString(), delayMs, 0});
    return messages;
}

Settlement ack(const QueueMessage &message)
{
    return Settlement{Settlement::Kind::Ack, message.id, message.delivery, 0, {}};
}

Settlement retry(const QueueMessage &message, qint64 delayMs)
{
    return Settlement{Settlement::Kind::Retry, message.id, message.delivery, delayMs, {}};
}

Settlement bury(const QueueMessage &message, const DeadLetterInfo &info = {})
{
    return Settlement{Settlement::Kind::DeadLetter, message.id, message.delivery, 0, info};
}

QList<Settlement> ackAll(const QList<QueueMessage> &messages)
{
    QList<Settlement> settlements;
    for (const QueueMessage &message : messages)
        settlements.append(ack(message));
    return settlements;
}

} // namespace

class TestRedisStreamQueue : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void declareTopologyTwice();
    void undeclaredStreamSaysSo();
    void connectionWithoutConsumerCannotLease();
    void enqueueLeaseAckEmptiesTheStream();
    void settlesThousandsPerSecond();
    void retryComesBackWithSameIdLater();
    void delayedEnqueueIsInvisibleUntilDue();
    void deadLettersAreListedRedrivenAndDiscarded();
    void deadConsumersEntriesAreReclaimed();
    void staleSettlementChangesNothing();
    void plainProducerEntryUsesEntryId();
    void entryWithoutBodyIsLeasedEmpty();
    void binaryPayloadSurvivesEveryPath();
    void countsDescribeTheQueue();
    void reconnectsAfterTheConnectionBroke();
    void wrongPasswordIsReportedWithoutIt();
    void unreachableServerIsReported();

private:
    // The test server's location for this test's stream, with another password if given.
    QueueLocation locationWith(const std::optional<QString> &password = std::nullopt) const;
    std::unique_ptr<RedisStreamQueue> open(const QString &consumer = QStringLiteral("worker-1"));
    // Leases until count deliveries arrived or timeoutMs passed.
    QList<QueueMessage> leaseUntil(RedisStreamQueue &queue, int count, qint64 leaseMs, int timeoutMs = 5000);
    QList<PendingEntry> pending();
    QueueCounts counts(RedisStreamQueue &queue);

    QString m_url;
    QueueLocation m_location;
    QByteArray m_stream;
    std::unique_ptr<RawRedis> m_raw;
};

void TestRedisStreamQueue::initTestCase()
{
    QFile file(qEnvironmentVariable("ONCE_TEST_REDIS_URL_FILE"));
    QVERIFY2(file.open(QIODevice::ReadOnly),
             "set ONCE_TEST_REDIS_URL_FILE to the url file of scripts/redis-server start DIR (ctest does)");
    m_url = QString::fromUtf8(file.readAll().trimmed());
    QString error;
    const auto location = QueueLocation::parse(m_url + QStringLiteral("?stream=probe"), &error);
    QVERIFY2(location, qPrintable(error));
    m_raw = std::make_unique<RawRedis>(*location);
}

void TestRedisStreamQueue::init()
{
    m_stream =
        "tst-" + QByteArray::number(QCoreApplication::applicationPid()) + '-' + QTest::currentTestFunction();
    m_location = locationWith();
}

void TestRedisStreamQueue::cleanup()
{
    m_raw->command({"DEL", m_stream, m_stream + ":delayed", m_stream + ":dead"});
}

QueueLocation TestRedisStreamQueue::locationWith(const std::optional<QString> &password) const
{
    QString error;
    auto location =
        QueueLocation::parse(m_url + QStringLiteral("?stream=") + QString::fromLatin1(m_stream), &error);
    if (!location)
        qFatal("bad test URL: %s", qPrintable(error));
    if (password)
        location->password = *password;
    return *location;
}

std::unique_ptr<RedisStreamQueue> TestRedisStreamQueue::open(const QString &consumer)
{
    QString error;
    auto queue = RedisStreamQueue::connect(m_location, consumer, &error);
    if (!queue)
        qWarning("cannot open the queue: %s", qPrintable(error));
    else if (!queue->declareTopology({}, &error))
        qWarning("cannot declare the topology: %s", qPrintable(error));
    return queue;
}

QList<QueueMessage> TestRedisStreamQueue::leaseUntil(RedisStreamQueue &queue, int count, qint64 leaseMs,
                                                     int timeoutMs)
{
    QList<QueueMessage> leased;
    QElapsedTimer timer;
    timer.start();
    while (leased.size() < count && timer.elapsed() < timeoutMs) {
        QString error;
        const auto batch = queue.lease(count - int(leased.size()), leaseMs, QStringLiteral("unused"), &error);
        if (!error.isEmpty()) {
            qWarning("lease failed: %s", qPrintable(error));
            break;
        }
        leased += batch;
        if (leased.size() < count)
            QTest::qWait(20);
    }
    return leased;
}

QList<PendingEntry> TestRedisStreamQueue::pending()
{
    QList<PendingEntry> entries;
    const Reply reply = m_raw->command({"XPENDING", m_stream, "once", "-", "+", "100"});
    for (size_t i = 0; reply->type == REDIS_REPLY_ARRAY && i < reply->elements; ++i) {
        const redisReply *entry = reply->element[i];
        entries.append(PendingEntry{QByteArray(entry->element[1]->str, qsizetype(entry->element[1]->len)),
                                    entry->element[3]->integer});
    }
    return entries;
}

QueueCounts TestRedisStreamQueue::counts(RedisStreamQueue &queue)
{
    QString error;
    const auto counts = queue.counts(&error);
    if (!counts)
        qWarning("counts failed: %s", qPrintable(error));
    if (counts)
        return *counts;
    QueueCounts failed;
    failed.ready = failed.inFlight = failed.delayed = failed.dead = -1;
    failed.unavailable = error;
    return failed;
}

void TestRedisStreamQueue::declareTopologyTwice()
{
    auto queue = open();
    QVERIFY(queue);
    QString error;
    QVERIFY2(queue->declareTopology({}, &error), qPrintable(error));
    QVERIFY2(queue->declareTopology({}, &error), qPrintable(error));
    const Reply groups = m_raw->command({"XINFO", "GROUPS", m_stream});
    QCOMPARE(groups->type, REDIS_REPLY_ARRAY);
    QCOMPARE(groups->elements, size_t(1));
    QCOMPARE(QByteArray(groups->element[0]->element[1]->str), QByteArray("once"));
    const QueueCounts empty = counts(*queue);
    QCOMPARE(empty.ready, 0);
    QCOMPARE(empty.inFlight, 0);
    QVERIFY(empty.unavailable.isEmpty());
}

void TestRedisStreamQueue::undeclaredStreamSaysSo()
{
    QString error;
    auto queue = RedisStreamQueue::connect(m_location, QStringLiteral("worker-1"), &error);
    QVERIFY2(queue, qPrintable(error));
    QVERIFY(queue->lease(10, LongLease, QString(), &error).isEmpty());
    QVERIFY2(error.contains(QLatin1String("no consumer group")), qPrintable(error));
    error.clear();
    QVERIFY(!queue->counts(&error));
    QVERIFY2(error.contains(QLatin1String("once init --queue")), qPrintable(error));
    QCOMPARE(m_raw->integer({"EXISTS", m_stream}), 0);
}

// What producers and operator commands open: it enqueues and counts, but leases nothing.
void TestRedisStreamQueue::connectionWithoutConsumerCannotLease()
{
    QString error;
    auto producer = RedisStreamQueue::connect(m_location, QString(), &error);
    QVERIFY2(producer, qPrintable(error));
    QVERIFY2(producer->declareTopology({}, &error), qPrintable(error));
    QVERIFY2(producer->enqueue(reminders(2), &error), qPrintable(error));
    QCOMPARE(counts(*producer).ready, 2);
    QVERIFY(producer->lease(10, LongLease, QString(), &error).isEmpty());
    QVERIFY2(error.contains(QLatin1String("without a consumer name")), qPrintable(error));
    QCOMPARE(counts(*producer).ready, 2);
    QVERIFY(!m_raw->clientId("once").isEmpty());
}

void TestRedisStreamQueue::enqueueLeaseAckEmptiesTheStream()
{
    auto queue = open();
    QVERIFY(queue);
    QString error;
    const qint64 before = nowMs();
    QVERIFY2(queue->enqueue(reminders(20), &error), qPrintable(error));
    QCOMPARE(m_raw->integer({"XLEN", m_stream}), 20);

    const auto leased = queue->lease(50, LongLease, QString(), &error);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QCOMPARE(leased.size(), 20);
    QSet<QString> ids;
    QSet<QByteArray> payloads;
    for (const QueueMessage &message : leased) {
        ids.insert(message.id);
        payloads.insert(message.payload);
        QCOMPARE(message.delivery, 1);
        QCOMPARE(message.redriveCount, 0);
        QVERIFY(message.enqueuedAtMs >= before && message.enqueuedAtMs <= nowMs());
        QVERIFY(message.leaseUntilMs >= before + LongLease);
    }
    QCOMPARE(ids.size(), 20);
    QSet<QByteArray> expected;
    for (const OutgoingMessage &message : reminders(20))
        expected.insert(message.payload);
    QCOMPARE(payloads, expected);
    QCOMPARE(counts(*queue).inFlight, 20);
    QVERIFY(queue->lease(50, LongLease, QString(), &error).isEmpty());

    QVERIFY2(queue->settle(ackAll(leased), &error), qPrintable(error));
    const QueueCounts after = counts(*queue);
    QCOMPARE(after.ready, 0);
    QCOMPARE(after.inFlight, 0);
    QCOMPARE(after.delayed, 0);
    QCOMPARE(after.dead, 0);
    QVERIFY(!after.oldestReadyAgeMs);
    QVERIFY(!after.nextVisibleInMs);
    QCOMPARE(m_raw->integer({"XLEN", m_stream}), 0);
    QVERIFY(pending().isEmpty());
}

// The engine settles a turn's deliveries in one call; pipelining keeps that to a round
// trip or two however many there are.
void TestRedisStreamQueue::settlesThousandsPerSecond()
{
    auto queue = open();
    QVERIFY(queue);
    QString error;
    constexpr int Total = 5000;
    QElapsedTimer timer;
    timer.start();
    QVERIFY2(queue->enqueue(reminders(Total), &error), qPrintable(error));
    int settled = 0;
    while (settled < Total) {
        const auto leased = queue->lease(200, LongLease, QString(), &error);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        QVERIFY(!leased.isEmpty());
        QVERIFY2(queue->settle(ackAll(leased), &error), qPrintable(error));
        settled += int(leased.size());
    }
    const qint64 elapsed = timer.elapsed();
    qInfo("%d messages enqueued, leased and acked in %lld ms", Total, elapsed);
    QCOMPARE(m_raw->integer({"XLEN", m_stream}), 0);
    // Several thousand a second, with a wide margin for a busy test machine.
    QVERIFY2(elapsed < 5000, qPrintable(QStringLiteral("took %1 ms").arg(elapsed)));
}

void TestRedisStreamQueue::retryComesBackWithSameIdLater()
{
    auto queue = open();
    QVERIFY(queue);
    QString error;
    QVERIFY2(queue->enqueue(reminders(1), &error), qPrintable(error));
    const auto first = queue->lease(10, LongLease, QString(), &error);
    QCOMPARE(first.size(), 1);
    QElapsedTimer timer;
    timer.start();
    QVERIFY2(queue->settle({retry(first.at(0), 500)}, &error), qPrintable(error));

    QVERIFY(queue->lease(10, LongLease, QString(), &error).isEmpty());
    const QueueCounts waiting = counts(*queue);
    QCOMPARE(waiting.delayed, 1);
    QCOMPARE(waiting.inFlight, 0);
    QCOMPARE(waiting.ready, 0);
    QVERIFY(waiting.nextVisibleInMs && *waiting.nextVisibleInMs > 0 && *waiting.nextVisibleInMs <= 500);
    QCOMPARE(m_raw->integer({"XLEN", m_stream}), 0);

    const auto again = leaseUntil(*queue, 1, LongLease);
    QCOMPARE(again.size(), 1);
    QVERIFY2(timer.elapsed() >= 450, qPrintable(QString::number(timer.elapsed())));
    QCOMPARE(again.at(0).id, first.at(0).id);
    QCOMPARE(again.at(0).delivery, 2);
    QCOMPARE(again.at(0).payload, first.at(0).payload);
    QCOMPARE(again.at(0).enqueuedAtMs, first.at(0).enqueuedAtMs);
    QCOMPARE(m_raw->integer({"ZCARD", m_stream + ":delayed"}), 0);
    QVERIFY2(queue->settle({ack(again.at(0))}, &error), qPrintable(error));
    QCOMPARE(m_raw->integer({"XLEN", m_stream}), 0);
}

void TestRedisStreamQueue::delayedEnqueueIsInvisibleUntilDue()
{
    auto queue = open();
    QVERIFY(queue);
    QString error;
    QElapsedTimer timer;
    timer.start();
    QVERIFY2(queue->enqueue(reminders(1, 0, 700) + reminders(1, 1), &error), qPrintable(error));
    QCOMPARE(m_raw->integer({"ZCARD", m_stream + ":delayed"}), 1);
    QCOMPARE(m_raw->integer({"XLEN", m_stream}), 1);

    const auto now = queue->lease(10, LongLease, QString(), &error);
    QCOMPARE(now.size(), 1);
    QCOMPARE(now.at(0).payload, reminderJson(1));
    const QueueCounts waiting = counts(*queue);
    QCOMPARE(waiting.delayed, 1);
    QVERIFY(waiting.nextVisibleInMs && *waiting.nextVisibleInMs <= 700);

    const auto later = leaseUntil(*queue, 1, LongLease);
    QCOMPARE(later.size(), 1);
    QVERIFY2(timer.elapsed() >= 650, qPrintable(QString::number(timer.elapsed())));
    QCOMPARE(later.at(0).payload, reminderJson(0));
    QCOMPARE(later.at(0).delivery, 1);
    QVERIFY(later.at(0).id != now.at(0).id);
    QCOMPARE(counts(*queue).delayed, 0);
}

void TestRedisStreamQueue::deadLettersAreListedRedrivenAndDiscarded()
{
    auto queue = open();
    QVERIFY(queue);
    QString error;
    QVERIFY2(queue->enqueue(reminders(3), &error), qPrintable(error));
    const auto leased = queue->lease(10, LongLease, QString(), &error);
    QCOMPARE(leased.size(), 3);
    const qint64 before = nowMs();
    QList<Settlement> burials;
    for (int i = 0; i < 3; ++i) {
        const DeadLetterInfo info{
            QStringLiteral("permanent"),    QStringLiteral("HTTP 400 for %1").arg(i), 2, 1000 + i, 2000 + i,
            "key-" + QByteArray::number(i), QStringLiteral("event-%1").arg(i)};
        burials.append(bury(leased.at(i), info));
    }
    QVERIFY2(queue->settle(burials, &error), qPrintable(error));
    QCOMPARE(m_raw->integer({"XLEN", m_stream}), 0);
    QCOMPARE(counts(*queue).dead, 3);

    const auto letters = queue->deadLetters(10, &error);
    QVERIFY2(letters, qPrintable(error));
    QCOMPARE(letters->size(), 3);
    for (int i = 0; i < 3; ++i) {
        const DeadLetter &letter = letters->at(i);
        QCOMPARE(letter.id, leased.at(i).id);
        QCOMPARE(letter.payload, leased.at(i).payload);
        QCOMPARE(letter.errorClass, QStringLiteral("permanent"));
        QCOMPARE(letter.lastError, QStringLiteral("HTTP 400 for %1").arg(i));
        QCOMPARE(letter.attempts, 2);
        QCOMPARE(letter.firstAttemptAtMs, 1000 + i);
        QCOMPARE(letter.lastAttemptAtMs, 2000 + i);
        QCOMPARE(letter.sendKey, "key-" + QByteArray::number(i));
        QCOMPARE(letter.eventId, QStringLiteral("event-%1").arg(i));
        QCOMPARE(letter.receiveCount, 1);
        QCOMPARE(letter.redriveCount, 0);
        QCOMPARE(letter.enqueuedAtMs, leased.at(i).enqueuedAtMs);
        QVERIFY(letter.deadAtMs >= before && letter.deadAtMs <= nowMs());
    }
    QCOMPARE(queue->deadLetters(2, &error)->size(), 2);

    const QString redriven = leased.at(1).id;
    const auto back = queue->redrive(
        10, [&](const DeadLetter &letter) { return letter.id == redriven; }, &error);
    QVERIFY2(back, qPrintable(error));
    QCOMPARE(back->size(), 1);
    QCOMPARE(back->at(0).id, redriven);
    QCOMPARE(counts(*queue).dead, 2);
    const auto again = queue->lease(10, LongLease, QString(), &error);
    QCOMPARE(again.size(), 1);
    QCOMPARE(again.at(0).id, redriven);
    QCOMPARE(again.at(0).payload, leased.at(1).payload);
    QCOMPARE(again.at(0).redriveCount, 1);
    QCOMPARE(again.at(0).delivery, 2); // the delivery number keeps growing for an id
    QCOMPARE(again.at(0).enqueuedAtMs, leased.at(1).enqueuedAtMs);
    QVERIFY2(queue->settle({ack(again.at(0))}, &error), qPrintable(error));

    const auto none = queue->discard(
        10, [](const DeadLetter &) { return false; }, &error);
    QVERIFY2(none, qPrintable(error));
    QVERIFY(none->isEmpty());
    const QString discarded = leased.at(0).id;
    const auto dropped = queue->discard(
        10, [&](const DeadLetter &letter) { return letter.id == discarded; }, &error);
    QVERIFY2(dropped, qPrintable(error));
    QCOMPARE(dropped->size(), 1);
    QCOMPARE(dropped->at(0).id, discarded);
    const auto left = queue->deadLetters(10, &error);
    QCOMPARE(left->size(), 1);
    QCOMPARE(left->at(0).id, leased.at(2).id);
    QCOMPARE(counts(*queue).dead, 1);
    QCOMPARE(m_raw->integer({"XLEN", m_stream}), 0);
}

void TestRedisStreamQueue::deadConsumersEntriesAreReclaimed()
{
    constexpr qint64 ShortLease = 300;
    QSet<QString> ids;
    {
        auto doomed = open(QStringLiteral("worker-a"));
        QVERIFY(doomed);
        QString error;
        QVERIFY2(doomed->enqueue(reminders(3), &error), qPrintable(error));
        const auto leased = doomed->lease(10, ShortLease, QString(), &error);
        QCOMPARE(leased.size(), 3);
        for (const QueueMessage &message : leased)
            ids.insert(message.id);
    } // it dies without settling anything

    auto survivor = open(QStringLiteral("worker-b"));
    QVERIFY(survivor);
    QString error;
    QVERIFY(survivor->lease(10, ShortLease, QString(), &error).isEmpty()); // their leases are not over yet
    QCOMPARE(counts(*survivor).inFlight, 3);

    const auto reclaimed = leaseUntil(*survivor, 3, ShortLease);
    QCOMPARE(reclaimed.size(), 3);
    for (const QueueMessage &message : reclaimed) {
        QVERIFY(ids.contains(message.id));
        QCOMPARE(message.delivery, 2);
    }
    const auto owners = pending();
    QCOMPARE(owners.size(), 3);
    for (const PendingEntry &entry : owners)
        QCOMPARE(entry.consumer, QByteArray("worker-b"));
    QVERIFY2(survivor->settle(ackAll(reclaimed), &error), qPrintable(error));
    QCOMPARE(m_raw->integer({"XLEN", m_stream}), 0);
    QCOMPARE(counts(*survivor).inFlight, 0);
}

void TestRedisStreamQueue::staleSettlementChangesNothing()
{
    constexpr qint64 ShortLease = 200;
    auto slow = open(QStringLiteral("worker-slow"));
    auto fast = open(QStringLiteral("worker-fast"));
    QVERIFY(slow && fast);
    QString error;
    QVERIFY2(slow->enqueue(reminders(3), &error), qPrintable(error));
    const auto stale = slow->lease(10, ShortLease, QString(), &error);
    QCOMPARE(stale.size(), 3);
    // XAUTOCLAIM takes over entries idle for longer than the taker's lease.
    const auto current = leaseUntil(*fast, 3, ShortLease);
    QCOMPARE(current.size(), 3);

    // The slow worker finishes after all, one settlement of each kind, and one for a
    // delivery it never had.
    QVERIFY2(slow->settle({ack(stale.at(0)), retry(stale.at(1), 0), bury(stale.at(2)),
                           Settlement{Settlement::Kind::Ack, QStringLiteral("no-such-id"), 1, 0, {}}},
                          &error),
             qPrintable(error));
    QCOMPARE(m_raw->integer({"XLEN", m_stream}), 3);
    const auto owners = pending();
    QCOMPARE(owners.size(), 3);
    for (const PendingEntry &entry : owners) {
        QCOMPARE(entry.consumer, QByteArray("worker-fast"));
        QCOMPARE(entry.deliveries, 2);
    }
    const QueueCounts unchanged = counts(*fast);
    QCOMPARE(unchanged.inFlight, 3);
    QCOMPARE(unchanged.delayed, 0);
    QCOMPARE(unchanged.dead, 0);

    QVERIFY2(fast->settle(ackAll(current), &error), qPrintable(error));
    QCOMPARE(m_raw->integer({"XLEN", m_stream}), 0);
    QVERIFY(pending().isEmpty());
}

void TestRedisStreamQueue::plainProducerEntryUsesEntryId()
{
    auto queue = open();
    QVERIFY(queue);
    const QByteArray entryId = m_raw->string({"XADD", m_stream, "*", "body", reminderJson(7)});
    QVERIFY(!entryId.isEmpty());
    QString error;
    const auto leased = queue->lease(10, LongLease, QString(), &error);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QCOMPARE(leased.size(), 1);
    QCOMPARE(leased.at(0).id, QString::fromLatin1(entryId));
    QCOMPARE(leased.at(0).payload, reminderJson(7));
    QCOMPARE(leased.at(0).delivery, 1);
    QCOMPARE(leased.at(0).redriveCount, 0);
    QCOMPARE(leased.at(0).enqueuedAtMs, entryId.left(entryId.indexOf('-')).toLongLong());

    // A retry re-adds it as a new entry that keeps the first entry's id as its message id.
    QVERIFY2(queue->settle({retry(leased.at(0), 0)}, &error), qPrintable(error));
    const auto again = leaseUntil(*queue, 1, LongLease);
    QCOMPARE(again.size(), 1);
    QCOMPARE(again.at(0).id, QString::fromLatin1(entryId));
    QCOMPARE(again.at(0).delivery, 2);
    QCOMPARE(again.at(0).enqueuedAtMs, leased.at(0).enqueuedAtMs);
    QVERIFY2(queue->settle({ack(again.at(0))}, &error), qPrintable(error));
    QCOMPARE(m_raw->integer({"XLEN", m_stream}), 0);
}

void TestRedisStreamQueue::entryWithoutBodyIsLeasedEmpty()
{
    auto queue = open();
    QVERIFY(queue);
    const QByteArray entryId = m_raw->string({"XADD", m_stream, "*", "note", "no body here"});
    QVERIFY(!entryId.isEmpty());
    QString error;
    const auto leased = queue->lease(10, LongLease, QString(), &error);
    QCOMPARE(leased.size(), 1);
    QCOMPARE(leased.at(0).id, QString::fromLatin1(entryId));
    QVERIFY(leased.at(0).payload.isEmpty());

    // What the engine does with a payload it cannot parse.
    QVERIFY2(
        queue->settle({bury(leased.at(0),
                            {QStringLiteral("invalid"), QStringLiteral("empty payload"), 0, 0, 0, {}, {}})},
                      &error),
        qPrintable(error));
    const auto letters = queue->deadLetters(10, &error);
    QCOMPARE(letters->size(), 1);
    QCOMPARE(letters->at(0).id, QString::fromLatin1(entryId));
    QCOMPARE(letters->at(0).errorClass, QStringLiteral("invalid"));
    QVERIFY(letters->at(0).payload.isEmpty());
    QCOMPARE(m_raw->integer({"XLEN", m_stream}), 0);
}

// Retries and delays carry the entry as JSON inside Redis; the body must come out as the
// same bytes, whatever they are.
void TestRedisStreamQueue::binaryPayloadSurvivesEveryPath()
{
    auto queue = open();
    QVERIFY(queue);
    const QByteArray payload = QByteArrayLiteral(
        "{\"x\":\"\\u00e9\"}\x00\xff\xc3\x28 \"quoted\" back\\slash /slash\n\t\x01 \xe2\x82\xac");
    QVERIFY(payload.contains('\0'));
    QString error;
    QVERIFY2(queue->enqueue({OutgoingMessage{payload, {}, {}, 1, 0}}, &error), qPrintable(error));
    auto leased = leaseUntil(*queue, 1, LongLease);
    QCOMPARE(leased.size(), 1);
    QCOMPARE(leased.at(0).payload, payload);

    QVERIFY2(queue->settle({retry(leased.at(0), 0)}, &error), qPrintable(error));
    leased = leaseUntil(*queue, 1, LongLease);
    QCOMPARE(leased.size(), 1);
    QCOMPARE(leased.at(0).payload, payload);

    QVERIFY2(queue->settle({bury(leased.at(0))}, &error), qPrintable(error));
    QCOMPARE(queue->deadLetters(1, &error)->at(0).payload, payload);
    QCOMPARE(queue
                 ->redrive(
                     1, [](const DeadLetter &) { return true; }, &error)
                 ->size(),
             1);
    leased = leaseUntil(*queue, 1, LongLease);
    QCOMPARE(leased.size(), 1);
    QCOMPARE(leased.at(0).payload, payload);
    QCOMPARE(leased.at(0).delivery, 3);
    QCOMPARE(leased.at(0).redriveCount, 1);
}

void TestRedisStreamQueue::countsDescribeTheQueue()
{
    auto queue = open();
    QVERIFY(queue);
    QString error;
    const qint64 enqueuedAt = nowMs();
    QVERIFY2(queue->enqueue(reminders(5) + reminders(2, 5, 10000), &error), qPrintable(error));
    const auto leased = queue->lease(2, LongLease, QString(), &error);
    QCOMPARE(leased.size(), 2);
    QVERIFY2(queue->settle({bury(leased.at(0))}, &error), qPrintable(error));
    QTest::qWait(200);

    const QueueCounts now = counts(*queue);
    QCOMPARE(now.ready, 3);
    QCOMPARE(now.inFlight, 1);
    QCOMPARE(now.delayed, 2);
    QCOMPARE(now.dead, 1);
    QVERIFY(now.unavailable.isEmpty());
    QVERIFY(now.oldestReadyAgeMs);
    QVERIFY2(*now.oldestReadyAgeMs >= 200 && *now.oldestReadyAgeMs <= nowMs() - enqueuedAt,
             qPrintable(QString::number(*now.oldestReadyAgeMs)));
    QVERIFY(now.nextVisibleInMs);
    QVERIFY2(*now.nextVisibleInMs > 8000 && *now.nextVisibleInMs <= 10000,
             qPrintable(QString::number(*now.nextVisibleInMs)));

    // Once only the in-flight one is left, it is the oldest message.
    const auto rest = queue->lease(10, LongLease, QString(), &error);
    QCOMPARE(rest.size(), 3);
    QVERIFY2(queue->settle(ackAll(rest), &error), qPrintable(error));
    const QueueCounts inFlightOnly = counts(*queue);
    QCOMPARE(inFlightOnly.ready, 0);
    QCOMPARE(inFlightOnly.inFlight, 1);
    QVERIFY(inFlightOnly.oldestReadyAgeMs && *inFlightOnly.oldestReadyAgeMs >= 200);
}

void TestRedisStreamQueue::reconnectsAfterTheConnectionBroke()
{
    auto queue = open(QStringLiteral("worker-reconnect"));
    QVERIFY(queue);
    QString error;
    QVERIFY2(queue->enqueue(reminders(1), &error), qPrintable(error));
    // Only this queue's connection: other tests may share the server.
    const QByteArray client = m_raw->clientId("once:worker-reconnect");
    QVERIFY(!client.isEmpty());
    QCOMPARE(m_raw->integer({"CLIENT", "KILL", "ID", client}), 1);

    QVERIFY(queue->lease(10, LongLease, QString(), &error).isEmpty());
    QVERIFY2(error.contains(QLatin1String("connection lost")), qPrintable(error));
    error.clear();
    const auto leased = queue->lease(10, LongLease, QString(), &error);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QCOMPARE(leased.size(), 1);
    QVERIFY2(queue->settle({ack(leased.at(0))}, &error), qPrintable(error));
    QCOMPARE(m_raw->integer({"XLEN", m_stream}), 0);
}

void TestRedisStreamQueue::wrongPasswordIsReportedWithoutIt()
{
    const QString wrong =
        QStringLiteral("not-the-password-") + QString::number(QCoreApplication::applicationPid());
    const QueueLocation right = locationWith();
    for (const QString &password : {wrong, QString()}) {
        QString error;
        QVERIFY(!RedisStreamQueue::connect(locationWith(password), QStringLiteral("worker-1"), &error));
        QVERIFY(!error.isEmpty());
        QVERIFY2(!error.contains(wrong) && !error.contains(right.password), qPrintable(error));
        QVERIFY2(error.contains(right.displayName()), qPrintable(error));
        QVERIFY2(error.contains(password.isEmpty() ? QLatin1String("NOAUTH") : QLatin1String("WRONGPASS")),
                 qPrintable(error));
        QVERIFY2(!error.contains(QLatin1Char('\n')), qPrintable(error));
    }
}

void TestRedisStreamQueue::unreachableServerIsReported()
{
    QueueLocation nowhere = m_location;
    nowhere.port = 1; // nothing listens there
    QString error;
    QElapsedTimer timer;
    timer.start();
    QVERIFY(!RedisStreamQueue::connect(nowhere, QStringLiteral("worker-1"), &error));
    QVERIFY2(error.contains(QLatin1String("cannot connect")), qPrintable(error));
    QVERIFY2(error.contains(nowhere.displayName()), qPrintable(error));
    QVERIFY(timer.elapsed() < 6000);
}

QTEST_GUILESS_MAIN(TestRedisStreamQueue)
#include "tst_redisstreamqueue.moc"
