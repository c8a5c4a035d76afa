// What the process-level tests (tst_delivery, tst_scaleout) share: running real `once`
// processes ($ONCE_BIN) against one store, waiting for them while the event loop runs,
// killing whatever is left when a test ends (passed or failed), reminders to enqueue,
// checks of `once stats --json`, and reading a store behind once's back.
#pragma once

#include "model/reminder.h"
#include "sim/partnersimulator.h"
#include "teststores.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QDeadlineTimer>
#include <QDir>
#include <QEventLoop>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMap>
#include <QProcess>
#include <QProcessEnvironment>
#include <QRegularExpression>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QSqlRecord>
#include <QStringList>
#include <QTcpSocket>
#include <QTimer>
#include <QUrl>

#include <algorithm>
#include <functional>
#include <memory>
#include <vector>

#ifdef Q_OS_LINUX
#include <csignal>
#include <sys/prctl.h>
#endif

namespace oncetest {

constexpr int WorkerTimeoutMs = 60000;
constexpr int CommandTimeoutMs = 30000;

// Runs the event loop (so that QProcess notices its children, and an in-process simulator
// answers) until done() holds or the time is up. done() is asked after every batch of
// events, and at least every 10 ms, so it may also steer a simulator between two requests.
inline bool pumpUntil(const std::function<bool()> &done, int timeoutMs)
{
    const QDeadlineTimer deadline(timeoutMs);
    QTimer tick;
    tick.start(10);
    while (!done()) {
        if (deadline.hasExpired())
            return false;
        QCoreApplication::processEvents(QEventLoop::WaitForMoreEvents);
    }
    return true;
}

struct ProcessResult
{
    bool finished = false; // false: still running at the deadline (then killed) or never started
    QProcess::ExitStatus exitStatus = QProcess::NormalExit;
    int exitCode = -1;
    QByteArray out;
    QByteArray err;
    QString what; // the command line, for messages

