#pragma once

#include "http/httpmessage.h"

#include <QObject>
#include <QSslConfiguration>

#include <functional>
#include <memory>

namespace once {

class HttpConnectionPool;

// A small HTTP/1.1 client over QTcpSocket / QSslSocket with keep-alive and a per-host
// connection pool. Unlike QNetworkAccessManager it never re-sends a request on its own:
// each send() writes the request at most once and reports exactly one HttpResult.
// TLS certificates are verified: against the system's CAs, or what setSslConfiguration()
// says. Lives on one thread.
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

    // For the https connections opened from now on (CAs to trust, a client certificate).
    void setSslConfiguration(const QSslConfiguration &configuration) { m_sslConfiguration = configuration; }
    QSslConfiguration sslConfiguration() const { return m_sslConfiguration; }

    int maxConnectionsPerHost() const { return m_maxConnections; }
    int openConnections() const;
    // Connections opened since construction; tests use it to check keep-alive reuse.
    qint64 connectionsOpened() const { return m_connectionsOpened; }

private:
    friend class HttpConnectionPool;
    int m_maxConnections = 16;
    qint64 m_connectionsOpened = 0;
    QSslConfiguration m_sslConfiguration = QSslConfiguration::defaultConfiguration();
    std::unique_ptr<HttpConnectionPool> m_pool;
};

} // namespace once
