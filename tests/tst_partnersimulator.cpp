#include "http/httpclient.h"
#include "sim/partnersimulator.h"
#include "sim/providerimitation.h"
#include "sim/shardedkeyhash.h"

#include <QElapsedTimer>
#include <QHostAddress>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QTcpServer>
#include <QTcpSocket>
#include <QTest>

#include <functional>
#include <optional>

using namespace once;

Q_DECLARE_METATYPE(once::HostileMode)

namespace {

QUrl localUrl(quint16 port, const QString &path)
{
    return QUrl(QStringLiteral("http://127.0.0.1:%1%2").arg(port).arg(path));
}

HttpRequest reminderPost(quint16 port, const QByteArray &key, const QByteArray &body = R"({"reminder":1})")
{
    HttpRequest request;
    request.url = localUrl(port, QStringLiteral("/reminders"));
    request.method = "POST";
    request.headers = {{"Content-Type", "application/json"}};
    if (!key.isEmpty())
        request.headers.append({"idempotency-key", key}); // the simulator must match it case-insensitively
    request.body = body;
    return request;
}

HttpRequest get(quint16 port, const QString &path)
{
    HttpRequest request;
    request.url = localUrl(port, path);
    request.method = "GET";
    return request;
}

// Sends one request and runs the event loop until its result arrives; httpStatus -1
// means the callback never came.
HttpResult exchange(HttpClient &client, const HttpRequest &request, int waitMs = 15000)
{
    std::optional<HttpResult> result;
    QObject context;
    client.send(request, &context, [&result](const HttpResult &r) { result = r; });
    if (!QTest::qWaitFor([&result] { return result.has_value(); }, waitMs)) {
        HttpResult missing;
        missing.httpStatus = -1;
        return missing;
    }
    return *result;
}

QJsonObject jsonOf(const HttpResult &result)
{
    return QJsonDocument::fromJson(result.body).object();
}

// Reads from a raw socket until `count` complete responses (Content-Length framed) arrived.
bool readResponses(QTcpSocket &socket, int count, QList<QByteArray> *responses)
{
    QByteArray buffer;
    return QTest::qWaitFor(
        [&] {
            buffer += socket.readAll();
            for (;;) {
                const qsizetype headEnd = buffer.indexOf("\r\n\r\n");
                if (headEnd < 0)
                    break;
                const QByteArray head = buffer.left(headEnd).toLower();
                const qsizetype at = head.indexOf("content-length:");
                const qsizetype end = head.indexOf("\r\n", at);
                const qint64 length =
                    at < 0 ? 0 : head.mid(at + 15, end < 0 ? -1 : end - at - 15).trimmed().toLongLong();
                if (buffer.size() < headEnd + 4 + length)
                    break;
                responses->append(buffer.left(headEnd + 4 + length));
                buffer.remove(0, headEnd + 4 + length);
            }
            return responses->size() >= count;
        },
        10000);
}

// Sends one POST /reminders on a raw socket and reads what comes back until enough(answer)
// holds or the socket closes; the answer as raw bytes, whatever its framing.
QByteArray rawReminder(quint16 port, const QByteArray &key, const std::function<bool(const QByteArray &)> &enough)
{
    QTcpSocket socket;
    socket.connectToHost(QHostAddress::LocalHost, port);
    if (!socket.waitForConnected(5000))
        return {};
    const QByteArray body = R"({"reminder":1})";
    socket.write("POST /reminders HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sim-token-1\r\nIdempotency-Key: " + key
                 + "\r\nContent-Type: application/json\r\nContent-Length: " + QByteArray::number(body.size())
                 + "\r\n\r\n" + body);
    QByteArray answer;
    [[maybe_unused]] const bool ended = QTest::qWaitFor(
        [&] {
            answer += socket.readAll();
            return enough(answer) || socket.state() != QAbstractSocket::ConnectedState;
        },
        10000);
    return answer + socket.readAll();
}

} // namespace

