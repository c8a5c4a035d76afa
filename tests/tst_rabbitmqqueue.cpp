// The RabbitMQ queue against a real broker: the private server scripts/rabbitmq-server
// starts for ctest (ONCE_TEST_RABBITMQ_URL_FILE, ONCE_TEST_RABBITMQ_MANAGEMENT_FILE).
#include "queues/rabbitmq/rabbitmqqueue.h"

#include <QElapsedTimer>
#include <QEventLoop>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QSet>
#include <QTest>
#include <QUuid>

#include <amqp.h>
#include <amqp_tcp_socket.h>

using namespace once;

namespace {

QString readFile(const char *variable)
{
    QFile file(qEnvironmentVariable(variable));
    if (!file.open(QIODevice::ReadOnly))
        return {};
    return QString::fromUtf8(file.readAll()).trimmed();
}

OutgoingMessage message(int i, qint64 delayMs = 0)
{
    const QByteArray key = "user-" + QByteArray::number(i) + "|reminder|2030-01-01T00:00:00Z";
    return OutgoingMessage{R"({"n":)" + QByteArray::number(i) + "}", key, QStringLiteral("event-%1").arg(i),
                           delayMs, 0};
}

Settlement settlement(Settlement::Kind kind, const QueueMessage &message, qint64 delayMs = 0)
{
    return Settlement{kind, message.id, message.delivery, delayMs, {}};
}

// Publishes as a producer other than this product would, with a client of the test's own.
bool rawPublish(const QueueLocation &where, const QByteArray &exchange, const QByteArray &routingKey,
                const amqp_basic_properties_t *properties, const QByteArray &body)
{
    const auto bytes = [](const QByteArray &data) {
        return amqp_bytes_t{size_t(data.size()), const_cast<char *>(data.constData())};
    };
    amqp_connection_state_t connection = amqp_new_connection();
    amqp_socket_t *socket = amqp_tcp_socket_new(connection);
    const bool ok = amqp_socket_open(socket, where.host.toUtf8().constData(), where.port) == AMQP_STATUS_OK &&
                    amqp_login(connection, "/", 0, AMQP_DEFAULT_FRAME_SIZE, 0, AMQP_SASL_METHOD_PLAIN,
                               where.user.toUtf8().constData(), where.password.toUtf8().constData())
                            .reply_type == AMQP_RESPONSE_NORMAL &&
                    amqp_channel_open(connection, 1) &&
                    amqp_basic_publish(connection, 1, bytes(exchange), bytes(routingKey), 0, 0, properties,
                                       bytes(body)) == AMQP_STATUS_OK;
    amqp_connection_close(connection, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(connection);
    return ok;
}

} // namespace

class TestRabbitMqQueue : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void declaresTopologyTwice();
    void enqueueLeaseAck();
    void retryComesBackAfterItsDelay();
    void aRetryIsDueUntilItIsBack();
    void deadLettersRedriveAndDiscard();
    void droppedConsumerMeansRedelivery();
    void crashLoopEndsAsDeadLetter();
    void earlyArrivalWaitsForItsTime();
    void messageWithoutIdOrHeaders();
    void reconnectsAfterLosingTheConnection();
    void countsFromManagementApi();
    void unreachableManagementApi();
    void errorsNeverShowThePassword();
    void throughput();

private:
    // A new queue (not declared yet) and its location; name unique to this run.
    QueueLocation location(const QString &managementUrl = {});
    std::unique_ptr<RabbitMqQueue> open(const QueueLocation &where,
                                        const QString &consumer = QStringLiteral("test"), int prefetch = 100);
    std::unique_ptr<RabbitMqQueue> declared(QueueLocation *where, const QString &managementUrl = {});
    // Leases until count messages came (or 10 s passed).
    QList<QueueMessage> leaseAll(RabbitMqQueue &queue, int count, int timeoutMs = 10000);
    // A new queue with one message, leased as *leased (the start of a retry's story);
    // nullptr after a warning when that failed.
    std::unique_ptr<RabbitMqQueue> withOneLeased(QueueMessage *leased);
    QueueCounts countsWhen(RabbitMqQueue &queue, const std::function<bool(const QueueCounts &)> &done);
    // The management API, as the test server's user; -1 when it did not answer.
    int management(const QByteArray &verb, const QString &path, QByteArray *body = nullptr);

    QString m_url;
    QString m_management;
};

void TestRabbitMqQueue::initTestCase()
{
    if (qEnvironmentVariableIsEmpty("ONCE_TEST_RABBITMQ_URL_FILE"))
        QSKIP("no RabbitMQ server: run through ctest (scripts/rabbitmq-server start DIR)");
    m_url = readFile("ONCE_TEST_RABBITMQ_URL_FILE");
    m_management = readFile("ONCE_TEST_RABBITMQ_MANAGEMENT_FILE");
    QVERIFY2(m_url.startsWith(QLatin1String("amqp://")), "no URL in ONCE_TEST_RABBITMQ_URL_FILE");
    QVERIFY2(m_management.startsWith(QLatin1String("http://")),
             "no URL in ONCE_TEST_RABBITMQ_MANAGEMENT_FILE");
}

