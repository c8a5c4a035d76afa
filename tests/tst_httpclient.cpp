#include "http/httpclient.h"
#include "httptesting.h"
#include "sim/partnersimulator.h"

#include <QHostAddress>
#include <QJsonDocument>
#include <QJsonObject>
#include <QPointer>
#include <QSignalSpy>
#include <QSslSocket>
#include <QTcpServer>
#include <QTcpSocket>
#include <QTest>
#include <QTimer>

#include <functional>
#include <memory>
#include <optional>

using namespace once;
using namespace oncetest;


class tst_HttpClient final : public QObject
{
    Q_OBJECT

private slots:
    void headerLookupIsCaseInsensitive();
    void postReceivesOkWithRequestId();
    void keepAliveReusesOneConnectionForSequentialRequests();
    void concurrentRequestsAllFinishWithinConnectionLimit();
    void queuedRequestsAreServedInSendOrder();
    void refusedConnectionIsNotSent();
    void unresolvableHostIsNotSent();
    void unsupportedSchemeIsReportedAsynchronously();
    void invalidHeaderIsRejectedWithoutEchoingIt();
    void tlsHandshakeFailureIsNotSent();
    void dropAfterAcceptIsInDoubtAndNeverResent();
    void closeWithoutAnswerOnKeptAliveConnectionIsInDoubt();
    void timeoutIsInDoubtAndAbandonsTheConnection();
    void chunkedResponseIsReassembled();
    void responseWithoutLengthEndsAtClose();
    void connectionCloseResponseIsNotReused();
    void hugeContentLengthIsInDoubtWithoutAllocating();
    void endlessChunkedBodyIsCutAtTheLimitAndInDoubt();
    void endlessBodyUntilCloseIsCutAtTheLimitAndInDoubt();
    void bodyAtTheLimitIsKeptAndOneByteMoreIsInDoubt();
    void responseBodyLimitIsPerRequest();
    void idleConnectionClosedByServerIsDropped();
    void callbackSkippedWhenContextIsDestroyed();
    void destroyingClientWithOutstandingRequestsIsSilent();
    void clientDeletedFromCallbackStopsFurtherCallbacks();
};

void tst_HttpClient::headerLookupIsCaseInsensitive()
{
    HttpResult result;
    result.headers = {
        {"Content-Type", "application/json"}, {"X-Request-Id", "req_1"}, {"x-request-id", "req_2"}};
    QCOMPARE(result.header("x-request-id"), QByteArray("req_1"));
    QCOMPARE(result.header("CONTENT-TYPE"), QByteArray("application/json"));
    QVERIFY(result.header("Retry-After").isNull());
}

void tst_HttpClient::postReceivesOkWithRequestId()
{
    PartnerSimulator partner;
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client;

    const HttpResult result = exchange(client, reminderPost(partner.port(), "key-1"));
    QCOMPARE(result.status, HttpResult::Status::Response);
    QCOMPARE(result.httpStatus, 200);
    QVERIFY(result.error.isEmpty());
    const QByteArray requestId = result.header("X-Request-Id");
    QVERIFY(requestId.startsWith("req_"));
    const QJsonObject body = QJsonDocument::fromJson(result.body).object();
    QCOMPARE(body.value(QLatin1String("request_id")).toString(), QString::fromLatin1(requestId));
    QCOMPARE(body.value(QLatin1String("status")).toString(), QStringLiteral("accepted"));
    QVERIFY(result.latencyMs >= 0);
    QCOMPARE(partner.stats().effects, 1);
}

void tst_HttpClient::keepAliveReusesOneConnectionForSequentialRequests()
{
    PartnerSimulator partner;
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client;

    for (int i = 0; i < 50; ++i) {
        const HttpResult result =
            exchange(client, reminderPost(partner.port(), "seq-" + QByteArray::number(i)));
        QCOMPARE(result.status, HttpResult::Status::Response);
        QCOMPARE(result.httpStatus, 200);
    }
    QCOMPARE(client.connectionsOpened(), 1);
    QCOMPARE(client.openConnections(), 1);
    QCOMPARE(partner.stats().requests, 50);
    QCOMPARE(partner.stats().effects, 50);
}