class tst_PartnerSimulator final : public QObject
{
    Q_OBJECT

private slots:
    void listenOnPortZeroPicksAFreePort();
    void newKeyIsAcceptedWithRequestId();
    void replayOfSameKeyReturnsSameRequestIdWithoutSecondEffect();
    void sameKeyWhileFirstInProgressIsConflict();
    void sameKeyWithDifferentBodyIsUnprocessable();
    void withoutIdempotencyEveryRequestIsAnEffect();
    void aKeyOlderThanItsWindowIsANewRequest();
    void requestWithoutKeyIsAlwaysAnEffect();
    void invalidJsonIsRejectedWithoutEffect();
    void failRateOneAnswers503WithoutEffect();
    void throttleRateOneAnswers429WithRetryAfter();
    void rateLimitAdmitsNASecondAndRefusesTheRest();
    void outageWindowAnswers503ThenRecovers();
    void outageRepeats();
    void dropAfterAcceptAppliesEffectAndReplaysLater();
    void effectAppliedWhenClientLeavesDuringLatency();
    void statsEffectsHealthAndUnknownPaths();
    void pipelinedRequestsAreAnsweredInOrder();
    void connectionCloseRequestIsHonoured();
    void latencyDoesNotBlockOtherConnections_data();
    void latencyDoesNotBlockOtherConnections();
    void hundredsOfConcurrentConnections();
    void hostileModesMisbehaveAsTheyClaim_data();
    void hostileModesMisbehaveAsTheyClaim();
    void hostileReplayKeepsOneEffect();
    void hostileCountLimitsTheMisbehaviour();
    void keysAreSplitSoThatNoDoublingMovesThemAll();
};

