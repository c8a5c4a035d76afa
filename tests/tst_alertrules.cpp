// The alert rules as the console, `once alerts`, `once watch` and the store's metrics
// evaluate them: facts per partner, thresholds from the store (set and audited through
// `once alerts set`), and what is almost a threshold refused with one line.
#include "deliveryharness.h"
#include "teststores.h"

#include "alerting/alertsettings.h"
#include "alerting/alerttext.h"
#include "monitoring/storemetrics.h"
#include "store/store.h"
#include "text/jsonvalues.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

using namespace once;
using namespace oncetest;

namespace {

constexpr qint64 Now = 1'800'000'000'000;
constexpr qint64 Minute = 60'000;

QJsonObject partnerSpell(const QString &name, const QString &breaker, int inARow, qint64 failingForMs,
                         const QString &errorClass = QStringLiteral("http-5xx"), bool paused = false)
{
    return QJsonObject{{QStringLiteral("name"), name},
                       {QStringLiteral("breaker"), breaker},
                       {QStringLiteral("consecutive_failures"), inARow},
                       {QStringLiteral("failing_since"), timeOrNull(inARow ? Now - failingForMs : 0)},
                       {QStringLiteral("last_failure_at"), timeOrNull(inARow ? Now - 500 : 0)},
                       {QStringLiteral("last_error_class"), inARow ? QJsonValue(errorClass) : QJsonValue()},
                       {QStringLiteral("last_http_status"), inARow ? QJsonValue(503) : QJsonValue()},
                       {QStringLiteral("paused"), paused}};
}

WorkerRecord runningWorker(const QString &id, const QJsonArray &partners)
{
    WorkerRecord worker;
    worker.id = id;
    worker.state = QStringLiteral("running");
    worker.heartbeatAtMs = Now - 1000;
    worker.partners = partners;
    return worker;
}

DeliveryStats quietStats()
{
    DeliveryStats stats;
    stats.appliedLast5Min = 10;
    stats.sendsLast5Min = 10;
    return stats;
}

QStringList keysOf(const QList<Alert> &alerts)
{
    QStringList keys;
    for (const Alert &alert : alerts)
        keys << alert.key() + QLatin1Char(':') + alertSeverityName(alert.severity);
    return keys;
}

} // namespace

class AlertRulesTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void aPartnerFailingIsAlertedAloneAndByItsOwnThreshold();
    void aPausedPartnerIsNotCalledDown();
    void queueRulesFireAboveTheirThresholdsOnly();
    void noWorkerCountsFromTheLastHeartbeat();
    void theStoreFailingWaitsForItsThreshold();
    void thresholdsAreReadAsTyped_data();
    void thresholdsAreReadAsTyped();
    void onceAlertsSetsListsAndAuditsTheStoresThresholds();
    void onceAlertsRefusesWhatIsAlmostRight_data();
    void onceAlertsRefusesWhatIsAlmostRight();
    void theStoresMetricsCarryTheSameAlerts();

private:
    TestStores m_stores;
    QString m_onceBin;
    std::unique_ptr<OnceRunner> m_once;
    QTemporaryDir m_dir;
};

void AlertRulesTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFile::exists(m_onceBin), "ONCE_BIN must name the built once binary (ctest sets it)");
}

void AlertRulesTest::init()
{
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_stores.newUrl());
    const auto init = m_once->run({QStringLiteral("init")});
    QVERIFY2(init.exitedWith(0), init.describe().constData());
}

void AlertRulesTest::cleanup()
{
    m_once.reset();
}

