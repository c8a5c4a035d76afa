// `once workers`: every worker registered on a store, as the console's Worker page
// lists them.
#include "cli.h"

#include "store/store.h"

#include <QJsonArray>

namespace once::cli {

namespace {

QString age(qint64 ms)
{
    if (ms < 1000)
        return QStringLiteral("just now");
    if (ms < 60 * 1000)
        return QStringLiteral("%1s ago").arg(ms / 1000);
    if (ms < 3600 * 1000)
        return QStringLiteral("%1m ago").arg(ms / 60000);
    if (ms < 48 * 3600 * 1000LL)
        return QStringLiteral("%1h ago").arg(ms / 3600000);
    return QStringLiteral("%1d ago").arg(ms / (24 * 3600000LL));
}

// Left-aligned text, right-aligned numbers, two spaces between columns; the last
// column (the partner URL) is not padded.
void printTable(const QList<QStringList> &rows, const QList<bool> &numeric)
{
    QList<qsizetype> widths(numeric.size(), 0);
    for (const auto &row : rows) {
        for (qsizetype column = 0; column < row.size(); ++column)
            widths[column] = std::max(widths[column], row[column].size());
    }
    for (const auto &row : rows) {
        QStringList cells;
        for (qsizetype column = 0; column < row.size(); ++column) {
            if (column == row.size() - 1)
                cells << row[column];
            else if (numeric[column])
                cells << row[column].rightJustified(widths[column]);
            else
                cells << row[column].leftJustified(widths[column]);
        }
        printLine(cells.join(QStringLiteral("  ")).trimmed());
    }
}

} // namespace

int runWorkers(const QStringList &arguments)
{
    Command command(
        QStringLiteral("workers"),
        QStringLiteral("Lists every worker registered on the store: running, paused, stopped, or gone "
                       "(no heartbeat for 15 s without having stopped), with its counters at its last "
                       "heartbeat."),
        {});
    command.parser().addOption({QStringLiteral("json"), QStringLiteral("Print JSON.")});
    if (const int exit = command.parse(arguments); exit >= 0)
        return exit;
    const auto store = command.openStore(Command::Access::ReadOnly);
    if (!store)
        return Failure;
    QString error;
    const auto workers = store->workers().list(&error);
    if (!workers)
        return failure(error);
    const qint64 now = nowMs();
    if (command.parser().isSet(QStringLiteral("json"))) {
        QJsonArray array;
        for (const auto &worker : *workers)
            array.append(worker.toJson(now));
        printJson(QJsonDocument(array));
        return Ok;
    }
    if (workers->isEmpty()) {
        printLine(
            QStringLiteral("no worker has registered on %1").arg(store->database().location().displayName()));
        return Ok;
    }
    QList<QStringList> rows{{QStringLiteral("ID"), QStringLiteral("HOST"), QStringLiteral("PID"),
                             QStringLiteral("STATUS"), QStringLiteral("STARTED"), QStringLiteral("HEARTBEAT"),
                             QStringLiteral("APPLIED"), QStringLiteral("DUPLICATES"),
                             QStringLiteral("RETRIES"), QStringLiteral("DEAD"), QStringLiteral("IN_FLIGHT"),
                             QStringLiteral("IN_DOUBT"), QStringLiteral("PARTNER")}};
    QStringList overruled; // workers holding what they were started to resend
    for (const auto &worker : *workers) {
        QString inDoubt = worker.inDoubtPolicy.isEmpty() ? QStringLiteral("-") : worker.inDoubtPolicy;
        if (worker.holdsAgainstItsStart()) {
            inDoubt += QLatin1Char('*');
            overruled << worker.id;
        }
        rows.append({worker.id, worker.host, QString::number(worker.pid), worker.status(now),
                     formatTime(worker.startedAtMs), age(now - worker.heartbeatAtMs),
                     QString::number(worker.applied), QString::number(worker.duplicates),
                     QString::number(worker.retries), QString::number(worker.deadLettered),
                     QString::number(worker.inFlight), inDoubt,
                     worker.partner.isEmpty() ? QStringLiteral("-") : worker.partner});
    }
    printTable(rows, {false, false, true, false, false, false, true, true, true, true, true, false, false});
    if (!overruled.isEmpty())
        printLine(QStringLiteral("* started with --in-doubt resend, but holds sends left in doubt for an operator: the "
                                 "store records that its partner does not honour Idempotency-Key (once partners)"));
    return Ok;
}

} // namespace once::cli