QueueLocation TestRabbitMqQueue::location(const QString &managementUrl)
{
    const QString name = QStringLiteral("t-%1-%2").arg(QString::fromLatin1(QTest::currentTestFunction()),
                                                       QUuid::createUuid().toString(QUuid::Id128).left(8));
    QString error;
    const auto where =
        QueueLocation::parse(QStringLiteral("%1?queue=%2&management=%3")
                                 .arg(m_url, name, managementUrl.isEmpty() ? m_management : managementUrl),
                             &error);
    if (!where)
        qFatal("bad test URL: %s", qPrintable(error));
    return *where;
}

std::unique_ptr<RabbitMqQueue> TestRabbitMqQueue::open(const QueueLocation &where, const QString &consumer,
                                                       int prefetch)
{
    QString error;
    auto queue = RabbitMqQueue::connect(where, consumer, prefetch, &error);
    if (!queue)
        qWarning().noquote() << "connect failed:" << error;
    return queue;
}

std::unique_ptr<RabbitMqQueue> TestRabbitMqQueue::declared(QueueLocation *where, const QString &managementUrl)
{
    *where = location(managementUrl);
    auto queue = open(*where);
    QString error;
    if (queue && !queue->declareTopology({}, &error)) {
        qWarning().noquote() << "declareTopology failed:" << error;
        return nullptr;
    }
    return queue;
}

QList<QueueMessage> TestRabbitMqQueue::leaseAll(RabbitMqQueue &queue, int count, int timeoutMs)
{
    QList<QueueMessage> leased;
    QElapsedTimer timer;
    timer.start();
    while (leased.size() < count && timer.elapsed() < timeoutMs) {
        QString error;
        const auto some = queue.lease(count - int(leased.size()), 30000, QStringLiteral("test"), &error);
        if (!error.isEmpty()) {
            qWarning().noquote() << "lease failed:" << error;
            break;
        }
        leased += some;
        if (some.isEmpty())
            QThread::msleep(5);
    }
    return leased;
}

std::unique_ptr<RabbitMqQueue> TestRabbitMqQueue::withOneLeased(QueueMessage *leased)
{
    QueueLocation where;
    auto queue = declared(&where);
    QString error;
    if (!queue || !queue->enqueue({message(1)}, &error)) {
        qWarning().noquote() << "enqueue failed:" << error;
        return nullptr;
    }
    const auto first = leaseAll(*queue, 1);
    if (first.size() != 1) {
        qWarning() << "leased" << first.size() << "messages, not 1";
        return nullptr;
    }
    *leased = first.first();
    return queue;
}

QueueCounts TestRabbitMqQueue::countsWhen(RabbitMqQueue &queue,
                                          const std::function<bool(const QueueCounts &)> &done)
{
    QueueCounts last;
    QElapsedTimer timer;
    timer.start();
    // The management API's statistics lag behind (the test server refreshes them often).
    while (timer.elapsed() < 15000) {
        QString error;
        const auto counts = queue.counts(&error);
        if (!counts) {
            qWarning().noquote() << "counts failed:" << error;
            return last;
        }
        last = *counts;
        if (done(last))
            break;
        QThread::msleep(100);
    }
    return last;
}

int TestRabbitMqQueue::management(const QByteArray &verb, const QString &path, QByteArray *body)
{
    const QueueLocation where = location();
    QNetworkAccessManager manager;
    QNetworkRequest request(QUrl(m_management + path));
    const QByteArray credentials = where.user.toUtf8() + ':' + where.password.toUtf8();
    request.setRawHeader("Authorization", "Basic " + credentials.toBase64());
    request.setTransferTimeout(5000);
    std::unique_ptr<QNetworkReply> reply(manager.sendCustomRequest(request, verb));
    QEventLoop loop;
    connect(reply.get(), &QNetworkReply::finished, &loop, &QEventLoop::quit);
    if (!reply->isFinished())
        loop.exec();
    if (body)
        *body = reply->readAll();
    return reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).isValid()
               ? reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt()
               : -1;
}

void TestRabbitMqQueue::declaresTopologyTwice()
{
    QueueLocation where;
    auto queue = declared(&where);
    QVERIFY(queue);
    QString error;
    QVERIFY2(queue->declareTopology({}, &error), qPrintable(error));
    // A second process declares the same topology without conflict.
    auto other = open(where);
    QVERIFY(other);
    QVERIFY2(other->declareTopology({}, &error), qPrintable(error));
    const auto counts = queue->counts(&error);
    QVERIFY2(counts, qPrintable(error));
    QCOMPARE(counts->ready, 0);
    QCOMPARE(counts->delayed, 0);
    QCOMPARE(counts->dead, 0);
}

