// Reminders that expire (issue 43): a reminder past its expires_at, or past its partner's or
// route's expire_after, is never sent; its key ends expired (final, not dead), its message
// is acked, and neither the partner's breaker nor its spell of failures hears of it. Real
// `once` processes against the partner simulator; effects counted at the simulator.
#include "deliveryharness.h"
#include "monitoring/storemetrics.h"
#include "sim/partnersimulator.h"
#include "store/store.h"
#include "teststores.h"

#include <QDateTime>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLoggingCategory>
#include <QSet>
#include <QTemporaryDir>
#include <QTest>
#include <QTimeZone>

using namespace once;
using namespace oncetest;

class ExpiryTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void remindersPastTheirExpiryAreNeverSent();
    void aReminderThatExpiresWhileWaitingForARetryEndsExpired();
    void aPartnersOrRoutesExpireAfterApplies();
    void almostValidExpiriesAreRefusedAlone();
    void aDeadLetterTellsItsExpiry();
    void aBrokersDeadLetterTellsItsExpiryFromTheLedger();

private:
    QString url() const { return QStringLiteral("http://127.0.0.1:%1/reminders").arg(m_partner->port()); }
    void startPartner(const PartnerFaults &faults);
    // A reminder line: scheduled at `scheduled`, expiring at `expires` (empty: none).
    static ReminderSpec reminder(const QString &name, const QString &scheduled, const QString &expires,
                                 const QString &channel = QStringLiteral("sms"));
    QString writeLines(const QString &name, const QList<QByteArray> &lines) const;
    QList<QByteArray> enqueue(const QList<ReminderSpec> &reminders, const QString &name);
    ProcessResult workUntilIdle(const QStringList &extra = {});
    QSet<QByteArray> eventKeys(const QStringList &args);
    qint64 storeCount(const QString &sql);
    QJsonObject partnerCounters();

    TestStores m_stores;
    QString m_onceBin;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<PartnerSimulator> m_partner;
    std::unique_ptr<OnceRunner> m_once;
};

namespace {

QString rfc3339(const QDateTime &time)
{
    return time.toUTC().toString(Qt::ISODateWithMs);
}

QSet<QByteArray> keySet(const QList<QByteArray> &keys)
{
    return QSet<QByteArray>(keys.begin(), keys.end());
}

} // namespace

void ExpiryTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFile::exists(m_onceBin), "ONCE_BIN must name the built once binary (ctest sets it)");
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.partnersim.debug=false"));
}

void ExpiryTest::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_stores.newUrl());
    const auto init = m_once->run({QStringLiteral("init")});
    QVERIFY2(init.exitedWith(0), init.describe().constData());
}

void ExpiryTest::cleanup()
{
    if (m_once)
        m_once->killAll();
    m_once.reset();
    m_partner.reset();
    m_dir.reset();
}

void ExpiryTest::startPartner(const PartnerFaults &faults)
{
    PartnerFaults counted = faults;
    counted.idempotent = false; // every request that reaches the partner is an effect
    m_partner = std::make_unique<PartnerSimulator>(counted);
    QString error;
    QVERIFY2(m_partner->listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
}

ReminderSpec ExpiryTest::reminder(const QString &name, const QString &scheduled, const QString &expires,
                                  const QString &channel)
{
    const QString userId = QStringLiteral("user-") + name;
    const QString reminderId = QStringLiteral("rem-") + name;
    const QString eventId = QStringLiteral("evt-") + name;
    QJsonObject object{
        {QStringLiteral("user_id"), userId},
        {QStringLiteral("reminder_id"), reminderId},
        {QStringLiteral("scheduled_at"), scheduled},
        {QStringLiteral("destination"), QStringLiteral("+15550001111")},
        {QStringLiteral("channel"), channel},
        {QStringLiteral("event_id"), eventId},
        {QStringLiteral("body"), QStringLiteral("Your table is ready")},
    };
    if (!expires.isEmpty())
        object.insert(QStringLiteral("expires_at"), expires);
    return {QJsonDocument(object).toJson(QJsonDocument::Compact), makeSendKey(userId, reminderId, scheduled)};
}

QString ExpiryTest::writeLines(const QString &name, const QList<QByteArray> &lines) const
{
    const QString path = m_dir->filePath(name + QStringLiteral(".jsonl"));
    QFile file(path);
    const QByteArray content = lines.join('\n') + '\n';
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate) || file.write(content) != content.size())
        qWarning("cannot write %s", qPrintable(path));
    return path;
}

