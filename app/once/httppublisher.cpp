#include "httppublisher.h"

#include <QElapsedTimer>
#include <QEventLoop>
#include <QHostAddress>
#include <QTcpSocket>
#include <QTimer>

#include <algorithm>
#include <memory>
#include <optional>
#include <sys/resource.h>

namespace once::cli {

namespace {

// One keep-alive connection and the request it has out, if any.
struct Connection
{
    std::unique_ptr<QTcpSocket> socket;
    QByteArray received;
    qint64 sentNs = -1; // -1: free
    int messages = 0;
};

struct Response
{
    int status = 0;
    QByteArray body;
};

// Takes one whole response off the front of buffer, if it holds one. `once serve` always
// answers with a Content-Length.
std::optional<Response> takeResponse(QByteArray &buffer, QString *error)
{
    const qsizetype headerEnd = buffer.indexOf("\r\n\r\n");
    if (headerEnd < 0)
        return std::nullopt;
    const QByteArray header = buffer.left(headerEnd).toLower();
    const qsizetype lengthAt = header.indexOf("\r\ncontent-length:");
    if (!header.startsWith("http/1.1 ") || lengthAt < 0) {
        *error = QStringLiteral("once serve answered something that is not HTTP/1.1 with a Content-Length: %1")
                     .arg(QString::fromUtf8(header.left(200)));
        return std::nullopt;
    }
    const qsizetype lengthEnd = header.indexOf("\r\n", lengthAt + 2);
    const qsizetype length = header.mid(lengthAt + 17, lengthEnd < 0 ? -1 : lengthEnd - lengthAt - 17).trimmed().toLongLong();
    if (buffer.size() < headerEnd + 4 + length)
        return std::nullopt;
    Response response{header.mid(9, 3).toInt(), buffer.mid(headerEnd + 4, length)};
    buffer.remove(0, headerEnd + 4 + length);
    return response;
}

} // namespace

HttpPublisher::HttpPublisher(Plan plan) : m_plan(std::move(plan)) {}

QByteArray HttpPublisher::request(qint64 first, int count) const
{
    QByteArray body;
    body.reserve(count * 330 + 64);
    body += "{\"queue\":\"" + m_plan.queueName.toUtf8() + "\",";
    if (m_plan.batch == 1) {
        body += "\"payload\":" + m_plan.payload(first) + '}';
    } else {
        body += "\"messages\":[";
        for (int i = 0; i < count; ++i) {
            if (i > 0)
                body += ',';
            body += "{\"payload\":" + m_plan.payload(first + i) + '}';
        }
        body += "]}";
    }
    QByteArray request;
    request.reserve(body.size() + 160);
    request += "POST ";
    request += m_plan.batch == 1 ? "/v1/queue/publish" : "/v1/queue/publish_batch";
    request += " HTTP/1.1\r\nHost: 127.0.0.1:" + QByteArray::number(m_plan.port)
               + "\r\nContent-Type: application/json\r\nContent-Length: " + QByteArray::number(body.size())
               + "\r\n\r\n";
    request += body;
    return request;
}

void HttpPublisher::run()
{
    QEventLoop loop;
    QElapsedTimer clock;
    std::vector<Connection> connections(size_t(m_plan.connections));
    qint64 handedOut = 0;
    qint64 firstSentNs = -1;
    qint64 lastAnsweredNs = 0;
    const auto stop = [&](const QString &error) {
        if (m_error.isEmpty())
            m_error = error;
        loop.quit();
    };
    // Messages due by now: all of them without a rate.
    const auto due = [&] {
        if (m_plan.ratePerSecond <= 0)
            return m_plan.messages;
        return std::min(m_plan.messages, clock.nsecsElapsed() * m_plan.ratePerSecond / 1000000000);
    };
    const auto sendNext = [&](Connection &connection) {
        if (connection.sentNs >= 0 || connection.socket->state() != QAbstractSocket::ConnectedState)
            return;
        const int count = int(std::min<qint64>(m_plan.batch, m_plan.messages - handedOut));
        if (count <= 0 || due() < handedOut + count)
            return;
        const QByteArray bytes = request(handedOut, count);
        connection.sentNs = clock.nsecsElapsed();
        if (firstSentNs < 0)
            firstSentNs = connection.sentNs;
        if (m_plan.ratePerSecond > 0) {
            const qint64 dueNs = (handedOut + count) * 1000000000 / m_plan.ratePerSecond;
            m_worstLagUs = std::max(m_worstLagUs, (connection.sentNs - dueNs) / 1000);
        }
        connection.messages = count;
        handedOut += count;
        connection.socket->write(bytes);
    };
    const auto sendWhatIsDue = [&] {
        for (auto &connection : connections)
            sendNext(connection);
    };

    clock.start();
    for (auto &connection : connections) {
        connection.socket = std::make_unique<QTcpSocket>();
        QTcpSocket *socket = connection.socket.get();
        QObject::connect(socket, &QTcpSocket::connected, &loop, [&, socket] {
            socket->setSocketOption(QAbstractSocket::LowDelayOption, 1);
            for (auto &c : connections)
                if (c.socket.get() == socket)
                    sendNext(c);
        });
        QObject::connect(socket, &QTcpSocket::readyRead, &loop, [&, socket] {
            Connection *self = nullptr;
            for (auto &c : connections)
                if (c.socket.get() == socket)
                    self = &c;
            self->received += socket->readAll();
            QString error;
            while (const auto response = takeResponse(self->received, &error)) {
                const qint64 now = clock.nsecsElapsed();
                const bool batchWhole = m_plan.batch == 1 || response->body.contains("\"rejected\":0,")
                                        || response->body.contains("\"rejected\":0}");
                if (response->status != 200 || !batchWhole || self->sentNs < 0)
                    return stop(QStringLiteral("once serve answered %1: %2")
                                    .arg(response->status)
                                    .arg(QString::fromUtf8(response->body.left(300))));
                m_latenciesUs.push_back((now - self->sentNs) / 1000);
                m_published += self->messages;
                lastAnsweredNs = now;
                self->sentNs = -1;
                if (m_published == m_plan.messages)
                    return loop.quit();
                sendNext(*self);
            }
            if (!error.isEmpty())
                stop(error);
        });
        QObject::connect(socket, &QTcpSocket::errorOccurred, &loop, [&, socket] {
            stop(QStringLiteral("a connection to once serve failed: %1").arg(socket->errorString()));
        });
        socket->connectToHost(QHostAddress(QHostAddress::LocalHost), m_plan.port);
    }
    // With a rate, a free connection waits for its next message to be due.
    QTimer pace;
    pace.setTimerType(Qt::PreciseTimer);
    QObject::connect(&pace, &QTimer::timeout, &loop, sendWhatIsDue);
    if (m_plan.ratePerSecond > 0)
        pace.start(1);
    if (m_plan.messages > 0)
        loop.exec();
    pace.stop();
    for (auto &connection : connections) {
        connection.socket->disconnect();
        connection.socket->abort();
    }
    m_elapsedUs = firstSentNs < 0 ? 0 : (lastAnsweredNs - firstSentNs) / 1000;
    std::sort(m_latenciesUs.begin(), m_latenciesUs.end());
    rusage usage{};
    getrusage(RUSAGE_THREAD, &usage);
    m_cpuSeconds = double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
                   + double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

} // namespace once::cli
