#include "cli.h"

#include "engine.h"
#include "httpclient.h"
#include "store.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QJsonObject>
#include <QProcess>
#include <QRandomGenerator>
#include <QTemporaryDir>
#include <QThread>
#include <QTimer>

#include <cstdio>
#include <sys/resource.h>

namespace once::cli {

namespace {

QByteArray benchReminder(qint64 n)
{
    return QStringLiteral(R"({"user_id":"u%1","reminder_id":"r%2","scheduled_at":"2026-12-01T09:00:00Z",)"
                          R"("destination":"+1555%3","channel":"sms","event_id":"bench-%4","body":"Your appointment is tomorrow at 10:00"})")
        .arg(n % 10007)
        .arg(n)
        .arg(n % 10000000, 7, 10, QLatin1Char('0'))
        .arg(n)
        .toUtf8();
}

// Producer of the open-loop mode: enqueues at a steady rate from its own thread and
// connection, as a separate producer process would.
class SteadyProducer final : public QThread
{
public:
    SteadyProducer(QString storeUrl, int ratePerSecond, int seconds)
        : m_storeUrl(std::move(storeUrl)), m_rate(ratePerSecond), m_seconds(seconds)
    {
    }
    qint64 produced() const { return m_produced; }
    QString error() const { return m_error; }

protected:
    void run() override
    {
        auto store = Store::open(m_storeUrl, &m_error);
        if (!store)
            return;
        QElapsedTimer clock;
        clock.start();
        const qint64 total = qint64(m_rate) * m_seconds;
        while (m_produced < total) {
            // Every 5 ms, enqueue what the rate owes by now.
            const qint64 due = std::min(total, clock.elapsed() * m_rate / 1000);
            QList<OutgoingMessage> batch;
            for (; m_produced + batch.size() < due;) {
                const QByteArray payload = benchReminder(m_produced + batch.size());
                batch.append(OutgoingMessage{payload, {}, {}, 0, 0});
            }
            if (!batch.isEmpty() && !store->queue().enqueue(batch, &m_error))
                return;
            m_produced += batch.size();
            QThread::msleep(5);
        }
    }

private:
    QString m_storeUrl;
    int m_rate = 0;
    int m_seconds = 0;
    qint64 m_produced = 0;
    QString m_error;
};

qint64 percentile(std::vector<qint64> values, double p)
{
    if (values.empty())
        return 0;
    std::sort(values.begin(), values.end());
    return values[std::min(values.size() - 1, size_t(double(values.size()) * p))];
}

std::optional<QJsonObject> partnerStats(quint16 port)
{
    HttpClient client(1);
    QEventLoop loop;
    std::optional<QJsonObject> stats;
    HttpRequest request;
    request.url = QUrl(QStringLiteral("http://127.0.0.1:%1/stats").arg(port));
    request.method = "GET";
    client.send(request, &loop, [&](const HttpResult &result) {
        if (result.status == HttpResult::Status::Response && result.httpStatus == 200)
            stats = QJsonDocument::fromJson(result.body).object();
        loop.quit();
    });
    loop.exec();
    return stats;
}

} // namespace

int runBench(const QStringList &arguments)
{
    Command command(QStringLiteral("bench"),
                    QStringLiteral("Starts the partner simulator, delivers reminders through a worker and reports "
                                   "reminders/s, enqueue-to-ack latency and peak memory. Without --rate: enqueue "
                                   "--count reminders first, then drain them. With --rate: feed that many per "
                                   "second for --duration seconds (open loop) and report the latency at that rate."),
                    {});
    auto &parser = command.parser();
    parser.addOptions({
        {QStringLiteral("count"), QStringLiteral("Reminders to deliver (closed loop)."), QStringLiteral("N"), QStringLiteral("50000")},
        {QStringLiteral("duplicate-share"), QStringLiteral("Share of reminders published twice."), QStringLiteral("R"), QStringLiteral("0.05")},
        {QStringLiteral("rate"), QStringLiteral("Open loop: reminders per second (0: closed loop)."), QStringLiteral("N"), QStringLiteral("0")},
        {QStringLiteral("duration"), QStringLiteral("Open loop: seconds to feed."), QStringLiteral("S"), QStringLiteral("10")},
        {QStringLiteral("concurrency"), QStringLiteral("Worker sends in flight."), QStringLiteral("N"), QStringLiteral("256")},
        {QStringLiteral("partner-latency-ms"), QStringLiteral("Simulated partner latency."), QStringLiteral("MS"), QStringLiteral("0")},
    });
    if (const int exit = command.parse(arguments); exit >= 0)
        return exit;
    const auto count = command.integer(QStringLiteral("count"), 1, 10000000);
    const auto duplicates = command.rate(QStringLiteral("duplicate-share"));
    const auto rate = command.integer(QStringLiteral("rate"), 0, 1000000);
    const auto duration = command.integer(QStringLiteral("duration"), 1, 3600);
    const auto concurrency = command.integer(QStringLiteral("concurrency"), 1, 1024);
    const auto latency = command.integer(QStringLiteral("partner-latency-ms"), 0, 10000);
    if (!count || !duplicates || !rate || !duration || !concurrency || !latency)
        return Usage;

    QTemporaryDir scratch;
    const QString storeUrl = parser.isSet(QStringLiteral("store"))
                                 ? command.storeUrl()
                                 : QStringLiteral("sqlite:") + scratch.filePath(QStringLiteral("bench.sqlite"));
    QString error;
    {
        auto store = Store::open(storeUrl, &error);
        if (!store)
            return failure(error);
    }

    // The partner runs in its own process, as a real one would, on the other core.
    QProcess simulator;
    simulator.setProcessChannelMode(QProcess::ForwardedErrorChannel);
    simulator.start(QCoreApplication::applicationFilePath(),
                    {QStringLiteral("partner-sim"), QStringLiteral("--port"), QStringLiteral("0"),
                     QStringLiteral("--latency-ms"), QString::number(*latency)});
    if (!simulator.waitForStarted() || !simulator.waitForReadyRead(10000))
        return failure(QStringLiteral("the partner simulator did not start"));
    const QByteArray banner = simulator.readLine();
    const quint16 port = quint16(banner.mid(banner.lastIndexOf(':') + 1).split('/').value(0).toUInt());
    if (!port)
        return failure(QStringLiteral("cannot read the simulator's port from \"%1\"").arg(QString::fromUtf8(banner.trimmed())));

    EngineConfig config;
    config.storeUrl = storeUrl;
    config.partnerUrl = QUrl(QStringLiteral("http://127.0.0.1:%1/reminders").arg(port));
    config.workerId = QStringLiteral("bench");
    config.concurrency = int(*concurrency);
    config.untilIdle = true;
    config.untilIdleHorizonMs = 0;
    config.idlePollMs = 2;
    config.recordLatencies = true;

    qint64 published = 0;
    std::unique_ptr<SteadyProducer> producer;
    if (*rate == 0) {
        auto store = Store::open(storeUrl, &error);
        QList<OutgoingMessage> batch;
        for (qint64 n = 0; n < *count; ++n) {
            const QByteArray payload = benchReminder(n);
            batch.append(OutgoingMessage{payload, {}, {}, 0, 0});
            if (QRandomGenerator::global()->generateDouble() < *duplicates)
                batch.append(OutgoingMessage{payload, {}, {}, 0, 0});
            if (batch.size() >= 5000 || n + 1 == *count) {
                if (!store->queue().enqueue(batch, &error))
                    return failure(error);
                published += batch.size();
                batch.clear();
            }
        }
        std::printf("enqueued %lld messages (%lld reminders, %lld published twice)\n", published, *count,
                    published - *count);
    } else {
        producer = std::make_unique<SteadyProducer>(storeUrl, int(*rate), int(*duration));
        // The worker must not go idle before the producer is done.
        config.untilIdle = false;
    }

    Engine engine(config);
    QElapsedTimer clock;
    QObject::connect(&engine, &Engine::finished, &engine, [](int code) { QCoreApplication::exit(code); });
    QTimer::singleShot(0, &engine, &Engine::start);
    clock.start();
    std::unique_ptr<Store> drainStore;
    QTimer drain;
    if (producer) {
        drainStore = Store::open(storeUrl, &error);
        if (!drainStore)
            return failure(error);
        // Once the producer is done, let the worker drain what is left, then stop it.
        QObject::connect(&drain, &QTimer::timeout, &engine, [&] {
            QString countError;
            const auto counts = drainStore->queue().counts(&countError);
            if (producer->isFinished() && engine.counters().inFlight == 0 && counts && counts->ready == 0
                && counts->inFlight == 0) {
                drain.stop();
                engine.stop();
            }
        });
        drain.start(20);
        producer->start();
    }
    const int exitCode = QCoreApplication::exec();
    const double seconds = double(clock.elapsed()) / 1000.0;
    if (producer) {
        producer->wait();
        if (!producer->error().isEmpty())
            return failure(producer->error());
        published = producer->produced();
    }
    const auto counters = engine.counters();
    const auto latencies = engine.latenciesMs();
    const auto stats = partnerStats(port);
    simulator.terminate();
    simulator.waitForFinished(5000);
    if (exitCode != 0)
        return failure(QStringLiteral("the worker stopped with an error"));

    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    std::printf("mode                   %s\n", *rate ? qPrintable(QStringLiteral("open loop at %1/s for %2 s").arg(*rate).arg(*duration))
                                                   : "closed loop (enqueue all, then drain)");
    std::printf("reminders applied      %lld (duplicates suppressed %lld)\n", counters.applied, counters.duplicates);
    std::printf("elapsed                %.2f s\n", seconds);
    std::printf("throughput             %.0f reminders/s (%.0f messages/s)\n", double(counters.applied) / seconds,
                double(counters.applied + counters.duplicates) / seconds);
    std::printf("enqueue-to-ack p50     %lld ms\n", percentile(latencies, 0.50));
    std::printf("enqueue-to-ack p99     %lld ms\n", percentile(latencies, 0.99));
    std::printf("peak RSS (worker)      %.1f MiB\n", double(usage.ru_maxrss) / 1024.0);
    std::printf("partner effects        %lld (duplicate effects %lld)\n",
                stats ? qint64(stats->value(QLatin1String("effects")).toDouble()) : -1,
                stats ? qint64(stats->value(QLatin1String("duplicate_effects")).toDouble()) : -1);
    std::printf("durability             SQLite WAL, synchronous=FULL; every claim committed before its send\n");
    std::printf("concurrency            %d, partner latency %lld ms\n", config.concurrency, *latency);
    return Ok;
}

} // namespace once::cli
