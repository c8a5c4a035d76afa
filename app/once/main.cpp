#include "cli.h"

#include "http/opensslteardown.h"
#include "monitoring/crashreport.h"

#include <QCoreApplication>
#include <QLoggingCategory>

#include <cstdio>
#include <functional>
#include <map>

namespace {

struct Subcommand
{
    const char *summary;
    std::function<int(const QStringList &)> run;
};

const std::map<QString, Subcommand> &subcommands()
{
    using namespace once::cli;
    static const std::map<QString, Subcommand> table{
        {QStringLiteral("init"), {"create or upgrade a store", runInit}},
        {QStringLiteral("enqueue"), {"put reminders (JSON Lines) on the queue", runEnqueue}},
        {QStringLiteral("worker"), {"deliver reminders to a partner", runWorker}},
        {QStringLiteral("workers"), {"list the workers registered on a store", runWorkers}},
        {QStringLiteral("stats"), {"queue and ledger counts", runStats}},
        {QStringLiteral("history"), {"the whole story of one event", runHistory}},
        {QStringLiteral("events"), {"list events by user or state", runEvents}},
        {QStringLiteral("dlq"), {"list dead letters", runDeadLetters}},
        {QStringLiteral("redrive"), {"put dead letters back on the queue", runRedrive}},
        {QStringLiteral("in-doubt"), {"list events whose send outcome is unknown", runInDoubt}},
        {QStringLiteral("resolve"), {"decide an in-doubt event", runResolve}},
        {QStringLiteral("incidents"), {"list, acknowledge, note, resolve and report incidents", runIncidents}},
        {QStringLiteral("partners"), {"whether each partner honours Idempotency-Key", runPartners}},
        {QStringLiteral("alerts"), {"the alert rules, their thresholds and what fires now", runAlerts}},
        {QStringLiteral("reconcile"), {"ask partners with a lookup about the events in doubt", runReconcile}},
        {QStringLiteral("partner-sim"), {"run the partner simulator", runPartnerSim}},
        {QStringLiteral("bench"), {"measure throughput and latency", runBench}},
        {QStringLiteral("serve"), {"the store's queue over HTTP (publish, consume, ack)", runServe}},
        {QStringLiteral("watch"), {"notify when an alert starts, repeats and resolves (webhook, Slack, mail)", runWatch}},
        {QStringLiteral("grant-readonly"), {"the SQL for a PostgreSQL role that may only look", runGrantReadOnly}},
    };
    return table;
}

void printUsage(FILE *to)
{
    std::fputs("Usage: once <command> [options]\n\n"
               "Delivers reminders from an at-least-once queue to a partner exactly once.\n\nCommands:\n",
               to);
    for (const auto &[name, command] : subcommands())
        std::fprintf(to, "  %-15s %s\n", qPrintable(name), command.summary);
    std::fputs("\nEvery command takes --help and --store. Exit status: 0 ok, 1 failure, 2 usage.\n", to);
}

} // namespace

int main(int argc, char *argv[])
{
    once::reportCrashesOnStderr("once");
    once::skipOpenSslTeardownAtExit();
    QCoreApplication app(argc, argv);
    // Per-connection chatter stays off unless QT_LOGGING_RULES asks for it.
    QLoggingCategory::setFilterRules(QStringLiteral("once.*.debug=false"));
    QCoreApplication::setOrganizationName(QStringLiteral("once"));
    QCoreApplication::setApplicationName(QStringLiteral("once"));
    QCoreApplication::setApplicationVersion(QStringLiteral(ONCE_VERSION));

    const QStringList arguments = QCoreApplication::arguments();
    once::cli::hideUrlPasswords(argc, argv);
    const QString command = arguments.value(1);
    if (command == QLatin1String("--version") || command == QLatin1String("-v")) {
        std::printf("once %s\n", ONCE_VERSION);
        return 0;
    }
    if (command.isEmpty() || command == QLatin1String("--help") || command == QLatin1String("-h")
        || command == QLatin1String("help")) {
        printUsage(command.isEmpty() ? stderr : stdout);
        return command.isEmpty() ? once::cli::Usage : once::cli::Ok;
    }
    const auto found = subcommands().find(command);
    if (found == subcommands().end()) {
        std::fprintf(stderr, "once: unknown command \"%s\" (see once --help)\n", qPrintable(command));
        return once::cli::Usage;
    }
    try {
        return found->second.run(arguments);
    } catch (const std::exception &exception) {
        std::fprintf(stderr, "once: %s\n", exception.what());
        return once::cli::Failure;
    }
}
