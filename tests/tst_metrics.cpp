// The Prometheus metrics: the text exposition from plain numbers (table tests), a real
// `once worker --metrics-listen` scraped while it delivers to the partner simulator, and
// the store-wide exposition that `once serve` serves, read from a real store; promtool
// (Debian's prometheus package) judges both outputs.
//
// Runs on SQLite and on PostgreSQL (STORES in tests/CMakeLists.txt).
#include "deliveryharness.h"
#include "delivery/engine.h"
#include "monitoring/exposition.h"
#include "monitoring/metricsserver.h"
#include "metricstesting.h"
#include "sim/partnersimulator.h"
#include "monitoring/storemetrics.h"
#include "monitoring/workermetrics.h"
#include "store/store.h"
#include "teststores.h"

#include <QFile>
#include <QHttpServer>
#include <QLoggingCategory>
#include <QRegularExpression>
#include <QSet>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <limits>

using namespace once;
using namespace oncetest;

class MetricsTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void exposition_data();
    void exposition();
    void histogramBucketIncludesItsUpperBound_data();
    void histogramBucketIncludesItsUpperBound();
    void listenAddress_data();
    void listenAddress();
    void storeExpositionLeavesOutQueueNumbersABrokerCouldNotCount();
    void storeExpositionShowsLatenessWhenThereIsSome();
    void alertRulesNameOnlyMetricsOnceExposes();

    void workerServesItsOwnCounters();
    void storeWideMetricsReadTheStore();
    void readyzFailsWhenTheSchemaIsNotCurrent();
    void badMetricsListenIsAOneLineError();
    void benchScrapesItsWorkersEverySecond();

private:
    // Enqueues `count` reminders and runs a worker with --metrics-listen until the partner
    // has applied them all; returns the worker (still running) and its metrics port.
    std::pair<QProcess *, quint16> deliverWithMetrics(int count);

    TestStores m_stores;
    QString m_onceBin;
    QString m_storeUrl;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<PartnerSimulator> m_partner;
    std::unique_ptr<OnceRunner> m_once;
};

namespace {
constexpr int Reminders = 40;
} // namespace

void MetricsTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFile::exists(m_onceBin), "ONCE_BIN must name the built once binary (ctest sets it)");
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.partnersim.debug=false"));
}

void MetricsTest::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_storeUrl = m_stores.newUrl();
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_storeUrl);
    PartnerFaults profile;
    profile.failRate = 0.2; // some transient sends beside the applied ones
    m_partner = std::make_unique<PartnerSimulator>(profile);
    QString error;
    QVERIFY2(m_partner->listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    const auto init = m_once->run({QStringLiteral("init")});
    QVERIFY2(init.exitedWith(0), init.describe().constData());
}

void MetricsTest::cleanup()
{
    m_once.reset();
    m_partner.reset();
    m_dir.reset();
}

