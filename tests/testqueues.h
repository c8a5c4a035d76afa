// Fresh broker queues for tests, of the kind the environment asks for, so one suite runs
// on the store's own queue (the default) and on a broker: ONCE_TEST_QUEUE=rabbitmq or
// redis, with ONCE_TEST_QUEUE_URL_FILE naming the URL file that scripts/rabbitmq-server
// or scripts/redis-server wrote (tests/CMakeLists.txt sets both for NAME_rabbitmq and
// NAME_redis, whose fixtures run those servers).
#pragma once

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QString>
#include <QUrl>

class TestQueues final
{
    Q_DISABLE_COPY_MOVE(TestQueues)

public:
    TestQueues()
    {
        m_kind = qEnvironmentVariable("ONCE_TEST_QUEUE");
        if (m_kind.isEmpty())
            return;
        if (m_kind != QLatin1String("rabbitmq") && m_kind != QLatin1String("redis"))
            qFatal("TestQueues: ONCE_TEST_QUEUE=%s is neither rabbitmq nor redis", qPrintable(m_kind));
        const QString urlFile = qEnvironmentVariable("ONCE_TEST_QUEUE_URL_FILE");
        QFile file(urlFile);
        if (urlFile.isEmpty() || !file.open(QIODevice::ReadOnly))
            qFatal("TestQueues: cannot read the broker URL file \"%s\" (did the %s fixture run?)", qPrintable(urlFile),
                   qPrintable(m_kind));
        m_baseUrl = QString::fromUtf8(file.readAll().trimmed());
        // RabbitMQ's management API (in-flight counts) listens on a port of its own, which
        // scripts/rabbitmq-server writes beside the URL.
        QFile management(QFileInfo(urlFile).dir().filePath(QStringLiteral("management-url")));
        if (m_kind == QLatin1String("rabbitmq") && management.open(QIODevice::ReadOnly))
            m_managementUrl = QString::fromUtf8(management.readAll().trimmed());
    }

    bool isBroker() const { return !m_kind.isEmpty(); }
    QString kind() const { return m_kind.isEmpty() ? QStringLiteral("the store's own queue") : m_kind; }

    // A queue nobody has used at the test broker, or empty for the store's own queue.
    QString newUrl()
    {
        if (m_kind.isEmpty())
            return {};
        ++m_count;
        const QString name = QStringLiteral("test-%1-%2").arg(QCoreApplication::applicationPid()).arg(m_count);
        if (m_kind == QLatin1String("redis"))
            return m_baseUrl + QStringLiteral("?stream=") + name;
        QString url = m_baseUrl + QStringLiteral("?queue=") + name;
        if (!m_managementUrl.isEmpty())
            url += QStringLiteral("&management=") + QString::fromLatin1(QUrl::toPercentEncoding(m_managementUrl));
        return url;
    }

private:
    QString m_kind;
    QString m_baseUrl;
    QString m_managementUrl;
    int m_count = 0;
};
