#pragma once

#include "http/listenaddress.h"

#include <QObject>

#include <functional>
#include <memory>
#include <optional>

class QHttpServer;

namespace once {


// GET /metrics (Prometheus text), GET /healthz (the process is up) and, given a readiness
// check, GET /readyz (200, or 503 with the reason). Everything runs on the thread that
// owns the server, between its other events: the callables must be quick and must not
// wait on anything. No authentication: the numbers hold no secrets, but keep the port
// on a private network.
class MetricsServer final : public QObject
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(MetricsServer)

public:
    using Exposer = std::function<QByteArray()>;
    using ReadinessCheck = std::function<QString()>; // empty: ready; else why not

    explicit MetricsServer(Exposer metrics, ReadinessCheck readiness = {}, QObject *parent = nullptr);
    ~MetricsServer() override;

    bool listen(const ListenAddress &address, QString *error);
    quint16 port() const { return m_port; }

    // The same routes on a server that serves more (once serve).
    static void addRoutes(QHttpServer &server, Exposer metrics, ReadinessCheck readiness);

private:
    std::unique_ptr<QHttpServer> m_server;
    quint16 m_port = 0;
};

} // namespace once
