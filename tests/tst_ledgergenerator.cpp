// The ledger generator of the console's benchmark, at a tiny size: the counts asked for,
// users scattered through the ledger, keys and history as the product makes them.
#include "model/reminder.h"
#include "sim/ledgergenerator.h"
#include "store/store.h"
#include "teststores.h"

#include <QLoggingCategory>
#include <QSqlQuery>
#include <QTest>

using namespace once;

namespace {

// 2026-03-01T12:00:00Z: a fixed end, so that one seed gives one store.
constexpr qint64 EndMs = 1772366400000;
constexpr qint64 DayMs = 24LL * 3600 * 1000;

LedgerShape tinyShape()
{
    LedgerShape shape;
    shape.events = 2000;
    shape.dead = 60;
    shape.inDoubt = 25;
    shape.retrying = 10;
    shape.claimed = 5;
    shape.queued = 7;
    shape.endMs = EndMs;
    shape.seed = 42;
    return shape;
}

} // namespace

class TestLedgerGenerator : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void fillsTheCountsAskedFor();
    void scattersUsersThroughTheLedger();
    void makesKeysAsTheProductDoes();
    void writesTheHistoryOfEachOutcome();
    void sameSeedSameStore();
    void refusesAStoreInUse();

private:
    qint64 scalar(const QString &sql);
    QStringList column(Store &store, const QString &sql);

    TestStores m_stores;
    QString m_url;
    std::unique_ptr<Store> m_store;
};

void TestLedgerGenerator::initTestCase()
{
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.database.debug=false\nonce.core.database.info=false"));
}

void TestLedgerGenerator::init()
{
    m_store.reset();
    m_url = m_stores.newUrl();
    QString error;
    m_store = Store::open(m_url, &error);
    QVERIFY2(m_store, qPrintable(error));
    LedgerGenerator generator(m_store->database(), tinyShape());
    QVERIFY2(generator.fill(&error), qPrintable(error));
}

qint64 TestLedgerGenerator::scalar(const QString &sql)
{
    QSqlQuery query(m_store->database().connection());
    if (!query.exec(sql) || !query.next())
        qFatal("%s: %s", qPrintable(sql), qPrintable(query.lastError().text()));
    return query.value(0).toLongLong();
}

QStringList TestLedgerGenerator::column(Store &store, const QString &sql)
{
    QSqlQuery query(store.database().connection());
    if (!query.exec(sql))
        qFatal("%s: %s", qPrintable(sql), qPrintable(query.lastError().text()));
    QStringList values;
    while (query.next())
        values << query.value(0).toString();
    return values;
}

void TestLedgerGenerator::fillsTheCountsAskedFor()
{
    const LedgerShape shape = tinyShape();
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM ledger")), shape.events);
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM ledger WHERE state = 'dead'")), shape.dead);
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM ledger WHERE state = 'in_doubt'")), shape.inDoubt);
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM ledger WHERE state = 'retrying'")), shape.retrying);
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM ledger WHERE state = 'claimed'")), shape.claimed);
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM ledger WHERE state = 'applied'")),
             shape.events - shape.dead - shape.inDoubt - shape.retrying - shape.claimed);
    // Every dead event has its dead letter, and only they.
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM dead_letters d JOIN ledger l ON l.send_key = d.send_key "
                                   "WHERE l.state = 'dead' AND d.payload = l.payload")),
             shape.dead);
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM dead_letters")), shape.dead);
    // Retrying and claimed keys have their message in the queue, beside those not claimed yet.
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM queue q JOIN ledger l ON l.send_key = q.send_key "
                                   "AND CAST(l.owner_message AS BIGINT) = q.id")),
             shape.retrying + shape.claimed);
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM queue")), shape.retrying + shape.claimed + shape.queued);
    QVERIFY(scalar(QStringLiteral("SELECT COUNT(*) FROM ledger WHERE duplicates > 0")) > 0);

    // The product reads the same numbers.
    QString error;
    const auto stats = m_store->inspector().stats(&error);
    QVERIFY2(stats, qPrintable(error));
    QCOMPARE(stats->deadKeys, shape.dead);
    QCOMPARE(stats->inDoubt, shape.inDoubt);
    QCOMPARE(stats->queue.dead, shape.dead);
    QCOMPARE(stats->acked, shape.events - shape.dead - shape.inDoubt - shape.retrying - shape.claimed);
    const auto inDoubt = m_store->inspector().inDoubt(&error);
    QVERIFY2(inDoubt, qPrintable(error));
    QCOMPARE(qint64(inDoubt->size()), shape.inDoubt);
    for (const EventRow &row : *inDoubt)
        QVERIFY2(!row.claimedBy.isEmpty() && row.claimedAtMs > 0, row.sendKey.constData());
}

void TestLedgerGenerator::scattersUsersThroughTheLedger()
{
    const qint64 events = tinyShape().events;
    QSqlQuery query(m_store->database().connection());
    const QString ordinal = m_store->database().isPostgres() ? QStringLiteral("seq") : QStringLiteral("rowid");
    QVERIFY(query.exec(QStringLiteral("SELECT user_id, COUNT(*), MIN(%1), MAX(%1) FROM ledger GROUP BY user_id").arg(ordinal)));
    qint64 users = 0;
    qint64 most = 0;
    qint64 widestSpan = 0;
    while (query.next()) {
        ++users;
        const qint64 count = query.value(1).toLongLong();
        const qint64 span = query.value(3).toLongLong() - query.value(2).toLongLong() + 1;
        // Never a run of consecutive rows.
        if (count > 1)
            QVERIFY2(span > count, qPrintable(query.value(0).toString()));
        most = std::max(most, count);
        widestSpan = std::max(widestSpan, span);
    }
    QVERIFY2(users > events / 40, qPrintable(QString::number(users)));
    // Some users far more often than the average of twenty...
    QVERIFY2(most >= 3 * events / users, qPrintable(QString::number(most)));
    // ...and from one end of the ledger to the other.
    QVERIFY(widestSpan > events * 3 / 4);
    // Dead letters are spread over the month too.
    QVERIFY(scalar(QStringLiteral("SELECT MAX(dead_at) - MIN(dead_at) FROM dead_letters")) > 20 * DayMs);
}