void tst_PartnerSimulator::listenOnPortZeroPicksAFreePort()
{
    PartnerSimulator partner;
    QString error;
    QVERIFY2(partner.listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    QVERIFY(partner.port() != 0);

    PartnerSimulator clash;
    QVERIFY(!clash.listen(QHostAddress::LocalHost, partner.port(), &error));
    QVERIFY(!error.isEmpty());
}

void tst_PartnerSimulator::newKeyIsAcceptedWithRequestId()
{
    PartnerSimulator partner;
    QSignalSpy effects(&partner, &PartnerSimulator::effectApplied);
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client;

    const HttpResult result = exchange(client, reminderPost(partner.port(), "k-new"));
    QCOMPARE(result.status, HttpResult::Status::Response);
    QCOMPARE(result.httpStatus, 200);
    const QJsonObject body = jsonOf(result);
    QVERIFY(body.value(QLatin1String("id")).toString().startsWith(QLatin1String("msg_")));
    QCOMPARE(body.value(QLatin1String("status")).toString(), QStringLiteral("accepted"));
    QCOMPARE(body.value(QLatin1String("request_id")).toString(),
             QString::fromLatin1(result.header("X-Request-Id")));
    QVERIFY(result.header("Idempotent-Replayed").isEmpty());
    QCOMPARE(effects.size(), 1);
    QCOMPARE(effects.at(0).at(0).toByteArray(), QByteArray("k-new"));
    QCOMPARE(partner.stats().requests, 1);
    QCOMPARE(partner.stats().effects, 1);
    QCOMPARE(partner.effectsByKey().value("k-new"), 1);
}

void tst_PartnerSimulator::replayOfSameKeyReturnsSameRequestIdWithoutSecondEffect()
{
    PartnerSimulator partner;
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client;

    const HttpResult first = exchange(client, reminderPost(partner.port(), "k-replay"));
    const HttpResult second = exchange(client, reminderPost(partner.port(), "k-replay"));
    QCOMPARE(first.httpStatus, 200);
    QCOMPARE(second.httpStatus, 200);
    QCOMPARE(second.header("X-Request-Id"), first.header("X-Request-Id"));
    QCOMPARE(second.body, first.body);
    QCOMPARE(second.header("Idempotent-Replayed"), QByteArray("true"));

    const PartnerStats stats = partner.stats();
    QCOMPARE(stats.requests, 2);
    QCOMPARE(stats.effects, 1);
    QCOMPARE(stats.duplicateRequests, 1);
    QCOMPARE(stats.duplicateEffects, 0);
    QCOMPARE(partner.effectsByKey().value("k-replay"), 1);
}

void tst_PartnerSimulator::sameKeyWhileFirstInProgressIsConflict()
{
    PartnerFaults profile;
    profile.latencyMs = 500;
    PartnerSimulator partner(profile);
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client(2);

    std::optional<HttpResult> first;
    client.send(reminderPost(partner.port(), "k-busy"), this, [&first](const HttpResult &r) { first = r; });
    QTRY_COMPARE(partner.stats().requests, 1);

    const HttpResult second = exchange(client, reminderPost(partner.port(), "k-busy"));
    QCOMPARE(second.status, HttpResult::Status::Response);
    QCOMPARE(second.httpStatus, 409);
    QVERIFY(!first.has_value());

    QTRY_VERIFY_WITH_TIMEOUT(first.has_value(), 5000);
    QCOMPARE(first->httpStatus, 200);
    QCOMPARE(partner.stats().effects, 1);
    QCOMPARE(partner.stats().duplicateRequests, 1);
}

void tst_PartnerSimulator::sameKeyWithDifferentBodyIsUnprocessable()
{
    PartnerSimulator partner;
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client;

    QCOMPARE(exchange(client, reminderPost(partner.port(), "k-body", R"({"text":"a"})")).httpStatus, 200);
    const HttpResult other = exchange(client, reminderPost(partner.port(), "k-body", R"({"text":"b"})"));
    QCOMPARE(other.httpStatus, 422);
    QVERIFY(other.header("X-Request-Id").isEmpty());
    QCOMPARE(partner.stats().effects, 1);
    QCOMPARE(partner.stats().duplicateRequests, 1);
}

void tst_PartnerSimulator::withoutIdempotencyEveryRequestIsAnEffect()
{
    PartnerFaults profile;
    profile.idempotent = false;
    PartnerSimulator partner(profile);
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client;

    const HttpResult first = exchange(client, reminderPost(partner.port(), "k-dup"));
    const HttpResult second = exchange(client, reminderPost(partner.port(), "k-dup"));
    QCOMPARE(first.httpStatus, 200);
    QCOMPARE(second.httpStatus, 200);
    QVERIFY(second.header("X-Request-Id") != first.header("X-Request-Id"));
    QVERIFY(second.header("Idempotent-Replayed").isEmpty());

    const PartnerStats stats = partner.stats();
    QCOMPARE(stats.effects, 2);
    QCOMPARE(stats.duplicateEffects, 1);
    QCOMPARE(partner.effectsByKey().value("k-dup"), 2);

    const QJsonObject remote = jsonOf(exchange(client, get(partner.port(), QStringLiteral("/stats"))));
    QCOMPARE(remote.value(QLatin1String("duplicate_effects")).toInteger(), 1);
}

// A provider keeps a key for a while only (Resend: 24 hours): a repeat after that acts
// again. The window shrunk to 300 ms, the same key is replayed inside it and is a second
// effect after it.
void tst_PartnerSimulator::aKeyOlderThanItsWindowIsANewRequest()
{
    QCOMPARE(providerImitation(u"resend")->keyWindowMs(), 24 * 3600 * 1000);
    QCOMPARE(providerImitation(u"webhook")->keyWindowMs(), 0);
    PartnerFaults profile;
    profile.keyWindowMs = 300;
    PartnerSimulator partner(profile);
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client;
    QElapsedTimer sinceFirst;
    sinceFirst.start();

    const HttpResult first = exchange(client, reminderPost(partner.port(), "k-window"));
    const HttpResult replay = exchange(client, reminderPost(partner.port(), "k-window"));
    QCOMPARE(first.httpStatus, 200);
    QCOMPARE(replay.header("Idempotent-Replayed"), QByteArray("true"));
    QCOMPARE(partner.stats().effects, 1);

    // Waiting out the window is the point here: nothing else can say that it has passed.
    QVERIFY(QTest::qWaitFor([&] { return sinceFirst.hasExpired(400); }, 2000));
    const HttpResult later = exchange(client, reminderPost(partner.port(), "k-window"));
    QCOMPARE(later.httpStatus, 200);
    QVERIFY(later.header("Idempotent-Replayed").isEmpty());
    QVERIFY(later.header("X-Request-Id") != first.header("X-Request-Id"));
    QCOMPARE(partner.stats().effects, 2);
    QCOMPARE(partner.stats().duplicateEffects, 1);
    QCOMPARE(partner.effectsByKey().value("k-window"), 2);
    // The key's window starts again with the request that acted.
    const HttpResult again = exchange(client, reminderPost(partner.port(), "k-window"));
    QCOMPARE(again.header("Idempotent-Replayed"), QByteArray("true"));
    QCOMPARE(partner.stats().effects, 2);
}

void tst_PartnerSimulator::requestWithoutKeyIsAlwaysAnEffect()
{
    PartnerSimulator partner;
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client;

    QCOMPARE(exchange(client, reminderPost(partner.port(), QByteArray())).httpStatus, 200);
    QCOMPARE(exchange(client, reminderPost(partner.port(), QByteArray())).httpStatus, 200);
    QCOMPARE(partner.stats().effects, 2);
    QCOMPARE(partner.stats().duplicateRequests, 0);
    QCOMPARE(partner.stats().duplicateEffects, 0);
}

void tst_PartnerSimulator::invalidJsonIsRejectedWithoutEffect()
{
    PartnerSimulator partner;
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client;

    QCOMPARE(exchange(client, reminderPost(partner.port(), "k-json", "{not json")).httpStatus, 400);
    QCOMPARE(partner.stats().effects, 0);
    // The rejected body did not claim the key.
    QCOMPARE(exchange(client, reminderPost(partner.port(), "k-json")).httpStatus, 200);
    QCOMPARE(partner.stats().effects, 1);
}

void tst_PartnerSimulator::failRateOneAnswers503WithoutEffect()
{
    PartnerFaults profile;
    profile.failRate = 1.0;
    PartnerSimulator partner(profile);
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client;

    for (int i = 0; i < 3; ++i)
        QCOMPARE(exchange(client, reminderPost(partner.port(), "k-fail")).httpStatus, 503);
    QCOMPARE(partner.stats().requests, 3);
    QCOMPARE(partner.stats().effects, 0);
    QCOMPARE(partner.stats().duplicateRequests, 0); // failed attempts do not claim the key

    profile.failRate = 0.0;
    partner.setProfile(profile);
    QCOMPARE(exchange(client, reminderPost(partner.port(), "k-fail")).httpStatus, 200);
    QCOMPARE(partner.stats().effects, 1);
}

void tst_PartnerSimulator::throttleRateOneAnswers429WithRetryAfter()
{
    PartnerFaults profile;
    profile.throttleRate = 1.0;
    profile.retryAfterSeconds = 7;
    PartnerSimulator partner(profile);
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client;

    const HttpResult result = exchange(client, reminderPost(partner.port(), "k-429"));
    QCOMPARE(result.httpStatus, 429);
    QCOMPARE(result.header("Retry-After"), QByteArray("7"));
    QCOMPARE(partner.stats().effects, 0);
}

// A provider's rate limit: N requests a second from a bucket holding N; the rest are
// answered 429 with Retry-After: 1 and do nothing, and /stats counts both.
void tst_PartnerSimulator::rateLimitAdmitsNASecondAndRefusesTheRest()
{
    PartnerFaults profile;
    profile.rateLimitPerSecond = 3;
    PartnerSimulator partner(profile);
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client;

    QList<int> statuses;
    for (int i = 0; i < 6; ++i) {
        const HttpResult result =
            exchange(client, reminderPost(partner.port(), "r-" + QByteArray::number(i)));
        statuses << result.httpStatus;
        if (result.httpStatus == 429)
            QCOMPARE(result.header("Retry-After"), QByteArray("1"));
    }
    // Six requests within milliseconds: the bucket's three, then (a token comes every
    // 333 ms, so on a very slow machine perhaps one more) 429s.
    QVERIFY2(statuses.mid(0, 3) == (QList<int>{200, 200, 200}) && statuses.last() == 429,
             qPrintable(QString::number(statuses.count(429))));
    const PartnerStats stats = partner.stats();
    QCOMPARE(stats.requests, 6);
    QCOMPARE(stats.admitted + stats.rateLimited, 6);
    QCOMPARE(stats.effects, stats.admitted); // a 429 did nothing
    const QJsonObject s = jsonOf(exchange(client, get(partner.port(), QStringLiteral("/stats"))));
    QCOMPARE(s.value(QLatin1String("rate_limited")).toInteger(), stats.rateLimited);
    QCOMPARE(s.value(QLatin1String("admitted")).toInteger(), stats.admitted);
    // The bucket refills: a later request is admitted again.
    QList<int> later;
    QVERIFY2(QTest::qWaitFor(
                 [&] {
                     later << exchange(client, reminderPost(partner.port(), "r-later")).httpStatus;
                     return later.last() == 200;
                 },
                 5000),
             qPrintable(QString::number(later.size()) + QStringLiteral(" tries, last ") +
                        QString::number(later.last())));
}

void tst_PartnerSimulator::outageWindowAnswers503ThenRecovers()
{
    PartnerFaults profile;
    profile.outageAfterRequests = 2;
    profile.outageSeconds = 1;
    PartnerSimulator partner(profile);
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client;

    QCOMPARE(exchange(client, reminderPost(partner.port(), "o-1")).httpStatus, 200);
    QCOMPARE(exchange(client, reminderPost(partner.port(), "o-2")).httpStatus, 200);
    QElapsedTimer clock;
    clock.start();
    const HttpResult down = exchange(client, reminderPost(partner.port(), "o-3"));
    QCOMPARE(down.httpStatus, 503);
    QCOMPARE(down.header("Retry-After"), QByteArray("1"));
    QCOMPARE(exchange(client, reminderPost(partner.port(), "o-3")).httpStatus, 503);

    QTRY_COMPARE_WITH_TIMEOUT(exchange(client, reminderPost(partner.port(), "o-3")).httpStatus, 200, 5000);
    QVERIFY2(clock.elapsed() >= 900, qPrintable(QString::number(clock.elapsed())));
    QCOMPARE(partner.stats().effects, 3);
    // A single outage: it does not come back.
    QCOMPARE(exchange(client, reminderPost(partner.port(), "o-4")).httpStatus, 200);
}

void tst_PartnerSimulator::outageRepeats()
{
    PartnerFaults profile;
    profile.outageAfterRequests = 1;
    profile.outageSeconds = 1;
    profile.outageEverySeconds = 2;
    PartnerSimulator partner(profile);
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client;

    QCOMPARE(exchange(client, reminderPost(partner.port(), "r-1")).httpStatus, 200);
    QCOMPARE(exchange(client, reminderPost(partner.port(), "r-2")).httpStatus, 503);
    QTRY_COMPARE_WITH_TIMEOUT(exchange(client, reminderPost(partner.port(), "r-2")).httpStatus, 200, 5000);
    QTRY_COMPARE_WITH_TIMEOUT(exchange(client, reminderPost(partner.port(), "r-3")).httpStatus, 503, 5000);
    QTRY_COMPARE_WITH_TIMEOUT(exchange(client, reminderPost(partner.port(), "r-3")).httpStatus, 200, 5000);
}

void tst_PartnerSimulator::dropAfterAcceptAppliesEffectAndReplaysLater()
{
    PartnerFaults profile;
    profile.dropAfterAcceptRate = 1.0;
    PartnerSimulator partner(profile);
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client;

    const HttpResult lost = exchange(client, reminderPost(partner.port(), "k-drop"));
    QCOMPARE(lost.status, HttpResult::Status::InDoubt);
    QCOMPARE(partner.stats().effects, 1);
    QCOMPARE(partner.stats().dropped, 1);

    // The caller retries the in-doubt request with the same key: a replay, not a new effect.
    profile.dropAfterAcceptRate = 0.0;
    partner.setProfile(profile);
    const HttpResult retry = exchange(client, reminderPost(partner.port(), "k-drop"));
    QCOMPARE(retry.httpStatus, 200);
    QCOMPARE(retry.header("Idempotent-Replayed"), QByteArray("true"));
    QCOMPARE(partner.stats().effects, 1);
    QCOMPARE(partner.stats().requests, 2);
}

void tst_PartnerSimulator::effectAppliedWhenClientLeavesDuringLatency()
{
    PartnerFaults profile;
    profile.latencyMs = 200;
    PartnerSimulator partner(profile);
    QSignalSpy effects(&partner, &PartnerSimulator::effectApplied);
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));

    QTcpSocket socket;
    socket.connectToHost(QHostAddress::LocalHost, partner.port());
    QVERIFY(socket.waitForConnected(5000));
    const QByteArray body = R"({"reminder":1})";
    socket.write("POST /reminders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k-gone\r\nContent-Length: " +
                 QByteArray::number(body.size()) + "\r\n\r\n" + body);
    QTRY_COMPARE(partner.stats().requests, 1);
    socket.abort();

    QTRY_COMPARE_WITH_TIMEOUT(effects.size(), 1, 5000);
    QCOMPARE(partner.effectsByKey().value("k-gone"), 1);
}

