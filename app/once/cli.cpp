#include "cli.h"

#include "queues/brokerqueue.h"
#include "queues/bullmq/bullmqscripts.h"
#include "queues/queuebackend.h"
#include "store/database.h"
#include "store/store.h"

#include <QCoreApplication>
#include <QDir>
#include <QSocketNotifier>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>
#include <sys/socket.h>
#include <unistd.h>

namespace once::cli {

namespace {

int signalPipe[2] = {-1, -1};
std::atomic<int> signalsReceived{0};

void onTerminationSignal(int)
{
    // A second signal means "now": the event loop may be the very thing that is stuck.
    if (signalsReceived.fetch_add(1) >= 1) {
        static const char message[] = "once: stopping at once; deliveries in flight will show as in doubt\n";
        [[maybe_unused]] const auto written = ::write(STDERR_FILENO, message, sizeof message - 1);
        ::_exit(Failure);
    }
    const char byte = 1;
    [[maybe_unused]] const auto written = ::write(signalPipe[1], &byte, 1);
}

} // namespace

// A signal handler may do almost nothing itself: it writes a byte that the event loop
// reads. SIGHUP (a closed terminal, a careless `kill -HUP`) stops as gently as SIGTERM:
// killed abruptly, a worker would leave its claims to expire in doubt.
void watchTerminationSignals(QObject *context, std::function<void()> onSignal)
{
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, signalPipe) != 0)
        return;
    auto *notifier = new QSocketNotifier(signalPipe[0], QSocketNotifier::Read, context);
    QObject::connect(notifier, &QSocketNotifier::activated, context, [onSignal = std::move(onSignal)] {
        char byte;
        [[maybe_unused]] const auto read = ::read(signalPipe[0], &byte, 1);
        onSignal();
    });
    struct sigaction action = {};
    action.sa_handler = onTerminationSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &action, nullptr);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGHUP, &action, nullptr);
}

// On a thread of its own, so that it fires even when the event loop waits on a store that
// does not answer.
void exitAfter(std::chrono::milliseconds grace, const QString &message)
{
    std::thread([grace, line = QByteArray(message.toLocal8Bit() + '\n')] {
        std::this_thread::sleep_for(grace);
        std::fputs(line.constData(), stderr);
        std::fflush(stderr);
        std::_Exit(Failure);
    }).detach();
}

Command::Command(const QString &name, const QString &description, const QString &synopsis) : m_name(name)
{
    m_parser.setApplicationDescription(description);
    m_parser.addHelpOption();
    m_parser.addOption({QStringLiteral("store"),
                        QStringLiteral("The store: a SQLite file, sqlite:PATH or postgres://USER@HOST[:PORT]/DB "
                                       "(default: $ONCE_STORE, else %1).")
                            .arg(defaultStoreFile()),
                        QStringLiteral("url")});
    if (!synopsis.isEmpty())
        m_parser.addPositionalArgument(QStringLiteral("arguments"), synopsis, synopsis);
}

int Command::parse(const QStringList &arguments)
{
    // The first argument is the program, the second the subcommand; QCommandLineParser
    // wants the program name first.
    QStringList forParser = arguments;
    forParser.removeAt(1);
    if (!m_parser.parse(forParser))
        return usageError(m_parser.errorText());
    if (m_parser.isSet(QStringLiteral("help"))) {
        QString help = m_parser.helpText();
        help.replace(QCoreApplication::applicationName() + QStringLiteral(" [options]"),
                     QCoreApplication::applicationName() + QLatin1Char(' ') + m_name + QStringLiteral(" [options]"));
        std::fputs(qPrintable(help), stdout);
        return Ok;
    }
    if (m_hasQueueOptions && m_parser.isSet(QStringLiteral("bullmq-scripts")))
        BullMqScripts::setCommandsFolder(
            QDir(m_parser.value(QStringLiteral("bullmq-scripts"))).absolutePath());
    return -1;
}

QString Command::storeUrl() const
{
    return m_parser.isSet(QStringLiteral("store")) ? m_parser.value(QStringLiteral("store")) : defaultStoreUrl();
}

