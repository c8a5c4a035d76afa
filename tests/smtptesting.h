// A real SMTP server on loopback for the tests that mail (tst_smtp, tst_watch):
// tests/scripts/smtp-server (aiosmtpd), whose path ctest gives as ONCE_TEST_SMTP_SERVER,
// with every mail kept and read back over its control port.
#pragma once

#include "deliveryharness.h"
#include "httptesting.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>

namespace oncetest {

// One tests/scripts/smtp-server process, killed with the object.
class SmtpServer
{
public:
    ~SmtpServer()
    {
        if (m_process.state() != QProcess::NotRunning) {
            m_process.kill();
            m_process.waitForFinished(5000);
        }
    }

    // Empty when it listens, else why not.
    QString start(const QStringList &args)
    {
        const QString script = qEnvironmentVariable("ONCE_TEST_SMTP_SERVER");
        if (script.isEmpty())
            return QStringLiteral(
                "ONCE_TEST_SMTP_SERVER must name tests/scripts/smtp-server (ctest sets it)");
        m_process.start(script, args);
        if (!m_process.waitForStarted(10000) || !m_process.waitForReadyRead(20000))
            return QStringLiteral("smtp-server did not start: ") +
                   QString::fromLocal8Bit(m_process.readAllStandardError());
        const QJsonObject ports = QJsonDocument::fromJson(m_process.readLine()).object();
        smtpPort = quint16(ports.value(QLatin1String("smtp")).toInt());
        m_controlPort = quint16(ports.value(QLatin1String("control")).toInt());
        return smtpPort && m_controlPort ? QString() : QStringLiteral("smtp-server printed no ports");
    }

    QString url(const QString &scheme = QStringLiteral("smtp")) const
    {
        return QStringLiteral("%1://127.0.0.1:%2").arg(scheme).arg(smtpPort);
    }

    QJsonObject stats() { return QJsonDocument::fromJson(get("/stats")).object(); }
    QJsonArray mails() { return QJsonDocument::fromJson(get("/mails")).array(); }

    bool setFault(const QJsonObject &fault)
    {
        HttpClient client;
        HttpRequest request;
        request.url = QUrl(QStringLiteral("http://127.0.0.1:%1/fault").arg(m_controlPort));
        request.body = QJsonDocument(fault).toJson(QJsonDocument::Compact);
        request.headers = {{"Content-Type", "application/json"}};
        request.timeoutMs = 10000;
        return exchange(client, request).httpStatus == 200;
    }

    quint16 smtpPort = 0;

private:
    QByteArray get(const QByteArray &path)
    {
        QString error;
        const QByteArray body = httpGet(m_controlPort, path, &error);
        if (!error.isEmpty())
            qWarning("%s", qPrintable(error));
        return body;
    }

    QProcess m_process;
    quint16 m_controlPort = 0;
};

} // namespace oncetest
