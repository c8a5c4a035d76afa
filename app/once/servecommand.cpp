// `once serve`: the store's queue over HTTP (core/serve, docs/http-api.md).
#include "cli.h"

#include "http/partnertls.h"
#include "serve/apitokens.h"
#include "serve/queueserver.h"
#include "serve/queueservice.h"

#include <QCoreApplication>
#include <QSslConfiguration>
#include <QThread>

#include <cstdio>

namespace once::cli {

namespace {

struct ListenAddress
{
    QHostAddress address;
    quint16 port = 0;
};

// HOST:PORT, [IPV6]:PORT or localhost:PORT; port 0 picks a free one (printed at start).
std::optional<ListenAddress> parseListen(const QString &text)
{
    const qsizetype colon = text.lastIndexOf(QLatin1Char(':'));
    if (colon <= 0)
        return std::nullopt;
    QString host = text.left(colon);
    if (host.startsWith(QLatin1Char('[')) && host.endsWith(QLatin1Char(']')))
        host = host.mid(1, host.size() - 2);
    bool ok = false;
    const uint port = text.mid(colon + 1).toUInt(&ok);
    if (!ok || port > 65535)
        return std::nullopt;
    ListenAddress listen;
    listen.port = quint16(port);
    if (host == QLatin1String("localhost"))
        listen.address = QHostAddress(QHostAddress::LocalHost);
    else if (!listen.address.setAddress(host))
        return std::nullopt;
    return listen;
}

} // namespace

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
    });
    if (const int exit = command.parse(arguments); exit >= 0)
        return exit;
    if (!parser.positionalArguments().isEmpty())
        return command.usageError(QStringLiteral("unexpected argument \"%1\"").arg(parser.positionalArguments().constFirst()));
    const auto listen = parseListen(parser.value(QStringLiteral("listen")));
    if (!listen)
        return command.usageError(
            QStringLiteral("--listen must be HOST:PORT, not \"%1\"").arg(parser.value(QStringLiteral("listen"))));
    const QString queueName = parser.value(QStringLiteral("queue-name"));
    if (queueName.isEmpty())
        return command.usageError(QStringLiteral("--queue-name must not be empty"));
    std::optional<ApiTokens> tokens;
    QString error;
    if (parser.isSet(QStringLiteral("tokens"))) {
        tokens = ApiTokens::load(parser.value(QStringLiteral("tokens")), &error);
        if (!tokens)
            return command.usageError(error);
    } else if (!listen->address.isLoopback()) {
        return command.usageError(QStringLiteral("refusing to listen on %1 without --tokens: anyone who can reach it "
                                                 "could publish and consume")
                                      .arg(listen->address.toString()));
    }
    const bool tls = parser.isSet(QStringLiteral("tls-cert")) || parser.isSet(QStringLiteral("tls-key"));
    QSslConfiguration tlsConfiguration = QSslConfiguration::defaultConfiguration();
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
        tlsConfiguration.setLocalCertificateChain(*chain);
        tlsConfiguration.setPrivateKey(*key);
    }

    // The store on a thread of its own: the HTTP event loop never waits on it.
    QThread storeThread;
    storeThread.setObjectName(QStringLiteral("once-serve-store"));
    auto *service = new QueueService(command.storeUrl(), queueName);
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
        QueueServer server(service, queueName, std::move(tokens));
        if (tls)
            server.sslSetup(tlsConfiguration);
        const quint16 port = server.listen(listen->address, listen->port);
        if (port == 0) {
            exitCode = failure(QStringLiteral("cannot listen on %1:%2 (in use, or not an address of this machine)")
                                   .arg(listen->address.toString())
                                   .arg(listen->port));
        } else {
            const QString host = listen->address.protocol() == QAbstractSocket::IPv6Protocol
                                     ? QLatin1Char('[') + listen->address.toString() + QLatin1Char(']')
                                     : listen->address.toString();
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
