// Fresh queues at a queue backend for tests, of the kind the environment asks for, so one
// suite runs on the store's own queue (the default) and at every registered backend
// (core/queues/queuebackend.h): ONCE_TEST_QUEUE=ID (rabbitmq, redis), with
// ONCE_TEST_QUEUE_URL_FILE naming the URL file its test server wrote (tests/CMakeLists.txt
// sets both for NAME_ID, whose fixture runs that server). A server that serves one queue
// (once serve) makes a fresh one per call instead: its script wrote DIR/queue-script, and
// `SCRIPT new-queue DIR NAME` prints the new queue's URL.
// A server that cannot run here (the Pub/Sub emulator is not in Debian's archive) left
// its reason in DIR/unavailable: the suite then says so and exits SkipExitCode, which
// tests/CMakeLists.txt reports as skipped, never as passed.
#pragma once

#include "queues/queuebackend.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QString>
#include <QStringList>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

class TestQueues final
{
    Q_DISABLE_COPY_MOVE(TestQueues)

public:
    static constexpr int SkipExitCode = 77;

    TestQueues()
    {
        m_kind = qEnvironmentVariable("ONCE_TEST_QUEUE");
        if (m_kind.isEmpty())
            return;
        m_backend = once::queueBackendForId(m_kind);
        if (!m_backend)
            qFatal("TestQueues: ONCE_TEST_QUEUE=%s is no registered queue backend (%s)", qPrintable(m_kind),
                   qPrintable(once::queueUrlSyntaxes()));
        const QString urlFile = qEnvironmentVariable("ONCE_TEST_QUEUE_URL_FILE");
        m_serverDir = QFileInfo(urlFile).dir();
        QFile unavailable(m_serverDir.filePath(QStringLiteral("unavailable")));
        if (unavailable.open(QIODevice::ReadOnly)) {
            std::printf("SKIPPED: no %s test server: %s\n", qPrintable(m_kind), unavailable.readAll().trimmed().constData());
            std::fflush(stdout);
            std::exit(SkipExitCode);
        }
        QFile script(m_serverDir.filePath(QStringLiteral("queue-script")));
        if (script.open(QIODevice::ReadOnly)) {
            m_queueScript = QString::fromUtf8(script.readAll().trimmed());
            return;
        }
        QFile file(urlFile);
        if (urlFile.isEmpty() || !file.open(QIODevice::ReadOnly))
            qFatal("TestQueues: cannot read the queue URL file \"%s\" (did the %s fixture run?)", qPrintable(urlFile),
                   qPrintable(m_kind));
        m_baseUrl = QString::fromUtf8(file.readAll().trimmed());
        // A backend on another backend's server (BullMQ on the Redis of redis://) speaks of
        // it in its own scheme.
        const qsizetype schemeEnd = m_baseUrl.indexOf(QLatin1String("://"));
        const QString scheme = m_baseUrl.left(std::max<qsizetype>(0, schemeEnd));
        if (schemeEnd > 0 && scheme != m_backend->scheme && !m_backend->moreSchemes.contains(scheme))
            m_baseUrl.replace(0, schemeEnd, QString(m_backend->scheme));
        // What else the server's queue URLs carry (RabbitMQ's management API listens on a
        // port of its own), which its script writes beside the URL.
        QFile parameters(QFileInfo(urlFile).dir().filePath(QStringLiteral("url-parameters")));
        if (parameters.open(QIODevice::ReadOnly))
            m_parameters = QString::fromUtf8(parameters.readAll().trimmed());
    }

    // The lease of a suite whose workers run --until-idle, for once init and once worker
    // alike: long for a few messages, and short for a queue that cannot count (Pub/Sub,
    // whose ack deadline follows it), where --until-idle waits a whole lease of quiet
    // (30 s by default).
    static QStringList untilIdleLeaseOptions() { return {QStringLiteral("--lease"), QStringLiteral("10")}; }
    // The worker's, with sends that time out well inside the lease (once worker refuses a
    // lease a send could outlast).
    static QStringList untilIdleWorkerOptions()
    {
        return untilIdleLeaseOptions() + QStringList{QStringLiteral("--timeout"), QStringLiteral("4")};
    }

    bool isBroker() const { return m_backend != nullptr; }
    QString kind() const { return m_kind.isEmpty() ? QStringLiteral("the store's own queue") : m_kind; }

    // A queue nobody has used at the test server, or empty for the store's own queue.
    QString newUrl()
    {
        if (!m_backend)
            return {};
        ++m_count;
        const QString name = QStringLiteral("test-%1-%2").arg(QCoreApplication::applicationPid()).arg(m_count);
        if (!m_queueScript.isEmpty())
            return queueFromScript(name);
        QString url = m_baseUrl + QLatin1Char('?') + m_backend->nameParameter + QLatin1Char('=') + name;
        if (!m_parameters.isEmpty())
            url += QLatin1Char('&') + m_parameters;
        return url;
    }

    // Asks the test server's script for something only a test server does (Kafka's mock:
    // cut a broker off, move a leader): `SCRIPT ACTION DIR ARGS...`. Empty, or why not.
    QString serverRequest(const QString &action, const QStringList &args) const
    {
        if (m_queueScript.isEmpty())
            return QStringLiteral("the %1 test server takes no requests").arg(kind());
        QString error;
        runScript(action, args, &error);
        return error;
    }

private:
    QString queueFromScript(const QString &name) const
    {
        QString error;
        const QByteArray url = runScript(QStringLiteral("new-queue"), {name}, &error);
        if (!error.isEmpty())
            qFatal("TestQueues: %s", qPrintable(error));
        return QString::fromUtf8(url.trimmed());
    }

    // `SCRIPT ACTION DIR ARGS...`: its standard output, or why it failed in *error.
    QByteArray runScript(const QString &action, const QStringList &args, QString *error) const
    {
        QProcess script;
        script.start(m_queueScript, QStringList{action, m_serverDir.path()} + args);
        if (!script.waitForFinished(30000) || script.exitStatus() != QProcess::NormalExit || script.exitCode() != 0)
            *error = QStringLiteral("%1 %2 %3 failed: %4")
                         .arg(m_queueScript, action, args.join(u' '), QString::fromUtf8(script.readAllStandardError()));
        return script.readAllStandardOutput();
    }

    QString m_kind;
    QDir m_serverDir;
    QString m_queueScript;
    const once::QueueBackend *m_backend = nullptr;
    QString m_baseUrl;
    QString m_parameters;
    int m_count = 0;
};