QList<QByteArray> ExpiryTest::enqueue(const QList<ReminderSpec> &reminders, const QString &name)
{
    QList<QByteArray> lines;
    QList<QByteArray> keys;
    for (const ReminderSpec &each : reminders) {
        lines.append(each.line);
        keys.append(each.key);
    }
    const auto result = m_once->run({QStringLiteral("enqueue"), writeLines(name, lines)});
    if (!result.exitedWith(0)) {
        qWarning("%s", result.describe().constData());
        return {};
    }
    return keys;
}

ProcessResult ExpiryTest::workUntilIdle(const QStringList &extra)
{
    return m_once->run(
        QStringList{QStringLiteral("worker"), QStringLiteral("--until-idle"), QStringLiteral("--worker-id"),
                    QStringLiteral("expiry")} +
            (extra.contains(QStringLiteral("--partners")) ? QStringList()
                                                          : QStringList{QStringLiteral("--partner"), url()}) +
            extra,
        {{QStringLiteral("PARTNER_TOKEN"), QStringLiteral("partner-secret-token")}}, WorkerTimeoutMs);
}

QSet<QByteArray> ExpiryTest::eventKeys(const QStringList &args)
{
    QSet<QByteArray> keys;
    for (const QJsonValue &row :
         m_once->jsonArray(QStringList{QStringLiteral("events"), QStringLiteral("--json")} + args))
        keys.insert(row.toObject().value(QLatin1String("key")).toString().toLatin1());
    return keys;
}

qint64 ExpiryTest::storeCount(const QString &sql)
{
    QString error;
    const QStringList rows = storeRows(m_stores, m_once->storeUrl(), sql, &error);
    if (!error.isEmpty())
        qWarning("%s", qPrintable(error));
    return rows.value(0, QStringLiteral("-1")).toLongLong();
}

// The one partner of the one worker, as its last heartbeat wrote it.
QJsonObject ExpiryTest::partnerCounters()
{
    const QJsonArray workers = m_once->jsonArray({QStringLiteral("workers"), QStringLiteral("--json")});
    for (const QJsonValue &worker : workers) {
        const QJsonArray partners = worker.toObject().value(QLatin1String("partners")).toArray();
        if (!partners.isEmpty())
            return partners.first().toObject();
    }
    return {};
}