// Two partners on one worker, one failing: its alert names it, the other has none; a
// partner's own threshold makes its spell an outage sooner than the store's.
void AlertRulesTest::aPartnerFailingIsAlertedAloneAndByItsOwnThreshold()
{
    AlertInputs inputs;
    inputs.stats = quietStats();
    inputs.workers << runningWorker(QStringLiteral("w-1"),
                                    {partnerSpell(QStringLiteral("texts"), QStringLiteral("open"), 6, 20'000),
                                     partnerSpell(QStringLiteral("mail"), QStringLiteral("closed"), 0, 0)});
    inputs.workers << runningWorker(QStringLiteral("w-2"),
                                    {partnerSpell(QStringLiteral("texts"), QStringLiteral("open"), 4, 30'000)});
    AlertThresholds thresholds;
    QList<Alert> alerts = evaluateAlerts(inputs, thresholds, Now);
    QCOMPARE(keysOf(alerts), QStringList{QStringLiteral("partner-down/texts:warning")});
    const Alert &failing = alerts.constFirst();
    QCOMPARE(failing.failingWorkers, 2);
    QCOMPARE(failing.holdingWorkers, 2);
    QCOMPARE(failing.failedInARow, 10);
    QCOMPARE(failing.sinceMs, Now - 30'000); // the earliest spell
    QCOMPARE(failing.value, qint64(30'000));
    QVERIFY2(alertText(failing, Now).startsWith(QStringLiteral("Partner texts failing for 30 s (10 failed sends in a row, "
                                                               "last http-5xx): the circuit breaker is open")),
             qPrintable(alertText(failing, Now)));

    thresholds.rows.append({AlertRule::PartnerDown, QStringLiteral("texts"), 20'000, QStringLiteral("ops"), Now});
    thresholds.rows.append({AlertRule::PartnerDown, QString(), 10 * Minute, QStringLiteral("ops"), Now});
    alerts = evaluateAlerts(inputs, thresholds, Now);
    QCOMPARE(keysOf(alerts), QStringList{QStringLiteral("partner-down/texts:critical")});
    QVERIFY2(alertText(alerts.constFirst(), Now)
                 .startsWith(QStringLiteral("Partner texts down for 30 s (10 failed sends in a row, last http-5xx): 2 "
                                            "workers are holding back and retry by themselves; do not redrive yet.")),
             qPrintable(alertText(alerts.constFirst(), Now)));
    QCOMPARE(alertTitle(alerts.constFirst()), QStringLiteral("Partner texts down"));

    // A refused credential is critical at once, whatever the threshold.
    inputs.workers = {runningWorker(QStringLiteral("w-1"),
                                    {partnerSpell(QStringLiteral("mail"), QStringLiteral("open"), 3, 2000,
                                                  QStringLiteral("credentials-refused"))})};
    alerts = evaluateAlerts(inputs, AlertThresholds{}, Now);
    QCOMPARE(keysOf(alerts), QStringList{QStringLiteral("partner-down/mail:critical")});
    QVERIFY(alertText(alerts.constFirst(), Now).startsWith(QStringLiteral("Partner mail refuses our credentials")));
}

void AlertRulesTest::aPausedPartnerIsNotCalledDown()
{
    AlertInputs inputs;
    inputs.stats = quietStats();
    inputs.workers << runningWorker(QStringLiteral("w-1"), {partnerSpell(QStringLiteral("texts"), QStringLiteral("open"),
                                                                         9, 10 * Minute, QStringLiteral("http-5xx"), true)});
    QVERIFY(evaluateAlerts(inputs, AlertThresholds{}, Now).isEmpty());
    // A worker that is gone tells nothing of its partner now.
    inputs.workers = {runningWorker(QStringLiteral("w-1"),
                                    {partnerSpell(QStringLiteral("texts"), QStringLiteral("open"), 9, 10 * Minute)})};
    inputs.workers.first().heartbeatAtMs = Now - 20'000;
    QVERIFY(keysOf(evaluateAlerts(inputs, AlertThresholds{}, Now)).filter(QStringLiteral("partner")).isEmpty());
}

void AlertRulesTest::queueRulesFireAboveTheirThresholdsOnly()
{
    AlertInputs inputs;
    inputs.workers << runningWorker(QStringLiteral("w-1"), {});
    DeliveryStats stats = quietStats();
    stats.queue.ready = 40;
    stats.queue.oldestReadyAgeMs = 5 * Minute;     // the default limit, not above it
    stats.latenessP95Ms = 10 * Minute;             // likewise
    stats.inDoubt = 2;
    stats.oldestInDoubtSinceMs = Now - 9 * Minute; // under ten minutes
    stats.deadLetteredLast15Min = 4;               // under five
    inputs.stats = stats;
    QVERIFY2(evaluateAlerts(inputs, AlertThresholds{}, Now).isEmpty(),
             qPrintable(keysOf(evaluateAlerts(inputs, AlertThresholds{}, Now)).join(QLatin1Char(' '))));

    stats.queue.oldestReadyAgeMs = 5 * Minute + 1;
    stats.latenessP95Ms = 10 * Minute + 1;
    stats.oldestInDoubtSinceMs = Now - 10 * Minute;
    stats.deadLetteredLast15Min = 5;
    inputs.stats = stats;
    const QList<Alert> alerts = evaluateAlerts(inputs, AlertThresholds{}, Now);
    QCOMPARE(keysOf(alerts), (QStringList{QStringLiteral("oldest-ready:critical"), QStringLiteral("lateness-p95:warning"),
                                          QStringLiteral("in-doubt:warning"), QStringLiteral("dead-letters:warning")}));
    QCOMPARE(alerts.at(0).cause, Alert::Cause::NotKeepingUp);
    QVERIFY2(alertText(alerts.at(2), Now).startsWith(QStringLiteral("2 events in doubt need an operator: the oldest has "
                                                                      "waited 10 min")),
             qPrintable(alertText(alerts.at(2), Now)));
    QVERIFY2(alertText(alerts.at(3), Now).startsWith(QStringLiteral("5 reminders dead-lettered in the last 15 minutes")),
             qPrintable(alertText(alerts.at(3), Now)));
}

void AlertRulesTest::noWorkerCountsFromTheLastHeartbeat()
{
    AlertInputs inputs;
    DeliveryStats stats = quietStats();
    stats.queue.ready = 3;
    stats.queue.oldestReadyAgeMs = 10'000;
    inputs.stats = stats;
    // None ever ran: counted from the oldest waiting message, 10 s, under 15 s.
    QVERIFY(evaluateAlerts(inputs, AlertThresholds{}, Now).isEmpty());
    stats.queue.oldestReadyAgeMs = 16'000;
    inputs.stats = stats;
    QCOMPARE(keysOf(evaluateAlerts(inputs, AlertThresholds{}, Now)), QStringList{QStringLiteral("no-worker:critical")});

    // One ran and was killed 20 s ago: gone, and nothing delivers.
    WorkerRecord killed = runningWorker(QStringLiteral("w-killed"), {});
    killed.heartbeatAtMs = Now - 20'000;
    inputs.workers = {killed};
    const QList<Alert> alerts = evaluateAlerts(inputs, AlertThresholds{}, Now);
    QCOMPARE(keysOf(alerts), QStringList{QStringLiteral("no-worker:critical")});
    QCOMPARE(alertText(alerts.constFirst(), Now),
             QStringLiteral("No worker is running: 3 messages wait. The last one (w-killed) stopped sending heartbeats "
                            "20 s ago. Start one (once worker, or the console's Worker page)."));
    // Nothing waits: nothing to alert on.
    stats.queue.ready = 0;
    stats.queue.oldestReadyAgeMs.reset();
    inputs.stats = stats;
    QVERIFY(evaluateAlerts(inputs, AlertThresholds{}, Now).isEmpty());
}

void AlertRulesTest::theStoreFailingWaitsForItsThreshold()
{
    AlertInputs inputs;
    inputs.storeError = QStringLiteral("could not connect to server");
    inputs.storeFailingSinceMs = Now - 29'000;
    QVERIFY(evaluateAlerts(inputs, AlertThresholds{}, Now).isEmpty());
    inputs.storeFailingSinceMs = Now - 30'000;
    const QList<Alert> alerts = evaluateAlerts(inputs, AlertThresholds{}, Now);
    QCOMPARE(keysOf(alerts), QStringList{QStringLiteral("store-failing:critical")});
    QCOMPARE(alerts.constFirst().toJson().value(QStringLiteral("store_error")).toString(), inputs.storeError);
}

void AlertRulesTest::thresholdsAreReadAsTyped_data()
{
    QTest::addColumn<QByteArray>("rule");
    QTest::addColumn<QByteArray>("typed");
    QTest::addColumn<qint64>("expected"); // -1: refused
    QTest::newRow("seconds bare") << QByteArray("oldest-ready") << QByteArray("300") << qint64(300'000);
    QTest::newRow("seconds") << QByteArray("oldest-ready") << QByteArray("90s") << qint64(90'000);
    QTest::newRow("minutes, spaces around") << QByteArray("partner-down") << QByteArray(" 5m ") << qint64(5 * Minute);
    QTest::newRow("hours") << QByteArray("in-doubt") << QByteArray("2h") << qint64(120 * Minute);
    QTest::newRow("a week") << QByteArray("lateness-p95") << QByteArray("7d") << qint64(7 * 24 * 60 * Minute);
    QTest::newRow("zero: at once") << QByteArray("in-doubt") << QByteArray("0") << qint64(0);
    QTest::newRow("over a week") << QByteArray("lateness-p95") << QByteArray("8d") << qint64(-1);
    QTest::newRow("unknown unit") << QByteArray("oldest-ready") << QByteArray("5x") << qint64(-1);
    QTest::newRow("negative") << QByteArray("oldest-ready") << QByteArray("-5s") << qint64(-1);
    QTest::newRow("a fraction") << QByteArray("oldest-ready") << QByteArray("1.5m") << qint64(-1);
    QTest::newRow("empty") << QByteArray("oldest-ready") << QByteArray("") << qint64(-1);
    QTest::newRow("reminders never zero") << QByteArray("remind-every") << QByteArray("0m") << qint64(-1);
    QTest::newRow("a count") << QByteArray("dead-letters") << QByteArray("12") << qint64(12);
    QTest::newRow("a count with a unit") << QByteArray("dead-letters") << QByteArray("12s") << qint64(-1);
    QTest::newRow("a count of zero") << QByteArray("partner-failing-sends") << QByteArray("0") << qint64(-1);
}

void AlertRulesTest::thresholdsAreReadAsTyped()
{
    QFETCH(QByteArray, rule);
    QFETCH(QByteArray, typed);
    QFETCH(qint64, expected);
    const auto named = alertRuleNamed(QString::fromUtf8(rule));
    QVERIFY(named);
    QString error;
    const auto value = parseAlertThreshold(*named, QString::fromUtf8(typed), &error);
    if (expected < 0) {
        QVERIFY(!value);
        QVERIFY2(error.startsWith(QString::fromUtf8(rule) + QStringLiteral(" takes ")) && !error.contains(QLatin1Char('\n')), qPrintable(error));
        return;
    }
    QVERIFY2(value, qPrintable(error));
    QCOMPARE(*value, expected);
    // Read back as it is written.
    QCOMPARE(parseAlertThreshold(*named, formatAlertThreshold(*named, *value), &error), value);
}

void AlertRulesTest::onceAlertsSetsListsAndAuditsTheStoresThresholds()
{
    auto set = m_once->run({QStringLiteral("alerts"), QStringLiteral("set"), QStringLiteral("oldest-ready"), QStringLiteral("0s")});
    QVERIFY2(set.exitedWith(0), set.describe().constData());
    set = m_once->run({QStringLiteral("alerts"), QStringLiteral("set"), QStringLiteral("partner-down"), QStringLiteral("20s"),
                       QStringLiteral("--partner"), QStringLiteral("texts")});
    QVERIFY2(set.exitedWith(0), set.describe().constData());
    QVERIFY2(set.out.contains("partner-down for texts set to 20s"), set.out.constData());

    // A message waits with no worker: oldest-ready at 0 fires by the store's threshold.
    QVERIFY(!m_once->enqueueReminders(m_dir.path(), 1, QStringLiteral("waiting")).isEmpty());
    QTest::qWait(20);
    const auto listed = m_once->run({QStringLiteral("alerts"), QStringLiteral("--json")});
    QVERIFY2(listed.exitedWith(0), listed.describe().constData());
    const QJsonObject json = QJsonDocument::fromJson(listed.out).object();
    QJsonObject oldest;
    QJsonObject down;
    for (const QJsonValue &rule : json.value(QStringLiteral("rules")).toArray()) {
        if (rule[QStringLiteral("rule")] == QStringLiteral("oldest-ready"))
            oldest = rule.toObject();
        if (rule[QStringLiteral("rule")] == QStringLiteral("partner-down"))
            down = rule.toObject();
    }
    QCOMPARE(oldest.value(QStringLiteral("value")).toInteger(), 0);
    QVERIFY(!oldest.value(QStringLiteral("set_by")).toString().isEmpty());
    QCOMPARE(down.value(QStringLiteral("value")).toInteger(), 60'000); // the store's stays the default
    QCOMPARE(down.value(QStringLiteral("partners")).toArray().at(0)[QStringLiteral("value")].toInteger(), 20'000);
    const QJsonArray firing = json.value(QStringLiteral("firing")).toArray();
    QStringList rules;
    for (const QJsonValue &alert : firing)
        rules << alert[QStringLiteral("rule")].toString();
    QVERIFY2(rules.contains(QStringLiteral("oldest-ready")), listed.out.constData());

    // Unset puts the default back; both changes are in the audit log.
    const auto unset = m_once->run({QStringLiteral("alerts"), QStringLiteral("unset"), QStringLiteral("oldest-ready")});
    QVERIFY2(unset.exitedWith(0), unset.describe().constData());
    QString error;
    auto store = Store::open(m_once->storeUrl(), &error);
    QVERIFY2(store, qPrintable(error));
    const auto thresholds = readAlertThresholds(store->database(), &error);
    QVERIFY2(thresholds, qPrintable(error));
    QCOMPARE(thresholds->value(AlertRule::OldestReady), 5 * Minute);
    QCOMPARE(thresholds->value(AlertRule::PartnerDown, QStringLiteral("texts")), qint64(20'000));
    QCOMPARE(thresholds->value(AlertRule::PartnerDown, QStringLiteral("mail")), Minute);
    const auto audit = store->inspector().auditLog(10, &error);
    QVERIFY2(audit, qPrintable(error));
    QStringList details;
    for (const AuditEntry &entry : *audit)
        if (entry.action == QLatin1String("alert-threshold"))
            details << entry.detail;
    QCOMPARE(details, (QStringList{QStringLiteral("oldest-ready back to its default (5m)"),
                                   QStringLiteral("partner-down for texts set to 20s"),
                                   QStringLiteral("oldest-ready set to 0s")}));
}

void AlertRulesTest::onceAlertsRefusesWhatIsAlmostRight_data()
{
    QTest::addColumn<QByteArray>("arguments"); // split at spaces
    QTest::addColumn<QByteArray>("said");
    QTest::newRow("unknown rule") << QByteArray("set partner-dwn 5m") << QByteArray("no alert rule \"partner-dwn\"");
    QTest::newRow("bad duration") << QByteArray("set oldest-ready 5minutes") << QByteArray("oldest-ready takes a duration");
    QTest::newRow("no value") << QByteArray("set oldest-ready") << QByteArray("usage: once alerts set RULE VALUE");
    QTest::newRow("extra value") << QByteArray("unset oldest-ready 5m") << QByteArray("usage: once alerts unset RULE");
    QTest::newRow("per partner where it is not") << QByteArray("set no-worker 1m --partner texts")
                                                 << QByteArray("no-worker is set for the whole store");
    QTest::newRow("partner without set") << QByteArray("--partner texts") << QByteArray("--partner goes with set or unset");
    QTest::newRow("unknown verb") << QByteArray("sett oldest-ready 5m") << QByteArray("\"sett\" is not set or unset");
}

void AlertRulesTest::onceAlertsRefusesWhatIsAlmostRight()
{
    QFETCH(QByteArray, arguments);
    QFETCH(QByteArray, said);
    QStringList args{QStringLiteral("alerts")};
    for (const QByteArray &argument : arguments.split(' '))
        args << QString::fromUtf8(argument);
    const auto result = m_once->run(args);
    QVERIFY2(result.exitedWith(2), result.describe().constData());
    QVERIFY2(result.err.contains(said), result.err.constData());
    QCOMPARE(result.err.count('\n'), 1);
    // Nothing was written.
    QString error;
    auto store = Store::open(m_once->storeUrl(), &error);
    QVERIFY2(store, qPrintable(error));
    QVERIFY(readAlertThresholds(store->database(), &error)->rows.isEmpty());
}

// /metrics on a store says what the banner says: once_alerts_firing by rule and partner.
void AlertRulesTest::theStoresMetricsCarryTheSameAlerts()
{
    const auto set = m_once->run({QStringLiteral("alerts"), QStringLiteral("set"), QStringLiteral("oldest-ready"), QStringLiteral("0s")});
    QVERIFY2(set.exitedWith(0), set.describe().constData());
    QVERIFY(!m_once->enqueueReminders(m_dir.path(), 1, QStringLiteral("waiting")).isEmpty());
    QTest::qWait(20);
    QString error;
    auto store = Store::open(m_once->storeUrl(), &error);
    QVERIFY2(store, qPrintable(error));
    const auto metrics = StoreMetrics::read(*store, std::nullopt, &error);
    QVERIFY2(metrics, qPrintable(error));
    const QByteArray text = storeExposition(*metrics);
    QVERIFY2(text.contains("once_alerts_firing{rule=\"oldest-ready\",partner=\"\",severity=\"critical\"} 1"),
             text.constData());
    QVERIFY2(!text.contains("once_alerts_firing{rule=\"no-worker\""), text.constData());
}

QTEST_GUILESS_MAIN(AlertRulesTest)
#include "tst_alertrules.moc"
