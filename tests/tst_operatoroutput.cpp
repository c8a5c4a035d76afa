// What `once` prints for an operator to copy and paste: send keys of ids that need
// percent-encoding ("%2B", "%3A", "%20", "%25" inside a key), worker ids and errors with
// a '%' in them, each printed exactly and found again when pasted back. Real `once`
// processes against a real store and the in-process partner simulator.
#include "deliveryharness.h"
#include "model/reminder.h"
#include "store/store.h"
#include "sim/partnersimulator.h"
#include "teststores.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLoggingCategory>
#include <QSet>
#include <QTemporaryDir>
#include <QTest>

using namespace once;
using namespace oncetest;

class OperatorOutputTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void keysArePrintedExactlyAndFoundWhenPasted();
    void everyDeliveryIsFoundByItsEventId();

private:
    QString partnerUrl() const { return QStringLiteral("http://127.0.0.1:%1/reminders").arg(m_partner->port()); }

    TestStores m_stores;
    QString m_onceBin;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<PartnerSimulator> m_partner;
    std::unique_ptr<OnceRunner> m_once;
};

void OperatorOutputTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFile::exists(m_onceBin), "ONCE_BIN must name the built once binary (ctest sets it)");
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.partnersim.debug=false"));
}

void OperatorOutputTest::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_stores.newUrl());
    m_partner = std::make_unique<PartnerSimulator>();
    QString error;
    QVERIFY2(m_partner->listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    QVERIFY(m_once->run({QStringLiteral("init")}).exitedWith(0));
}

void OperatorOutputTest::cleanup()
{
    m_once.reset();
    m_partner.reset();
    m_dir.reset();
}

void OperatorOutputTest::keysArePrintedExactlyAndFoundWhenPasted()
{
    // Ids whose keys carry percent-escapes that read like QString::arg() placeholders.
    const QStringList users{QStringLiteral("a+b"), QStringLiteral("c:d"), QStringLiteral("e f"), QStringLiteral("100%1")};
    QByteArray lines;
    QList<QByteArray> keys;
    for (const QString &user : users) {
        const QString scheduledAt = QStringLiteral("2026-12-01T09:00:00Z");
        const QJsonObject reminder{{QStringLiteral("user_id"), user},
                                   {QStringLiteral("reminder_id"), QStringLiteral("r%2")},
                                   {QStringLiteral("scheduled_at"), scheduledAt},
                                   {QStringLiteral("destination"), QStringLiteral("+15550100")},
                                   {QStringLiteral("body"), QStringLiteral("hello")},
                                   {QStringLiteral("event_id"), QString(QStringLiteral("evt-") + user)}};
        lines += QJsonDocument(reminder).toJson(QJsonDocument::Compact) + '\n';
        keys << makeSendKey(user, QStringLiteral("r%2"), scheduledAt);
    }
    QVERIFY(keys.at(0).contains("%2B") && keys.at(1).contains("%3A") && keys.at(2).contains("%20")
            && keys.at(3).contains("%25"));
    const QString file = m_dir->filePath(QStringLiteral("odd.jsonl"));
    {
        QFile out(file);
        QVERIFY(out.open(QIODevice::WriteOnly));
        out.write(lines);
    }
    QVERIFY(m_once->run({QStringLiteral("enqueue"), file}).exitedWith(0));
    // Every one fails once and is dead-lettered, by a worker whose id has a '%' too.
    PartnerFaults failing;
    failing.failRate = 1.0;
    m_partner->setProfile(failing);
    const auto worker = m_once->run({QStringLiteral("worker"), QStringLiteral("--partner"), partnerUrl(),
                                     QStringLiteral("--max-attempts"), QStringLiteral("1"), QStringLiteral("--worker-id"),
                                     QStringLiteral("w%1-%2"), QStringLiteral("--until-idle")},
                                    {}, WorkerTimeoutMs);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());

    const auto dlq = m_once->run({QStringLiteral("dlq")});
    QVERIFY2(dlq.exitedWith(0), dlq.describe().constData());
    const auto events = m_once->run({QStringLiteral("events")});
    QVERIFY2(events.exitedWith(0), events.describe().constData());
    const auto dryRun = m_once->run({QStringLiteral("redrive"), QStringLiteral("--all"), QStringLiteral("--dry-run")});
    QVERIFY2(dryRun.exitedWith(0), dryRun.describe().constData());
    for (const QByteArray &key : std::as_const(keys)) {
        QVERIFY2(dlq.out.contains(QByteArray("  " + key + "  http-5xx  attempts=1 redrives=0  ")), dlq.out.constData());
        QVERIFY2(events.out.contains(QByteArray("dead       " + key + "  user=")), events.out.constData());
        QVERIFY2(dryRun.out.contains(QByteArray(" " + key + "  http-5xx")), dryRun.out.constData());
        // The key as printed, pasted back.
        const auto history = m_once->run({QStringLiteral("history"), QString::fromLatin1(key)});
        QVERIFY2(history.exitedWith(0), history.describe().constData());
        QVERIFY2(history.out.startsWith(QByteArray("dead       " + key + "  user=")), history.out.constData());
        QVERIFY2(history.out.contains("worker=w%1-%2"), history.out.constData());
    }
    QVERIFY2(events.out.contains("user=100%1 reminder=r%2 sends=1"), events.out.constData());
}