std::unique_ptr<Store> Command::openStore(Access access) const
{
    QString error;
    auto store = Store::open(storeUrl(), &error,
                             access == Access::ReadOnly ? Database::Access::ReadOnly : Database::Access::ReadWrite);
    if (!store)
        failure(error);
    return store;
}

void Command::addQueueOption()
{
    m_parser.addOption({QStringLiteral("queue"),
                        QStringLiteral("A broker's queue: %1 (default: $ONCE_QUEUE, else the store's own queue).")
                            .arg(queueUrlSyntaxes()),
                        QStringLiteral("url")});
    m_parser.addOption(
        {QStringLiteral("bullmq-scripts"),
         QStringLiteral("Where a bullmq:// queue's scripts are: the commands folder of the team's "
                        "bullmq package, %1 (default: $ONCE_BULLMQ_SCRIPTS, else %2).")
             .arg(BullMqScripts::supportedVersions().join(QStringLiteral(", ")),
                  QStringLiteral("./node_modules/bullmq/dist/cjs/commands")),
         QStringLiteral("dir")});
    m_hasQueueOptions = true;
}

QString Command::queueUrl() const
{
    return m_parser.isSet(QStringLiteral("queue")) ? m_parser.value(QStringLiteral("queue"))
                                                   : qEnvironmentVariable("ONCE_QUEUE");
}

std::unique_ptr<BrokerQueue> Command::openBrokerQueue() const
{
    QString error;
    const auto location = QueueLocation::parse(queueUrl(), &error);
    if (!location) {
        failure(error);
        return nullptr;
    }
    auto queue = once::openBrokerQueue(*location, {}, 1, &error);
    if (!queue)
        failure(error);
    return queue;
}

std::optional<qint64> Command::integer(const QString &option, qint64 min, qint64 max) const
{
    bool ok = false;
    const qint64 value = m_parser.value(option).toLongLong(&ok);
    if (!ok || value < min || value > max) {
        usageError(QStringLiteral("--%1 must be a whole number from %2 to %3, not \"%4\"")
                       .arg(option)
                       .arg(min)
                       .arg(max)
                       .arg(m_parser.value(option)));
        return std::nullopt;
    }
    return value;
}

std::optional<double> Command::rate(const QString &option) const
{
    bool ok = false;
    const double value = m_parser.value(option).toDouble(&ok);
    if (!ok || value < 0.0 || value > 1.0) {
        usageError(QStringLiteral("--%1 must be a number from 0 to 1, not \"%2\"").arg(option, m_parser.value(option)));
        return std::nullopt;
    }
    return value;
}

int Command::usageError(const QString &message) const
{
    std::fprintf(stderr, "once %s: %s (see once %s --help)\n", qPrintable(m_name), qPrintable(message),
                 qPrintable(m_name));
    return Usage;
}

void hideUrlPasswords(int argc, char **argv)
{
    for (int i = 1; i < argc; ++i) {
        char *scheme = std::strstr(argv[i], "://");
        if (!scheme)
            continue;
        char *authority = scheme + 3;
        char *const end = authority + std::strcspn(authority, "/?#");
        char *at = nullptr; // the last one: a password may hold an @ of its own
        for (char *p = authority; p < end; ++p) {
            if (*p == '@')
                at = p;
        }
        char *colon = at ? static_cast<char *>(std::memchr(authority, ':', size_t(at - authority))) : nullptr;
        if (colon)
            std::memset(colon + 1, '*', size_t(at - colon - 1));
    }
}

void printJson(const QJsonDocument &document)
{
    std::fputs(document.toJson(QJsonDocument::Indented).constData(), stdout);
}

void printLine(const QString &line)
{
    std::fputs(qPrintable(line + QLatin1Char('\n')), stdout);
    std::fflush(stdout);
}

int failure(const QString &message)
{
    std::fprintf(stderr, "once: %s\n", qPrintable(message));
    return Failure;
}

} // namespace once::cli