void tst_HttpClient::concurrentRequestsAllFinishWithinConnectionLimit()
{
    PartnerSimulator partner;
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client(8);

    int finished = 0;
    int responses = 0;
    int mostOpen = 0;
    for (int i = 0; i < 100; ++i) {
        client.send(reminderPost(partner.port(), "conc-" + QByteArray::number(i)), this,
                    [&](const HttpResult &r) {
                        ++finished;
                        if (r.status == HttpResult::Status::Response && r.httpStatus == 200)
                            ++responses;
                        mostOpen = std::max(mostOpen, client.openConnections());
                    });
        mostOpen = std::max(mostOpen, client.openConnections());
    }
    QTRY_COMPARE_WITH_TIMEOUT(finished, 100, 20000);
    QCOMPARE(responses, 100);
    QVERIFY2(mostOpen <= 8, qPrintable(QString::number(mostOpen)));
    QVERIFY(client.connectionsOpened() <= 8);
    QCOMPARE(partner.stats().effects, 100);
}

void tst_HttpClient::queuedRequestsAreServedInSendOrder()
{
    PartnerSimulator partner;
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client(1);

    QList<int> order;
    for (int i = 0; i < 10; ++i) {
        client.send(reminderPost(partner.port(), "fifo-" + QByteArray::number(i)), this,
                    [&order, i](const HttpResult &r) {
                        if (r.status == HttpResult::Status::Response)
                            order.append(i);
                    });
    }
    QTRY_COMPARE(order.size(), 10);
    QCOMPARE(order, QList<int>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
    QCOMPARE(client.connectionsOpened(), 1);
}

void tst_HttpClient::refusedConnectionIsNotSent()
{
    quint16 port = 0;
    {
        QTcpServer probe;
        QVERIFY(probe.listen(QHostAddress::LocalHost, 0));
        port = probe.serverPort();
    } // closed: nothing listens on the port now
    HttpClient client;

    const HttpResult result = exchange(client, reminderPost(port, "refused"));
    QCOMPARE(result.status, HttpResult::Status::NotSent);
    QCOMPARE(result.httpStatus, 0);
    QVERIFY(!result.error.isEmpty());
    QVERIFY(!leaksSecret(result));
    QCOMPARE(client.openConnections(), 0);
    QCOMPARE(client.connectionsOpened(), 0);
}

void tst_HttpClient::unresolvableHostIsNotSent()
{
    HttpClient client;
    HttpRequest request = reminderPost(80, "dns");
    request.url = QUrl(QStringLiteral("http://no-such-host.invalid/reminders"));
    request.timeoutMs = 5000; // a sandbox without DNS may only time out: still NotSent

    const HttpResult result = exchange(client, request);
    QCOMPARE(result.status, HttpResult::Status::NotSent);
    QVERIFY(!result.error.isEmpty());
    QVERIFY(!leaksSecret(result));
}

void tst_HttpClient::unsupportedSchemeIsReportedAsynchronously()
{
    HttpClient client;
    HttpRequest request = reminderPost(80, "ftp");
    request.url = QUrl(QStringLiteral("ftp://127.0.0.1/reminders"));

    std::optional<HttpResult> result;
    client.send(request, this, [&result](const HttpResult &r) { result = r; });
    QVERIFY2(!result.has_value(), "the callback must never run inside send()");
    QTRY_VERIFY(result.has_value());
    QCOMPARE(result->status, HttpResult::Status::NotSent);
    QVERIFY(!leaksSecret(*result));
}

void tst_HttpClient::invalidHeaderIsRejectedWithoutEchoingIt()
{
    PartnerSimulator partner;
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client;
    HttpRequest request = reminderPost(partner.port(), "injected");
    request.headers.append({"X-Evil", QByteArray("a\r\nAuthorization: ") + authorization()});

    const HttpResult result = exchange(client, request);
    QCOMPARE(result.status, HttpResult::Status::NotSent);
    QVERIFY(!result.error.isEmpty());
    QVERIFY(!leaksSecret(result));
    QCOMPARE(partner.stats().requests, 0);
}

void tst_HttpClient::tlsHandshakeFailureIsNotSent()
{
    if (!QSslSocket::supportsSsl())
        QSKIP("no TLS backend available");
    // Answers the ClientHello with plain-text garbage and hangs up.
    QTcpServer server;
    int requestBytes = 0;
    QObject::connect(&server, &QTcpServer::newConnection, &server, [&] {
        while (QTcpSocket *socket = server.nextPendingConnection()) {
            QObject::connect(socket, &QIODevice::readyRead, socket, [socket, &requestBytes] {
                requestBytes += int(socket->readAll().size());
                socket->write("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
                socket->disconnectFromHost();
            });
            QObject::connect(socket, &QAbstractSocket::disconnected, socket, &QObject::deleteLater);
        }
    });
    QVERIFY(server.listen(QHostAddress::LocalHost, 0));
    HttpClient client;
    HttpRequest request = reminderPost(server.serverPort(), "tls");
    request.url = QUrl(QStringLiteral("https://127.0.0.1:%1/reminders").arg(server.serverPort()));

    const HttpResult result = exchange(client, request);
    QCOMPARE(result.status, HttpResult::Status::NotSent);
    QVERIFY(!result.error.isEmpty());
    QVERIFY(!leaksSecret(result));
    QVERIFY(requestBytes > 0); // the handshake did start
    QCOMPARE(client.openConnections(), 0);
}

void tst_HttpClient::dropAfterAcceptIsInDoubtAndNeverResent()
{
    PartnerFaults profile;
    profile.dropAfterAcceptRate = 1.0;
    PartnerSimulator partner(profile);
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client;

    const HttpResult result = exchange(client, reminderPost(partner.port(), "dropped"));
    QCOMPARE(result.status, HttpResult::Status::InDoubt);
    QVERIFY(!result.error.isEmpty());
    QVERIFY(!leaksSecret(result));

    // A full round trip afterwards gives a silent re-send every chance to reach the partner.
    HttpRequest health;
    health.url = localUrl(partner.port(), QStringLiteral("/health"));
    health.method = "GET";
    const HttpResult ok = exchange(client, health);
    QCOMPARE(ok.status, HttpResult::Status::Response);
    QCOMPARE(ok.body, QByteArray("ok"));

    QCOMPARE(partner.stats().requests, 1);
    QCOMPARE(partner.stats().effects, 1);
    QCOMPARE(partner.stats().dropped, 1);
}

void tst_HttpClient::closeWithoutAnswerOnKeptAliveConnectionIsInDoubt()
{
    // Answers the first request ever and hangs up on every later one: exactly what
    // makes QNetworkAccessManager replay a POST on a fresh connection.
    ScriptedServer server([](QTcpSocket *socket, int number) {
        if (number == 1)
            answerOk(socket);
        else
            socket->close();
    });
    QVERIFY(server.listen());
    HttpClient client;

    const HttpResult first = exchange(client, reminderPost(server.port(), "k1"));
    QCOMPARE(first.status, HttpResult::Status::Response);
    QCOMPARE(first.httpStatus, 200);

    const HttpResult second = exchange(client, reminderPost(server.port(), "k2"));
    QCOMPARE(second.status, HttpResult::Status::InDoubt);
    QVERIFY(!leaksSecret(second));
    QCOMPARE(client.connectionsOpened(), 1);
    QCOMPARE(server.requests(), 2);
    QCOMPARE(server.connections(), 1);
}

void tst_HttpClient::timeoutIsInDoubtAndAbandonsTheConnection()
{
    PartnerFaults profile;
    profile.latencyMs = 1500;
    PartnerSimulator partner(profile);
    QSignalSpy effects(&partner, &PartnerSimulator::effectApplied);
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client;
    HttpRequest request = reminderPost(partner.port(), "slow");
    request.timeoutMs = 200;

    const HttpResult result = exchange(client, request);
    QCOMPARE(result.status, HttpResult::Status::InDoubt);
    QVERIFY(!leaksSecret(result));
    QVERIFY2(result.latencyMs >= 150 && result.latencyMs < 1500,
             qPrintable(QString::number(result.latencyMs)));
    QCOMPARE(client.openConnections(), 0);

    // In doubt indeed: the partner still applies the effect later.
    QTRY_COMPARE_WITH_TIMEOUT(effects.size(), 1, 5000);

    profile.latencyMs = 0;
    partner.setProfile(profile);
    const HttpResult next = exchange(client, reminderPost(partner.port(), "after-timeout"));
    QCOMPARE(next.status, HttpResult::Status::Response);
    QCOMPARE(client.connectionsOpened(), 2);
    QCOMPARE(partner.stats().requests, 2);
}

void tst_HttpClient::chunkedResponseIsReassembled()
{
    ScriptedServer server([](QTcpSocket *socket, int number) {
        if (number == 1) {
            // Split mid-chunk, with the rest sent later, to exercise incremental parsing.
            socket->write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Request-Id: req_c\r\n\r\n"
                          "5\r\nhel");
            QTimer::singleShot(30, socket, [socket] {
                socket->write("lo\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n");
            });
        } else {
            socket->write("HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
                          "1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n");
        }
    });
    QVERIFY(server.listen());
    HttpClient client;

    const HttpResult first = exchange(client, reminderPost(server.port(), "chunk-1"));
    QCOMPARE(first.status, HttpResult::Status::Response);
    QCOMPARE(first.httpStatus, 200);
    QCOMPARE(first.body, QByteArray("hello, world"));
    QCOMPARE(first.header("x-request-id"), QByteArray("req_c"));

    const HttpResult second = exchange(client, reminderPost(server.port(), "chunk-2"));
    QCOMPARE(second.status, HttpResult::Status::Response);
    QCOMPARE(second.httpStatus, 201);
    QCOMPARE(second.body, QByteArray("abcdefghijklmnopqrstuvwxyz"));
    QCOMPARE(client.connectionsOpened(), 1); // the chunked framing left the connection reusable
}

void tst_HttpClient::responseWithoutLengthEndsAtClose()
{
    ScriptedServer server([](QTcpSocket *socket, int) {
        socket->write("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end");
        socket->disconnectFromHost();
    });
    QVERIFY(server.listen());
    HttpClient client;

    for (int i = 0; i < 2; ++i) {
        const HttpResult result = exchange(client, reminderPost(server.port(), "eof"));
        QCOMPARE(result.status, HttpResult::Status::Response);
        QCOMPARE(result.httpStatus, 200);
        QCOMPARE(result.body, QByteArray("until the end"));
    }
    QCOMPARE(client.connectionsOpened(), 2);
    QCOMPARE(server.requests(), 2);
}

void tst_HttpClient::connectionCloseResponseIsNotReused()
{
    // The server announces the close but keeps the socket open: the client must not reuse it.
    ScriptedServer server([](QTcpSocket *socket, int) {
        socket->write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
    });
    QVERIFY(server.listen());
    HttpClient client;

    for (int i = 0; i < 3; ++i) {
        const HttpResult result = exchange(client, reminderPost(server.port(), "close"));
        QCOMPARE(result.status, HttpResult::Status::Response);
        QCOMPARE(result.body, QByteArray("ok"));
    }
    QCOMPARE(client.connectionsOpened(), 3);
    QCOMPARE(server.connections(), 3);
    QTRY_COMPARE(client.openConnections(), 0);
}

void tst_HttpClient::hugeContentLengthIsInDoubtWithoutAllocating()
{
    // Announces 90 TB and sends one byte: a buffer sized from the header is a crash
    // (std::bad_alloc) on every restart, the key claimed forever.
    bool serverSawClose = false;
    ScriptedServer server([&serverSawClose](QTcpSocket *socket, int) {
        QObject::connect(socket, &QAbstractSocket::disconnected, socket, [&serverSawClose] { serverSawClose = true; });
        socket->write("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 99999999999999\r\n\r\n{");
    });
    QVERIFY(server.listen());
    HttpClient client;

    const HttpResult result = exchange(client, reminderPost(server.port(), "huge-length"));
    QCOMPARE(result.status, HttpResult::Status::InDoubt);
    QVERIFY2(result.error.contains(QLatin1String("99999999999999")) && result.error.contains(QLatin1String("64 KiB")),
             qPrintable(result.error));
    QVERIFY2(!result.error.contains(u'\n'), qPrintable(result.error));
    QVERIFY(!leaksSecret(result));
    QCOMPARE(client.openConnections(), 0);
    QTRY_VERIFY(serverSawClose);
    QCOMPARE(server.requests(), 1);
}

void tst_HttpClient::endlessChunkedBodyIsCutAtTheLimitAndInDoubt()
{
    qint64 streamed = 0;
    bool serverSawClose = false;
    ScriptedServer server([&](QTcpSocket *socket, int) {
        QObject::connect(socket, &QAbstractSocket::disconnected, socket, [&serverSawClose] { serverSawClose = true; });
        streamForever(socket, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Request-Id: req_endless\r\n\r\n",
                      []() -> QByteArray { return QByteArray("1000\r\n") + QByteArray(0x1000, 'x') + "\r\n"; }, &streamed);
    });
    QVERIFY(server.listen());
    HttpClient client;
    HttpRequest request = reminderPost(server.port(), "endless-chunked");
    request.timeoutMs = 3000;

    const HttpResult result = exchange(client, request);
    QCOMPARE(result.status, HttpResult::Status::InDoubt);
    // Cut at the limit, not left to run until the timeout.
    QVERIFY2(result.error.contains(QLatin1String("HTTP 200")) && result.error.contains(QLatin1String("chunked"))
                 && result.error.contains(QLatin1String("64 KiB")),
             qPrintable(result.error));
    QVERIFY(result.body.isEmpty());
    QCOMPARE(client.openConnections(), 0);
    QTRY_VERIFY(serverSawClose);
    QVERIFY(streamed > 64 * 1024);
    QCOMPARE(server.requests(), 1);
}

void tst_HttpClient::endlessBodyUntilCloseIsCutAtTheLimitAndInDoubt()
{
    qint64 streamed = 0;
    bool serverSawClose = false;
    ScriptedServer server([&](QTcpSocket *socket, int) {
        QObject::connect(socket, &QAbstractSocket::disconnected, socket, [&serverSawClose] { serverSawClose = true; });
        streamForever(socket, "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n\r\n",
                      []() -> QByteArray { return QByteArray(16 * 1024, 'y'); }, &streamed);
    });
    QVERIFY(server.listen());
    HttpClient client;
    HttpRequest request = reminderPost(server.port(), "endless-close");
    request.timeoutMs = 3000;

    const HttpResult result = exchange(client, request);
    QCOMPARE(result.status, HttpResult::Status::InDoubt);
    QVERIFY2(result.error.contains(QLatin1String("HTTP 503")) && result.error.contains(QLatin1String("64 KiB")),
             qPrintable(result.error));
    QCOMPARE(client.openConnections(), 0);
    QTRY_VERIFY(serverSawClose);
    QCOMPARE(server.requests(), 1);
}

void tst_HttpClient::bodyAtTheLimitIsKeptAndOneByteMoreIsInDoubt()
{
    constexpr int Limit = 64 * 1024;
    ScriptedServer server([](QTcpSocket *socket, int number) {
        const int size = number == 1 ? Limit : Limit + 1;
        socket->write("HTTP/1.1 200 OK\r\nContent-Length: " + QByteArray::number(size) + "\r\n\r\n");
        socket->write(QByteArray(size, 'z'));
    });
    QVERIFY(server.listen());
    HttpClient client;

    const HttpResult atLimit = exchange(client, reminderPost(server.port(), "at-limit"));
    QCOMPARE(atLimit.status, HttpResult::Status::Response);
    QCOMPARE(atLimit.body.size(), Limit);
    QCOMPARE(client.openConnections(), 1); // kept alive: the limit did not spoil the framing

    const HttpResult over = exchange(client, reminderPost(server.port(), "over-limit"));
    QCOMPARE(over.status, HttpResult::Status::InDoubt);
    QVERIFY2(over.error.contains(QLatin1String("65537")), qPrintable(over.error));
    QCOMPARE(client.openConnections(), 0);
    QCOMPARE(server.requests(), 2);
}

void tst_HttpClient::responseBodyLimitIsPerRequest()
{
    ScriptedServer server([](QTcpSocket *socket, int) {
        socket->write("HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world");
    });
    QVERIFY(server.listen());
    HttpClient client;
    HttpRequest request = reminderPost(server.port(), "small-limit");
    request.maxResponseBodyBytes = 10;
    const HttpResult over = exchange(client, request);
    QCOMPARE(over.status, HttpResult::Status::InDoubt);
    QVERIFY2(over.error.contains(QLatin1String("10 bytes")), qPrintable(over.error));

    request.maxResponseBodyBytes = 11;
    const HttpResult fits = exchange(client, request);
    QCOMPARE(fits.status, HttpResult::Status::Response);
    QCOMPARE(fits.body, QByteArray("hello world"));
}

void tst_HttpClient::idleConnectionClosedByServerIsDropped()
{
    ScriptedServer server([](QTcpSocket *socket, int) {
        answerOk(socket);
        socket->disconnectFromHost(); // keep-alive promised, but the server times out at once
    });
    QVERIFY(server.listen());
    HttpClient client;

    const HttpResult first = exchange(client, reminderPost(server.port(), "idle-1"));
    QCOMPARE(first.status, HttpResult::Status::Response);
    QTRY_COMPARE(client.openConnections(), 0);

    const HttpResult second = exchange(client, reminderPost(server.port(), "idle-2"));
    QCOMPARE(second.status, HttpResult::Status::Response);
    QCOMPARE(client.connectionsOpened(), 2);
    QCOMPARE(server.requests(), 2);
}

void tst_HttpClient::callbackSkippedWhenContextIsDestroyed()
{
    PartnerFaults profile;
    profile.latencyMs = 100;
    PartnerSimulator partner(profile);
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client(1); // one connection: the second request finishes strictly after the first

    bool called = false;
    auto *context = new QObject;
    client.send(reminderPost(partner.port(), "orphan"), context,
                [&called](const HttpResult &) { called = true; });
    delete context;

    const HttpResult later = exchange(client, reminderPost(partner.port(), "witness"));
    QCOMPARE(later.status, HttpResult::Status::Response);
    QCOMPARE(partner.stats().effects, 2);
    QVERIFY(!called);
}

void tst_HttpClient::destroyingClientWithOutstandingRequestsIsSilent()
{
    PartnerFaults profile;
    profile.latencyMs = 200;
    PartnerSimulator partner(profile);
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));

    int calls = 0;
    auto *client = new HttpClient(2);
    for (int i = 0; i < 5; ++i) {
        client->send(reminderPost(partner.port(), "gone-" + QByteArray::number(i)), this,
                     [&calls](const HttpResult &) { ++calls; });
    }
    // Let at least the first requests reach the partner before the client goes.
    QTRY_VERIFY(partner.stats().requests >= 1);
    delete client;

    QTRY_VERIFY_WITH_TIMEOUT(partner.stats().effects >= 1, 5000);
    // A full exchange on another client proves the event loop ran past any stale work.
    HttpClient other;
    HttpRequest health;
    health.url = localUrl(partner.port(), QStringLiteral("/health"));
    health.method = "GET";
    QCOMPARE(exchange(other, health).status, HttpResult::Status::Response);
    QCOMPARE(calls, 0);
}

void tst_HttpClient::clientDeletedFromCallbackStopsFurtherCallbacks()
{
    PartnerSimulator partner;
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));

    int calls = 0;
    QPointer<HttpClient> client = new HttpClient(4);
    for (int i = 0; i < 4; ++i) {
        client->send(reminderPost(partner.port(), "suicide-" + QByteArray::number(i)), this,
                     [&calls, &client](const HttpResult &) {
                         ++calls;
                         delete client.data();
                     });
    }
    QTRY_VERIFY(client.isNull());
    QTRY_VERIFY_WITH_TIMEOUT(partner.stats().requests >= 1, 5000);
    HttpClient other;
    HttpRequest health;
    health.url = localUrl(partner.port(), QStringLiteral("/health"));
    health.method = "GET";
    QCOMPARE(exchange(other, health).status, HttpResult::Status::Response);
    QCOMPARE(calls, 1);
}

QTEST_GUILESS_MAIN(tst_HttpClient)
#include "tst_httpclient.moc"