void tst_PartnerSimulator::statsEffectsHealthAndUnknownPaths()
{
    PartnerSimulator partner;
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client;

    exchange(client, reminderPost(partner.port(), "s-1"));
    exchange(client, reminderPost(partner.port(), "s-1"));
    exchange(client, reminderPost(partner.port(), "s-2"));

    const HttpResult stats = exchange(client, get(partner.port(), QStringLiteral("/stats")));
    QCOMPARE(stats.httpStatus, 200);
    const QJsonObject s = jsonOf(stats);
    QCOMPARE(s.value(QLatin1String("requests")).toInteger(), 3);
    QCOMPARE(s.value(QLatin1String("effects")).toInteger(), 2);
    QCOMPARE(s.value(QLatin1String("duplicate_requests")).toInteger(), 1);
    QCOMPARE(s.value(QLatin1String("duplicate_effects")).toInteger(), 0);
    QCOMPARE(s.value(QLatin1String("dropped")).toInteger(), 0);
    QCOMPARE(s.value(QLatin1String("peak_held")).toInteger(), 0); // no latency, nothing waited
    QCOMPARE(s.value(QLatin1String("hostile")).toInteger(), 0);
    // The counts once bench --partner-url reads from any partner: POSTs, and distinct keys applied.
    QCOMPARE(s.value(QLatin1String("posts")).toInteger(), 3);
    QCOMPARE(s.value(QLatin1String("keys")).toInteger(), 2);
    // Delivery events go out only with an events target (setEventsTarget).
    QCOMPARE(s.value(QLatin1String("events_posted")).toInteger(), 0);
    QCOMPARE(s.value(QLatin1String("events_accepted")).toInteger(), 0);
    QCOMPARE(s.value(QLatin1String("events_refused")).toInteger(), 0);
    // Without --rate-limit everything is admitted; per second: [second, requests, 429s, effects].
    QCOMPARE(s.value(QLatin1String("rate_limited")).toInteger(), 0);
    QCOMPARE(s.value(QLatin1String("admitted")).toInteger(), 3);
    qint64 requestsPerSecond = 0;
    qint64 effectsPerSecond = 0;
    for (const QJsonValue &second : s.value(QLatin1String("seconds")).toArray()) {
        requestsPerSecond += second[1].toInteger();
        effectsPerSecond += second[3].toInteger();
    }
    QCOMPARE(requestsPerSecond, 3);
    QCOMPARE(effectsPerSecond, 2);
    QCOMPARE(s.size(), 15);

    const QJsonObject e = jsonOf(exchange(client, get(partner.port(), QStringLiteral("/effects"))));
    QCOMPARE(e.size(), 2);
    QCOMPARE(e.value(QLatin1String("s-1")).toInt(), 1);
    QCOMPARE(e.value(QLatin1String("s-2")).toInt(), 1);

    const HttpResult health = exchange(client, get(partner.port(), QStringLiteral("/health")));
    QCOMPARE(health.httpStatus, 200);
    QCOMPARE(health.body, QByteArray("ok"));

    QCOMPARE(exchange(client, get(partner.port(), QStringLiteral("/nowhere"))).httpStatus, 404);
    QCOMPARE(exchange(client, get(partner.port(), QStringLiteral("/reminders"))).httpStatus, 405);
    QCOMPARE(partner.stats().requests, 3); // only POST /reminders counts
    QCOMPARE(client.connectionsOpened(), 1);
}

