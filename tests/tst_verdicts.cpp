// What a verdict counts as a possible effect, against what a partner really did: real
// `once` workers send to the in-process partner simulator, which does not honour
// Idempotency-Key and counts each effect; `once history` and `once events` read the store
// afterwards. A 503 is an answer that nothing was done and must not read as a second
// delivery; a connection dropped after the partner acted must.
#include "deliveryharness.h"
#include "model/reminder.h"
#include "sim/partnersimulator.h"
#include "teststores.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLoggingCategory>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>
#include <QTimeZone>

using namespace once;
using namespace oncetest;

class VerdictsTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void onlyCallsThatMayHaveActedCountAsEffects();
    void queuedVerdictSaysItsDueTimeInLocalTime();

private:
    QString partnerUrl() const { return QStringLiteral("http://127.0.0.1:%1/reminders").arg(m_partner->port()); }
    bool enqueue(const ReminderSpec &reminder, int delaySeconds = 0);
    // Runs one worker until it is idle, letting steer() change the partner between requests.
    bool work(const std::function<void()> &steer);
    QJsonObject history(const QByteArray &key);
    QList<QByteArray> eventKeys(const QStringList &arguments);

    TestStores m_stores;
    QString m_onceBin;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<PartnerSimulator> m_partner;
    std::unique_ptr<OnceRunner> m_once;
    // A zone far from UTC, with an abbreviation, so that a UTC time cannot pass for local.
    const QMap<QString, QString> m_zone{{QStringLiteral("TZ"), QStringLiteral("Asia/Kolkata")}};
};

void VerdictsTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFile::exists(m_onceBin), "ONCE_BIN must name the built once binary (ctest sets it)");
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.partnersim.debug=false"));
}

void VerdictsTest::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_stores.newUrl());
    m_partner = std::make_unique<PartnerSimulator>();
    QString error;
    QVERIFY2(m_partner->listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    QVERIFY(m_once->run({QStringLiteral("init")}).exitedWith(0));
}

void VerdictsTest::cleanup()
{
    m_once.reset();
    m_partner.reset();
    m_dir.reset();
}

bool VerdictsTest::enqueue(const ReminderSpec &reminder, int delaySeconds)
{
    const QString file = m_dir->filePath(QStringLiteral("one.jsonl"));
    QFile out(file);
    if (!out.open(QIODevice::WriteOnly | QIODevice::Truncate))
        return false;
    out.write(reminder.line + '\n');
    out.close();
    const auto result = m_once->run(
        {QStringLiteral("enqueue"), QStringLiteral("--delay"), QString::number(delaySeconds), file});
    if (!result.exitedWith(0))
        qWarning("%s", result.describe().constData());
    return result.exitedWith(0);
}

bool VerdictsTest::work(const std::function<void()> &steer)
{
    QProcess *worker = m_once->start({QStringLiteral("worker"), QStringLiteral("--partner"), partnerUrl(),
                                      QStringLiteral("--backoff-base-ms"), QStringLiteral("20"),
                                      QStringLiteral("--timeout"), QStringLiteral("5"), QStringLiteral("--until-idle")});
    const auto result = m_once->waitFor(worker, WorkerTimeoutMs, steer);
    if (!result.exitedWith(0))
        qWarning("%s", result.describe().constData());
    return result.exitedWith(0);
}

QJsonObject VerdictsTest::history(const QByteArray &key)
{
    const auto result = m_once->run({QStringLiteral("history"), QStringLiteral("--json"), QString::fromLatin1(key)}, m_zone);
    if (!result.exitedWith(0))
        qWarning("%s", result.describe().constData());
    return QJsonDocument::fromJson(result.out).object();
}

QList<QByteArray> VerdictsTest::eventKeys(const QStringList &arguments)
{
    const auto result = m_once->run(QStringList{QStringLiteral("events"), QStringLiteral("--json")} + arguments, m_zone);
    if (!result.exitedWith(0))
        qWarning("%s", result.describe().constData());
    QList<QByteArray> keys;
    for (const auto &row : QJsonDocument::fromJson(result.out).array())
        keys << row.toObject().value(QLatin1String("key")).toString().toLatin1();
    return keys;
}