    bool exitedWith(int code) const { return finished && exitStatus == QProcess::NormalExit && exitCode == code; }
    bool crashed() const { return finished && exitStatus == QProcess::CrashExit; }
    QByteArray describe() const
    {
        QString text = what + QStringLiteral(": ");
        if (!finished)
            text += QStringLiteral("did not finish");
        else if (exitStatus == QProcess::CrashExit)
            text += QStringLiteral("crashed");
        else
            text += QStringLiteral("exit %1").arg(exitCode);
        return text.toUtf8() + "\n--- stdout:\n" + out.left(4000) + "\n--- stderr:\n" + err.left(4000);
    }
};

struct ReminderSpec
{
    QByteArray line;
    QByteArray key;
};

inline ReminderSpec makeReminder(const QString &prefix, int i, const QString &channel = QStringLiteral("sms"))
{
    const QString userId = QStringLiteral("%1-user-%2").arg(prefix, QString::number(i));
    const QString reminderId = QStringLiteral("%1-rem-%2").arg(prefix, QString::number(i));
    const QString scheduledAt = QStringLiteral("2024-05-01T09:%1:00Z").arg(i % 60, 2, 10, QLatin1Char('0'));
    const QJsonObject object{
        {QStringLiteral("user_id"), userId},
        {QStringLiteral("reminder_id"), reminderId},
        {QStringLiteral("scheduled_at"), scheduledAt},
        {QStringLiteral("destination"), QStringLiteral("+1555%1").arg(i, 7, 10, QLatin1Char('0'))},
        {QStringLiteral("channel"), channel},
        {QStringLiteral("event_id"), QStringLiteral("%1-evt-%2").arg(prefix).arg(i)},
        {QStringLiteral("body"), QStringLiteral("Your appointment is tomorrow at 10:00")},
    };
    return {QJsonDocument(object).toJson(QJsonDocument::Compact), once::makeSendKey(userId, reminderId, scheduledAt)};
}

// Empty when every named field of `once stats --json` has the expected value. A count the
// queue cannot report (null, with queue_unavailable saying why: Pub/Sub's backlog) is not
// checked.
inline QString statsProblems(const QJsonObject &stats, const QList<QPair<QString, qint64>> &expected)
{
    if (stats.isEmpty())
        return QStringLiteral("once stats --json gave nothing");
    QStringList problems;
    for (const auto &[field, value] : expected) {
        const QJsonValue actual = stats.value(field);
        if (actual.isNull() && !stats.value(QLatin1String("queue_unavailable")).toString().isEmpty())
            continue;
        if (!actual.isDouble() || qint64(actual.toDouble()) != value)
            problems << QStringLiteral("%1 is %2, expected %3")
                            .arg(field, QString::fromUtf8(QJsonDocument(QJsonArray{actual}).toJson(QJsonDocument::Compact)))
                            .arg(value);
    }
    if (!problems.isEmpty())
        problems << QString::fromUtf8(QJsonDocument(stats).toJson(QJsonDocument::Compact));
    return problems.join(QLatin1String("; "));
}

// Rows of a query on a store through a connection of its own (not once's Database class),
// for what no command shows or to check what once left behind; each row's columns joined
// with '|'. On SQLite the connection only reads, and waits for a worker's write lock.
inline QStringList storeRows(const TestStores &stores, const QString &storeUrl, const QString &sql,
                             QString *error = nullptr)
{
    static int connections = 0;
    const QString name = QStringLiteral("deliveryharness-%1").arg(++connections);
    QStringList rows;
    QString problem;
    {
        QSqlDatabase db = stores.openRaw(storeUrl, name);
        if (!db.isOpen()) {
            problem = QStringLiteral("cannot open %1: %2").arg(TestStores::withoutPassword(storeUrl), db.lastError().text());
        } else {
            QSqlQuery query(db);
            if (db.driverName() == QLatin1String("QSQLITE")) {
                query.exec(QStringLiteral("PRAGMA busy_timeout = 10000"));
                query.exec(QStringLiteral("PRAGMA query_only = 1"));
            }
            query.setForwardOnly(true);
            if (!query.exec(sql)) {
                problem = sql + QStringLiteral(": ") + query.lastError().text();
            } else {
                const int columnCount = query.record().count();
                while (query.next()) {
                    QStringList columns;
                    for (int i = 0; i < columnCount; ++i)
                        columns << query.value(i).toString();
                    rows << columns.join(u'|');
                }
            }
        }
        db.close();
    }
    QSqlDatabase::removeDatabase(name);
    if (!problem.isEmpty()) {
        qWarning("%s", qPrintable(problem));
        if (error)
            *error = problem;
    }
    return rows;
}

// Effects at a partner simulator per key: empty when each key had exactly one and nothing
// else took effect twice, else the first problems in one line.
inline QString exactlyOnceProblems(const once::PartnerSimulator &partner, const QList<QByteArray> &keys)
{
    const auto effects = partner.effectsByKey();
    QStringList problems;
    for (const auto &key : keys) {
        if (effects.value(key) != 1)
            problems << QStringLiteral("%1 had %2 effects").arg(QString::fromLatin1(key), QString::number(effects.value(key)));
    }
    if (effects.size() != keys.size())
        problems << QStringLiteral("%1 keys had effects, expected %2").arg(effects.size()).arg(keys.size());
    if (const qint64 duplicates = partner.stats().duplicateEffects; duplicates != 0)
        problems << QStringLiteral("%1 duplicate effects").arg(duplicates);
    return problems.mid(0, 10).join(QLatin1String("; "));
}

// The peak resident memory of a running process (VmHWM in /proc/PID/status), in KiB; -1
// when it cannot be read (the process is gone, or this is not Linux).
inline qint64 peakMemoryKiB(qint64 pid)
{
    QFile status(QStringLiteral("/proc/%1/status").arg(pid));
    if (pid <= 0 || !status.open(QIODevice::ReadOnly))
        return -1;
    for (const QByteArray &line : status.readAll().split('\n')) {
        if (line.startsWith("VmHWM:"))
            return line.mid(6).trimmed().split(' ').value(0).toLongLong();
    }
    return -1;
}

// Every occurrence of `secret` in a store, however it is kept: as bytes in the SQLite
// file and its WAL and shared memory, or in any column of any table of a PostgreSQL
// database (and in the server's log and write-ahead log written since `since`).
// Empty when there is none; *scanned says what was looked at.
inline QStringList whereStoreHolds(const TestStores &stores, const QString &storeUrl, const QByteArray &secret,
                                   const QDateTime &since, QStringList *scanned)
{
    QStringList found;
    const auto scanFile = [&](const QString &path) {
        QFile file(path);
        if (!file.open(QIODevice::ReadOnly)) {
            found << QStringLiteral("cannot read %1: %2").arg(path, file.errorString());
            return;
        }
        if (file.readAll().contains(secret))
            found << path;
        *scanned << QFileInfo(path).fileName();
    };
    if (storeUrl.startsWith(QLatin1String("sqlite:"))) {
        const QString path = storeUrl.mid(int(qstrlen("sqlite:")));
        if (!QFile::exists(path))
            found << QStringLiteral("no store file %1").arg(path);
        for (const auto &suffix : {"", "-wal", "-shm"}) {
            if (QFile::exists(path + QString::fromLatin1(suffix)))
                scanFile(path + QString::fromLatin1(suffix));
        }
        return found;
    }

    // PostgreSQL: every table of the store's database, each row as text. A row's text
    // shows a BYTEA column (the payloads) in hex, so look for the secret in hex too.
    const QString database = QUrl(storeUrl).path().mid(1);
    QString error;
    const QStringList tables = storeRows(stores, storeUrl,
                                         QStringLiteral("SELECT table_name FROM information_schema.tables "
                                                        "WHERE table_schema = 'public' AND table_type = 'BASE TABLE' "
                                                        "ORDER BY 1"),
                                         &error);
    if (!error.isEmpty() || !tables.contains(QLatin1String("ledger")) || !tables.contains(QLatin1String("attempts")))
        return found << QStringLiteral("%1: cannot list its tables (%2): %3").arg(database, error, tables.join(u','));
    const QByteArray hex = secret.toHex();
    qsizetype bytes = 0;
    for (const QString &table : tables) {
        const QStringList rows = storeRows(
            stores, storeUrl, QStringLiteral("SELECT COALESCE(string_agg(t::text, ' '), '') FROM \"%1\" t").arg(table),
            &error);
        if (!error.isEmpty())
            return found << error;
        const QByteArray text = rows.value(0).toUtf8();
        bytes += text.size();
        if (text.contains(secret) || text.contains(hex))
            found << QStringLiteral("%1: table %2").arg(database, table);
    }
    *scanned << QStringLiteral("%1 (%2 tables, %3 bytes as text)")
                    .arg(database, QString::number(tables.size()), QString::number(bytes));

    // What the server wrote elsewhere since `since`: its log (a failed statement is logged
    // with its text) and its write-ahead log (rows deleted since are still there).
    const QString clusterDir = QFileInfo(qEnvironmentVariable("ONCE_TEST_POSTGRES_URL_FILE")).absolutePath();
    if (stores.isPostgres() && QFile::exists(clusterDir + QStringLiteral("/server.log"))) {
        QStringList serverFiles{clusterDir + QStringLiteral("/server.log")};
        const QDir wal(clusterDir + QStringLiteral("/data/pg_wal"));
        for (const QFileInfo &segment : wal.entryInfoList(QDir::Files)) {
            if (segment.lastModified() >= since.addSecs(-1))
                serverFiles << segment.absoluteFilePath();
        }
        for (const QString &path : std::as_const(serverFiles)) {
            if (!scanned->contains(QFileInfo(path).fileName()))
                scanFile(path);
        }
    }
    return found;
}

// The port a worker started with --metrics-listen 127.0.0.1:0 says it serves its metrics
// on (the kernel's pick), read from its standard error; 0 when it never said so in time.
// What it said goes to *said, for a failure's message.
inline quint16 workerMetricsPort(QProcess *worker, int timeoutMs, QByteArray *said)
{
    static const QRegularExpression where(QStringLiteral("metrics at http://127\\.0\\.0\\.1:(\\d+)/metrics"));
    quint16 port = 0;
    pumpUntil(
        [&] {
            *said += worker->readAllStandardError();
            const auto match = where.match(QString::fromUtf8(*said));
            port = match.hasMatch() ? quint16(match.captured(1).toUInt()) : 0;
            return port != 0 || worker->state() == QProcess::NotRunning;
        },
        timeoutMs);
    return port;
}

// A blocking HTTP GET on 127.0.0.1 (for a partner simulator in another process). Returns
// the body of a 200 answer; otherwise an empty array and *error says why.
inline QByteArray httpGet(quint16 port, const QByteArray &path, QString *error, int timeoutMs = 10000)
{
    QTcpSocket socket;
    socket.connectToHost(QHostAddress::LocalHost, port);
    if (!socket.waitForConnected(timeoutMs)) {
        *error = QStringLiteral("GET %1: %2").arg(QString::fromLatin1(path), socket.errorString());
        return {};
    }
    socket.write("GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    QByteArray answer;
    const QDeadlineTimer deadline(timeoutMs);
    while (socket.state() == QAbstractSocket::ConnectedState && !deadline.hasExpired()) {
        socket.waitForReadyRead(int(std::max<qint64>(1, deadline.remainingTime())));
        answer += socket.readAll();
    }
    answer += socket.readAll();
    const qsizetype headEnd = answer.indexOf("\r\n\r\n");
    if (headEnd < 0 || !answer.startsWith("HTTP/1.1 200 ")) {
        *error = QStringLiteral("GET %1: unexpected answer: %2")
                     .arg(QString::fromLatin1(path), QString::fromLatin1(answer.left(300)));
        return {};
    }
    return answer.mid(headEnd + 4);
}

// Starts `once` processes against one store and owns them: whatever still runs when it
// goes (at the end of a test, passed or failed) is killed and reaped.
class OnceRunner final
{
    Q_DISABLE_COPY_MOVE(OnceRunner)

public:
    // queueUrl: a broker's queue that every process uses (as $ONCE_QUEUE), or empty for
    // the store's own.
    OnceRunner(const QString &onceBin, const QString &storeUrl, const QString &queueUrl = {})
        : m_onceBin(onceBin), m_storeUrl(storeUrl), m_queueUrl(queueUrl)
    {
    }
    ~OnceRunner() { killAll(); }

    const QString &storeUrl() const { return m_storeUrl; }
    // A command that every process is started through, once's own command line after it
    // (runuser -u nobody --: as another user); empty (the default) starts once itself.
    void setWrapper(const QStringList &wrapper) { m_wrapper = wrapper; }

    // The environment of every process: this one's, without what would change what once
    // does behind a test's back, plus `extra`. The BullMQ scripts are the ones the suite
    // was given (ONCE_TEST_BULLMQ_SCRIPTS: tests/producers' bullmq), if any.
    static QProcessEnvironment environment(const QMap<QString, QString> &extra = {})
    {
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        for (const auto name : {"ONCE_FAILPOINT", "ONCE_FAILPOINT_SKIP", "ONCE_PARTNER_TOKEN", "ONCE_STORE",
                                "ONCE_QUEUE", "ONCE_BULLMQ_SCRIPTS"})
            env.remove(QString::fromLatin1(name));
        if (const QString scripts = qEnvironmentVariable("ONCE_TEST_BULLMQ_SCRIPTS"); !scripts.isEmpty())
            env.insert(QStringLiteral("ONCE_BULLMQ_SCRIPTS"), scripts);
        for (auto it = extra.cbegin(); it != extra.cend(); ++it)
            env.insert(it.key(), it.value());
        return env;
    }

    // Starts `once <args>`, with --store inserted after the subcommand unless the arguments
    // name one or the subcommand uses none (partner-sim).
    QProcess *start(QStringList args, const QMap<QString, QString> &env = {})
    {
        if (!args.contains(QLatin1String("--store")) && args.value(0) != QLatin1String("partner-sim")) {
            args.insert(1, QStringLiteral("--store"));
            args.insert(2, m_storeUrl);
        }
        auto process = std::make_unique<QProcess>();
        if (m_wrapper.isEmpty()) {
            process->setProgram(m_onceBin);
            process->setArguments(args);
        } else {
            process->setProgram(m_wrapper.constFirst());
            process->setArguments(m_wrapper.mid(1) + QStringList{m_onceBin} + args);
        }
        QMap<QString, QString> extra = env;
        if (!m_queueUrl.isEmpty() && !extra.contains(QStringLiteral("ONCE_QUEUE")))
            extra.insert(QStringLiteral("ONCE_QUEUE"), m_queueUrl);
        process->setProcessEnvironment(environment(extra));
#ifdef Q_OS_LINUX
        // Should this test process die before it can kill them (ctest's timeout, a crash),
        // its children die with it instead of delivering on in the background.
        process->setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGKILL); });
#endif
        process->start(QIODevice::ReadOnly);
        m_processes.push_back(std::move(process));
        return m_processes.back().get();
    }

    // eachTurn runs after every batch of events while the process runs. A process still
    // running at the deadline is killed (a worker's result then tells the store's counts).
    ProcessResult waitFor(QProcess *process, int timeoutMs, const std::function<void()> &eachTurn = {})
    {
        ProcessResult result;
        // Through a wrapper, once's own arguments follow the wrapper's and once's path.
        const QStringList args = process->arguments().mid(m_wrapper.size());
        result.what = QStringList(m_wrapper + QStringList{QStringLiteral("once")} + shown(args)).join(QLatin1Char(' '));
        result.finished = pumpUntil(
            [&] {
                if (eachTurn)
                    eachTurn();
                return process->state() == QProcess::NotRunning;
            },
            timeoutMs);
        if (process->error() == QProcess::FailedToStart) {
            result.finished = false;
            result.err = process->errorString().toUtf8();
            return result;
        }
        if (!result.finished) {
            process->kill();
            process->waitForFinished(5000);
            if (args.value(0) == QLatin1String("worker"))
                result.what += QStringLiteral(" (store then: %1)")
                                   .arg(QString::fromUtf8(QJsonDocument(stats()).toJson(QJsonDocument::Compact)));
        }
        result.exitStatus = process->exitStatus();
        result.exitCode = process->exitCode();
        result.out = process->readAllStandardOutput();
        result.err = process->readAllStandardError();
        return result;
    }

    // Runs a short command to its end; it is not kept afterwards.
    ProcessResult run(const QStringList &args, const QMap<QString, QString> &env = {}, int timeoutMs = CommandTimeoutMs)
    {
        QProcess *process = start(args, env);
        const ProcessResult result = waitFor(process, timeoutMs);
        release(process);
        return result;
    }

    // Forgets (and deletes) a process that has finished.
    void release(QProcess *process)
    {
        std::erase_if(m_processes, [process](const auto &p) { return p.get() == process; });
    }

    // SIGKILLs every process still running and waits for each; returns how many it killed.
    int killAll()
    {
        int killed = 0;
        for (auto &process : m_processes) {
            if (process->state() != QProcess::NotRunning) {
                process->kill();
                process->waitForFinished(5000);
                ++killed;
            }
        }
        m_processes.clear();
        return killed;
    }

    QJsonObject stats()
    {
        const auto result = run({QStringLiteral("stats"), QStringLiteral("--json")});
        if (!result.exitedWith(0))
            qWarning("%s", result.describe().constData());
        return QJsonDocument::fromJson(result.out).object();
    }

    QJsonArray jsonArray(const QStringList &args)
    {
        const auto result = run(args);
        const auto document = QJsonDocument::fromJson(result.out);
        if (!result.exitedWith(0) || !document.isArray())
            qWarning("%s", result.describe().constData());
        return document.array();
    }

    // Writes `count` reminders (makeReminder(prefix, i)) to a file in `dir` and enqueues
    // it (with `extraArgs`, such as another --store). Returns their send keys, or an empty
    // list (after a warning) when that failed.
    QList<QByteArray> enqueueReminders(const QString &dir, int count, const QString &prefix,
                                       const QStringList &extraArgs = {}, const QString &channel = QStringLiteral("sms"))
    {
        QByteArray content;
        QList<QByteArray> keys;
        for (int i = 0; i < count; ++i) {
            const auto reminder = makeReminder(prefix, i, channel);
            content += reminder.line + '\n';
            keys.append(reminder.key);
        }
        const QString path = QDir(dir).filePath(prefix + QStringLiteral(".jsonl"));
        QFile file(path);
        if (!file.open(QIODevice::WriteOnly) || file.write(content) != content.size()) {
            qWarning("cannot write %s", qPrintable(path));
            return {};
        }
        file.close();
        const auto enqueue = run(QStringList{QStringLiteral("enqueue"), path} + extraArgs);
        if (!enqueue.exitedWith(0)) {
            qWarning("%s", enqueue.describe().constData());
            return {};
        }
        return keys;
    }

    // Starts `once partner-sim --port 0 OPTIONS` and returns the port it printed, or 0
    // (after a warning).
    quint16 startPartnerSim(const QStringList &options = {})
    {
        QProcess *process = start(QStringList{QStringLiteral("partner-sim"), QStringLiteral("--port"), QStringLiteral("0")}
                                  + options);
        QByteArray line;
        pumpUntil(
            [&] {
                if (process->canReadLine())
                    line = process->readLine();
                return !line.isEmpty() || process->state() == QProcess::NotRunning;
            },
            10000);
        static const QRegularExpression listening(QStringLiteral("listening on http://127\\.0\\.0\\.1:(\\d+)[/ ]"));
        const auto match = listening.match(QString::fromUtf8(line));
        if (!match.hasMatch()) {
            qWarning("once partner-sim said %s%s", line.constData(), process->readAllStandardError().constData());
            return 0;
        }
        return quint16(match.captured(1).toUInt());
    }

    // Starts `once serve --listen 127.0.0.1:0 OPTIONS` on this runner's store and returns the
    // port its first line names, or 0 (after a warning). *server, if given, is the process,
    // its standard error the read channel (one line per request); *startLines, what it said
    // up to where it listens.
    quint16 startServe(const QStringList &options = {}, QProcess **server = nullptr, QByteArray *startLines = nullptr)
    {
        QProcess *process = start(QStringList{QStringLiteral("serve"), QStringLiteral("--listen"),
                                              QStringLiteral("127.0.0.1:0")}
                                  + options);
        process->setReadChannel(QProcess::StandardError);
        if (server)
            *server = process;
        static const QRegularExpression listening(QStringLiteral("listening on https?://[^ ]+:(\\d+) for"));
        QByteArray said;
        QRegularExpressionMatch match;
        pumpUntil(
            [&] {
                while (process->canReadLine() && !match.hasMatch()) {
                    said += process->readLine();
                    match = listening.match(QString::fromUtf8(said));
                }
                return match.hasMatch() || process->state() == QProcess::NotRunning;
            },
            15000);
        if (startLines)
            *startLines = said;
        if (!match.hasMatch()) {
            qWarning("once serve did not start: %s%s", said.constData(), process->readAllStandardError().constData());
            return 0;
        }
        return quint16(match.captured(1).toUInt());
    }

    // Arguments as they may be shown: store URLs without their password.
    static QStringList shown(QStringList args)
    {
        for (auto &arg : args)
            arg = TestStores::withoutPassword(arg);
        return args;
    }

private:
    QString m_onceBin;
    QString m_storeUrl;
    QString m_queueUrl;
    QStringList m_wrapper;
    std::vector<std::unique_ptr<QProcess>> m_processes;
};

} // namespace oncetest

#define VERIFY_NO_PROBLEMS(text)                                                                                       \
    do {                                                                                                               \
        const QString problems_ = (text);                                                                              \
        QVERIFY2(problems_.isEmpty(), qPrintable(problems_));                                                          \
    } while (false)