void tst_PartnerSimulator::pipelinedRequestsAreAnsweredInOrder()
{
    PartnerFaults profile;
    profile.latencyMs = 50; // the first answer is delayed: the second must still come after it
    PartnerSimulator partner(profile);
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));

    QTcpSocket socket;
    socket.connectToHost(QHostAddress::LocalHost, partner.port());
    QVERIFY(socket.waitForConnected(5000));
    const QByteArray body = R"({"reminder":1})";
    const QByteArray post =
        "POST /reminders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k-pipe\r\nContent-Length: " +
        QByteArray::number(body.size()) + "\r\n\r\n" + body;
    socket.write(post + "GET /health HTTP/1.1\r\nHost: x\r\n\r\n" + post);

    QList<QByteArray> responses;
    QVERIFY(readResponses(socket, 3, &responses));
    QVERIFY(responses.at(0).startsWith("HTTP/1.1 200"));
    QVERIFY(responses.at(0).contains("X-Request-Id: req_"));
    QVERIFY(responses.at(1).endsWith("\r\n\r\nok"));
    QVERIFY(responses.at(2).contains("Idempotent-Replayed: true"));
    QCOMPARE(partner.stats().effects, 1);
}

void tst_PartnerSimulator::connectionCloseRequestIsHonoured()
{
    PartnerSimulator partner;
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));

    QTcpSocket socket;
    QSignalSpy disconnected(&socket, &QAbstractSocket::disconnected);
    socket.connectToHost(QHostAddress::LocalHost, partner.port());
    QVERIFY(socket.waitForConnected(5000));
    socket.write("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");

    QList<QByteArray> responses;
    QVERIFY(readResponses(socket, 1, &responses));
    QVERIFY(responses.at(0).contains("Connection: close"));
    QTRY_COMPARE(disconnected.size(), 1);
}