void VerdictsTest::onlyCallsThatMayHaveActedCountAsEffects()
{
    PartnerFaults plain;
    plain.idempotent = false;

    // Two 503s, then accepted: three calls, one effect.
    const ReminderSpec refused = makeReminder(QStringLiteral("refused"), 1);
    QVERIFY(enqueue(refused));
    PartnerFaults failing = plain;
    failing.failRate = 1.0;
    m_partner->setProfile(failing);
    QVERIFY(work([this, plain] {
        if (m_partner->stats().requests >= 2 && m_partner->profile().failRate > 0)
            m_partner->setProfile(plain);
    }));

    // Acted on, then the connection dropped before the answer: resent with the same key
    // and acted on again. Two calls, two effects.
    const ReminderSpec dropped = makeReminder(QStringLiteral("dropped"), 2);
    QVERIFY(enqueue(dropped));
    PartnerFaults dropping = plain;
    dropping.dropAfterAcceptRate = 1.0;
    m_partner->setProfile(dropping);
    const qint64 before = m_partner->stats().requests;
    QVERIFY(work([this, plain, before] {
        if (m_partner->stats().requests > before && m_partner->profile().dropAfterAcceptRate > 0)
            m_partner->setProfile(plain);
    }));

    const auto effects = m_partner->effectsByKey();
    QCOMPARE(effects.value(refused.key), 1);
    QCOMPARE(effects.value(dropped.key), 2);
    QVERIFY(m_once->run({QStringLiteral("partners"), partnerUrl(), QStringLiteral("--honours-key"), QStringLiteral("no")})
                .exitedWith(0));

    const QJsonObject once = history(refused.key);
    QCOMPARE(once.value(QLatin1String("sends")).toInt(), 3);
    QCOMPARE(once.value(QLatin1String("possible_effects")).toInt(), 1);
    QCOMPARE(once.value(QLatin1String("verdict_kind")).toString(), QStringLiteral("delivered"));
    const QString onceVerdict = once.value(QLatin1String("verdict")).toString();
    QVERIFY2(onceVerdict.startsWith(QLatin1String("Delivered once: the partner received 3 calls with the same key "
                                                  "(2 failed, 1 accepted), and only the accepted one took effect")),
             qPrintable(onceVerdict));
    // Said as the customer hears it, at the time of the accepted call in the local zone.
    const QDateTime appliedAt = QDateTime::fromString(once.value(QLatin1String("applied_at")).toString(), Qt::ISODateWithMs)
                                    .toTimeZone(QTimeZone("Asia/Kolkata"));
    QCOMPARE(once.value(QLatin1String("customer_text")).toString(),
             QStringLiteral("We sent this once; our partner confirmed it at %1.")
                 .arg(appliedAt.toString(QStringLiteral("HH:mm"))
                      + (appliedAt.date() == QDateTime::currentDateTime().toTimeZone(QTimeZone("Asia/Kolkata")).date()
                             ? QString()
                             : QLocale(QLocale::English).toString(appliedAt.date(), QStringLiteral(" 'on' d MMMM")))));

    const QJsonObject twice = history(dropped.key);
    QCOMPARE(twice.value(QLatin1String("possible_effects")).toInt(), 2);
    QCOMPARE(twice.value(QLatin1String("verdict_kind")).toString(), QStringLiteral("duplicated"));
    const QString twiceVerdict = twice.value(QLatin1String("verdict")).toString();
    QVERIFY2(twiceVerdict.startsWith(QLatin1String("May have been delivered 2 times: the partner received 2 calls "
                                                   "with the same key (1 unanswered, 1 accepted)")),
             qPrintable(twiceVerdict));
    const QString twiceCustomer = twice.value(QLatin1String("customer_text")).toString();
    QVERIFY2(QRegularExpression(QStringLiteral("^Our partner may have sent this twice, at \\d\\d:\\d\\d(:\\d\\d)? and "
                                               "\\d\\d:\\d\\d(:\\d\\d)?"))
                 .match(twiceCustomer)
                 .hasMatch(),
             qPrintable(twiceCustomer));

    // Support's question: who may have got it twice, today?
    QCOMPARE(eventKeys({QStringLiteral("--state"), QStringLiteral("several-effects")}), QList<QByteArray>{dropped.key});
    QCOMPARE(eventKeys({QStringLiteral("--state"), QStringLiteral("several-effects"), QStringLiteral("--day"),
                        QDateTime::currentDateTime().toTimeZone(QTimeZone("Asia/Kolkata")).date().toString(Qt::ISODate)}),
             QList<QByteArray>{dropped.key});
    QCOMPARE(eventKeys({QStringLiteral("--state"), QStringLiteral("unanswered")}), QList<QByteArray>{dropped.key});
    QCOMPARE(eventKeys({QStringLiteral("--since"), QDateTime::currentDateTimeUtc().addSecs(3600).toString(Qt::ISODate)}),
             QList<QByteArray>{});
    QCOMPARE(eventKeys({QStringLiteral("--until"), QDateTime::currentDateTimeUtc().addSecs(-3600).toString(Qt::ISODate)}),
             QList<QByteArray>{});
    // The most calls first, whatever order they were written in.
    QCOMPARE(eventKeys({QStringLiteral("--most-sends")}), (QList<QByteArray>{refused.key, dropped.key}));
    QCOMPARE(eventKeys({QStringLiteral("--most-sends"), QStringLiteral("--limit"), QStringLiteral("1")}),
             QList<QByteArray>{refused.key});

    const auto bad = m_once->run({QStringLiteral("events"), QStringLiteral("--day"), QStringLiteral("yesterday")});
    QVERIFY2(bad.exitedWith(2) && bad.err.contains("--day needs a date as YYYY-MM-DD"), bad.describe().constData());
}

void VerdictsTest::queuedVerdictSaysItsDueTimeInLocalTime()
{
    const ReminderSpec later = makeReminder(QStringLiteral("later"), 3);
    QVERIFY(enqueue(later, 3600));
    const QJsonObject queued = history(later.key);
    const QString verdict = queued.value(QLatin1String("verdict")).toString();
    // It read "due at 2026-12-06T15:45:05.906Z" where every other time is local.
    const auto due = QRegularExpression(QStringLiteral("due at (\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d) IST \\(in "))
                         .match(verdict);
    QVERIFY2(due.hasMatch(), qPrintable(verdict));
    const QDateTime dueAt = QDateTime::fromString(due.captured(1), QStringLiteral("yyyy-MM-dd HH:mm:ss"));
    const QDateTime expected = QDateTime::currentDateTime().toTimeZone(QTimeZone("Asia/Kolkata")).addSecs(3600);
    QVERIFY2(qAbs(dueAt.secsTo(QDateTime(expected.date(), expected.time()))) < 60, qPrintable(verdict));
    QVERIFY2(queued.value(QLatin1String("customer_text")).toString().startsWith(
                 QLatin1String("This has not been sent yet; it is due to go out at ")),
             qPrintable(queued.value(QLatin1String("customer_text")).toString()));
}

QTEST_GUILESS_MAIN(VerdictsTest)
#include "tst_verdicts.moc"