// Reminders already past their expires_at are never sent: no request reaches the partner,
// their keys are expired (counted by once stats, listed by once events --state expired),
// their messages acked, and the partner's breaker and spell of failures untouched: ten of
// them would have opened a breaker that trips at five. The ones beside them that have not
// expired are sent once. A producer's retry of an expired reminder is a duplicate.
void ExpiryTest::remindersPastTheirExpiryAreNeverSent()
{
    startPartner({});
    constexpr int Expired = 10;
    QList<ReminderSpec> reminders;
    for (int i = 0; i < Expired; ++i)
        reminders.append(
            reminder(QStringLiteral("late-%1").arg(i), QStringLiteral("2024-05-01T09:00:00Z"),
                     QStringLiteral("2024-05-01T10:%1:00+01:00").arg(i, 2, 10, QLatin1Char('0'))));
    const QString future = rfc3339(QDateTime::currentDateTimeUtc().addDays(1));
    QList<ReminderSpec> live{
        reminder(QStringLiteral("fresh"), QStringLiteral("2024-05-01T09:00:00Z"), future),
        reminder(QStringLiteral("plain"), QStringLiteral("2024-05-01T09:00:00Z"), QString())};
    const auto keys = enqueue(reminders + live, QStringLiteral("mixed"));
    QCOMPARE(keys.size(), Expired + 2);
    const QList<QByteArray> expiredKeys = keys.mid(0, Expired);
    const QList<QByteArray> liveKeys = keys.mid(Expired);

    const auto worker = workUntilIdle();
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    QCOMPARE(m_partner->stats().requests, qint64(liveKeys.size()));
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_partner, liveKeys));
    const QString problems = statsProblems(m_once->stats(), {{QStringLiteral("expired"), Expired},
                                                             {QStringLiteral("acked"), 2},
                                                             {QStringLiteral("dead_keys"), 0},
                                                             {QStringLiteral("dead"), 0},
                                                             {QStringLiteral("ready"), 0},
                                                             {QStringLiteral("in_flight"), 0},
                                                             {QStringLiteral("delayed"), 0},
                                                             {QStringLiteral("failed_sends_last_5m"), 0}});
    QVERIFY2(problems.isEmpty(), qPrintable(problems));
    QCOMPARE(eventKeys({QStringLiteral("--state"), QStringLiteral("expired")}), keySet(expiredKeys));
    QCOMPARE(m_stores.totalsDisagreeWithLedger(m_once->storeUrl()), QString());
    {
        // The store's metrics, as once serve's /metrics exposes them.
        QString error;
        const auto store = Store::open(m_once->storeUrl(), &error, Database::Access::ReadOnly);
        QVERIFY2(store, qPrintable(error));
        const auto metrics = StoreMetrics::read(*store, std::nullopt, &error);
        QVERIFY2(metrics, qPrintable(error));
        const QByteArray text = storeExposition(*metrics);
        QVERIFY2(text.contains("\nonce_reminders_expired_total 10\n"), text.constData());
    }

    // Expired is an outcome: no failure, no spell, the breaker closed.
    const QJsonObject partner = partnerCounters();
    QVERIFY2(!partner.isEmpty(), "the worker's heartbeat names its partner");
    QCOMPARE(partner.value(QLatin1String("failures")).toInteger(), 0);
    QCOMPARE(partner.value(QLatin1String("consecutive_failures")).toInteger(), 0);
    QCOMPARE(partner.value(QLatin1String("breaker")).toString(), QStringLiteral("closed"));
    QVERIFY(partner.value(QLatin1String("failing_since")).isNull());

    // The history and the verdict say when it expired and how late it was.
    const auto history =
        m_once->run({QStringLiteral("history"), QString::fromLatin1(expiredKeys.constFirst())});
    QVERIFY2(history.exitedWith(0), history.describe().constData());
    QVERIFY2(history.out.contains(" expire expired  message=") &&
                 history.out.contains("(expired at 2024-05-01T09:00:00.000Z; ") &&
                 history.out.contains("verdict: Not sent: expired at ") &&
                 history.out.contains(" ack acked  message=") && !history.out.contains("Z  send "),
             history.out.constData());
    const auto story = m_once->run(
        {QStringLiteral("history"), QString::fromLatin1(expiredKeys.constFirst()), QStringLiteral("--json")});
    const QJsonObject event = QJsonDocument::fromJson(story.out).object();
    QCOMPARE(event.value(QLatin1String("state")).toString(), QStringLiteral("expired"));
    QCOMPARE(event.value(QLatin1String("verdict_kind")).toString(), QStringLiteral("expired"));
    QCOMPARE(event.value(QLatin1String("expires_at")).toString(), QStringLiteral("2024-05-01T09:00:00.000Z"));

    // Published again (a producer's retry): recognised as final, acked without a send.
    QCOMPARE(enqueue({reminders.constFirst()}, QStringLiteral("again")).size(), 1);
    const auto again = workUntilIdle();
    QVERIFY2(again.exitedWith(0), again.describe().constData());
    QCOMPARE(m_partner->stats().requests, qint64(liveKeys.size()));
    const QString afterAgain = statsProblems(m_once->stats(), {{QStringLiteral("expired"), Expired},
                                                               {QStringLiteral("duplicate_deliveries"), 1},
                                                               {QStringLiteral("ready"), 0},
                                                               {QStringLiteral("dead"), 0}});
    QVERIFY2(afterAgain.isEmpty(), qPrintable(afterAgain));
}