void MetricsTest::exposition_data()
{
    QTest::addColumn<std::function<void(Exposition &)>>("write");
    QTest::addColumn<QString>("expected");

    QTest::newRow("counter") << std::function<void(Exposition &)>([](Exposition &out) {
        out.counter(QStringLiteral("once_reminders_applied_total"), QStringLiteral("Applied."), 12);
    }) << QStringLiteral("# HELP once_reminders_applied_total Applied.\n"
                         "# TYPE once_reminders_applied_total counter\n"
                         "once_reminders_applied_total 12\n");
    QTest::newRow("gauge in seconds") << std::function<void(Exposition &)>([](Exposition &out) {
        out.gauge(QStringLiteral("once_queue_oldest_ready_age_seconds"), QStringLiteral("Age."), 1.25);
    }) << QStringLiteral("# HELP once_queue_oldest_ready_age_seconds Age.\n"
                         "# TYPE once_queue_oldest_ready_age_seconds gauge\n"
                         "once_queue_oldest_ready_age_seconds 1.25\n");
    QTest::newRow("large count stays an integer") << std::function<void(Exposition &)>([](Exposition &out) {
        out.counter(QStringLiteral("a_total"), QStringLiteral("A."), 123456789012.0);
    }) << QStringLiteral("# HELP a_total A.\n# TYPE a_total counter\na_total 123456789012\n");
    QTest::newRow("shortest decimal") << std::function<void(Exposition &)>([](Exposition &out) {
        out.gauge(QStringLiteral("g"), QStringLiteral("G."), 0.1);
    }) << QStringLiteral("# HELP g G.\n# TYPE g gauge\ng 0.1\n");
    QTest::newRow("special values") << std::function<void(Exposition &)>([](Exposition &out) {
        out.family(QStringLiteral("g"), Exposition::Type::Gauge, QStringLiteral("G."));
        out.sample(QStringLiteral("g"), {{QStringLiteral("v"), QStringLiteral("nan")}},
                   std::numeric_limits<double>::quiet_NaN());
        out.sample(QStringLiteral("g"), {{QStringLiteral("v"), QStringLiteral("inf")}},
                   std::numeric_limits<double>::infinity());
        out.sample(QStringLiteral("g"), {{QStringLiteral("v"), QStringLiteral("-inf")}},
                   -std::numeric_limits<double>::infinity());
    }) << QStringLiteral("# HELP g G.\n# TYPE g gauge\ng{v=\"nan\"} NaN\ng{v=\"inf\"} +Inf\ng{v=\"-inf\"} -Inf\n");
    QTest::newRow("labels escaped") << std::function<void(Exposition &)>([](Exposition &out) {
        out.family(QStringLiteral("once_sends_total"), Exposition::Type::Counter, QStringLiteral("Sends."));
        out.sample(QStringLiteral("once_sends_total"),
                   {{QStringLiteral("outcome"), QStringLiteral("a\"b")},
                    {QStringLiteral("error_class"), QStringLiteral("c\\d\ne")}},
                   3);
    }) << QStringLiteral("# HELP once_sends_total Sends.\n# TYPE once_sends_total counter\n"
                         "once_sends_total{outcome=\"a\\\"b\",error_class=\"c\\\\d\\ne\"} 3\n");
    QTest::newRow("help escaped, quotes kept") << std::function<void(Exposition &)>([](Exposition &out) {
        out.gauge(QStringLiteral("g"), QStringLiteral("One \"line\"\\two\nthree."), 0);
    }) << QStringLiteral("# HELP g One \"line\"\\\\two\\nthree.\n# TYPE g gauge\ng 0\n");
    QTest::newRow("histogram cumulative") << std::function<void(Exposition &)>([](Exposition &out) {
        Histogram histogram = Histogram::withBounds({0.1, 1});
        histogram.observe(0.05);
        histogram.observe(0.5);
        histogram.observe(0.5);
        histogram.observe(7);
        out.histogram(QStringLiteral("once_send_duration_seconds"), QStringLiteral("Durations."), histogram);
    }) << QStringLiteral("# HELP once_send_duration_seconds Durations.\n"
                         "# TYPE once_send_duration_seconds histogram\n"
                         "once_send_duration_seconds_bucket{le=\"0.1\"} 1\n"
                         "once_send_duration_seconds_bucket{le=\"1\"} 3\n"
                         "once_send_duration_seconds_bucket{le=\"+Inf\"} 4\n"
                         "once_send_duration_seconds_sum 8.05\n"
                         "once_send_duration_seconds_count 4\n");
}

void MetricsTest::exposition()
{
    QFETCH(std::function<void(Exposition &)>, write);
    QFETCH(QString, expected);
    Exposition out;
    write(out);
    QCOMPARE(QString::fromUtf8(out.text()), expected);
    const PromtoolVerdict verdict = checkWithPromtool(out.text());
    QVERIFY2(verdict.exitCode == 0 && verdict.output.isEmpty(), verdict.output.constData());
}

