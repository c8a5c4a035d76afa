#pragma once

#include <QCommandLineParser>
#include <QJsonArray>
#include <QJsonDocument>
#include <QStringList>

#include <chrono>
#include <functional>
#include <memory>

namespace once {
class BrokerQueue;
class Store;
}

namespace once::cli {

// Exit codes shared by every subcommand.
enum Exit { Ok = 0, Failure = 1, Usage = 2 };

// A subcommand's parser with the options every subcommand has (--store, --help).
// parse() prints help or a one-line usage error itself and tells the caller to exit.
class Command final
{
public:
    Command(const QString &name, const QString &description, const QString &synopsis);

    QCommandLineParser &parser() { return m_parser; }
    const QCommandLineParser &parser() const { return m_parser; }
    // Returns -1 to go on, or the exit code to return.
    int parse(const QStringList &arguments);
    QString storeUrl() const;
    // Prints the error itself. ReadOnly for the commands that only look: they write
    // nothing, so they work on a backup, a read-only disk or a store they may only read.
    enum class Access { ReadWrite, ReadOnly };
    std::unique_ptr<Store> openStore(Access access = Access::ReadWrite) const;
    // --queue, for the subcommands that touch the queue: a broker's queue, else the store's;
    // and --bullmq-scripts, which parse() hands to the BullMQ backend.
    void addQueueOption();
    QString queueUrl() const; // --queue, else $ONCE_QUEUE; empty: the store's own queue
    std::unique_ptr<BrokerQueue> openBrokerQueue() const; // prints the error itself

    // Integer option in [min, max]; prints a usage error and returns nullopt when not.
    std::optional<qint64> integer(const QString &option, qint64 min, qint64 max) const;
    std::optional<double> rate(const QString &option) const; // in [0, 1]

    int usageError(const QString &message) const;

private:
    QString m_name;
    QCommandLineParser m_parser;
    bool m_hasQueueOptions = false;
};

// A password in a URL on the command line (smtp://USER:PASSWORD@..., postgres://...) is
// readable by every user of the machine (ps, /proc/PID/cmdline): once the arguments are
// copied, the process overwrites the passwords in its own argv with asterisks.
void hideUrlPasswords(int argc, char **argv);

void printJson(const QJsonDocument &document);
// Prints rows that know how to be JSON (toJson()) as one JSON array.
template<typename Rows> void printJsonArray(const Rows &rows)
{
    QJsonArray array;
    for (const auto &row : rows)
        array.append(row.toJson());
    printJson(QJsonDocument(array));
}
void printLine(const QString &line);
int failure(const QString &message);
// Turns SIGTERM, SIGINT and SIGHUP into a call on the event loop; a second one exits at once.
void watchTerminationSignals(QObject *context, std::function<void()> onSignal);
// Ends the process with status 1 and this line after the grace period, whatever the event
// loop is doing: for a stop that must not wait for ever on a store or a partner.
void exitAfter(std::chrono::milliseconds grace, const QString &message);

int runInit(const QStringList &arguments);
int runEnqueue(const QStringList &arguments);
int runStats(const QStringList &arguments);
int runHistory(const QStringList &arguments);
int runEvents(const QStringList &arguments);
int runDeadLetters(const QStringList &arguments);
int runRedrive(const QStringList &arguments);
int runInDoubt(const QStringList &arguments);
int runResolve(const QStringList &arguments);
int runPartners(const QStringList &arguments);
int runAlerts(const QStringList &arguments);
int runReconcile(const QStringList &arguments);
int runWorker(const QStringList &arguments);
int runWorkers(const QStringList &arguments);
int runPartnerSim(const QStringList &arguments);
int runBench(const QStringList &arguments);
int runGrantReadOnly(const QStringList &arguments);
int runServe(const QStringList &arguments);
int runIncidents(const QStringList &arguments);
int runWatch(const QStringList &arguments);

} // namespace once::cli