void TestRabbitMqQueue::enqueueLeaseAck()
{
    QueueLocation where;
    auto queue = declared(&where);
    QVERIFY(queue);
    QList<OutgoingMessage> messages;
    for (int i = 0; i < 50; ++i)
        messages.append(message(i));
    QString error;
    QVERIFY2(queue->enqueue(messages, &error), qPrintable(error));
    auto counts = countsWhen(*queue, [](const QueueCounts &c) { return c.ready == 50; });
    QCOMPARE(counts.ready, 50);

    const qint64 before = QDateTime::currentMSecsSinceEpoch();
    const auto leased = leaseAll(*queue, 50);
    QCOMPARE(leased.size(), 50);
    QSet<QString> ids;
    for (int i = 0; i < leased.size(); ++i) {
        const QueueMessage &m = leased.at(i);
        ids.insert(m.id);
        QCOMPARE(m.payload, messages.at(i).payload); // in order
        QCOMPARE(m.delivery, 1);
        QCOMPARE(m.redriveCount, 0);
        QVERIFY(m.enqueuedAtMs > 0 && m.enqueuedAtMs <= before);
        QVERIFY(m.leaseUntilMs >= before + 30000);
    }
    QCOMPARE(ids.size(), 50);
    QList<Settlement> acks;
    for (const auto &m : leased)
        acks.append(settlement(Settlement::Kind::Ack, m));
    // Settlements of unknown deliveries are ignored, not errors.
    acks.append(Settlement{Settlement::Kind::Ack, QStringLiteral("no-such-id"), 1, 0, {}});
    acks.append(Settlement{Settlement::Kind::Ack, leased.first().id, 7, 0, {}});
    QVERIFY2(queue->settle(acks, &error), qPrintable(error));
    counts = countsWhen(*queue, [](const QueueCounts &c) {
        return c.ready == 0 && c.inFlight == 0 && c.unavailable.isEmpty();
    });
    QCOMPARE(counts.ready, 0);
    QCOMPARE(counts.inFlight, 0);
    QCOMPARE(counts.dead, 0);
    QCOMPARE(counts.delayed, 0);
    QVERIFY2(counts.unavailable.isEmpty(), qPrintable(counts.unavailable));
    // Nothing comes back: the acks reached the broker.
    queue.reset();
    auto again = open(where);
    QVERIFY(again);
    QVERIFY(leaseAll(*again, 1, 500).isEmpty());
}

void TestRabbitMqQueue::retryComesBackAfterItsDelay()
{
    QueueMessage first;
    auto queue = withOneLeased(&first);
    QVERIFY(queue);
    QElapsedTimer timer;
    timer.start();
    QString error;
    QVERIFY2(queue->settle({settlement(Settlement::Kind::Retry, first, 1000)}, &error), qPrintable(error));
    const auto counts = queue->counts(&error);
    QVERIFY2(counts, qPrintable(error));
    QCOMPARE(counts->delayed, 1);
    QCOMPARE(counts->ready, 0);
    QVERIFY(counts->nextVisibleInMs && *counts->nextVisibleInMs <= 1000);
    // Not before its time...
    QVERIFY(leaseAll(*queue, 1, 600).isEmpty());
    // ...but then, as the same message with the next delivery number.
    const auto second = leaseAll(*queue, 1, 10000);
    QCOMPARE(second.size(), 1);
    QVERIFY2(timer.elapsed() >= 950, qPrintable(QString::number(timer.elapsed())));
    QVERIFY2(timer.elapsed() < 5000, qPrintable(QString::number(timer.elapsed())));
    QCOMPARE(second.first().id, first.id);
    QCOMPARE(second.first().payload, first.payload);
    QCOMPARE(second.first().delivery, 2);
    QCOMPARE(second.first().enqueuedAtMs, first.enqueuedAtMs);
    // A retry without delay (a turn handing its deliveries back) is visible at once.
    QVERIFY2(queue->settle({settlement(Settlement::Kind::Retry, second.first(), 0)}, &error),
             qPrintable(error));
    const auto third = leaseAll(*queue, 1, 2000);
    QCOMPARE(third.size(), 1);
    QCOMPARE(third.first().id, first.id);
    QCOMPARE(third.first().delivery, 3);
    QVERIFY2(queue->settle({settlement(Settlement::Kind::Ack, third.first())}, &error), qPrintable(error));
}

