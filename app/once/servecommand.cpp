// `once serve`: the store's queue over HTTP (core/serve, docs/http-api.md).
#include "cli.h"

#include "http/listenaddress.h"
#include "http/pemfiles.h"
#include "partners/partnersettings.h"
#include "serve/apitokens.h"
#include "serve/queueserver.h"
#include "serve/queueservice.h"

#include <QCoreApplication>
#include <QSslCertificate>
#include <QSslKey>
#include <QThread>

#include <cstdio>

namespace once::cli {

int runServe(const QStringList &arguments)
{
    Command command(QStringLiteral("serve"),
                    QStringLiteral("Serves the store's queue over HTTP/JSON: publish, consume, ack, nack, extend, stats, "
                                   "dead letters and redrive, with bearer tokens and per-token rates (see "
                                   "docs/http-api.md). Without --tokens it listens on loopback only. SIGTERM, SIGINT "
                                   "or SIGHUP: stop."),
                    {});
    auto &parser = command.parser();
    parser.addOptions({
        {QStringLiteral("listen"), QStringLiteral("Address and port to listen on (port 0: any free one)."),
         QStringLiteral("HOST:PORT"), QStringLiteral("127.0.0.1:8080")},
        {QStringLiteral("queue-name"), QStringLiteral("The name clients give as \"queue\"."), QStringLiteral("NAME"),
         QStringLiteral("reminders")},
        {QStringLiteral("tokens"),
         QStringLiteral("Bearer tokens, one a line: NAME TOKEN ROLE [rate=N/s] (roles: producer, consumer, read, "
                        "operator)."),
         QStringLiteral("FILE")},
        {QStringLiteral("tls-cert"), QStringLiteral("Serve HTTPS with this PEM certificate (with --tls-key)."),
         QStringLiteral("FILE")},
        {QStringLiteral("tls-key"), QStringLiteral("The PEM private key of --tls-cert."), QStringLiteral("FILE")},
        {QStringLiteral("allowed-host"),
         QStringLiteral("A host name clients reach this server by (the Host header), besides its listening address; "
                        "repeatable. On loopback only this machine's own names are taken by default; elsewhere any, "
                        "unless this is given."),
         QStringLiteral("NAME")},
        {QStringLiteral("max-connections"),
         QStringLiteral("Connections served at once; more wait for one to end. Keep it below the descriptors the "
                        "process may open (LimitNOFILE)."),
         QStringLiteral("N"), QStringLiteral("900")},
        {QStringLiteral("client-timeout"),
         QStringLiteral("Seconds a connection may be idle, or take between the bytes of a request, or not read its "
                        "answer, before it is closed."),
         QStringLiteral("SECONDS"), QStringLiteral("30")},
        {QStringLiteral("store-timeout"),
         QStringLiteral("Seconds a request waits for the store before it is answered 503 with Retry-After."),
         QStringLiteral("SECONDS"), QStringLiteral("10")},
        {QStringLiteral("partners"),
         QStringLiteral("The partners file (as once worker reads it, else $ONCE_PARTNERS): their providers' delivery "
                        "events are taken at POST /v1/partners/NAME/events, each checked by its provider's signature "
                        "(docs/partners.md, \"Delivery events\")."),
         QStringLiteral("FILE")},
        {QStringLiteral("max-receives"),
         QStringLiteral("A message consumed this many times without an ack goes to the dead letters instead of "
                        "being handed out again, as a managed queue's redrive policy (0: no limit)."),
         QStringLiteral("N"), QStringLiteral("0")},
    });
    if (const int exit = command.parse(arguments); exit >= 0)
        return exit;
    if (!parser.positionalArguments().isEmpty())
        return command.usageError(QStringLiteral("unexpected argument \"%1\"").arg(parser.positionalArguments().constFirst()));
    QString error;
    const auto listen = ListenAddress::parse(parser.value(QStringLiteral("listen")), &error);
    if (!listen)
        return command.usageError(QStringLiteral("--listen: ") + error);
    const auto maxReceives = command.integer(QStringLiteral("max-receives"), 0, 1000);
    const auto maxConnections = command.integer(QStringLiteral("max-connections"), 1, 1000000);
    const auto clientTimeout = command.integer(QStringLiteral("client-timeout"), 1, 3600);
    const auto storeTimeout = command.integer(QStringLiteral("store-timeout"), 1, 600);
    if (!maxReceives || !maxConnections || !clientTimeout || !storeTimeout)
        return Usage;
    QueueServer::Options options;
    options.limits.http.maxConnections = int(*maxConnections);
    options.limits.http.connectionTimeoutSeconds = int(*clientTimeout);
    options.limits.storeTimeoutMs = int(*storeTimeout) * 1000;
    options.limits.readinessTimeoutMs = std::min(options.limits.storeTimeoutMs, 2000);
    options.allowedHosts = parser.values(QStringLiteral("allowed-host"));
    // A systemd unit's environment file names it as the worker's does.
    const QString partnersFile = parser.isSet(QStringLiteral("partners")) ? parser.value(QStringLiteral("partners"))
                                                                          : qEnvironmentVariable("ONCE_PARTNERS");
    if (!partnersFile.isEmpty()) {
        const auto partners = readPartnersFile(partnersFile, &error);
        if (!partners)
            return command.usageError(error);
        options.partners = *partners;
    }
    const QString queueName = parser.value(QStringLiteral("queue-name"));
    if (queueName.isEmpty())
        return command.usageError(QStringLiteral("--queue-name must not be empty"));
    std::optional<ApiTokens> tokens;
    if (parser.isSet(QStringLiteral("tokens"))) {
        tokens = ApiTokens::load(parser.value(QStringLiteral("tokens")), &error);
        if (!tokens)
            return command.usageError(error);
    } else if (!listen->host.isLoopback()) {
        return command.usageError(QStringLiteral("refusing to listen on %1 without --tokens: anyone who can reach it "
                                                 "could publish and consume")
                                      .arg(listen->host.toString()));
    }
    const bool tls = parser.isSet(QStringLiteral("tls-cert")) || parser.isSet(QStringLiteral("tls-key"));
    std::optional<std::pair<QByteArray, QByteArray>> tlsPem;
    if (tls) {
        if (!parser.isSet(QStringLiteral("tls-cert")) || !parser.isSet(QStringLiteral("tls-key")))
            return command.usageError(QStringLiteral("give --tls-cert and --tls-key together"));
        // The certificate file may hold its chain: the server's certificate first.
        const auto chain = readPemCertificates(parser.value(QStringLiteral("tls-cert")), &error);
        if (!chain)
            return failure(error);
        const auto key = readPemPrivateKey(parser.value(QStringLiteral("tls-key")), &error);
        if (!key)
            return failure(error);
        // Read and checked here (one-line errors naming the file), handed on as PEM.
        QByteArray certificates;
        for (const auto &certificate : *chain)
            certificates += certificate.toPem();
        tlsPem = std::pair{certificates, key->toPem()};
    }

    // The store on a thread of its own: the HTTP event loop never waits on it.
    QThread storeThread;
    storeThread.setObjectName(QStringLiteral("once-serve-store"));
    auto *service = new QueueService(command.storeUrl(), queueName);
    service->setMaxReceives(int(*maxReceives));
    service->moveToThread(&storeThread);
    QObject::connect(&storeThread, &QThread::finished, service, &QObject::deleteLater);
    storeThread.start();
    bool opened = false;
    QMetaObject::invokeMethod(service, [&] { opened = service->open(&error); }, Qt::BlockingQueuedConnection);
    const auto stopStore = [&storeThread] {
        storeThread.quit();
        storeThread.wait();
    };
    if (!opened) {
        stopStore();
        return failure(error);
    }

    int exitCode = Ok;
    {
        QueueServer server(service, queueName, std::move(tokens), options);
        if (!server.listen(listen->host, listen->port, tlsPem, &error)) {
            exitCode = failure(QStringLiteral("cannot listen on %1:%2: %3").arg(listen->host.toString()).arg(listen->port).arg(error));
        } else {
            const quint16 port = server.serverPort();
            const QString host = listen->host.protocol() == QAbstractSocket::IPv6Protocol
                                     ? QLatin1Char('[') + listen->host.toString() + QLatin1Char(']')
                                     : listen->host.toString();
            std::fprintf(stderr, "once serve: listening on %s://%s:%u for queue %s\n", tls ? "https" : "http",
                         qPrintable(host), port, qPrintable(queueName));
            std::fflush(stderr);
            watchTerminationSignals(&server, [] { QCoreApplication::quit(); });
            QCoreApplication::exec();
        }
    }
    stopStore();
    return exitCode;
}

} // namespace once::cli