void MetricsTest::histogramBucketIncludesItsUpperBound_data()
{
    QTest::addColumn<double>("value");
    QTest::addColumn<int>("bucket");
    QTest::newRow("below the first") << 0.001 << 0;
    QTest::newRow("on the first") << 0.005 << 0;
    QTest::newRow("just above the first") << 0.0051 << 1;
    QTest::newRow("on the last") << 60.0 << 12;
    QTest::newRow("above the last") << 61.0 << 13;
}

void MetricsTest::histogramBucketIncludesItsUpperBound()
{
    QFETCH(double, value);
    QFETCH(int, bucket);
    Histogram histogram = Histogram::withBounds(SendStatistics::durationBoundsSeconds());
    histogram.observe(value);
    QCOMPARE(histogram.counts.indexOf(1), bucket);
    QCOMPARE(histogram.count(), 1);
}

void MetricsTest::listenAddress_data()
{
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("host"); // empty: refused
    QTest::addColumn<int>("port");
    QTest::newRow("ipv4") << QStringLiteral("127.0.0.1:9464") << QStringLiteral("127.0.0.1") << 9464;
    QTest::newRow("any port") << QStringLiteral("127.0.0.1:0") << QStringLiteral("127.0.0.1") << 0;
    QTest::newRow("localhost") << QStringLiteral("localhost:9464") << QStringLiteral("127.0.0.1") << 9464;
    QTest::newRow("ipv6") << QStringLiteral("[::1]:9464") << QStringLiteral("::1") << 9464;
    QTest::newRow("all addresses") << QStringLiteral("0.0.0.0:9464") << QStringLiteral("0.0.0.0") << 9464;
    QTest::newRow("no port") << QStringLiteral("127.0.0.1") << QString() << 0;
    QTest::newRow("no host") << QStringLiteral(":9464") << QString() << 0;
    QTest::newRow("port too large") << QStringLiteral("127.0.0.1:65536") << QString() << 0;
    QTest::newRow("port not a number") << QStringLiteral("127.0.0.1:http") << QString() << 0;
    QTest::newRow("host name") << QStringLiteral("metrics.example:9464") << QString() << 0;
}

void MetricsTest::listenAddress()
{
    QFETCH(QString, text);
    QFETCH(QString, host);
    QFETCH(int, port);
    QString error;
    const auto address = ListenAddress::parse(text, &error);
    if (host.isEmpty()) {
        QVERIFY(!address);
        QVERIFY(!error.isEmpty() && !error.contains(QLatin1Char('\n')));
        return;
    }
    QVERIFY2(address, qPrintable(error));
    QCOMPARE(address->host.toString(), host);
    QCOMPARE(int(address->port), port);
}

void MetricsTest::storeExpositionLeavesOutQueueNumbersABrokerCouldNotCount()
{
    StoreMetrics metrics;
    metrics.stats.queue.ready = 5;
    metrics.stats.queue.oldestReadyAgeMs = 1500;
    metrics.stats.inDoubt = 2;
    const QByteArray counted = storeExposition(metrics);
    QCOMPARE(sampleValue(counted, QStringLiteral("once_queue_messages{state=\"ready\"}")), 5.0);
    QCOMPARE(sampleValue(counted, QStringLiteral("once_queue_oldest_ready_age_seconds")), 1.5);

    metrics.stats.queue.unavailable = QStringLiteral("the management API did not answer");
    const QByteArray uncounted = storeExposition(metrics);
    QVERIFY(!uncounted.contains("once_queue_messages"));
    QVERIFY(!uncounted.contains("once_dead_letters"));
    QCOMPARE(sampleValue(uncounted, QStringLiteral("once_in_doubt")), 2.0);
    const PromtoolVerdict verdict = checkWithPromtool(uncounted);
    QVERIFY2(verdict.exitCode == 0 && verdict.output.isEmpty(), verdict.output.constData());
}