void TestLedgerGenerator::makesKeysAsTheProductDoes()
{
    QSqlQuery query(m_store->database().connection());
    QVERIFY(query.exec(QStringLiteral("SELECT send_key, event_id, user_id, reminder_id, destination, channel, "
                                      "scheduled_at, payload FROM ledger UNION ALL SELECT send_key, event_id, NULL, "
                                      "NULL, NULL, NULL, NULL, payload FROM queue")));
    qint64 rows = 0;
    while (query.next()) {
        const auto parsed = parseReminder(query.value(7).toByteArray());
        QVERIFY2(parsed.reminder, qPrintable(parsed.error));
        const Reminder &reminder = *parsed.reminder;
        QCOMPARE(QString::fromLatin1(reminder.sendKey), query.value(0).toString());
        QCOMPARE(reminder.eventId, query.value(1).toString());
        if (!query.value(2).isNull()) {
            QCOMPARE(reminder.userId, query.value(2).toString());
            QCOMPARE(reminder.reminderId, query.value(3).toString());
            QCOMPARE(reminder.destination, query.value(4).toString());
            QCOMPARE(reminder.channel, query.value(5).toString());
            QCOMPARE(reminder.scheduledAt.toMSecsSinceEpoch(), query.value(6).toLongLong());
        }
        ++rows;
    }
    QCOMPARE(rows, tinyShape().events + tinyShape().retrying + tinyShape().claimed + tinyShape().queued);
}

void TestLedgerGenerator::writesTheHistoryOfEachOutcome()
{
    // One send row for every request the ledger counts, in every state.
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM attempts WHERE step = 'send'")),
             scalar(QStringLiteral("SELECT SUM(sends) FROM ledger")));
    // Every applied event was applied by exactly one send, the last.
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM attempts a JOIN ledger l ON l.send_key = a.send_key WHERE "
                                   "l.state = 'applied' AND a.step = 'send' AND a.outcome = 'applied' AND "
                                   "a.at + a.latency_ms = l.applied_at")),
             scalar(QStringLiteral("SELECT COUNT(*) FROM ledger WHERE state = 'applied'")));
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM attempts WHERE step = 'dead-letter'")), tinyShape().dead);
    // A claim and an ack for every duplicate delivery.
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM attempts WHERE step = 'claim' AND outcome = 'duplicate'")),
             scalar(QStringLiteral("SELECT SUM(duplicates) FROM ledger")));
    // Only keys being claimed right now have no history yet.
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM ledger l WHERE NOT EXISTS (SELECT 1 FROM attempts a WHERE "
                                   "a.send_key = l.send_key)")),
             tinyShape().claimed);

    // The story of a dead event reads as the engine's would.
    QString error;
    const QString key = column(*m_store, QStringLiteral("SELECT send_key FROM ledger WHERE state = 'dead' AND sends = 8")).value(0);
    QVERIFY(!key.isEmpty());
    const auto attempts = m_store->inspector().attempts(key.toLatin1(), &error);
    QVERIFY2(attempts, qPrintable(error));
    QCOMPARE(qint64(attempts->size()), 8 + 7 + 1 + 2 * scalar(QStringLiteral("SELECT duplicates FROM ledger WHERE send_key = '%1'").arg(key)));
    QCOMPARE(attempts->constFirst().step, QStringLiteral("send"));
    QCOMPARE(attempts->at(1).step, QStringLiteral("retry"));
    QVERIFY(std::any_of(attempts->cbegin(), attempts->cend(),
                        [](const Attempt &a) { return a.step == QLatin1String("dead-letter"); }));
}

void TestLedgerGenerator::sameSeedSameStore()
{
    const QString order = m_store->database().isPostgres() ? QStringLiteral("seq") : QStringLiteral("rowid");
    const QString keys = QStringLiteral("SELECT send_key || ' ' || state || ' ' || CAST(updated_at AS TEXT) FROM ledger ORDER BY %1").arg(order);
    const QStringList first = column(*m_store, keys);

    const auto generate = [this, &keys](quint64 seed) {
        QString error;
        auto store = Store::open(m_stores.newUrl(), &error);
        if (!store)
            qFatal("%s", qPrintable(error));
        LedgerShape shape = tinyShape();
        shape.seed = seed;
        LedgerGenerator generator(store->database(), shape);
        if (!generator.fill(&error))
            qFatal("%s", qPrintable(error));
        return column(*store, keys);
    };
    QCOMPARE(generate(tinyShape().seed), first);
    const QStringList other = generate(tinyShape().seed + 1);
    QCOMPARE(other.size(), first.size());
    QVERIFY(other != first);
}

void TestLedgerGenerator::refusesAStoreInUse()
{
    QString error;
    LedgerGenerator again(m_store->database(), tinyShape());
    QVERIFY(!again.fill(&error));
    QVERIFY2(error.contains(QLatin1String("already holds")), qPrintable(error));
    LedgerShape impossible = tinyShape();
    impossible.dead = impossible.events;
    QVERIFY(!impossible.problem().isEmpty());
}

QTEST_GUILESS_MAIN(TestLedgerGenerator)
#include "tst_ledgergenerator.moc"