void TestRabbitMqQueue::aRetryIsDueUntilItIsBack()
{
    // A 2 s delay goes to the 5 s tier. An --until-idle worker asks the counts whether
    // anything is still to come: they must say the retry is due until it is back, in its
    // tier, on its way from the tier to the main queue (where it is in neither) and in the
    // main queue. A worker that looked in between exited with its retries still to come.
    QueueMessage first;
    auto queue = withOneLeased(&first);
    QVERIFY(queue);
    QElapsedTimer timer;
    timer.start();
    QString error;
    QVERIFY2(queue->settle({settlement(Settlement::Kind::Retry, first, 2000)}, &error), qPrintable(error));
    const qint64 settledMs = timer.elapsed();

    // Due when the broker offers it again, at the end of its tier, not at the end of its delay.
    QThread::msleep(3000);
    const qint64 askedMs = timer.elapsed();
    auto counts = queue->counts(&error);
    QVERIFY2(counts, qPrintable(error));
    QCOMPARE(counts->delayed, 1);
    QVERIFY(counts->nextVisibleInMs);
    QVERIFY2(*counts->nextVisibleInMs <= 5000 + settledMs - askedMs && *counts->nextVisibleInMs > 0,
             qPrintable(QStringLiteral("due in %1 ms, asked %2 ms after the retry went to the 5 s tier")
                            .arg(*counts->nextVisibleInMs)
                            .arg(askedMs)));

    // Looked at as often as a worker can look, it is never counted nowhere.
    QList<QueueMessage> back;
    int looks = 0;
    while (back.isEmpty()) {
        counts = queue->counts(&error);
        QVERIFY2(counts, qPrintable(error));
        ++looks;
        QVERIFY2(counts->delayed + counts->ready + counts->inFlight > 0 || counts->nextVisibleInMs,
                 qPrintable(QStringLiteral("look %1, %2 ms after the retry: counted nowhere")
                                .arg(looks)
                                .arg(timer.elapsed())));
        back = queue->lease(1, 30000, QStringLiteral("test"), &error);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        QVERIFY2(timer.elapsed() < 15000, "the retry never came back");
    }
    QCOMPARE(back.first().id, first.id);
    QCOMPARE(back.first().delivery, 2);
    QVERIFY2(timer.elapsed() >= 4900, qPrintable(QString::number(timer.elapsed())));
    QVERIFY2(queue->settle({settlement(Settlement::Kind::Ack, back.first())}, &error), qPrintable(error));
    qInfo("looked %d times while the retry came back", looks);
}

void TestRabbitMqQueue::deadLettersRedriveAndDiscard()
{
    QueueLocation where;
    auto queue = declared(&where);
    QVERIFY(queue);
    QString error;
    QVERIFY2(queue->enqueue({message(0), message(1), message(2), message(3)}, &error), qPrintable(error));
    const auto leased = leaseAll(*queue, 4);
    QCOMPARE(leased.size(), 4);
    const qint64 before = QDateTime::currentMSecsSinceEpoch();
    QList<Settlement> burials;
    for (int i = 0; i < 4; ++i) {
        Settlement s = settlement(Settlement::Kind::DeadLetter, leased.at(i));
        s.deadLetter = DeadLetterInfo{QStringLiteral("permanent"),
                                      QStringLiteral("HTTP 400 for %1").arg(i),
                                      3,
                                      1000 + i,
                                      2000 + i,
                                      message(i).sendKey,
                                      message(i).eventId};
        burials.append(s);
    }
    QVERIFY2(queue->settle(burials, &error), qPrintable(error));

    const auto letters = queue->deadLetters(10, &error);
    QVERIFY2(letters, qPrintable(error));
    QCOMPARE(letters->size(), 4);
    for (int i = 0; i < 4; ++i) {
        const DeadLetter &letter = letters->at(i);
        QCOMPARE(letter.id, leased.at(i).id);
        QCOMPARE(letter.payload, message(i).payload);
        QCOMPARE(letter.sendKey, message(i).sendKey);
        QCOMPARE(letter.eventId, message(i).eventId);
        QCOMPARE(letter.errorClass, QStringLiteral("permanent"));
        QCOMPARE(letter.lastError, QStringLiteral("HTTP 400 for %1").arg(i));
        QCOMPARE(letter.attempts, 3);
        QCOMPARE(letter.firstAttemptAtMs, 1000 + i);
        QCOMPARE(letter.lastAttemptAtMs, 2000 + i);
        QCOMPARE(letter.receiveCount, 1);
        QCOMPARE(letter.redriveCount, 0);
        QVERIFY(letter.deadAtMs >= before);
        QCOMPARE(letter.enqueuedAtMs, leased.at(i).enqueuedAtMs);
    }
    // Looking took nothing away, and a limit is a limit.
    const auto firstTwo = queue->deadLetters(2, &error);
    QVERIFY2(firstTwo, qPrintable(error));
    QCOMPARE(firstTwo->size(), 2);
    QCOMPARE(firstTwo->at(0).id, leased.at(0).id);
    auto counts = queue->counts(&error);
    QVERIFY2(counts, qPrintable(error));
    QCOMPARE(counts->dead, 4);
    QCOMPARE(counts->ready, 0);

    // Redrive letters 1 and 3: back on the queue, the others stay in order.
    const QSet<QString> chosen{leased.at(1).id, leased.at(3).id};
    const auto redriven = queue->redrive(
        4, [&](const DeadLetter &l) { return chosen.contains(l.id); }, &error);
    QVERIFY2(redriven, qPrintable(error));
    QCOMPARE(redriven->size(), 2);
    QCOMPARE(redriven->at(0).id, leased.at(1).id);
    QCOMPARE(redriven->at(1).id, leased.at(3).id);
    const auto left = queue->deadLetters(10, &error);
    QVERIFY2(left, qPrintable(error));
    QCOMPARE(left->size(), 2);
    QCOMPARE(left->at(0).id, leased.at(0).id);
    QCOMPARE(left->at(1).id, leased.at(2).id);
    const auto back = leaseAll(*queue, 2);
    QCOMPARE(back.size(), 2);
    for (int i = 0; i < 2; ++i) {
        const int original = i == 0 ? 1 : 3;
        QCOMPARE(back.at(i).id, leased.at(original).id);
        QCOMPARE(back.at(i).payload, message(original).payload);
        QCOMPARE(back.at(i).redriveCount, 1);
        // Delivery numbers go on growing (the ledger, not the queue, restarts the budget).
        QCOMPARE(back.at(i).delivery, leased.at(original).delivery + 1);
        QCOMPARE(back.at(i).enqueuedAtMs, leased.at(original).enqueuedAtMs);
    }
    // Dying again, a redriven letter says so.
    Settlement again = settlement(Settlement::Kind::DeadLetter, back.at(0));
    again.deadLetter.errorClass = QStringLiteral("permanent");
    QVERIFY2(queue->settle({again, settlement(Settlement::Kind::Ack, back.at(1))}, &error),
             qPrintable(error));
    const auto redied = queue->deadLetters(10, &error);
    QVERIFY2(redied, qPrintable(error));
    QCOMPARE(redied->size(), 3);
    QCOMPARE(redied->at(2).id, leased.at(1).id);
    QCOMPARE(redied->at(2).redriveCount, 1);

    // Discard letter 2: gone for good; nothing lands on the queue.
    const auto discarded = queue->discard(
        3, [&](const DeadLetter &l) { return l.id == leased.at(2).id; }, &error);
    QVERIFY2(discarded, qPrintable(error));
    QCOMPARE(discarded->size(), 1);
    QCOMPARE(discarded->first().id, leased.at(2).id);
    const auto remaining = queue->deadLetters(10, &error);
    QVERIFY2(remaining, qPrintable(error));
    QCOMPARE(remaining->size(), 2);
    QCOMPARE(remaining->at(0).id, leased.at(0).id);
    QCOMPARE(remaining->at(1).id, leased.at(1).id);
    counts = queue->counts(&error);
    QVERIFY2(counts, qPrintable(error));
    QCOMPARE(counts->dead, 2);
    QCOMPARE(counts->ready, 0);
    // Selecting nothing takes nothing.
    const auto none = queue->redrive(
        10, [](const DeadLetter &) { return false; }, &error);
    QVERIFY2(none, qPrintable(error));
    QVERIFY(none->isEmpty());
    QCOMPARE(queue->deadLetters(10, &error)->size(), 2);
}