// once-alerts.yml alerts on the p95; an hour without an accepted send has no lateness,
// which must read as no number rather than as none late.
void MetricsTest::storeExpositionShowsLatenessWhenThereIsSome()
{
    StoreMetrics metrics;
    QVERIFY(!storeExposition(metrics).contains("once_lateness"));

    metrics.stats.latenessP50Ms = 1250;
    metrics.stats.latenessP95Ms = 42000;
    const QByteArray text = storeExposition(metrics);
    QCOMPARE(sampleValue(text, QStringLiteral("once_lateness_p50_seconds")), 1.25);
    QCOMPARE(sampleValue(text, QStringLiteral("once_lateness_p95_seconds")), 42.0);
    const PromtoolVerdict verdict = checkWithPromtool(text);
    QVERIFY2(verdict.exitCode == 0 && verdict.output.isEmpty(), verdict.output.constData());
}

// packaging/prometheus/once-alerts.yml alerts on these names: a rule over a renamed or
// removed metric would never fire, and promtool's own tests of the rules feed it series
// by name, so they cannot tell.
void MetricsTest::alertRulesNameOnlyMetricsOnceExposes()
{
    QFile rules(qEnvironmentVariable("ONCE_TEST_ALERT_RULES"));
    QVERIFY2(rules.open(QIODevice::ReadOnly),
             "ONCE_TEST_ALERT_RULES must name once-alerts.yml (ctest sets it)");
    const QString text = QString::fromUtf8(rules.readAll());

    StoreMetrics store;
    store.stats.latenessP50Ms = 1000;
    store.stats.latenessP95Ms = 2000;
    EngineCounters worker;
    PartnerCounters partner;
    partner.name = QStringLiteral("mail");
    worker.partners.append(partner);
    QSet<QString> exposed;
    const QByteArray expositions[] = {storeExposition(store), workerExposition(worker)};
    for (const QByteArray &exposition : expositions) {
        for (const QByteArray &line : exposition.split('\n')) {
            if (line.startsWith("# TYPE "))
                exposed.insert(QString::fromUtf8(line.split(' ').value(2)));
        }
    }
    QSet<QString> named;
    static const QRegularExpression metric(QStringLiteral("\\bonce_[a-z0-9_]+"));
    for (auto it = metric.globalMatch(text); it.hasNext();)
        named.insert(it.next().captured());
    QVERIFY(named.size() >= 10);
    for (const QString &name : std::as_const(named))
        QVERIFY2(exposed.contains(name),
                 qPrintable(name + QStringLiteral(" is in once-alerts.yml but once exposes no such metric")));
}

std::pair<QProcess *, quint16> MetricsTest::deliverWithMetrics(int count)
{
    if (m_once->enqueueReminders(m_dir->path(), count, QStringLiteral("metrics")).size() != count)
        return {};
    QProcess *worker = m_once->start(
        {QStringLiteral("worker"), QStringLiteral("--partner"),
         QStringLiteral("http://127.0.0.1:%1/reminders").arg(m_partner->port()), QStringLiteral("--worker-id"),
         QStringLiteral("scraped"), QStringLiteral("--backoff-base-ms"), QStringLiteral("20"),
         QStringLiteral("--max-attempts"), QStringLiteral("50"), QStringLiteral("--metrics-listen"),
         QStringLiteral("127.0.0.1:0")});
    // The worker says where it listens (port 0: the kernel's pick) before it delivers.
    QByteArray said;
    const quint16 port = workerMetricsPort(worker, WorkerTimeoutMs, &said);
    if (!port) {
        qWarning("the worker never said where its metrics are: %s", said.constData());
        return {};
    }
    if (!pumpUntil([&] { return m_partner->stats().effects == count; }, WorkerTimeoutMs)) {
        qWarning("the partner applied %lld of %d", m_partner->stats().effects, count);
        return {};
    }
    return {worker, port};
}