// A reminder whose partner keeps failing waits for its retries; once its expiry passes it
// ends expired, not dead (its tries are far from spent), and is not sent again. The
// partner's spell of failures counts the sends that failed and nothing more.
void ExpiryTest::aReminderThatExpiresWhileWaitingForARetryEndsExpired()
{
    PartnerFaults failing;
    failing.failRate = 1.0;
    startPartner(failing);
    constexpr int Count = 3;
    const QDateTime now = QDateTime::currentDateTimeUtc();
    const QString scheduled = rfc3339(now.addSecs(-60));
    const QString expires = rfc3339(now.addMSecs(2500));
    QList<ReminderSpec> reminders;
    for (int i = 0; i < Count; ++i)
        reminders.append(reminder(QStringLiteral("retried-%1").arg(i), scheduled, expires));
    const auto keys = enqueue(reminders, QStringLiteral("retried"));
    QCOMPARE(keys.size(), Count);

    m_once->start({QStringLiteral("worker"), QStringLiteral("--partner"), url(),
                   QStringLiteral("--worker-id"), QStringLiteral("retrying"),
                   QStringLiteral("--max-attempts"), QStringLiteral("100"),
                   QStringLiteral("--backoff-base-ms"), QStringLiteral("100"),
                   QStringLiteral("--backoff-cap-s"), QStringLiteral("1")});
    QVERIFY2(pumpUntil([&] { return m_once->stats().value(QLatin1String("expired")).toInteger() == Count; },
                       WorkerTimeoutMs),
             QJsonDocument(m_once->stats()).toJson().constData());
    QVERIFY2(QDateTime::currentDateTimeUtc() >= QDateTime::fromString(expires, Qt::ISODateWithMs),
             "expired before its expiry");
    QVERIFY(m_partner->stats().requests >= Count); // each was tried while it could be
    QCOMPARE(m_partner->stats().effects, qint64(0));
    QCOMPARE(eventKeys({QStringLiteral("--state"), QStringLiteral("expired")}), keySet(keys));
    const QString problems = statsProblems(m_once->stats(), {{QStringLiteral("expired"), Count},
                                                             {QStringLiteral("dead_keys"), 0},
                                                             {QStringLiteral("dead"), 0},
                                                             {QStringLiteral("retrying"), 0},
                                                             {QStringLiteral("ready"), 0},
                                                             {QStringLiteral("delayed"), 0}});
    QVERIFY2(problems.isEmpty(), qPrintable(problems));
    // Nothing went out for a key after its expiry was recorded.
    QCOMPARE(storeCount(
                 QStringLiteral("SELECT COUNT(*) FROM attempts s JOIN attempts e ON e.send_key = s.send_key "
                                "AND e.step = 'expire' WHERE s.step = 'send' AND s.at > e.at")),
             0);
    // Each failed send fed the spell once; the expiries added nothing to it.
    const qint64 sends = storeCount(QStringLiteral("SELECT COUNT(*) FROM attempts WHERE step = 'send'"));
    QVERIFY(sends >= Count);
    QVERIFY2(pumpUntil(
                 [&] {
                     const QJsonObject partner = partnerCounters();
                     return partner.value(QLatin1String("failures")).toInteger() == sends &&
                            partner.value(QLatin1String("consecutive_failures")).toInteger() == sends;
                 },
                 WorkerTimeoutMs),
             qPrintable(QStringLiteral("%1 sends; the partner: %2")
                            .arg(sends)
                            .arg(QString::fromUtf8(
                                QJsonDocument(partnerCounters()).toJson(QJsonDocument::Compact)))));
}