// An accepted send waits latencyMs; a failing partner's 503 waits failLatencyMs (one
// timing out behind its load balancer). Either way the requests wait together.
void tst_PartnerSimulator::latencyDoesNotBlockOtherConnections_data()
{
    QTest::addColumn<bool>("failing");
    QTest::newRow("accepted") << false;
    QTest::newRow("failed") << true;
}

void tst_PartnerSimulator::latencyDoesNotBlockOtherConnections()
{
    QFETCH(bool, failing);
    PartnerFaults profile;
    if (failing) {
        profile.failRate = 1.0;
        profile.failLatencyMs = 300;
    } else {
        profile.latencyMs = 300;
    }
    PartnerSimulator partner(profile);
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client(20);

    QElapsedTimer clock;
    clock.start();
    const int answer = failing ? 503 : 200;
    int done = 0;
    for (int i = 0; i < 20; ++i) {
        client.send(reminderPost(partner.port(), "lat-" + QByteArray::number(i)), this,
                    [&done, answer](const HttpResult &r) { done += r.httpStatus == answer ? 1 : 0; });
    }
    QTRY_COMPARE_WITH_TIMEOUT(done, 20, 10000);
    // Serialised they would take 6 s; in parallel a little over 300 ms.
    QVERIFY2(clock.elapsed() >= 300 && clock.elapsed() < 3000, qPrintable(QString::number(clock.elapsed())));
    // All twenty waited out the latency together, and none waits any more.
    QCOMPARE(partner.stats().peakHeld, 20);
    QCOMPARE(partner.stats().held, 0);
    QCOMPARE(partner.stats().effects, failing ? 0 : 20);
}

