// A real Prometheus (Debian's prometheus package) scrapes a real `once worker
// --metrics-listen` every second while it delivers to the partner simulator, and the
// number it stores is the number the partner received. Prometheus runs on a free
// loopback port with its configuration and its data in a temporary folder.
#include "deliveryharness.h"
#include "metricstesting.h"
#include "sim/partnersimulator.h"
#include "teststores.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLoggingCategory>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QTemporaryDir>
#include <QTest>
#include <QUrlQuery>

using namespace once;
using namespace oncetest;

namespace {

// A process Prometheus scrapes: job is its job label.
struct ScrapeTarget
{
    QString job;
    quint16 port = 0;
};

// One Prometheus server for a test, scraping its targets every second.
class PrometheusServer final
{
    Q_DISABLE_COPY_MOVE(PrometheusServer)

public:
    explicit PrometheusServer(const QString &dir) : m_dir(dir) {}
    ~PrometheusServer()
    {
        m_process.kill();
        m_process.waitForFinished(10000);
    }

    bool start(const QList<ScrapeTarget> &targets, QString *error)
    {
        QString config = QStringLiteral("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                                        "  evaluation_interval: 1s\nscrape_configs:\n");
        for (const ScrapeTarget &target : targets)
            config += QStringLiteral("  - job_name: %1\n    static_configs:\n      - targets: ['127.0.0.1:%2']\n")
                          .arg(target.job)
                          .arg(target.port);
        QFile file(m_dir + QStringLiteral("/prometheus.yml"));
        if (!file.open(QIODevice::WriteOnly) || file.write(config.toUtf8()) < 0) {
            *error = QStringLiteral("cannot write %1").arg(file.fileName());
            return false;
        }
        file.close();
        m_port = freeLoopbackPort();
        m_process.setProcessChannelMode(QProcess::MergedChannels);
        m_process.setStandardOutputFile(m_dir + QStringLiteral("/prometheus.log"));
        m_process.start(QStringLiteral("prometheus"),
                        {QStringLiteral("--config.file=") + file.fileName(),
                         QStringLiteral("--storage.tsdb.path=") + m_dir + QStringLiteral("/data"),
                         QStringLiteral("--web.listen-address=127.0.0.1:%1").arg(m_port),
                         QStringLiteral("--log.level=warn")});
        if (!m_process.waitForStarted(10000)) {
            *error = QStringLiteral("prometheus did not start: ") + m_process.errorString();
            return false;
        }
        const bool ready = pumpUntil(
            [&] { return get(QStringLiteral("/-/ready")).has_value() || m_process.state() == QProcess::NotRunning; },
            30000);
        if (!ready || m_process.state() == QProcess::NotRunning) {
            *error = QStringLiteral("prometheus never became ready: ") + log();
            return false;
        }
        return true;
    }

    // The value of an instant query that yields one sample, if it does.
    std::optional<double> query(const QString &expression)
    {
        QUrlQuery parameters;
        parameters.addQueryItem(QStringLiteral("query"), expression);
        const auto body = get(QStringLiteral("/api/v1/query?") + parameters.toString(QUrl::FullyEncoded));
        if (!body)
            return std::nullopt;
        const QJsonArray result =
            QJsonDocument::fromJson(*body).object().value(QStringLiteral("data")).toObject().value(QStringLiteral("result")).toArray();
        if (result.size() != 1)
            return std::nullopt;
        bool ok = false;
        const double value =
            result.first().toObject().value(QStringLiteral("value")).toArray().at(1).toString().toDouble(&ok);
        return ok ? std::optional<double>(value) : std::nullopt;
    }

    QString log() const
    {
        QFile file(m_dir + QStringLiteral("/prometheus.log"));
        return file.open(QIODevice::ReadOnly) ? QString::fromUtf8(file.readAll().right(2000)) : QString();
    }

private:
    std::optional<QByteArray> get(const QString &pathAndQuery)
    {
        QNetworkRequest request(QUrl(QStringLiteral("http://127.0.0.1:%1").arg(m_port) + pathAndQuery));
        request.setTransferTimeout(5000);
        std::unique_ptr<QNetworkReply> reply(m_network.get(request));
        pumpUntil([&] { return reply->isFinished(); }, 10000);
        if (!reply->isFinished() || reply->error() != QNetworkReply::NoError)
            return std::nullopt;
        return reply->readAll();
    }

    QString m_dir;
    quint16 m_port = 0;
    QProcess m_process;
    QNetworkAccessManager m_network;
};

constexpr int Reminders = 30;

} // namespace

class PrometheusTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void prometheusReadsBackWhatTheWorkerDelivered();

private:
    TestStores m_stores;
    QString m_onceBin;
};

void PrometheusTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFile::exists(m_onceBin), "ONCE_BIN must name the built once binary (ctest sets it)");
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.partnersim.debug=false"));
}

void PrometheusTest::prometheusReadsBackWhatTheWorkerDelivered()
{
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    OnceRunner once(m_onceBin, m_stores.newUrl());
    QVERIFY(once.run({QStringLiteral("init")}).exitedWith(0));
    PartnerSimulator partner;
    QString error;
    QVERIFY2(partner.listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    QCOMPARE(once.enqueueReminders(dir.path(), Reminders, QStringLiteral("scraped")).size(), Reminders);

    const quint16 workerPort = freeLoopbackPort();
    QProcess *worker = once.start({QStringLiteral("worker"), QStringLiteral("--partner"),
                                   QStringLiteral("http://127.0.0.1:%1/reminders").arg(partner.port()),
                                   QStringLiteral("--metrics-listen"), QStringLiteral("127.0.0.1:%1").arg(workerPort)});
    // once serve on the same store: its /metrics is the store's, whoever delivered.
    const quint16 servePort = freeLoopbackPort();
    QProcess *server = once.start({QStringLiteral("serve"), QStringLiteral("--listen"),
                                   QStringLiteral("127.0.0.1:%1").arg(servePort)});
    const QList<ScrapeTarget> targets{{QStringLiteral("worker"), workerPort}, {QStringLiteral("serve"), servePort}};
    PrometheusServer prometheus(dir.path());
    QVERIFY2(prometheus.start(targets, &error), qPrintable(error));

    QVERIFY(pumpUntil([&] { return partner.stats().effects == Reminders; }, WorkerTimeoutMs));
    std::optional<double> applied;
    const bool readBack = pumpUntil(
        [&] {
            applied = prometheus.query(QStringLiteral("once_reminders_applied_total{job=\"worker\"}"));
            return applied == double(partner.stats().effects);
        },
        WorkerTimeoutMs);
    QVERIFY2(readBack, qPrintable(QStringLiteral("Prometheus has %1, the partner received %2; its log: %3")
                                      .arg(applied ? QString::number(*applied) : QStringLiteral("nothing"))
                                      .arg(partner.stats().effects)
                                      .arg(prometheus.log())));
    QCOMPARE(prometheus.query(QStringLiteral("up{job=\"worker\"}")), 1.0);
    QCOMPARE(prometheus.query(QStringLiteral("sum(once_sends_total{job=\"worker\",outcome=\"applied\"})")),
             double(Reminders));
    // The store-wide numbers, through once serve, say the same about the ledger.
    const bool readFromServe = pumpUntil(
        [&] {
            applied = prometheus.query(QStringLiteral("once_reminders_applied_total{job=\"serve\"}"));
            return applied == double(Reminders);
        },
        WorkerTimeoutMs);
    QVERIFY2(readFromServe, qPrintable(QStringLiteral("Prometheus has %1 from once serve; its log: %2")
                                           .arg(applied ? QString::number(*applied) : QStringLiteral("nothing"))
                                           .arg(prometheus.log())));
    QCOMPARE(prometheus.query(QStringLiteral("up{job=\"serve\"}")), 1.0);
    server->terminate();
    QVERIFY(once.waitFor(server, WorkerTimeoutMs).exitedWith(0));

    worker->terminate();
    QVERIFY(once.waitFor(worker, WorkerTimeoutMs).exitedWith(0));
}

QTEST_GUILESS_MAIN(PrometheusTest)
#include "tst_prometheus.moc"
