// What the HTTP client tests share: a request with a credential no error may show, a
// blocking exchange, and a bare server with scripted (also hostile) answers.
#pragma once

#include "http/httpclient.h"

#include <QHostAddress>
#include <QProcess>
#include <QTcpServer>
#include <QTcpSocket>
#include <QTest>

#include <functional>
#include <memory>
#include <optional>

namespace oncetest {

using namespace once;


// A self-signed certificate for 127.0.0.1 and its unencrypted EC key, made by the openssl
// command as certificatePath and keyPath; empty when made, else why not.
inline QString makeLoopbackCertificate(const QString &certificatePath, const QString &keyPath)
{
    QProcess openssl;
    openssl.start(QStringLiteral("openssl"),
                  {QStringLiteral("req"), QStringLiteral("-x509"), QStringLiteral("-newkey"), QStringLiteral("ec"),
                   QStringLiteral("-pkeyopt"), QStringLiteral("ec_paramgen_curve:prime256v1"), QStringLiteral("-nodes"),
                   QStringLiteral("-keyout"), keyPath, QStringLiteral("-out"), certificatePath, QStringLiteral("-days"),
                   QStringLiteral("2"), QStringLiteral("-subj"), QStringLiteral("/CN=127.0.0.1"), QStringLiteral("-addext"),
                   QStringLiteral("subjectAltName=IP:127.0.0.1")});
    if (!openssl.waitForFinished(30000))
        return QStringLiteral("openssl did not finish");
    if (openssl.exitCode() != 0)
        return QString::fromLocal8Bit(openssl.readAllStandardError());
    return {};
}

// The credential every test request carries; no error text may ever show it.
inline constexpr char kSecret[] = "s3cr3t-token-never-logged";

inline QByteArray authorization()
{
    return QByteArray("Bearer ") + kSecret;
}

inline QUrl localUrl(quint16 port, const QString &path = QStringLiteral("/reminders"))
{
    return QUrl(QStringLiteral("http://127.0.0.1:%1%2").arg(port).arg(path));
}

inline HttpRequest reminderPost(quint16 port, const QByteArray &key, const QByteArray &body = R"({"reminder":1})")
{
    HttpRequest request;
    request.url = localUrl(port);
    request.method = "POST";
    request.headers = {{"Content-Type", "application/json"}, {"Authorization", authorization()}};
    if (!key.isEmpty())
        request.headers.append({"Idempotency-Key", key});
    request.body = body;
    request.timeoutMs = 10000;
    return request;
}

// Sends one request and runs the event loop until its result arrives. A result with
// httpStatus -1 means the callback never came.
inline HttpResult exchange(HttpClient &client, const HttpRequest &request, int waitMs = 15000)
{
    std::optional<HttpResult> result;
    QObject context;
    client.send(request, &context, [&result](const HttpResult &r) { result = r; });
    if (!QTest::qWaitFor([&result] { return result.has_value(); }, waitMs)) {
        HttpResult missing;
        missing.httpStatus = -1;
        missing.error = QStringLiteral("test: no result within %1 ms").arg(waitMs);
        return missing;
    }
    return *result;
}

inline bool leaksSecret(const HttpResult &result)
{
    return result.error.contains(QLatin1String(kSecret));
}

// A bare server with scripted answers, for behaviour the simulator never shows:
// chunked bodies, closing without an answer, bodies delimited by the close.
class ScriptedServer final
{
    Q_DISABLE_COPY_MOVE(ScriptedServer)

public:
    // Called once per complete request; `number` counts requests over all connections.
    using Handler = std::function<void(QTcpSocket *socket, int number)>;

    explicit ScriptedServer(Handler handler) : m_handler(std::move(handler))
    {
        QObject::connect(&m_server, &QTcpServer::newConnection, &m_server, [this] {
            while (QTcpSocket *socket = m_server.nextPendingConnection()) {
                ++m_connections;
                auto buffer = std::make_shared<QByteArray>();
                QObject::connect(socket, &QIODevice::readyRead, socket,
                                 [this, socket, buffer] { onReadyRead(socket, *buffer); });
                QObject::connect(socket, &QAbstractSocket::disconnected, socket, &QObject::deleteLater);
            }
        });
    }

    bool listen() { return m_server.listen(QHostAddress::LocalHost, 0); }
    quint16 port() const { return m_server.serverPort(); }
    int requests() const { return m_requests; }
    int connections() const { return m_connections; }
    // The request being answered, head and body, while the handler runs.
    const QByteArray &request() const { return m_request; }

private:
    void onReadyRead(QTcpSocket *socket, QByteArray &buffer)
    {
        buffer += socket->readAll();
        for (;;) {
            const qsizetype headEnd = buffer.indexOf("\r\n\r\n");
            if (headEnd < 0)
                return;
            qint64 length = 0;
            const QByteArray head = buffer.left(headEnd).toLower();
            const qsizetype at = head.indexOf("content-length:");
            if (at >= 0) {
                const qsizetype end = head.indexOf("\r\n", at);
                length = head.mid(at + 15, end < 0 ? -1 : end - at - 15).trimmed().toLongLong();
            }
            if (buffer.size() < headEnd + 4 + length)
                return;
            m_request = buffer.left(headEnd + 4 + length);
            buffer.remove(0, headEnd + 4 + length);
            m_handler(socket, ++m_requests);
            if (socket->state() != QAbstractSocket::ConnectedState)
                return;
        }
    }

    QTcpServer m_server;
    Handler m_handler;
    QByteArray m_request;
    int m_requests = 0;
    int m_connections = 0;
};

inline void answerOk(QTcpSocket *socket)
{
    socket->write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok");
}

// Answers with `head` and then writes nextPiece() for as long as the client reads: a
// body that never ends. Paced by what the socket has flushed, so that this side's own
// buffer stays small. *streamed counts the body bytes written.
inline void streamForever(QTcpSocket *socket, const QByteArray &head, std::function<QByteArray()> nextPiece,
                          qint64 *streamed)
{
    socket->write(head);
    const auto more = [socket, nextPiece = std::move(nextPiece), streamed] {
        while (socket->state() == QAbstractSocket::ConnectedState && socket->bytesToWrite() < 256 * 1024) {
            const QByteArray piece = nextPiece();
            *streamed += piece.size();
            socket->write(piece);
        }
    };
    QObject::connect(socket, &QIODevice::bytesWritten, socket, more);
    more();
}

} // namespace oncetest