void MetricsTest::workerServesItsOwnCounters()
{
    const auto [worker, port] = deliverWithMetrics(Reminders);
    QVERIFY(worker);
    QByteArray metrics;
    // The counters are the engine's own: the last outcome may be on its way to them.
    const bool allCounted = pumpUntil(
        [&] {
            metrics = fetchHttp(port, "/metrics").body;
            return sampleValue(metrics, QStringLiteral("once_reminders_applied_total")) == double(Reminders);
        },
        WorkerTimeoutMs);
    QVERIFY2(allCounted, metrics.constData());
    QCOMPARE(sampleValue(metrics, QStringLiteral("once_sends_total{outcome=\"applied\",error_class=\"\"}")),
             double(Reminders));
    const double transient =
        sampleValue(metrics, QStringLiteral("once_sends_total{outcome=\"transient\",error_class=\"http-5xx\"}"))
            .value_or(0);
    // Every request the partner saw was one send, and one observation of its duration.
    QCOMPARE(qint64(Reminders + transient), m_partner->stats().requests);
    QCOMPARE(sampleValue(metrics, QStringLiteral("once_send_duration_seconds_count")), Reminders + transient);
    QCOMPARE(sampleValue(metrics, QStringLiteral("once_send_duration_seconds_bucket{le=\"+Inf\"}")),
             Reminders + transient);
    QCOMPARE(sampleValue(metrics, QStringLiteral("once_breaker_open")), 0.0);
    QVERIFY2(!metrics.contains("once_queue_messages"), "a worker's metrics ask the store nothing");

    const PromtoolVerdict verdict = checkWithPromtool(metrics);
    QVERIFY2(verdict.exitCode == 0 && verdict.output.isEmpty(), verdict.output.constData());
    const HttpAnswer health = fetchHttp(port, "/healthz");
    QCOMPARE(health.status, 200);
    QCOMPARE(health.body, QByteArray("ok\n"));

    worker->terminate();
    const auto stopped = m_once->waitFor(worker, WorkerTimeoutMs);
    QVERIFY2(stopped.exitedWith(0), stopped.describe().constData());
}

void MetricsTest::storeWideMetricsReadTheStore()
{
    const auto [worker, port] = deliverWithMetrics(Reminders);
    QVERIFY(worker);
    Q_UNUSED(port);
    QString error;
    const auto store = Store::open(m_storeUrl, &error, Database::Access::ReadOnly);
    QVERIFY2(store, qPrintable(error));
    std::optional<StoreMetrics> metrics;
    // Outcomes reach the store a turn after the partner applied them.
    QVERIFY(pumpUntil(
        [&] {
            metrics = StoreMetrics::read(*store, std::nullopt, &error);
            return metrics && metrics->stats.acked == Reminders && metrics->stats.queue.ready == 0
                   && metrics->stats.queue.inFlight == 0;
        },
        WorkerTimeoutMs));
    const QByteArray text = storeExposition(*metrics);
    QCOMPARE(sampleValue(text, QStringLiteral("once_reminders_applied_total")), double(Reminders));
    QCOMPARE(sampleValue(text, QStringLiteral("once_sends_total{outcome=\"applied\",error_class=\"\"}")),
             double(Reminders));
    const double transient =
        sampleValue(text, QStringLiteral("once_sends_total{outcome=\"transient\",error_class=\"http-5xx\"}")).value_or(0);
    QCOMPARE(qint64(Reminders + transient), m_partner->stats().requests);
    QCOMPARE(sampleValue(text, QStringLiteral("once_send_duration_seconds_count")), Reminders + transient);
    QCOMPARE(sampleValue(text, QStringLiteral("once_queue_messages{state=\"ready\"}")), 0.0);
    QCOMPARE(sampleValue(text, QStringLiteral("once_dead_letters")), 0.0);
    QCOMPARE(sampleValue(text, QStringLiteral("once_in_doubt")), 0.0);
    QCOMPARE(sampleValue(text, QStringLiteral("once_workers{status=\"running\"}")), 1.0);
    QCOMPARE(sampleValue(text, QStringLiteral("once_workers{status=\"gone\"}")), 0.0);
    QCOMPARE(sampleValue(text, QStringLiteral("once_breaker_open")), 0.0);
    const PromtoolVerdict verdict = checkWithPromtool(text);
    QVERIFY2(verdict.exitCode == 0 && verdict.output.isEmpty(), verdict.output.constData());
    QCOMPARE(storeUnreadiness(*store), QString());
}