void tst_PartnerSimulator::hundredsOfConcurrentConnections()
{
    PartnerSimulator partner;
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client(300);

    int ok = 0;
    int finished = 0;
    for (int i = 0; i < 1200; ++i) {
        client.send(reminderPost(partner.port(), "many-" + QByteArray::number(i % 600)), this,
                    [&](const HttpResult &r) {
                        ++finished;
                        ok += r.httpStatus == 200 ? 1 : 0;
                    });
    }
    QTRY_COMPARE_WITH_TIMEOUT(finished, 1200, 30000);
    QVERIFY(client.connectionsOpened() > 1);
    QVERIFY(client.connectionsOpened() <= 300);
    // Same-key requests may overlap and get 409; every key took effect exactly once.
    QCOMPARE(partner.stats().effects, 600);
    QCOMPARE(partner.stats().duplicateEffects, 0);
    QVERIFY(ok >= 600);
}

void tst_PartnerSimulator::hostileModesMisbehaveAsTheyClaim_data()
{
    QTest::addColumn<HostileMode>("mode");
    QTest::addColumn<QByteArray>("statusLine");
    QTest::addColumn<QByteArray>("shows");
    QTest::addColumn<bool>("endless");
    QTest::addColumn<int>("effects");

    QTest::newRow("huge-content-length") << HostileMode::HugeContentLength << QByteArray("HTTP/1.1 200 OK")
                                         << QByteArray("Content-Length: 99999999999999\r\n") << false << 1;
    QTest::newRow("endless-chunked") << HostileMode::EndlessChunked << QByteArray("HTTP/1.1 200 OK")
                                     << QByteArray("Transfer-Encoding: chunked\r\n") << true << 1;
    QTest::newRow("endless-body") << HostileMode::EndlessBody << QByteArray("HTTP/1.1 200 OK")
                                  << QByteArray("Connection: close\r\n") << true << 1;
    QTest::newRow("endless-headers") << HostileMode::EndlessHeaders << QByteArray("HTTP/1.1 200 OK")
                                     << QByteArray("X-Filler-1: ") << true << 1;
    QTest::newRow("echo-authorization") << HostileMode::EchoAuthorization
                                        << QByteArray("HTTP/1.1 503 Service Unavailable")
                                        << QByteArray("X-Request-Id: Bearer sim-token-1\r\n") << false << 0;
    QTest::newRow("huge-retry-after") << HostileMode::HugeRetryAfter << QByteArray("HTTP/1.1 429 Too Many Requests")
                                      << QByteArray("Retry-After: 99999999999999999999999\r\n") << false << 0;
    QTest::newRow("hostile-request-id") << HostileMode::HostileRequestId << QByteArray("HTTP/1.1 200 OK")
                                        << QByteArray("X-Request-Id: =HYPERLINK(") << false << 1;
}