void TestRabbitMqQueue::droppedConsumerMeansRedelivery()
{
    QueueLocation where;
    auto first = declared(&where);
    QVERIFY(first);
    QString error;
    QVERIFY2(first->enqueue({message(1), message(2), message(3)}, &error), qPrintable(error));
    const auto leased = leaseAll(*first, 3);
    QCOMPARE(leased.size(), 3);
    // A second consumer gets none of them while the first holds them.
    auto second = open(where, QStringLiteral("second"));
    QVERIFY(second);
    QVERIFY(leaseAll(*second, 3, 300).isEmpty());
    // The first one dies without settling: its deliveries go to the second.
    first.reset();
    const auto redelivered = leaseAll(*second, 3);
    QCOMPARE(redelivered.size(), 3);
    QSet<QString> ids;
    for (const auto &m : leased)
        ids.insert(m.id);
    for (const auto &m : redelivered) {
        QVERIFY(ids.contains(m.id));
        QCOMPARE(m.delivery, 2);
    }
    // The dead consumer's settlement would be ignored; the living one's counts.
    QList<Settlement> acks;
    for (const auto &m : redelivered)
        acks.append(settlement(Settlement::Kind::Ack, m));
    QVERIFY2(second->settle(acks, &error), qPrintable(error));
    second.reset();
    auto third = open(where, QStringLiteral("third"));
    QVERIFY(third);
    QVERIFY(leaseAll(*third, 1, 500).isEmpty());
}

void TestRabbitMqQueue::crashLoopEndsAsDeadLetter()
{
    QueueLocation where;
    auto queue = declared(&where);
    QVERIFY(queue);
    QString error;
    QVERIFY2(queue->enqueue({message(7)}, &error), qPrintable(error));
    queue.reset();
    // Every consumer dies holding it; the broker gives up after the delivery limit.
    int deliveries = 0;
    for (int crash = 1; crash <= 30; ++crash) {
        auto doomed = open(where, QStringLiteral("doomed-%1").arg(crash), 1);
        QVERIFY(doomed);
        const auto leased = leaseAll(*doomed, 1, 1000);
        if (leased.isEmpty())
            break;
        QCOMPARE(leased.first().delivery, crash);
        deliveries = crash;
    }
    QCOMPARE(deliveries, 21); // x-delivery-limit 20: the 21st delivery is the last
    auto survivor = open(where);
    QVERIFY(survivor);
    // The broker dead-letters in the background.
    std::optional<QList<DeadLetter>> letters;
    QElapsedTimer timer;
    timer.start();
    for (;;) {
        letters = survivor->deadLetters(10, &error);
        QVERIFY2(letters, qPrintable(error));
        if (!letters->isEmpty() || timer.elapsed() > 5000)
            break;
        QThread::msleep(50);
    }
    QCOMPARE(letters->size(), 1);
    QCOMPARE(letters->first().errorClass, QStringLiteral("broker-delivery_limit"));
    QCOMPARE(letters->first().payload, message(7).payload);
    QCOMPARE(letters->first().sendKey, message(7).sendKey);
    QVERIFY(letters->first().deadAtMs > 0);
    QCOMPARE(letters->first().receiveCount, 21);
}