void MetricsTest::readyzFailsWhenTheSchemaIsNotCurrent()
{
    QString error;
    const auto store = Store::open(m_storeUrl, &error);
    QVERIFY2(store, qPrintable(error));
    MetricsServer server(
        [&store] {
            QString readError;
            const auto metrics = StoreMetrics::read(*store, std::nullopt, &readError);
            return metrics ? storeExposition(*metrics) : readError.toUtf8();
        },
        [&store] { return storeUnreadiness(*store); });
    QVERIFY2(server.listen({QHostAddress(QHostAddress::LocalHost), 0}, &error), qPrintable(error));
    const HttpAnswer ready = fetchHttp(server.port(), "/readyz");
    QCOMPARE(ready.status, 200);
    QCOMPARE(ready.body, QByteArray("ready\n"));
    QVERIFY(fetchHttp(server.port(), "/metrics").body.contains("once_reminders_applied_total 0"));

    QVERIFY(store->database().exec(QStringLiteral("UPDATE schema_version SET version = version + 1"), &error));
    const HttpAnswer notReady = fetchHttp(server.port(), "/readyz");
    QCOMPARE(notReady.status, 503);
    QVERIFY2(notReady.body.contains("schema is version"), notReady.body.constData());
}

void MetricsTest::badMetricsListenIsAOneLineError()
{
    const QString partner = QStringLiteral("http://127.0.0.1:%1/reminders").arg(m_partner->port());
    const auto badSyntax = m_once->run(
        {QStringLiteral("worker"), QStringLiteral("--partner"), partner, QStringLiteral("--metrics-listen"),
         QStringLiteral("localhost")});
    QVERIFY2(badSyntax.exitedWith(2), badSyntax.describe().constData());
    QCOMPARE(badSyntax.err.trimmed().count('\n'), 0);
    QVERIFY2(badSyntax.err.contains("--metrics-listen"), badSyntax.err.constData());

    QTcpServer taken;
    QVERIFY(taken.listen(QHostAddress::LocalHost, 0));
    const auto inUse = m_once->run({QStringLiteral("worker"), QStringLiteral("--partner"), partner,
                                    QStringLiteral("--metrics-listen"),
                                    QStringLiteral("127.0.0.1:%1").arg(taken.serverPort())});
    QVERIFY2(inUse.exitedWith(1), inUse.describe().constData());
    QCOMPARE(inUse.err.trimmed().count('\n'), 0);
    QVERIFY2(inUse.err.contains("cannot listen on 127.0.0.1 port"), inUse.err.constData());
}

void MetricsTest::benchScrapesItsWorkersEverySecond()
{
    const auto bench = m_once->run({QStringLiteral("bench"), QStringLiteral("--rate"), QStringLiteral("50"),
                                    QStringLiteral("--duration"), QStringLiteral("3"), QStringLiteral("--workers"),
                                    QStringLiteral("2"), QStringLiteral("--scrape-metrics"), QStringLiteral("--store"),
                                    QStringLiteral("sqlite:") + m_dir->filePath(QStringLiteral("bench.sqlite"))},
                                   {}, 120000);
    QVERIFY2(bench.exitedWith(0), bench.describe().constData());
    static const QRegularExpression scrapes(QStringLiteral("metrics scrapes +(\\d+), every second per worker \\(0 failed\\)"));
    const auto match = scrapes.match(QString::fromUtf8(bench.out));
    QVERIFY2(match.hasMatch(), bench.out.constData());
    QVERIFY2(match.captured(1).toInt() >= 4, bench.out.constData()); // two workers, at least two seconds
}

QTEST_GUILESS_MAIN(MetricsTest)
#include "tst_metrics.moc"