// A producer that retried with a fresh event id each time: one reminder, three event ids.
// Support looks up whichever id the producer's log shows; each finds the one event, whose
// story names every delivery's event id and message id.
void OperatorOutputTest::everyDeliveryIsFoundByItsEventId()
{
    const QStringList eventIds{QStringLiteral("evt-first"), QStringLiteral("evt-again"), QStringLiteral("evt-third")};
    QByteArray lines;
    for (const QString &eventId : eventIds) {
        const QJsonObject reminder{{QStringLiteral("user_id"), QStringLiteral("u-dup")},
                                   {QStringLiteral("reminder_id"), QStringLiteral("r-dup")},
                                   {QStringLiteral("scheduled_at"), QStringLiteral("2026-12-01T09:00:00Z")},
                                   {QStringLiteral("destination"), QStringLiteral("+15550100")},
                                   {QStringLiteral("body"), QStringLiteral("hello")},
                                   {QStringLiteral("event_id"), eventId}};
        lines += QJsonDocument(reminder).toJson(QJsonDocument::Compact) + '\n';
    }
    const QByteArray key = makeSendKey(QStringLiteral("u-dup"), QStringLiteral("r-dup"),
                                       QStringLiteral("2026-12-01T09:00:00Z"));
    const QString file = m_dir->filePath(QStringLiteral("retried.jsonl"));
    {
        QFile out(file);
        QVERIFY(out.open(QIODevice::WriteOnly));
        out.write(lines);
    }
    QVERIFY(m_once->run({QStringLiteral("enqueue"), file}).exitedWith(0));
    const auto worker = m_once->run({QStringLiteral("worker"), QStringLiteral("--partner"), partnerUrl(),
                                     QStringLiteral("--until-idle")},
                                    {}, WorkerTimeoutMs);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    QCOMPARE(m_partner->effectsByKey().value(key), 1);

    for (const QString &eventId : eventIds) {
        const auto history = m_once->run({QStringLiteral("history"), eventId});
        QVERIFY2(history.exitedWith(0), history.describe().constData());
        QVERIFY2(history.out.startsWith(QByteArray("applied    " + key + "  user=")), history.out.constData());
        for (const QString &each : eventIds)
            QVERIFY2(history.out.contains(QByteArray(QByteArray(" event=") + each.toUtf8() + ' ')), history.out.constData());
    }
    const auto json = m_once->run({QStringLiteral("history"), QStringLiteral("--json"), QStringLiteral("evt-third")});
    QVERIFY2(json.exitedWith(0), json.describe().constData());
    QSet<QString> seen;
    for (const QJsonValue attempt : QJsonDocument::fromJson(json.out).object().value(QStringLiteral("attempts")).toArray())
        seen.insert(attempt.toObject().value(QStringLiteral("event_id")).toString());
    QCOMPARE(seen, QSet<QString>(eventIds.cbegin(), eventIds.cend()));

    // The console's search, on the same store: each id lists the one event.
    QString error;
    const auto store = Store::open(m_once->storeUrl(), &error);
    QVERIFY2(store, qPrintable(error));
    for (const QString &eventId : eventIds) {
        EventFilter filter;
        filter.text = eventId;
        const auto found = store->inspector().events(filter, &error);
        QVERIFY2(found, qPrintable(error));
        QCOMPARE(found->size(), 1);
        QCOMPARE(found->constFirst().sendKey, key);
        QCOMPARE(store->inspector().countEvents(filter, &error), std::optional<qint64>(1));
    }
    EventFilter nobody;
    nobody.text = QStringLiteral("evt-never");
    QCOMPARE(store->inspector().events(nobody, &error)->size(), 0);
}

QTEST_GUILESS_MAIN(OperatorOutputTest)
#include "tst_operatoroutput.moc"
