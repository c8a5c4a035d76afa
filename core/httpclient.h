#pragma once

#include <QByteArray>
#include <QList>
#include <QObject>
#include <QPair>
#include <QUrl>

#include <functional>
#include <memory>

namespace once {

using HttpHeaders = QList<QPair<QByteArray, QByteArray>>;

struct HttpRequest
{
    QUrl url;
    QByteArray method = "POST";
    HttpHeaders headers; // extra headers; Host, Content-Length and Connection are added by the client
    QByteArray body;
    int timeoutMs = 10000; // whole exchange, from the first byte written to the last byte read
};

// What happened to one request. The distinction between NotSent and InDoubt is the
// reason this client exists: a caller may retry NotSent freely, but an InDoubt request
// may already have taken effect at the server.
struct HttpResult
{
    enum class Status {
        Response, // a complete HTTP response arrived (any status code)
        NotSent,  // failed before any byte of the request was written: refused, DNS, TLS handshake
        InDoubt,  // failed after the request was (partly) written: timeout, reset, close without answer
    };
    Status status = Status::NotSent;
    int httpStatus = 0;
    HttpHeaders headers;
    QByteArray body;
    QString error; // human-readable; never contains request headers
    qint64 latencyMs = 0;

    QByteArray header(const QByteArray &name) const; // case-insensitive, first match
};

class HttpConnectionPool;

// A small HTTP/1.1 client over QTcpSocket / QSslSocket with keep-alive and a per-host
// connection pool. Unlike QNetworkAccessManager it never re-sends a request on its own:
// each send() writes the request at most once and reports exactly one HttpResult.
// TLS certificates are verified (the system CA store). Lives on one thread.
class HttpClient final : public QObject
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(HttpClient)

public:
    explicit HttpClient(int maxConnectionsPerHost = 16, QObject *parent = nullptr);
    ~HttpClient() override;

    using Callback = std::function<void(const HttpResult &)>;
    // Queues the request if every connection to the host is busy. onFinished is called
    // once, later (never from inside send()), unless context is destroyed first.
    void send(const HttpRequest &request, QObject *context, Callback onFinished);

    int maxConnectionsPerHost() const { return m_maxConnections; }
    int openConnections() const;
    // Connections opened since construction; tests use it to check keep-alive reuse.
    qint64 connectionsOpened() const { return m_connectionsOpened; }

private:
    friend class HttpConnectionPool;
    int m_maxConnections = 16;
    qint64 m_connectionsOpened = 0;
    std::unique_ptr<HttpConnectionPool> m_pool;
};

} // namespace once
