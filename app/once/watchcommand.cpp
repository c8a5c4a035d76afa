#include "cli.h"

#include "alerting/watcher.h"
#include "store/storelocation.h"

#include <QCoreApplication>
#include <QHostInfo>

#include <cstdio>

namespace once::cli {

namespace {
// Beyond a store's own timeouts: a stop that waits on a store that does not answer ends anyway.
constexpr std::chrono::seconds StopGrace{10};
} // namespace

int runWatch(const QStringList &arguments)
{
    Command command(
        QStringLiteral("watch"),
        QStringLiteral("Watches a store headless and notifies when an alert starts (an incident opens), "
                       "when it resolves, and every remind-every (once alerts) while it is open and "
                       "unacknowledged. Several watchers may watch one store: the one holding the "
                       "store's watch lease records incidents and notifies, the others stand by and "
                       "take over within three intervals. SIGTERM, SIGINT or SIGHUP: release the lease, "
                       "exit 0. See docs/alerts.md."),
        {});
    auto &parser = command.parser();
    parser.addOptions({
        {QStringLiteral("notify"),
         QStringLiteral(
             "Where to notify; repeat for several. http(s)://HOST/PATH: a JSON webhook; "
             "slack+https://HOST/PATH: a Slack-compatible incoming webhook (Mattermost, Discord's /slack); "
             "smtp(s)://USER:PASSWORD@HOST:PORT?from=ADDRESS&to=ADDRESS: a mail; env:NAME or file:PATH: "
             "the URL from there. Default: $ONCE_NOTIFY (URLs separated by spaces)."),
         QStringLiteral("URL")},
        {QStringLiteral("interval"), QStringLiteral("Seconds between two evaluations."), QStringLiteral("S"),
         QStringLiteral("5")},
        {QStringLiteral("clear-after"),
         QStringLiteral(
             "Seconds an alert must be gone before its incident resolves (default: two intervals)."),
         QStringLiteral("S")},
        {QStringLiteral("watcher-id"), QStringLiteral("This watcher's name in the lease (default host:pid)."),
         QStringLiteral("ID")},
        {QStringLiteral("once"),
         QStringLiteral("Evaluate once, send what is owed, exit (for cron and tests).")},
    });
    if (const int exit = command.parse(arguments); exit >= 0)
        return exit;
    const auto interval = command.integer(QStringLiteral("interval"), 1, 3600);
    if (!interval)
        return Usage;
    std::optional<qint64> clearAfter = *interval * 2;
    if (parser.isSet(QStringLiteral("clear-after")))
        clearAfter = command.integer(QStringLiteral("clear-after"), 0, 24 * 3600);
    if (!clearAfter)
        return Usage;

    QStringList urls = parser.values(QStringLiteral("notify"));
    if (urls.isEmpty())
        urls = qEnvironmentVariable("ONCE_NOTIFY").split(QLatin1Char(' '), Qt::SkipEmptyParts);
    if (urls.isEmpty())
        return command.usageError(QStringLiteral("where to notify? --notify URL (or $ONCE_NOTIFY)"));
    std::vector<std::unique_ptr<Notifier>> notifiers;
    for (const QString &url : std::as_const(urls)) {
        QString error;
        auto notifier = createNotifier(url, &error);
        if (!notifier)
            return command.usageError(error);
        notifiers.push_back(std::move(notifier));
    }
    QString storeError;
    if (!StoreLocation::parse(command.storeUrl(), &storeError))
        return command.usageError(storeError);

    WatcherConfig config;
    config.storeUrl = command.storeUrl();
    config.holder = parser.isSet(QStringLiteral("watcher-id"))
                        ? parser.value(QStringLiteral("watcher-id"))
                        : QStringLiteral("%1:%2").arg(QHostInfo::localHostName(),
                                                      QString::number(QCoreApplication::applicationPid()));
    config.intervalMs = *interval * 1000;
    // Renewed every evaluation; three missed ones hand it to another watcher.
    config.leaseTtlMs = config.intervalMs * 3;
    config.clearAfterMs = *clearAfter * 1000;
    config.once = parser.isSet(QStringLiteral("once"));

    QStringList names;
    for (const auto &notifier : notifiers)
        names.append(notifier->name());
    std::fprintf(stderr, "once watch: notifying %s every %lld s\n",
                 qPrintable(names.join(QLatin1String(", "))), static_cast<long long>(*interval));

    Watcher watcher(config, std::move(notifiers));
    int exitCode = Ok;
    QObject::connect(&watcher, &Watcher::finished, &watcher, [&exitCode](int code) {
        exitCode = code;
        QCoreApplication::exit(code);
    });
    watchTerminationSignals(&watcher, [&watcher] {
        exitAfter(StopGrace,
                  QStringLiteral("once watch: not stopped after %1 s; exiting now").arg(StopGrace.count()));
        watcher.stop();
    });
    watcher.start();
    QCoreApplication::exec();
    return exitCode;
}

} // namespace once::cli