// Without an expires_at of its own, a reminder lives as long as its partner's
// expire_after says, counted from its scheduled time, unless its route says otherwise; its
// own expires_at wins over both. The claim records the expiry it worked out.
void ExpiryTest::aPartnersOrRoutesExpireAfterApplies()
{
    startPartner({});
    const QByteArray partners = QStringLiteral(R"({"partners": {
        "texts": {"profile": "webhook", "url": "%1", "token": "env:PARTNER_TOKEN", "expire_after": "1h"}
    }, "routes": {"sms": "texts", "push": {"partner": "texts", "expire_after": "7d"}}})")
                                    .arg(url())
                                    .toUtf8();
    const QString partnersFile = m_dir->filePath(QStringLiteral("partners.json"));
    QFile file(partnersFile);
    QVERIFY(file.open(QIODevice::WriteOnly) && file.write(partners) == partners.size());
    file.close();

    const QDateTime now = QDateTime::currentDateTimeUtc();
    const QString twoHoursAgo = rfc3339(now.addSecs(-2 * 3600));
    const ReminderSpec stale = reminder(QStringLiteral("stale"), twoHoursAgo, QString());
    const ReminderSpec recent = reminder(QStringLiteral("recent"), rfc3339(now.addSecs(-60)), QString());
    const ReminderSpec ownExpiry = reminder(QStringLiteral("own"), twoHoursAgo, rfc3339(now.addDays(1)));
    const ReminderSpec routed =
        reminder(QStringLiteral("routed"), twoHoursAgo, QString(), QStringLiteral("push"));
    const auto keys = enqueue({stale, recent, ownExpiry, routed}, QStringLiteral("defaults"));
    QCOMPARE(keys.size(), 4);

    const auto worker = workUntilIdle({QStringLiteral("--partners"), partnersFile});
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_partner, {recent.key, ownExpiry.key, routed.key}));
    QCOMPARE(eventKeys({QStringLiteral("--state"), QStringLiteral("expired")}), QSet<QByteArray>{stale.key});
    const QJsonArray expired = m_once->jsonArray({QStringLiteral("events"), QStringLiteral("--json"),
                                                  QStringLiteral("--state"), QStringLiteral("expired")});
    QCOMPARE(expired.size(), 1);
    QCOMPARE(expired.first().toObject().value(QLatin1String("expires_at")).toString(),
             rfc3339(QDateTime::fromString(twoHoursAgo, Qt::ISODateWithMs).addSecs(3600)));
    QCOMPARE(
        storeCount(QStringLiteral("SELECT COUNT(*) FROM ledger WHERE send_key = '%1' AND expires_at = %2")
                       .arg(QString::fromLatin1(routed.key))
                       .arg(QDateTime::fromString(twoHoursAgo, Qt::ISODateWithMs).toMSecsSinceEpoch() +
                            7 * 24 * 3600 * 1000LL)),
        1);

    // An almost right expire_after stops the worker at start, in one line.
    const QByteArray wrong = QByteArray(partners).replace("\"1h\"", "\"1 hour\"");
    QVERIFY(file.open(QIODevice::WriteOnly | QIODevice::Truncate) && file.write(wrong) == wrong.size());
    file.close();
    const auto refused = workUntilIdle({QStringLiteral("--partners"), partnersFile});
    QVERIFY2(refused.exitedWith(2), refused.describe().constData());
    QVERIFY2(refused.err.contains("partner \"texts\": \"expire_after\" must be a duration such as \"90s\""),
             refused.err.constData());
}

