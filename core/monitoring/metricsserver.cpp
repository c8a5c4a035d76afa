#include "monitoring/metricsserver.h"

#include "monitoring/exposition.h"

#include <QHttpServer>
#include <QHttpServerResponse>
#include <QTcpServer>

namespace once {

MetricsServer::MetricsServer(Exposer metrics, ReadinessCheck readiness, QObject *parent)
    : QObject(parent), m_server(std::make_unique<QHttpServer>())
{
    addRoutes(*m_server, std::move(metrics), std::move(readiness));
}

MetricsServer::~MetricsServer() = default;

bool MetricsServer::listen(const ListenAddress &address, QString *error)
{
    // A server of our own rather than QHttpServer::listen(), which does not say why.
    auto tcp = std::make_unique<QTcpServer>();
    if (!tcp->listen(address.host, address.port)) {
        *error = QStringLiteral("cannot listen on %1 port %2: %3")
                     .arg(address.host.toString(), QString::number(address.port), tcp->errorString());
        return false;
    }
    m_port = tcp->serverPort();
    m_server->bind(tcp.release()); // the HTTP server owns it now
    return true;
}

void MetricsServer::addRoutes(QHttpServer &server, Exposer metrics, ReadinessCheck readiness)
{
    server.route(QStringLiteral("/metrics"), QHttpServerRequest::Method::Get, [metrics = std::move(metrics)] {
        return QHttpServerResponse(Exposition::ContentType, metrics());
    });
    server.route(QStringLiteral("/healthz"), QHttpServerRequest::Method::Get, [] {
        return QHttpServerResponse(QByteArrayLiteral("text/plain; charset=utf-8"), QByteArrayLiteral("ok\n"));
    });
    if (!readiness)
        return;
    server.route(QStringLiteral("/readyz"), QHttpServerRequest::Method::Get, [readiness = std::move(readiness)] {
        const QString problem = readiness();
        if (problem.isEmpty())
            return QHttpServerResponse(QByteArrayLiteral("text/plain; charset=utf-8"), QByteArrayLiteral("ready\n"));
        return QHttpServerResponse(QByteArrayLiteral("text/plain; charset=utf-8"), problem.toUtf8() + '\n',
                                   QHttpServerResponse::StatusCode::ServiceUnavailable);
    });
}

} // namespace once
