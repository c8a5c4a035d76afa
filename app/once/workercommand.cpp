#include "cli.h"
#include "partneroptions.h"

#include "queues/brokerqueue.h"
#include "delivery/engine.h"
#include "delivery/partnersender.h"
#include "partners/partnerprofile.h"
#include "monitoring/metricsserver.h"
#include "monitoring/workermetrics.h"

#include <QCoreApplication>
#include <QHostInfo>
#include <QTimer>

#include <cstdio>

namespace once::cli {

namespace {
// Beyond the last send's timeout, for its outcome and the others' to be recorded.
constexpr int StopGraceMarginMs = 5000;
} // namespace

int runWorker(const QStringList &arguments)
{
    Command command(QStringLiteral("worker"),
                    QStringLiteral("Delivers queued reminders to the partner: claim the send key, send with it as "
                                   "Idempotency-Key, record, ack. The bearer token comes from ONCE_PARTNER_TOKEN. "
                                   "SIGTERM, SIGINT or SIGHUP: stop consuming, finish what is in flight, exit 0; "
                                   "what is not finished within --timeout + 5 s (or at a second signal) is left "
                                   "in doubt, exit 1. A store that fails for good (corrupt, full, read-only, "
                                   "deleted or replaced) for 10 s: exit 1."),
                    {});
    auto &parser = command.parser();
    parser.addOptions({
        {QStringLiteral("concurrency"), QStringLiteral("Sends in flight at once."), QStringLiteral("N"), QStringLiteral("16")},
        {QStringLiteral("max-attempts"), QStringLiteral("Sends before a reminder is dead-lettered."), QStringLiteral("N"), QStringLiteral("8")},
        {QStringLiteral("lease"), QStringLiteral("Seconds a delivery is held before the queue offers it again."), QStringLiteral("S"), QStringLiteral("30")},
        {QStringLiteral("timeout"), QStringLiteral("Seconds one partner request may take."), QStringLiteral("S"), QStringLiteral("10")},
        {QStringLiteral("in-doubt"), QStringLiteral("When a send's outcome is unknown: resend (same key) or hold (for an operator)."), QStringLiteral("POLICY"), QStringLiteral("resend")},
        {QStringLiteral("backoff-base-ms"), QStringLiteral("First retry delay ceiling, doubled per try (full jitter)."), QStringLiteral("MS"), QStringLiteral("1000")},
        {QStringLiteral("backoff-cap-s"), QStringLiteral("Longest retry delay."), QStringLiteral("S"), QStringLiteral("300")},
        {QStringLiteral("retention-days"), QStringLiteral("Keep finished records this long."), QStringLiteral("D"), QStringLiteral("30")},
        {QStringLiteral("until-idle"), QStringLiteral("Exit once nothing is ready, in flight or due within a minute.")},
        {QStringLiteral("worker-id"), QStringLiteral("This worker's name in the history (default host:pid)."), QStringLiteral("ID")},
        {QStringLiteral("progress"), QStringLiteral("Print live counts every second.")},
        {QStringLiteral("metrics-listen"), QStringLiteral("Serve this worker's own counters as Prometheus metrics at http://HOST:PORT/metrics, and /healthz. No authentication: keep it on loopback or a private network."), QStringLiteral("HOST:PORT")},
        {QStringLiteral("rate"), QStringLiteral("With --partner URL: send it at most this many requests, as 20/s, 300/min or 1000/h; the pace adapts below it to the partner's 429s (docs/partners.md). Default: no ceiling (a partners file gives each partner its \"rate\")."), QStringLiteral("N/s")},
    });
    addPartnerOptions(command, QStringLiteral("The one partner every reminder goes to: a webhook (http://127.0.0.1:8080/reminders), a provider's API base with --partner-profile, or smtp://USER:PASSWORD@HOST:PORT?from=ADDRESS (smtps:// for implicit TLS). The token comes from ONCE_PARTNER_TOKEN. Default: $ONCE_PARTNER."));
    command.addQueueOption();
    if (const int exit = command.parse(arguments); exit >= 0)
        return exit;
    const auto concurrency = command.integer(QStringLiteral("concurrency"), 1, 1024);
    const auto maxAttempts = command.integer(QStringLiteral("max-attempts"), 1, 100);
    const auto lease = command.integer(QStringLiteral("lease"), 1, 12 * 3600);
    const auto timeout = command.integer(QStringLiteral("timeout"), 1, 900);
    const auto backoffBase = command.integer(QStringLiteral("backoff-base-ms"), 0, 3600 * 1000);
    const auto backoffCap = command.integer(QStringLiteral("backoff-cap-s"), 0, 24 * 3600);
    const auto retention = command.integer(QStringLiteral("retention-days"), 1, 3650);
    if (!concurrency || !maxAttempts || !lease || !timeout || !backoffBase || !backoffCap || !retention)
        return Usage;
    const QString policy = parser.value(QStringLiteral("in-doubt"));
    if (policy != QLatin1String("resend") && policy != QLatin1String("hold"))
        return command.usageError(QStringLiteral("--in-doubt must be resend or hold"));
    if (*timeout >= *lease)
        return command.usageError(QStringLiteral("--lease must be longer than --timeout, or a slow send looks like a crash"));

    auto partners = choosePartners(command, PartnerWithFile::Refused);
    if (!partners)
        return Usage;
    if (parser.isSet(QStringLiteral("rate"))) {
        if (!partners->file.isEmpty())
            return command.usageError(QStringLiteral("--rate goes with --partner URL; in a partners file each partner has its \"rate\""));
        const QString text = parser.value(QStringLiteral("rate"));
        const auto perSecond = parseRate(text);
        if (!perSecond)
            return command.usageError(QStringLiteral("--rate must read like 20/s, 300/min or 1000/h (more than 0), not \"%1\"")
                                          .arg(text.left(40)));
        partners->partners.partners.first().ratePerSecond = *perSecond;
    }

    std::optional<ListenAddress> metricsAddress;
    if (parser.isSet(QStringLiteral("metrics-listen"))) {
        QString addressError;
        metricsAddress = ListenAddress::parse(parser.value(QStringLiteral("metrics-listen")), &addressError);
        if (!metricsAddress)
            return command.usageError(QStringLiteral("--metrics-listen: ") + addressError);
    }

    QString queueError;
    if (!command.queueUrl().isEmpty() && !QueueLocation::parse(command.queueUrl(), &queueError))
        return command.usageError(queueError);

    EngineConfig config;
    config.storeUrl = command.storeUrl();
    config.queueUrl = command.queueUrl();
    config.partners = partners->partners;
    config.workerId = parser.isSet(QStringLiteral("worker-id"))
                          ? parser.value(QStringLiteral("worker-id"))
                          : QStringLiteral("%1:%2").arg(QHostInfo::localHostName(), QString::number(QCoreApplication::applicationPid()));
    config.concurrency = int(*concurrency);
    config.maxAttempts = int(*maxAttempts);
    config.leaseMs = *lease * 1000;
    config.requestTimeoutMs = int(*timeout * 1000);
    config.inDoubtPolicy = policy == QLatin1String("hold") ? InDoubtPolicy::Hold : InDoubtPolicy::Resend;
    config.backoffBaseMs = *backoffBase;
    config.backoffCapMs = *backoffCap * 1000;
    config.retentionMs = *retention * 24 * 3600 * 1000;
    config.untilIdle = parser.isSet(QStringLiteral("until-idle"));

    Engine engine(config);
    // On the engine's own thread, between its events: a scrape copies the counters the
    // engine keeps anyway and asks the store nothing.
    std::unique_ptr<MetricsServer> metrics;
    if (metricsAddress) {
        metrics = std::make_unique<MetricsServer>([&engine] { return workerExposition(engine.counters()); });
        QString listenError;
        if (!metrics->listen(*metricsAddress, &listenError))
            return failure(QStringLiteral("--metrics-listen: ") + listenError);
        const QString host = metricsAddress->host.protocol() == QAbstractSocket::IPv6Protocol
                                 ? QLatin1Char('[') + metricsAddress->host.toString() + QLatin1Char(']')
                                 : metricsAddress->host.toString();
        std::fprintf(stderr, "once worker: metrics at http://%s:%u/metrics\n", qPrintable(host), unsigned(metrics->port()));
    }
    int exitCode = Ok;
    QObject::connect(&engine, &Engine::finished, &engine, [&exitCode](int code) {
        exitCode = code;
        QCoreApplication::exit(code);
    });
    // In flight means at the partner (at most --timeout) or waiting for a turn to record:
    // past that, a store or a partner that does not answer must not keep the process.
    const auto grace = std::chrono::milliseconds(config.requestTimeoutMs + StopGraceMarginMs);
    watchTerminationSignals(&engine, [&engine, grace] {
        std::fputs("once worker: stopping, finishing what is in flight\n", stderr);
        exitAfter(grace, QStringLiteral("once worker: not stopped after %1 s; exiting now, deliveries still in flight "
                                        "will show as in doubt")
                             .arg(grace.count() / 1000));
        engine.stop();
    });
    QTimer progress;
    if (parser.isSet(QStringLiteral("progress"))) {
        QObject::connect(&progress, &QTimer::timeout, &engine, [&engine] {
            const auto c = engine.counters();
            std::fprintf(stderr, "applied %lld  duplicates %lld  retries %lld  dead %lld  held %lld  in flight %d\n",
                         c.applied, c.duplicates, c.retries, c.deadLettered, c.held, c.inFlight);
        });
        progress.start(1000);
    }
    QTimer::singleShot(0, &engine, &Engine::start);
    QCoreApplication::exec();
    const auto c = engine.counters();
    std::fprintf(stderr, "once worker %s: applied %lld, duplicates suppressed %lld, retries %lld, dead-lettered %lld, "
                         "held in doubt %lld\n",
                 qPrintable(config.workerId), c.applied, c.duplicates, c.retries, c.deadLettered, c.held);
    return exitCode;
}

} // namespace once::cli
