#include "cli.h"
#include "httppublisher.h"

#include "delivery/partnersender.h"
#include "http/httpclient.h"
#include "queues/brokerqueue.h"
#include "queues/bullmq/bullmqscripts.h"
#include "store/store.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QElapsedTimer>
#include <QFile>
#include <QEventLoop>
#include <QJsonObject>
#include <QProcess>
#include <QRandomGenerator>
#include <QRegularExpression>
#include <QSqlQuery>
#include <QTcpServer>
#include <QTemporaryDir>
#include <QThread>
#include <QTimeZone>
#include <QTimer>
#include <QUrl>

#include <csignal>
#include <cstdio>
#include <memory>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

namespace once::cli {

namespace {

// A reminder scheduled at the moment it is enqueued, so that the ledger alone gives
// each one's enqueue-to-ack latency (applied_at - scheduled_at), whichever worker
// process delivered it. The run's nonce keeps the keys of two runs on one store apart.
QByteArray benchReminder(const QString &nonce, qint64 n, qint64 enqueuedAtMs)
{
    const QString scheduledAt =
        QDateTime::fromMSecsSinceEpoch(enqueuedAtMs, QTimeZone::utc()).toString(Qt::ISODateWithMs);
    return QStringLiteral(R"({"user_id":"u%1","reminder_id":"r%2-%3","scheduled_at":"%4",)"
                          R"("destination":"+1555%5","channel":"sms","event_id":"bench-%2-%3","body":"Your appointment is tomorrow at 10:00"})")
        .arg(QString::number(n % 10007), nonce, QString::number(n), scheduledAt,
             QStringLiteral("%1").arg(n % 10000000, 7, 10, QLatin1Char('0')))
        .toUtf8();
}

// Producer of the open-loop mode: enqueues at a steady rate from its own thread and
// connection, as a separate producer process would.
class SteadyProducer final : public QThread
{
public:
    SteadyProducer(QString storeUrl, QString queueUrl, QString nonce, int ratePerSecond, int seconds)
        : m_storeUrl(std::move(storeUrl)), m_queueUrl(std::move(queueUrl)), m_nonce(std::move(nonce)),
          m_rate(ratePerSecond), m_seconds(seconds)
    {
    }
    qint64 produced() const { return m_produced; }
    QString error() const { return m_error; }

protected:
    void run() override
    {
        std::unique_ptr<Store> store;
        std::unique_ptr<BrokerQueue> broker;
        if (m_queueUrl.isEmpty()) {
            store = Store::open(m_storeUrl, &m_error);
        } else if (const auto location = QueueLocation::parse(m_queueUrl, &m_error)) {
            broker = openBrokerQueue(*location, {}, 1, &m_error);
        }
        if (!store && !broker)
            return;
        MessageQueue &queue = broker ? static_cast<MessageQueue &>(*broker) : store->queue();
        QElapsedTimer clock;
        clock.start();
        const qint64 total = qint64(m_rate) * m_seconds;
        while (m_produced < total) {
            // Every 5 ms, enqueue what the rate owes by now.
            const qint64 due = std::min(total, clock.elapsed() * m_rate / 1000);
            QList<OutgoingMessage> batch;
            const qint64 now = nowMs();
            while (m_produced + batch.size() < due)
                batch.append(OutgoingMessage{benchReminder(m_nonce, m_produced + batch.size(), now), {}, {}, 0, 0});
            if (!batch.isEmpty() && !queue.enqueue(batch, &m_error))
                return;
            m_produced += batch.size();
            QThread::msleep(5);
        }
    }

private:
    QString m_storeUrl;
    QString m_queueUrl;
    QString m_nonce;
    int m_rate = 0;
    int m_seconds = 0;
    qint64 m_produced = 0;
    QString m_error;
};

qint64 percentile(const std::vector<qint64> &sorted, double p)
{
    if (sorted.empty())
        return 0;
    return sorted[std::min(sorted.size() - 1, size_t(double(sorted.size()) * p))];
}

std::optional<QJsonObject> partnerStats(const QUrl &url)
{
    HttpClient client(1);
    QEventLoop loop;
    std::optional<QJsonObject> stats;
    HttpRequest request;
    request.url = url;
    request.method = "GET";
    request.timeoutMs = 5000;
    client.send(request, &loop, [&](const HttpResult &result) {
        if (result.status == HttpResult::Status::Response && result.httpStatus == 200)
            stats = QJsonDocument::fromJson(result.body).object();
        loop.quit();
    });
    loop.exec();
    return stats;
}

// GET /stats at the partner's origin. With --partner-url the bench reads these two counts
// there if the partner offers them, {"posts": N, "keys": M}: the POSTs it received and the
// distinct Idempotency-Key values it applied (once partner-sim and scripts/peer/sink.js do).
QUrl statsUrlOf(const QUrl &partner)
{
    QUrl url = partner.adjusted(QUrl::RemoveQuery | QUrl::RemoveFragment | QUrl::RemoveUserInfo);
    url.setPath(QStringLiteral("/stats"));
    return url;
}

struct PostCounts
{
    qint64 posts = 0;
    qint64 keys = 0;
};

std::optional<PostCounts> postCounts(const QUrl &statsUrl)
{
    const auto stats = partnerStats(statsUrl);
    if (!stats || !stats->value(QLatin1String("posts")).isDouble() || !stats->value(QLatin1String("keys")).isDouble())
        return std::nullopt;
    return PostCounts{qint64(stats->value(QLatin1String("posts")).toDouble()),
                      qint64(stats->value(QLatin1String("keys")).toDouble())};
}

// A port free now on 127.0.0.1, for a worker's --metrics-listen: the bench must know it
// before the worker starts, and reads nothing else from the worker.
quint16 freeLoopbackPort()
{
    QTcpServer probe;
    return probe.listen(QHostAddress::LocalHost, 0) ? probe.serverPort() : 0;
}

// Scrapes every worker's /metrics once a second, as Prometheus would, so that a run with
// --scrape-metrics and one without tell what the scrapes cost the workers.
class MetricsScraper final : public QObject
{
public:
    explicit MetricsScraper(QList<quint16> ports) : m_ports(std::move(ports))
    {
        QObject::connect(&m_timer, &QTimer::timeout, this, &MetricsScraper::scrape);
    }
    void start() { m_timer.start(1000); }
    // Scrapes still out when the run ends meet workers that are stopping: not counted.
    void stop()
    {
        m_timer.stop();
        m_stopped = true;
    }
    qint64 scrapes() const { return m_scrapes; }
    qint64 failed() const { return m_failed; }
    QString lastError() const { return m_lastError; }

private:
    void scrape()
    {
        for (const quint16 port : std::as_const(m_ports)) {
            HttpRequest request;
            request.url = QUrl(QStringLiteral("http://127.0.0.1:%1/metrics").arg(port));
            request.method = "GET";
            request.timeoutMs = 5000;
            m_client.send(request, this, [this](const HttpResult &result) {
                if (m_stopped)
                    return;
                ++m_scrapes;
                if (result.status != HttpResult::Status::Response || result.httpStatus != 200
                    || !result.body.contains("once_reminders_applied_total ")) {
                    ++m_failed;
                    m_lastError = result.error.isEmpty() ? QStringLiteral("HTTP %1").arg(result.httpStatus) : result.error;
                }
            });
        }
    }