void tst_PartnerSimulator::hostileModesMisbehaveAsTheyClaim()
{
    QFETCH(HostileMode, mode);
    QFETCH(QByteArray, statusLine);
    QFETCH(QByteArray, shows);
    QFETCH(bool, endless);
    QFETCH(int, effects);
    PartnerFaults profile;
    profile.hostile = mode;
    PartnerSimulator partner(profile);
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));

    // Endless answers are read for 2 MiB: far past any limit of a client, and still going.
    constexpr qsizetype Plenty = 2 * 1024 * 1024;
    const QByteArray answer = rawReminder(partner.port(), "hostile-1", [&](const QByteArray &got) {
        return endless ? got.size() > Plenty : got.contains("\r\n\r\n") && got.contains(shows);
    });
    QVERIFY2(answer.startsWith(QByteArray(statusLine + "\r\n")), answer.left(200).constData());
    QVERIFY2(answer.contains(shows), answer.left(400).constData());
    if (endless)
        QVERIFY2(answer.size() > Plenty, qPrintable(QString::number(answer.size())));
    if (mode == HostileMode::EndlessHeaders)
        QVERIFY(!answer.contains("\r\n\r\n"));
    if (mode == HostileMode::EchoAuthorization)
        QVERIFY(answer.contains(R"("request_id":"Bearer sim-token-1")"));
    // The partner acted (or not) before it misbehaved: counted honestly.
    QCOMPARE(partner.stats().effects, effects);
    QCOMPARE(partner.effectsByKey().value("hostile-1"), effects);
    QCOMPARE(partner.stats().hostile, 1);
    QCOMPARE(partner.stats().requests, 1);
}

void tst_PartnerSimulator::hostileReplayKeepsOneEffect()
{
    PartnerFaults profile;
    profile.hostile = HostileMode::HugeContentLength;
    PartnerSimulator partner(profile);
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    for (int i = 0; i < 3; ++i) {
        const QByteArray answer = rawReminder(partner.port(), "hostile-replay",
                                              [](const QByteArray &got) { return got.contains("\r\n\r\n{"); });
        QVERIFY2(answer.contains("Content-Length: 99999999999999"), answer.constData());
    }
    QCOMPARE(partner.stats().requests, 3);
    QCOMPARE(partner.stats().effects, 1);
    QCOMPARE(partner.stats().duplicateRequests, 2);
    QCOMPARE(partner.stats().hostile, 3);
}

void tst_PartnerSimulator::hostileCountLimitsTheMisbehaviour()
{
    PartnerFaults profile;
    profile.hostile = HostileMode::EchoAuthorization;
    profile.hostileCount = 1;
    PartnerSimulator partner(profile);
    QVERIFY(partner.listen(QHostAddress::LocalHost, 0));
    HttpClient client;

    const HttpResult first = exchange(client, reminderPost(partner.port(), "k-count"));
    QCOMPARE(first.httpStatus, 503);
    const HttpResult second = exchange(client, reminderPost(partner.port(), "k-count"));
    QCOMPARE(second.httpStatus, 200);
    QCOMPARE(jsonOf(second).value(QLatin1String("status")).toString(), QStringLiteral("accepted"));
    QCOMPARE(partner.stats().hostile, 1);
    QCOMPARE(partner.stats().effects, 1);
    HttpResult stats = exchange(client, get(partner.port(), QStringLiteral("/stats")));
    QCOMPARE(jsonOf(stats).value(QLatin1String("hostile")).toInt(), 1);
}


void tst_PartnerSimulator::keysAreSplitSoThatNoDoublingMovesThemAll()
{
    // Send keys as a worker makes them: user first, so that most begin alike, and a run's
    // reminders differ only in their counter and time.
    const auto sendKey = [](int n) -> QByteArray {
        return "u" + QByteArray::number(n % 10007) + ":r7kq2x-" + QByteArray::number(n)
               + ":2026-12-05T00:00:0" + QByteArray::number(n % 10) + ".000Z";
    };
    const int keys = 200000;
    ShardedKeyHash<int> effects;
    for (int n = 0; n < keys; ++n)
        effects[sendKey(n)] += 1;
    effects[sendKey(12345)] += 1;

    QCOMPARE(effects.size(), qsizetype(keys));
    // One hash would move all 200,000 at its last doubling; split evenly, the largest
    // part holds about a 256th of them (781).
    const qsizetype even = keys / ShardedKeyHash<int>::Shards;
    QVERIFY2(effects.largestShard() < 2 * even,
             qPrintable(QStringLiteral("largest part: %1 keys of %2").arg(effects.largestShard()).arg(keys)));
    QCOMPARE(*std::as_const(effects).find(sendKey(12345)), 2);
    QCOMPARE(*effects.find(sendKey(keys - 1)), 1);
    QCOMPARE(effects.find("u1:never-sent"), nullptr);

    const QHash<QByteArray, int> all = effects.toHash();
    QCOMPARE(all.size(), qsizetype(keys));
    QCOMPARE(all.value(sendKey(0)), 1);
    QCOMPARE(all.value(sendKey(12345)), 2);
}
QTEST_GUILESS_MAIN(tst_PartnerSimulator)
#include "tst_partnersimulator.moc"