void TestRabbitMqQueue::earlyArrivalWaitsForItsTime()
{
    // A delay beyond the longest tier arrives early and hops on. Simulated with a message
    // published to the main queue whose x-once-visible-at is 1.5 s away (an hour's wait
    // is no test): it goes through the 5 s tier once more.
    QueueLocation where;
    auto queue = declared(&where);
    QVERIFY(queue);
    QString error;
    QVERIFY2(queue->enqueue({message(1, 1)}, &error), qPrintable(error)); // 1 ms: the 1 s tier
    amqp_table_entry_t entries[2];
    entries[0].key = amqp_cstring_bytes("x-once-visible-at");
    entries[0].value.kind = AMQP_FIELD_KIND_I64;
    entries[0].value.value.i64 = QDateTime::currentMSecsSinceEpoch() + 1500;
    entries[1].key = amqp_cstring_bytes("x-once-receives");
    entries[1].value.kind = AMQP_FIELD_KIND_I64;
    entries[1].value.value.i64 = 2;
    amqp_basic_properties_t properties{};
    properties._flags = AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_HEADERS_FLAG;
    properties.message_id = amqp_cstring_bytes("early-bird");
    properties.headers = amqp_table_t{2, entries};
    const QByteArray name = where.name.toUtf8();
    QVERIFY(rawPublish(where, name, name, &properties, R"({"early":true})"));

    QElapsedTimer timer;
    timer.start();
    // The 1 ms message comes after its 1 s tier; the early bird not before 1.5 s.
    auto leased = leaseAll(*queue, 1, 3000);
    QCOMPARE(leased.size(), 1);
    QCOMPARE(leased.first().payload, message(1).payload);
    QVERIFY(leaseAll(*queue, 1, 1200).isEmpty());
    const auto counts = queue->counts(&error);
    QVERIFY2(counts, qPrintable(error));
    QCOMPARE(counts->delayed, 1); // the early bird, in the 5 s tier
    leased = leaseAll(*queue, 1, 10000);
    QCOMPARE(leased.size(), 1);
    QVERIFY2(timer.elapsed() >= 4500, qPrintable(QString::number(timer.elapsed())));
    QCOMPARE(leased.first().id, QStringLiteral("early-bird"));
    QCOMPARE(leased.first().delivery, 3); // the hop was no delivery
}

void TestRabbitMqQueue::messageWithoutIdOrHeaders()
{
    // A foreign producer's plain message: no message_id, no headers, no timestamp.
    QueueLocation where;
    auto queue = declared(&where);
    QVERIFY(queue);
    const QByteArray name = where.name.toUtf8();
    QVERIFY(rawPublish(where, name, name, nullptr, "{}"));
    // And one straight into the dead-letter queue.
    QVERIFY(rawPublish(where, QByteArray(), name + ".dead", nullptr, R"({"dead":1})"));

    const qint64 before = QDateTime::currentMSecsSinceEpoch();
    const auto leased = leaseAll(*queue, 1);
    QCOMPARE(leased.size(), 1);
    const QueueMessage first = leased.first();
    QVERIFY2(first.id.startsWith(QLatin1String("amqp-test-")), qPrintable(first.id));
    QCOMPARE(first.delivery, 1);
    QCOMPARE(first.payload, QByteArray("{}"));
    QVERIFY(first.enqueuedAtMs >= before - 1000);
    // A retry keeps the id it was leased under.
    QString error;
    QVERIFY2(queue->settle({settlement(Settlement::Kind::Retry, first)}, &error), qPrintable(error));
    const auto again = leaseAll(*queue, 1);
    QCOMPARE(again.size(), 1);
    QCOMPARE(again.first().id, first.id);
    QCOMPARE(again.first().delivery, 2);
    QCOMPARE(again.first().enqueuedAtMs, first.enqueuedAtMs);

    // The dead letter's id stays the same from one look to the next, so it can be picked.
    const auto looked = queue->deadLetters(10, &error);
    QVERIFY2(looked, qPrintable(error));
    QCOMPARE(looked->size(), 1);
    const QString deadId = looked->first().id;
    QVERIFY2(deadId.startsWith(QLatin1String("amqp-dead-")), qPrintable(deadId));
    QCOMPARE(queue->deadLetters(10, &error)->first().id, deadId);
    const auto redriven = queue->redrive(
        1, [&](const DeadLetter &l) { return l.id == deadId; }, &error);
    QVERIFY2(redriven, qPrintable(error));
    QCOMPARE(redriven->size(), 1);
    const auto revived = leaseAll(*queue, 1);
    QCOMPARE(revived.size(), 1);
    QCOMPARE(revived.first().id, deadId);
    QCOMPARE(revived.first().payload, QByteArray(R"({"dead":1})"));
    QCOMPARE(revived.first().redriveCount, 1);
}

