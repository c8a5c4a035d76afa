#include "httpclient.h"
#include "partnersimulator.h"

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

namespace {

// The credential every test request carries; no error text may ever show it.
constexpr char kSecret[] = "s3cr3t-token-never-logged";

QByteArray authorization()
{
    return QByteArray("Bearer ") + kSecret;
}

QUrl localUrl(quint16 port, const QString &path = QStringLiteral("/reminders"))
{
    return QUrl(QStringLiteral("http://127.0.0.1:%1%2").arg(port).arg(path));
}

HttpRequest reminderPost(quint16 port, const QByteArray &key, const QByteArray &body = R"({"reminder":1})")
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
HttpResult exchange(HttpClient &client, const HttpRequest &request, int waitMs = 15000)
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

bool leaksSecret(const HttpResult &result)
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
            buffer.remove(0, headEnd + 4 + length);
            m_handler(socket, ++m_requests);
            if (socket->state() != QAbstractSocket::ConnectedState)
                return;
        }
    }

    QTcpServer m_server;
    Handler m_handler;
    int m_requests = 0;
    int m_connections = 0;
};

void answerOk(QTcpSocket *socket)
{
    socket->write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok");
}

} // namespace

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
    PartnerProfile profile;
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
    PartnerProfile profile;
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
    PartnerProfile profile;
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
    PartnerProfile profile;
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
