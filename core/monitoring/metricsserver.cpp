#include "metricsserver.h"

#include "exposition.h"

#include <QHttpServer>
#include <QHttpServerResponse>
#include <QTcpServer>

namespace once {

std::optional<ListenAddress> ListenAddress::parse(const QString &text, QString *error)
{
    const qsizetype colon = text.lastIndexOf(QLatin1Char(':'));
    QString host = colon > 0 ? text.left(colon) : QString();
    const QString portText = colon > 0 ? text.mid(colon + 1) : QString();
    if (host.startsWith(QLatin1Char('[')) && host.endsWith(QLatin1Char(']')))
        host = host.mid(1, host.size() - 2);
    bool isNumber = false;
    const uint port = portText.toUInt(&isNumber);
    if (host.isEmpty() || !isNumber || port > 65535) {
        *error = QStringLiteral("expected HOST:PORT (e.g. 127.0.0.1:9464), got \"%1\"").arg(text);
        return std::nullopt;
    }
    ListenAddress address;
    address.port = quint16(port);
    if (host == QLatin1String("localhost"))
        address.host = QHostAddress(QHostAddress::LocalHost);
    else if (!address.host.setAddress(host)) {
        *error = QStringLiteral("\"%1\" is not an IP address (or localhost)").arg(host);
        return std::nullopt;
    }
    return address;
}

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