void TestRabbitMqQueue::reconnectsAfterLosingTheConnection()
{
    QueueLocation where;
    auto queue = declared(&where);
    QVERIFY(queue);
    QString error;
    QVERIFY2(queue->enqueue({message(1), message(2)}, &error), qPrintable(error));
    auto worker = open(where, QStringLiteral("reconnecting"), 10);
    QVERIFY(worker);
    const auto leased = leaseAll(*worker, 2);
    QCOMPARE(leased.size(), 2);

    // An operator (or a broker restart) closes the worker's connection.
    QString connection;
    QElapsedTimer timer;
    timer.start();
    while (connection.isEmpty() && timer.elapsed() < 10000) {
        QByteArray body;
        QCOMPARE(management("GET", QStringLiteral("/api/connections"), &body), 200);
        for (const auto value : QJsonDocument::fromJson(body).array()) {
            const QJsonObject object = value.toObject();
            if (object.value(QLatin1String("user_provided_name")).toString() ==
                QLatin1String("once reconnecting"))
                connection = object.value(QLatin1String("name")).toString();
        }
        if (connection.isEmpty())
            QThread::msleep(100);
    }
    QVERIFY2(!connection.isEmpty(), "the worker's connection is not listed by its name");
    QCOMPARE(management("DELETE", QStringLiteral("/api/connections/") +
                                      QString::fromLatin1(QUrl::toPercentEncoding(connection))),
             204);

    // The next call finds out...
    timer.restart();
    while (error.isEmpty() && timer.elapsed() < 5000) {
        worker->lease(10, 30000, QStringLiteral("reconnecting"), &error);
        QThread::msleep(20);
    }
    QVERIFY2(error.contains(QLatin1String("lost the connection")), qPrintable(error));
    QVERIFY(!error.contains(where.password));
    // ...and the one after reconnects: the old leases are gone, their messages are back.
    error.clear();
    QVERIFY2(worker->settle({settlement(Settlement::Kind::Ack, leased.at(0))}, &error), qPrintable(error));
    const auto again = leaseAll(*worker, 2);
    QCOMPARE(again.size(), 2);
    QCOMPARE(again.at(0).id, leased.at(0).id);
    QCOMPARE(again.at(0).delivery, 2);
    QCOMPARE(again.at(1).id, leased.at(1).id);
    QCOMPARE(again.at(1).delivery, 2);
    QVERIFY2(worker->settle({settlement(Settlement::Kind::Ack, again.at(0)),
                             settlement(Settlement::Kind::Ack, again.at(1))},
                            &error),
             qPrintable(error));
    const auto counts =
        countsWhen(*queue, [](const QueueCounts &c) { return c.inFlight == 0 && c.unavailable.isEmpty(); });
    QCOMPARE(counts.ready, 0);
    QCOMPARE(counts.inFlight, 0);
}

void TestRabbitMqQueue::countsFromManagementApi()
{
    QueueLocation where;
    auto queue = declared(&where);
    QVERIFY(queue);
    QString error;
    QList<OutgoingMessage> messages;
    for (int i = 0; i < 10; ++i)
        messages.append(message(i, i < 3 ? 30000 : 0));
    QVERIFY2(queue->enqueue(messages, &error), qPrintable(error));
    auto consumer = open(where, QStringLiteral("holder"), 4);
    QVERIFY(consumer);
    QCOMPARE(leaseAll(*consumer, 4).size(), 4);
    const auto counts =
        countsWhen(*queue, [](const QueueCounts &c) { return c.inFlight == 4 && c.ready == 3; });
    QVERIFY2(counts.unavailable.isEmpty(), qPrintable(counts.unavailable));
    QCOMPARE(counts.inFlight, 4);
    QCOMPARE(counts.ready, 3);
    QCOMPARE(counts.delayed, 3);
    QCOMPARE(counts.dead, 0);
    QVERIFY(counts.nextVisibleInMs && *counts.nextVisibleInMs <= 30000);
}