// expires_at is read as strictly as scheduled_at: a time before scheduled_at, one without
// an offset, a month 13 are each refused with one line naming the field, and the lines
// around them are enqueued and sent all the same. Published unchecked, a worker
// dead-letters each of them as invalid and sends the rest of the batch.
void ExpiryTest::almostValidExpiriesAreRefusedAlone()
{
    startPartner({});
    const QString scheduled = QStringLiteral("2026-12-01T09:00:00Z");
    const QString future = rfc3339(QDateTime::currentDateTimeUtc().addDays(2));
    const ReminderSpec first = reminder(QStringLiteral("first"), scheduled, future);
    const ReminderSpec before =
        reminder(QStringLiteral("before"), scheduled, QStringLiteral("2026-12-01T08:59:59Z"));
    const ReminderSpec noOffset =
        reminder(QStringLiteral("no-offset"), scheduled, QStringLiteral("2026-12-01T10:00:00"));
    const ReminderSpec month13 =
        reminder(QStringLiteral("month-13"), scheduled, QStringLiteral("2026-13-01T00:00:00Z"));
    const ReminderSpec last = reminder(QStringLiteral("last"), scheduled, future);
    const QString path = writeLines(QStringLiteral("almost"),
                                    {first.line, before.line, noOffset.line, month13.line, last.line});
    const auto enqueued = m_once->run({QStringLiteral("enqueue"), path});
    QVERIFY2(enqueued.exitedWith(1), enqueued.describe().constData());
    const QList<QByteArray> said = enqueued.err.trimmed().split('\n');
    QCOMPARE(said.size(), 4);
    QVERIFY2(said.at(0).startsWith("line 2: expires_at \"2026-12-01T08:59:59Z\" is before scheduled_at"),
             said.at(0).constData());
    QVERIFY2(said.at(1).startsWith("line 3: expires_at \"2026-12-01T10:00:00\" is not an RFC 3339 time"),
             said.at(1).constData());
    QVERIFY2(said.at(2).startsWith("line 4: expires_at \"2026-13-01T00:00:00Z\" is not an RFC 3339 time"),
             said.at(2).constData());
    QCOMPARE(said.at(3), QByteArray("enqueued 2, rejected 3"));
    QCOMPARE(m_once->stats().value(QLatin1String("ready")).toInteger(), 2);

    const auto unchecked =
        m_once->run({QStringLiteral("enqueue"), QStringLiteral("--unchecked"),
                     writeLines(QStringLiteral("unchecked"), {before.line, noOffset.line, month13.line})});
    QVERIFY2(unchecked.exitedWith(0), unchecked.describe().constData());
    const auto worker = workUntilIdle();
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_partner, {first.key, last.key}));
    const QJsonArray letters = m_once->jsonArray({QStringLiteral("dlq"), QStringLiteral("--json")});
    QCOMPARE(letters.size(), 3);
    for (const QJsonValue &letter : letters) {
        const QJsonObject object = letter.toObject();
        QCOMPARE(object.value(QLatin1String("error_class")).toString(), QStringLiteral("invalid-message"));
        QVERIFY2(
            object.value(QLatin1String("last_error")).toString().startsWith(QLatin1String("expires_at \"")),
            qPrintable(object.value(QLatin1String("last_error")).toString()));
    }
    QCOMPARE(m_once->stats().value(QLatin1String("expired")).toInteger(), 0);
}

// A dead letter knows when its reminder expires and what became of its key: once dlq
// --json says expires_at and key_state, and the plain list says "expired T (would be N
// late)" once it has, so an operator sees that a redrive would only settle it expired.
void ExpiryTest::aDeadLetterTellsItsExpiry()
{
    PartnerFaults failing;
    failing.failRate = 1.0;
    startPartner(failing);
    const QDateTime now = QDateTime::currentDateTimeUtc();
    const QString expires = rfc3339(now.addMSecs(1500));
    const ReminderSpec soon = reminder(QStringLiteral("soon"), rfc3339(now.addSecs(-3600)), expires);
    const QString laterExpires = rfc3339(now.addDays(1));
    const ReminderSpec later = reminder(QStringLiteral("later"), rfc3339(now.addSecs(-3600)), laterExpires);
    QCOMPARE(enqueue({soon, later}, QStringLiteral("dying")).size(), 2);
    const auto worker = workUntilIdle({QStringLiteral("--max-attempts"), QStringLiteral("1")});
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    QCOMPARE(m_once->stats().value(QLatin1String("dead")).toInteger(), 2);
    QVERIFY(pumpUntil(
        [&] { return QDateTime::currentDateTimeUtc() > QDateTime::fromString(expires, Qt::ISODateWithMs); },
        5000));

    QHash<QByteArray, QJsonObject> byKey;
    for (const QJsonValue &letter : m_once->jsonArray({QStringLiteral("dlq"), QStringLiteral("--json")}))
        byKey.insert(letter.toObject().value(QLatin1String("key")).toString().toLatin1(), letter.toObject());
    QCOMPARE(byKey.size(), 2);
    QCOMPARE(byKey.value(soon.key).value(QLatin1String("expires_at")).toString(), expires);
    QCOMPARE(byKey.value(soon.key).value(QLatin1String("key_state")).toString(), QStringLiteral("dead"));
    QCOMPARE(byKey.value(later.key).value(QLatin1String("expires_at")).toString(), laterExpires);
    QCOMPARE(byKey.value(later.key).value(QLatin1String("key_state")).toString(), QStringLiteral("dead"));

    const auto listed = m_once->run({QStringLiteral("dlq")});
    QVERIFY2(listed.exitedWith(0), listed.describe().constData());
    const QList<QByteArray> lines = listed.out.trimmed().split('\n');
    QCOMPARE(lines.size(), 2);
    for (const QByteArray &line : lines) {
        if (line.contains(soon.key))
            QVERIFY2(line.contains(QByteArray("  expired " + expires.toLatin1() + " (would be 1 h late)")),
                     line.constData());
        else
            QVERIFY2(!line.contains("expired"), line.constData());
    }
}

