// A fake HTTP server for tests whose code under test blocks its thread on an answer: each
// request recorded, each answered as the test scripts it (hostile answers included).
#pragma once

#include <QByteArray>
#include <QHostAddress>
#include <QJsonDocument>
#include <QJsonObject>
#include <QList>
#include <QMutex>
#include <QPair>
#include <QTcpServer>
#include <QTcpSocket>
#include <QThread>
#include <QUrlQuery>

#include <functional>
#include <memory>

namespace oncetest {

struct SeenRequest
{
    QByteArray method;
    QByteArray path;
    QList<QPair<QByteArray, QByteArray>> headers;
    QByteArray body;

    QByteArray header(const QByteArray &name) const
    {
        for (const auto &[key, value] : headers)
            if (key.compare(name, Qt::CaseInsensitive) == 0)
                return value;
        return {};
    }
    QByteArray formValue(const QString &name) const
    {
        return QUrlQuery(QString::fromLatin1(body)).queryItemValue(name, QUrl::FullyDecoded).toLatin1();
    }
};

struct Answer
{
    enum class Kind
    {
        Respond,
        Close,
        Silent
    };
    Kind kind = Kind::Respond;
    int status = 200;
    QByteArray body;
    QList<QPair<QByteArray, QByteArray>> headers;
    qint64 padding = 0; // bytes of filler after body, for an answer that is far too long
};

inline Answer jsonAnswer(int status, const QJsonObject &json, QList<QPair<QByteArray, QByteArray>> headers = {})
{
    return {Answer::Kind::Respond, status, QJsonDocument(json).toJson(QJsonDocument::Compact),
            std::move(headers), 0};
}

// An HTTP server on a thread of its own: the code under test (GoogleCredentials, the cloud
// queues) blocks the calling thread while it waits for an answer, so the fake cannot share
// the test's event loop (tests/httptesting.h's ScriptedServer does). Each request is
// recorded and answered by the responder, which runs on the server's thread.
class ThreadedFakeServer final
{
    Q_DISABLE_COPY_MOVE(ThreadedFakeServer)

public:
    using Responder = std::function<Answer(const SeenRequest &)>;

    ThreadedFakeServer()
    {
        m_thread.setObjectName(QStringLiteral("fake-server"));
        m_server = new QTcpServer;
        m_server->moveToThread(&m_thread);
        QObject::connect(&m_thread, &QThread::finished, m_server, &QObject::deleteLater);
        QObject::connect(m_server, &QTcpServer::newConnection, m_server, [this] { accept(); });
        m_thread.start();
        QMetaObject::invokeMethod(
            m_server,
            [this] { m_port = m_server->listen(QHostAddress::LocalHost, 0) ? m_server->serverPort() : 0; },
            Qt::BlockingQueuedConnection);
    }
    ~ThreadedFakeServer()
    {
        m_thread.quit();
        m_thread.wait();
    }

    quint16 port() const { return m_port; }
    QString url(const char *path) const
    {
        return QStringLiteral("http://127.0.0.1:%1%2").arg(m_port).arg(QLatin1String(path));
    }

    void setResponder(Responder responder)
    {
        QMutexLocker lock(&m_mutex);
        m_responder = std::move(responder);
    }
    QList<SeenRequest> requests() const
    {
        QMutexLocker lock(&m_mutex);
        return m_requests;
    }
    qsizetype requestCount() const { return requests().size(); }
    // Forgets the requests seen so far: a suite sharing one server between its tests.
    void clearRequests()
    {
        QMutexLocker lock(&m_mutex);
        m_requests.clear();
    }

private:
    void accept()
    {
        while (QTcpSocket *socket = m_server->nextPendingConnection()) {
            auto buffer = std::make_shared<QByteArray>();
            QObject::connect(socket, &QIODevice::readyRead, socket,
                             [this, socket, buffer] { onReadyRead(socket, *buffer); });
            QObject::connect(socket, &QAbstractSocket::disconnected, socket, &QObject::deleteLater);
        }
    }

    void onReadyRead(QTcpSocket *socket, QByteArray &buffer)
    {
        buffer += socket->readAll();
        for (;;) {
            const qsizetype headEnd = buffer.indexOf("\r\n\r\n");
            if (headEnd < 0)
                return;
            SeenRequest request;
            QList<QByteArray> lines = buffer.left(headEnd).split('\n');
            const QList<QByteArray> requestLine = lines.takeFirst().trimmed().split(' ');
            request.method = requestLine.value(0);
            request.path = requestLine.value(1);
            qint64 length = 0;
            for (const QByteArray &line : std::as_const(lines)) {
                const qsizetype colon = line.indexOf(':');
                request.headers.append({line.left(colon).trimmed(), line.mid(colon + 1).trimmed()});
                if (request.headers.last().first.compare("Content-Length", Qt::CaseInsensitive) == 0)
                    length = request.headers.last().second.toLongLong();
            }
            if (buffer.size() < headEnd + 4 + length)
                return;
            request.body = buffer.mid(headEnd + 4, length);
            buffer.remove(0, headEnd + 4 + length);
            Responder responder;
            {
                QMutexLocker lock(&m_mutex);
                m_requests.append(request);
                responder = m_responder;
            }
            const Answer answer =
                responder ? responder(request) : Answer{Answer::Kind::Respond, 404, {}, {}, 0};
            switch (answer.kind) {
            case Answer::Kind::Silent:
                return;
            case Answer::Kind::Close:
                socket->disconnectFromHost();
                return;
            case Answer::Kind::Respond:
                break;
            }
            QByteArray head = "HTTP/1.1 " + QByteArray::number(answer.status) + " Fake\r\nContent-Length: " +
                              QByteArray::number(answer.body.size() + answer.padding) + "\r\n";
            for (const auto &[name, value] : answer.headers)
                head += name + ": " + value + "\r\n";
            socket->write(head + "\r\n" + answer.body);
            if (answer.padding > 0)
                socket->write(QByteArray(answer.padding, 'x'));
        }
    }

    QThread m_thread;
    QTcpServer *m_server = nullptr; // lives on m_thread, deleted there
    quint16 m_port = 0;
    mutable QMutex m_mutex;
    Responder m_responder;
    QList<SeenRequest> m_requests;
};

} // namespace oncetest