void TestRabbitMqQueue::unreachableManagementApi()
{
    QueueLocation where;
    // Port 1: nothing listens there.
    auto queue = declared(&where, QStringLiteral("http://127.0.0.1:1"));
    QVERIFY(queue);
    QString error;
    QVERIFY2(queue->enqueue({message(1), message(2)}, &error), qPrintable(error));
    QElapsedTimer timer;
    timer.start();
    const auto counts = queue->counts(&error);
    QVERIFY2(counts, qPrintable(error));
    QVERIFY(timer.elapsed() < 3000);
    QCOMPARE(counts->ready, 2);
    QCOMPARE(counts->inFlight, 0);
    QVERIFY2(counts->unavailable.startsWith(
                 QLatin1String("RabbitMQ management API not reachable at http://127.0.0.1:1")),
             qPrintable(counts->unavailable));
    QVERIFY(!counts->unavailable.contains(where.password));
    // Without the API, what this process holds still counts as in flight.
    QCOMPARE(leaseAll(*queue, 1).size(), 1);
    const auto holding = queue->counts(&error);
    QVERIFY2(holding, qPrintable(error));
    QCOMPARE(holding->inFlight, 2); // one leased, one fetched ahead (the prefetch is 100)
    QCOMPARE(holding->ready, 0);
}

void TestRabbitMqQueue::errorsNeverShowThePassword()
{
    const QueueLocation where = location();
    QVERIFY(!where.password.isEmpty());
    QStringList errors;

    QueueLocation wrong = where;
    wrong.password = QStringLiteral("wrong-secret-8c1d");
    QString error;
    QVERIFY(!RabbitMqQueue::connect(wrong, QStringLiteral("test"), 1, &error));
    QVERIFY2(error.contains(QLatin1String("cannot log in")), qPrintable(error));
    QVERIFY2(error.contains(where.displayName()), qPrintable(error));
    errors << error;

    QueueLocation nowhere = where;
    nowhere.port = 1;
    QVERIFY(!RabbitMqQueue::connect(nowhere, QStringLiteral("test"), 1, &error));
    QVERIFY2(error.contains(QLatin1String("cannot connect: refused")), qPrintable(error));
    errors << error;

    // The topology is not declared: every operation fails, saying which queue is missing.
    auto queue = open(where);
    QVERIFY(queue);
    QVERIFY(queue->lease(1, 1000, QStringLiteral("test"), &error).isEmpty());
    QVERIFY2(error.contains(where.name), qPrintable(error));
    QVERIFY2(error.contains(QLatin1String("once init --queue")), qPrintable(error));
    errors << error;
    error.clear();
    QVERIFY(!queue->enqueue({message(1)}, &error));
    QVERIFY2(error.contains(where.name), qPrintable(error));
    errors << error;
    QVERIFY(!queue->counts(&error));
    QVERIFY2(error.contains(QLatin1String("looking at queue ") + where.name), qPrintable(error));
    errors << error;
    QVERIFY(!queue->deadLetters(10, &error));
    errors << error;
    // The connection survives the channel errors.
    QVERIFY2(queue->declareTopology({}, &error), qPrintable(error));
    QVERIFY2(queue->enqueue({message(1)}, &error), qPrintable(error));
    QCOMPARE(leaseAll(*queue, 1).size(), 1);

    for (const QString &text : std::as_const(errors)) {
        QVERIFY2(!text.contains(where.password), qPrintable(text));
        QVERIFY2(!text.contains(wrong.password), qPrintable(text));
    }
}

void TestRabbitMqQueue::throughput()
{
    QueueLocation where;
    auto producer = declared(&where);
    QVERIFY(producer);
    constexpr int Count = 5000;
    QList<OutgoingMessage> messages;
    for (int i = 0; i < Count; ++i)
        messages.append(message(i));
    QString error;
    QElapsedTimer timer;
    timer.start();
    QVERIFY2(producer->enqueue(messages, &error), qPrintable(error));
    const qint64 enqueueMs = std::max<qint64>(timer.elapsed(), 1);

    auto consumer = open(where, QStringLiteral("fast"), 500);
    QVERIFY(consumer);
    timer.restart();
    QSet<QString> ids;
    int retried = 0;
    while (ids.size() < Count && timer.elapsed() < 60000) {
        const auto leased = consumer->lease(500, 30000, QStringLiteral("fast"), &error);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        QList<Settlement> settlements;
        for (const auto &m : leased) {
            // One in ten goes round once more, as the engine's retries would.
            if (m.delivery == 1 && m.payload.endsWith("0}")) {
                settlements.append(settlement(Settlement::Kind::Retry, m));
                ++retried;
                continue;
            }
            ids.insert(m.id);
            settlements.append(settlement(Settlement::Kind::Ack, m));
        }
        QVERIFY2(consumer->settle(settlements, &error), qPrintable(error));
    }
    const qint64 consumeMs = std::max<qint64>(timer.elapsed(), 1);
    QCOMPARE(ids.size(), Count);
    QCOMPARE(retried, Count / 10);
    qInfo("enqueue: %d messages in %lld ms (%lld/s); lease + settle (10%% retried): %lld ms (%lld/s)", Count,
          enqueueMs, Count * 1000 / enqueueMs, consumeMs, Count * 1000 / consumeMs);
    const auto counts = producer->counts(&error);
    QVERIFY2(counts, qPrintable(error));
    QCOMPARE(counts->ready, 0);
    QCOMPARE(counts->delayed, 0);
}

QTEST_GUILESS_MAIN(TestRabbitMqQueue)
#include "tst_rabbitmqqueue.moc"