    QList<quint16> m_ports;
    HttpClient m_client{4, this};
    QTimer m_timer{this};
    qint64 m_scrapes = 0;
    qint64 m_failed = 0;
    QString m_lastError;
    bool m_stopped = false;
};

// What the ledger says about this run's reminders.
struct RunResult
{
    qint64 applied = 0;
    qint64 lastAppliedAtMs = 0;
    std::vector<qint64> latenciesMs; // sorted
};

std::optional<RunResult> readRun(Store &store, const QString &nonce, qint64 sinceMs, QString *error)
{
    QSqlQuery query(store.database().connection());
    query.setForwardOnly(true);
    query.prepare(QStringLiteral("SELECT reminder_id, applied_at - scheduled_at, applied_at FROM ledger "
                                 "WHERE scheduled_at >= ? AND state = 'applied'"));
    query.addBindValue(sinceMs);
    if (!store.database().exec(query, error))
        return std::nullopt;
    RunResult run;
    const QString prefix = QLatin1Char('r') + nonce + QLatin1Char('-');
    while (query.next()) {
        if (!query.value(0).toString().startsWith(prefix))
            continue;
        ++run.applied;
        run.latenciesMs.push_back(query.value(1).toLongLong());
        run.lastAppliedAtMs = std::max(run.lastAppliedAtMs, query.value(2).toLongLong());
    }
    std::sort(run.latenciesMs.begin(), run.latenciesMs.end());
    return run;
}

std::optional<bool> storeQueueIsEmpty(Store &store, QString *error)
{
    QSqlQuery query(store.database().connection());
    query.prepare(QStringLiteral("SELECT NOT EXISTS (SELECT 1 FROM queue)"));
    if (!store.database().exec(query, error) || !query.next())
        return std::nullopt;
    return query.value(0).toBool();
}

// Keys this run applied so far (a run's reminders are scheduled at their enqueue time).
std::optional<qint64> appliedSince(Store &store, qint64 sinceMs, QString *error)
{
    QSqlQuery query(store.database().connection());
    query.prepare(QStringLiteral("SELECT COUNT(*) FROM ledger WHERE scheduled_at >= ? AND state = 'applied'"));
    query.addBindValue(sinceMs);
    if (!store.database().exec(query, error) || !query.next())
        return std::nullopt;
    return query.value(0).toLongLong();
}

QString durabilityOf(Database &database)
{
    if (!database.isPostgres())
        return QStringLiteral("SQLite WAL, synchronous=FULL; every claim committed before its send");
    QSqlQuery query(database.connection());
    QStringList settings;
    for (const auto name : {"synchronous_commit", "fsync"}) {
        if (query.exec(QStringLiteral("SHOW ") + QLatin1String(name)) && query.next())
            settings << QStringLiteral("%1=%2").arg(QLatin1String(name), query.value(0).toString());
    }
    return QStringLiteral("PostgreSQL %1; every claim committed before its send").arg(settings.join(QLatin1String(", ")));
}

// `once serve` on the bench's store, as its own process: the port it picked is on the
// first line it writes to stderr; the rest (a line per request) goes to logPath, as a
// production server's log would go somewhere.
struct ServeProcess
{
    QProcess process;
    quint16 port = 0;
};

std::unique_ptr<ServeProcess> startServe(const QProcessEnvironment &environment, const QString &logPath, QString *error)
{
    auto serve = std::make_unique<ServeProcess>();
    serve->process.setProcessEnvironment(environment);
    serve->process.setStandardOutputFile(QProcess::nullDevice());
    serve->process.setStandardErrorFile(logPath);
    serve->process.start(QCoreApplication::applicationFilePath(),
                         {QStringLiteral("serve"), QStringLiteral("--listen"), QStringLiteral("127.0.0.1:0")});
    if (!serve->process.waitForStarted()) {
        *error = QStringLiteral("once serve did not start: %1").arg(serve->process.errorString());
        return nullptr;
    }
    static const QRegularExpression listening(QStringLiteral(R"(listening on http://127\.0\.0\.1:(\d+) )"));
    QFile log(logPath);
    QElapsedTimer waited;
    waited.start();
    while (waited.elapsed() < 10000 && serve->process.state() == QProcess::Running) {
        if (log.isOpen() || log.open(QIODevice::ReadOnly)) {
            log.seek(0);
            const QString first = QString::fromUtf8(log.readLine());
            if (const auto match = listening.match(first); match.hasMatch()) {
                serve->port = quint16(match.captured(1).toUInt());
                return serve;
            }
        }
        QThread::msleep(20);
    }
    serve->process.kill();
    serve->process.waitForFinished(5000);
    QFile again(logPath);
    again.open(QIODevice::ReadOnly);
    *error = QStringLiteral("once serve did not say which port it listens on: %1")
                 .arg(QString::fromUtf8(again.read(500)).trimmed());
    return nullptr;
}

// A running process's CPU time so far (user + system), from /proc.
double processCpuSeconds(qint64 pid)
{
    QFile stat(QStringLiteral("/proc/%1/stat").arg(pid));
    if (!stat.open(QIODevice::ReadOnly))
        return -1;
    const QByteArray text = stat.readAll();
    // The fields after the command's name, which is in parentheses and may hold spaces.
    const QList<QByteArray> fields = text.mid(text.lastIndexOf(')') + 2).split(' ');
    if (fields.size() < 13)
        return -1;
    return double(fields.at(11).toLongLong() + fields.at(12).toLongLong()) / double(sysconf(_SC_CLK_TCK));
}

double percentileMs(const std::vector<qint64> &sortedUs, double p)
{
    return double(percentile(sortedUs, p)) / 1000.0;
}

} // namespace

int runBench(const QStringList &arguments)
{
    Command command(QStringLiteral("bench"),
                    QStringLiteral("Starts the partner simulator (or sends to --partner-url) and --workers worker "
                                   "processes on one store, delivers reminders and reports reminders/s, "
                                   "enqueue-to-ack latency and peak memory. Without --rate: enqueue --count reminders first, then drain them. With "
                                   "--rate: feed that many per second for --duration seconds (open loop) and report "
                                   "the latency at that rate. With --via-serve the reminders are published over HTTP "
                                   "to a once serve process on the store, while the workers drain it. Without "
                                   "--store it uses a new SQLite file; on a shared store, use an empty database, as "
                                   "its work competes with the run."),
                    {});
    auto &parser = command.parser();
    parser.addOptions({
        {QStringLiteral("count"), QStringLiteral("Reminders to deliver (closed loop)."), QStringLiteral("N"), QStringLiteral("50000")},
        {QStringLiteral("duplicate-share"), QStringLiteral("Share of reminders published twice."), QStringLiteral("R"), QStringLiteral("0.05")},
        {QStringLiteral("rate"), QStringLiteral("Open loop: reminders per second (0: closed loop)."), QStringLiteral("N"), QStringLiteral("0")},
        {QStringLiteral("duration"), QStringLiteral("Open loop: seconds to feed."), QStringLiteral("S"), QStringLiteral("10")},
        {QStringLiteral("workers"), QStringLiteral("Worker processes on the store (0 with --via-serve: publish only)."), QStringLiteral("N"), QStringLiteral("1")},
        {QStringLiteral("concurrency"), QStringLiteral("Sends in flight per worker."), QStringLiteral("N"), QStringLiteral("256")},
        {QStringLiteral("partner-latency-ms"), QStringLiteral("Simulated partner latency."), QStringLiteral("MS"), QStringLiteral("0")},
        {QStringLiteral("partner-rate-limit"), QStringLiteral("The simulated partner admits at most N requests a second and answers the others 429 (0: no limit); the report says what share of its requests were 429s."), QStringLiteral("N"), QStringLiteral("0")},
        {QStringLiteral("partner-url"), QStringLiteral("Send to this partner endpoint instead of starting the simulator, e.g. http://127.0.0.1:8080/reminders. Its effects are counted only if GET /stats at its origin answers {\"posts\": N, \"keys\": M}."), QStringLiteral("URL")},
        {QStringLiteral("in-doubt"), QStringLiteral("The workers' in-doubt policy: resend or hold (hold claims no further ahead than it sends)."), QStringLiteral("POLICY"), QStringLiteral("resend")},
        {QStringLiteral("scrape-metrics"), QStringLiteral("Run the workers with --metrics-listen and scrape each one's /metrics every second, as Prometheus would: compare with a run without it for the scrapes' cost.")},
        {QStringLiteral("via-serve"), QStringLiteral("Publish over HTTP/1.1 keep-alive to a once serve process on the store (each publish committed before its 200), reporting publishes/s and publish latency.")},
        {QStringLiteral("batch"), QStringLiteral("With --via-serve: messages per publish_batch request (1: single publishes)."), QStringLiteral("N"), QStringLiteral("1")},
        {QStringLiteral("connections"), QStringLiteral("With --via-serve: keep-alive connections publishing at once, one request in flight on each."), QStringLiteral("N"), QStringLiteral("50")},
    });
    command.addQueueOption();
    if (const int exit = command.parse(arguments); exit >= 0)
        return exit;
    const auto count = command.integer(QStringLiteral("count"), 1, 10000000);
    const auto duplicates = command.rate(QStringLiteral("duplicate-share"));
    const auto rate = command.integer(QStringLiteral("rate"), 0, 1000000);
    const auto duration = command.integer(QStringLiteral("duration"), 1, 3600);
    const auto workers = command.integer(QStringLiteral("workers"), 0, 64);
    const auto concurrency = command.integer(QStringLiteral("concurrency"), 1, 1024);
    const auto latency = command.integer(QStringLiteral("partner-latency-ms"), 0, 10000);
    const auto rateLimit = command.integer(QStringLiteral("partner-rate-limit"), 0, 1000000);
    const auto batch = command.integer(QStringLiteral("batch"), 1, 500);
    const auto connections = command.integer(QStringLiteral("connections"), 1, 1000);
    if (!count || !duplicates || !rate || !duration || !workers || !concurrency || !latency || !rateLimit || !batch
        || !connections)
        return Usage;
    const bool viaServe = parser.isSet(QStringLiteral("via-serve"));
    if (!viaServe && (parser.isSet(QStringLiteral("batch")) || parser.isSet(QStringLiteral("connections"))))
        return command.usageError(QStringLiteral("--batch and --connections go with --via-serve"));
    if (!viaServe && *workers == 0)
        return command.usageError(QStringLiteral("--workers 0 goes with --via-serve (publish only)"));
    if (viaServe && !command.queueUrl().isEmpty())
        return command.usageError(QStringLiteral("--via-serve publishes to the store's own queue: it takes no --queue"));
    const bool externalPartner = parser.isSet(QStringLiteral("partner-url"));
    QUrl partnerUrl;
    if (externalPartner) {
        if (parser.isSet(QStringLiteral("partner-latency-ms")))
            return command.usageError(QStringLiteral("--partner-latency-ms is the simulator's: the partner at --partner-url answers at its own pace"));
        if (parser.isSet(QStringLiteral("partner-rate-limit")))
            return command.usageError(QStringLiteral("--partner-rate-limit is the simulator's: the partner at --partner-url limits at its own rate"));
        partnerUrl = QUrl(parser.value(QStringLiteral("partner-url")), QUrl::StrictMode);
        if (!partnerUrl.isValid() || partnerUrl.host().isEmpty()
            || (partnerUrl.scheme() != QLatin1String("http") && partnerUrl.scheme() != QLatin1String("https")))
            return command.usageError(QStringLiteral("--partner-url must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:8080/reminders"));
    }
    const QString inDoubtPolicy = parser.value(QStringLiteral("in-doubt"));
    if (inDoubtPolicy != QLatin1String("resend") && inDoubtPolicy != QLatin1String("hold"))
        return command.usageError(QStringLiteral("--in-doubt must be resend or hold"));
    // The workers inherit the token: refuse it here rather than watch every one of them refuse it.
    if (const QString problem = partnerTokenProblem(qgetenv("ONCE_PARTNER_TOKEN")); !problem.isEmpty())
        return command.usageError(QStringLiteral("ONCE_PARTNER_TOKEN ") + problem);

    QTemporaryDir scratch;
    const QString storeUrl = parser.isSet(QStringLiteral("store"))
                                 ? command.storeUrl()
                                 : QStringLiteral("sqlite:") + scratch.filePath(QStringLiteral("bench.sqlite"));
    QString error;
    auto store = Store::open(storeUrl, &error);
    if (!store)
        return failure(error);
    const QString queueUrl = command.queueUrl();
    std::unique_ptr<BrokerQueue> broker;
    if (!queueUrl.isEmpty()) {
        broker = command.openBrokerQueue();
        if (!broker)
            return Failure;
        if (!broker->declareTopology({}, &error))
            return failure(error);
    }
    MessageQueue &queue = broker ? static_cast<MessageQueue &>(*broker) : store->queue();
    const QString nonce = QString::number(QRandomGenerator::global()->bounded(1u << 30), 36);

    QProcess simulator;
    std::optional<PostCounts> postsBefore;
    if (externalPartner) {
        // Its counts so far, so that the run's share can be told: the partner may have
        // served others before.
        postsBefore = postCounts(statsUrlOf(partnerUrl));
    } else {
        // The partner runs in its own process, as a real one would.
        simulator.setProcessChannelMode(QProcess::ForwardedErrorChannel);
        simulator.start(QCoreApplication::applicationFilePath(),
                        {QStringLiteral("partner-sim"), QStringLiteral("--port"), QStringLiteral("0"),
                         QStringLiteral("--latency-ms"), QString::number(*latency), QStringLiteral("--rate-limit"),
                         QString::number(*rateLimit)});
        if (!simulator.waitForStarted() || !simulator.waitForReadyRead(10000))
            return failure(QStringLiteral("the partner simulator did not start"));
        const QByteArray banner = simulator.readLine();
        const quint16 port = quint16(banner.mid(banner.lastIndexOf(':') + 1).split('/').value(0).toUInt());
        if (!port)
            return failure(QStringLiteral("cannot read the simulator's port from \"%1\"").arg(QString::fromUtf8(banner.trimmed())));
        partnerUrl = QUrl(QStringLiteral("http://127.0.0.1:%1/reminders").arg(port));
    }

    // Workers and once serve are separate processes, as in production. The store URL goes
    // through the environment, not the command line, where `ps` would show a password.
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert(QStringLiteral("ONCE_STORE"), storeUrl);
    if (broker) {
        environment.insert(QStringLiteral("ONCE_QUEUE"), queueUrl);
        // The workers load a BullMQ queue's scripts from where this process did.
        environment.insert(QStringLiteral("ONCE_BULLMQ_SCRIPTS"), BullMqScripts::commandsFolder());
    }

    const qint64 runStartMs = nowMs();
    qint64 published = 0;
    std::unique_ptr<SteadyProducer> producer;
    std::unique_ptr<ServeProcess> serve;
    std::unique_ptr<HttpPublisher> publisher;
    if (viaServe) {
        serve = startServe(environment, scratch.filePath(QStringLiteral("serve.log")), &error);
        if (!serve)
            return failure(error);
        HttpPublisher::Plan plan;
        plan.port = serve->port;
        plan.queueName = QStringLiteral("reminders");
        plan.messages = *rate ? *rate * *duration : *count;
        plan.batch = int(*batch);
        plan.connections = int(*connections);
        plan.ratePerSecond = int(*rate);
        plan.payload = [nonce](qint64 n) { return benchReminder(nonce, n, nowMs()); };
        publisher = std::make_unique<HttpPublisher>(plan);
    } else if (*rate == 0) {
        QList<OutgoingMessage> batch;
        for (qint64 n = 0; n < *count; ++n) {
            const QByteArray payload = benchReminder(nonce, n, nowMs());
            batch.append(OutgoingMessage{payload, {}, {}, 0, 0});
            if (QRandomGenerator::global()->generateDouble() < *duplicates)
                batch.append(OutgoingMessage{payload, {}, {}, 0, 0});
            if (batch.size() >= 5000 || n + 1 == *count) {
                if (!queue.enqueue(batch, &error))
                    return failure(error);
                published += batch.size();
                batch.clear();
            }
        }
        std::printf("enqueued %lld messages (%lld reminders, %lld published twice)\n", published, *count,
                    published - *count);
    } else {
        producer = std::make_unique<SteadyProducer>(storeUrl, queueUrl, nonce, int(*rate), int(*duration));
    }

    std::vector<std::unique_ptr<QProcess>> processes;
    const bool scrapeMetrics = parser.isSet(QStringLiteral("scrape-metrics"));
    QList<quint16> metricsPorts;
    const qint64 workersStartMs = nowMs();
    for (int i = 0; i < *workers; ++i) {
        auto process = std::make_unique<QProcess>();
        process->setProcessEnvironment(environment);
        process->setProcessChannelMode(QProcess::ForwardedErrorChannel);
        QStringList workerArguments{QStringLiteral("worker"), QStringLiteral("--partner"),
                                    partnerUrl.toString(QUrl::FullyEncoded),
                                    QStringLiteral("--concurrency"), QString::number(*concurrency),
                                    QStringLiteral("--in-doubt"), inDoubtPolicy, QStringLiteral("--worker-id"),
                                    QStringLiteral("bench-%1-%2").arg(nonce, QString::number(i + 1))};
        if (scrapeMetrics) {
            metricsPorts.append(freeLoopbackPort());
            workerArguments << QStringLiteral("--metrics-listen")
                            << QStringLiteral("127.0.0.1:%1").arg(metricsPorts.constLast());
        }
        process->start(QCoreApplication::applicationFilePath(), workerArguments);
        if (!process->waitForStarted())
            return failure(QStringLiteral("a worker process did not start"));
        processes.push_back(std::move(process));
    }
    if (producer)
        producer->start();
    MetricsScraper scraper(metricsPorts);
    if (scrapeMetrics)
        scraper.start();
    if (publisher)
        publisher->start();

    // Done when the producer is and the queue is empty: then stop the workers as an
    // operator would (SIGTERM: finish and record what is in flight).
    QEventLoop loop;
    QTimer poll;
    bool workerDied = false;
    QObject::connect(&poll, &QTimer::timeout, &loop, [&] {
        for (const auto &process : processes)
            workerDied = workerDied || process->state() == QProcess::NotRunning;
        if (publisher && publisher->isFinished() && !publisher->error().isEmpty())
            return loop.quit();
        const bool fed = (!producer || producer->isFinished()) && (!publisher || publisher->isFinished());
        bool drained = false;
        bool readable = true;
        if (broker) {
            const auto counts = queue.counts(&error);
            readable = counts.has_value();
            // A broker's count of unacked messages may be unavailable, and includes what
            // it pushed ahead to the workers: the ledger says when every reminder is done.
            const qint64 expected = producer ? producer->produced() : *count;
            drained = counts && fed && counts->ready == 0 && counts->delayed == 0
                      && appliedSince(*store, runStartMs, &error).value_or(-1) >= expected;
        } else {
            // Nothing ready, delayed or in flight: no row left. Counting them instead read
            // the whole queue four times a second, in the process that shares the cores
            // with the worker being measured.
            const auto empty = storeQueueIsEmpty(*store, &error);
            readable = empty.has_value();
            drained = fed && empty.value_or(false);
        }
        // Publishing alone: done when the last publish is answered.
        if (*workers == 0)
            drained = fed;
        if (workerDied || !readable || drained)
            loop.quit();
    });
    // Often enough to stop soon after the end, rarely enough not to compete with the
    // workers (the figures come from the ledger anyway).
    poll.start(250);
    loop.exec();
    poll.stop();
    scraper.stop();
    for (const auto &process : processes)
        process->terminate();
    bool cleanExit = !workerDied;
    for (const auto &process : processes) {
        if (!process->waitForFinished(30000))
            process->kill();
        cleanExit = cleanExit && process->exitStatus() == QProcess::NormalExit && process->exitCode() == 0;
    }
    double serveCpuSeconds = -1;
    if (serve) {
        serveCpuSeconds = processCpuSeconds(serve->process.processId());
        serve->process.terminate();
        if (!serve->process.waitForFinished(10000))
            serve->process.kill();
    }
    if (publisher) {
        publisher->wait();
        if (!publisher->error().isEmpty())
            return failure(publisher->error());
        published = publisher->published();
    }
    if (producer) {
        producer->wait();
        if (!producer->error().isEmpty())
            return failure(producer->error());
        published = producer->produced();
    }
    std::optional<QJsonObject> stats;
    std::optional<PostCounts> postsAfter;
    if (externalPartner) {
        postsAfter = postCounts(statsUrlOf(partnerUrl));
    } else {
        stats = partnerStats(statsUrlOf(partnerUrl));
        simulator.terminate();
        simulator.waitForFinished(5000);
    }
    if (!cleanExit)
        return failure(QStringLiteral("a worker stopped with an error (see its messages above)"));

    const auto run = readRun(*store, nonce, runStartMs, &error);
    if (!run)
        return failure(error);
    const auto registry = store->workers().list(&error);
    QStringList perWorker;
    const QString ours = QStringLiteral("bench-%1-").arg(nonce);
    for (const auto &worker : registry.value_or(QList<WorkerRecord>())) {
        if (worker.id.startsWith(ours))
            perWorker << QString::number(worker.applied);
    }
    // From the workers' start to the last outcome recorded: the time the ledger says the
    // work took, not including how long the workers took to notice they were done.
    const double seconds = double(std::max<qint64>(1, run->lastAppliedAtMs - workersStartMs)) / 1000.0;
    rusage usage{};
    getrusage(RUSAGE_CHILDREN, &usage);
    std::printf("store                  %s\n", qPrintable(store->database().location().displayName()));
    if (broker)
        std::printf("queue                  %s (%s)\n", qPrintable(broker->location().displayName()),
                    qPrintable(broker->location().brokerName()));
    if (publisher) {
        const QString how = *batch > 1 ? QStringLiteral("publish_batch of %1").arg(*batch) : QStringLiteral("single publishes");
        std::printf("publish                over HTTP to once serve: %s, %lld keep-alive connections\n", qPrintable(how),
                    *connections);
        const double publishSeconds = double(std::max<qint64>(1, publisher->elapsedUs())) / 1e6;
        std::printf("published              %lld messages in %.2f s (first request sent to last 200 read)\n",
                    publisher->published(), publishSeconds);
        std::printf("publish throughput     %.0f messages/s, each committed before its 200\n",
                    double(publisher->published()) / publishSeconds);
        std::printf("publish latency p50    %.1f ms (request sent to 200 read, per request)\n",
                    percentileMs(publisher->latenciesUs(), 0.50));
        std::printf("publish latency p99    %.1f ms\n", percentileMs(publisher->latenciesUs(), 0.99));
        if (*rate)
            std::printf("producer behind rate   %.1f ms at most\n", double(std::max<qint64>(0, publisher->worstLagUs())) / 1000.0);
        std::printf("CPU                    once serve %.2f s, producers %.2f s\n", serveCpuSeconds, publisher->cpuSeconds());
    }
    if (*workers == 0) {
        std::printf("workers                none (publishing alone)\n");
        std::printf("durability             %s\n", qPrintable(durabilityOf(store->database())));
        return Ok;
    }
    std::printf("mode                   %s\n", *rate ? qPrintable(QStringLiteral("open loop at %1/s for %2 s").arg(*rate).arg(*duration))
                                                   : publisher ? "closed loop (publish all while the workers drain)"
                                                               : "closed loop (enqueue all, then drain)");
    const QString partner = externalPartner ? partnerUrl.toDisplayString()
                                            : QStringLiteral("simulator, latency %1 ms").arg(*latency);
    std::printf("workers                %lld processes, %lld sends in flight each, partner %s, in doubt: %s\n",
                *workers, *concurrency, qPrintable(partner), qPrintable(inDoubtPolicy));
    std::printf("reminders applied      %lld of %lld published messages\n", run->applied, published);
    std::printf("applied per worker     %s\n", qPrintable(perWorker.join(QLatin1String(" / "))));
    std::printf("elapsed                %.2f s (workers started to last outcome recorded)\n", seconds);
    std::printf("throughput             %.0f reminders/s\n", double(run->applied) / seconds);
    std::printf("enqueue-to-ack p50     %lld ms\n", percentile(run->latenciesMs, 0.50));
    std::printf("enqueue-to-ack p99     %lld ms\n", percentile(run->latenciesMs, 0.99));
    if (scrapeMetrics)
        std::printf("metrics scrapes        %lld, every second per worker (%lld failed%s)\n", scraper.scrapes(),
                    scraper.failed(),
                    scraper.failed() ? qPrintable(QStringLiteral(", the last: ") + scraper.lastError()) : "");
    std::printf("%s %.1f MiB\n", serve ? "peak RSS (worker/serve)" : "peak RSS (worker)      ", double(usage.ru_maxrss) / 1024.0);
    if (!externalPartner) {
        std::printf("partner effects        %lld (duplicate effects %lld)\n",
                    stats ? qint64(stats->value(QLatin1String("effects")).toDouble()) : -1,
                    stats ? qint64(stats->value(QLatin1String("duplicate_effects")).toDouble()) : -1);
        if (*rateLimit > 0 && stats) {
            const auto requests = qint64(stats->value(QLatin1String("requests")).toDouble());
            const auto limited = qint64(stats->value(QLatin1String("rate_limited")).toDouble());
            std::printf("partner 429s           %lld of %lld requests (%.1f%%), at its limit of %lld/s\n", limited,
                        requests, requests ? 100.0 * double(limited) / double(requests) : 0.0, *rateLimit);
        }
    } else if (postsBefore && postsAfter) {
        std::printf("partner POSTs          %lld, %lld distinct Idempotency-Keys (the partner's /stats, during the run)\n",
                    postsAfter->posts - postsBefore->posts, postsAfter->keys - postsBefore->keys);
    } else {
        std::printf("partner effects        not counted here: %s does not answer {\"posts\": N, \"keys\": M}\n",
                    qPrintable(statsUrlOf(partnerUrl).toDisplayString()));
    }
    std::printf("durability             %s\n", qPrintable(durabilityOf(store->database())));
    return Ok;
}

} // namespace once::cli