// A broker keeps the letter, the worker's store its key: once dlq --queue reads each
// letter's key state and expiry from the store (here a worker on its own store consumes
// over `once serve`'s REST queue, whose letters the broker path lists).
void ExpiryTest::aBrokersDeadLetterTellsItsExpiryFromTheLedger()
{
    PartnerFaults failing;
    failing.failRate = 1.0;
    startPartner(failing);
    const QByteArray token = "operator-secret-0123456789abcdef";
    const QString tokens = m_dir->filePath(QStringLiteral("tokens"));
    QFile file(tokens);
    QVERIFY(file.open(QIODevice::WriteOnly) && file.write("oncall " + token + " operator\n") > 0);
    file.close();
    const quint16 port = m_once->startServe({QStringLiteral("--tokens"), tokens});
    QVERIFY(port);
    const QString queue = QStringLiteral("rest+http://127.0.0.1:%1/v1?queue=reminders").arg(port);
    const QMap<QString, QString> withToken{{QStringLiteral("ONCE_QUEUE_TOKEN"), QString::fromLatin1(token)}};

    OnceRunner worker(m_onceBin, m_stores.newUrl());
    QVERIFY(worker.run({QStringLiteral("init")}).exitedWith(0));
    const QDateTime now = QDateTime::currentDateTimeUtc();
    const QString expires = rfc3339(now.addMSecs(1000));
    const ReminderSpec soon = reminder(QStringLiteral("brokered"), rfc3339(now.addSecs(-3600)), expires);
    const auto enqueued = worker.run(
        {QStringLiteral("enqueue"), QStringLiteral("--queue"), queue, writeLines(QStringLiteral("brokered"), {soon.line})},
        withToken);
    QVERIFY2(enqueued.exitedWith(0), enqueued.describe().constData());
    const auto worked = worker.run({QStringLiteral("worker"), QStringLiteral("--queue"), queue, QStringLiteral("--partner"),
                                    url(), QStringLiteral("--max-attempts"), QStringLiteral("1"),
                                    QStringLiteral("--until-idle")},
                                   withToken, WorkerTimeoutMs);
    QVERIFY2(worked.exitedWith(0), worked.describe().constData());
    QVERIFY(pumpUntil([&] { return QDateTime::currentDateTimeUtc() > QDateTime::fromString(expires, Qt::ISODateWithMs); },
                      5000));

    const auto listed = worker.run({QStringLiteral("dlq"), QStringLiteral("--json"), QStringLiteral("--queue"), queue},
                                   withToken);
    QVERIFY2(listed.exitedWith(0), listed.describe().constData());
    const QJsonArray letters = QJsonDocument::fromJson(listed.out).array();
    QCOMPARE(letters.size(), 1);
    const QJsonObject letter = letters.first().toObject();
    QCOMPARE(letter.value(QLatin1String("key")).toString().toLatin1(), soon.key);
    QCOMPARE(letter.value(QLatin1String("expires_at")).toString(), expires);
    QCOMPARE(letter.value(QLatin1String("key_state")).toString(), QStringLiteral("dead"));
    const auto plain = worker.run({QStringLiteral("dlq"), QStringLiteral("--queue"), queue}, withToken);
    QVERIFY2(plain.exitedWith(0) && plain.out.contains(QByteArray("  expired " + expires.toLatin1() + " (would be 1 h late)")),
             plain.describe().constData());
}

QTEST_GUILESS_MAIN(ExpiryTest)
#include "tst_expiry.moc"
