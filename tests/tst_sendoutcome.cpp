// What a partner answer means (classify), Retry-After, backoff and the circuit breaker.
#include "delivery/circuitbreaker.h"
#include "http/httpclient.h"
#include "delivery/partnersender.h"
#include "http/retryafter.h"

#include <QDateTime>
#include <QLocale>
#include <QScopeGuard>
#include <QTest>

#include <ctime>

using namespace once;

Q_DECLARE_METATYPE(once::SendOutcome::Kind)
Q_DECLARE_METATYPE(once::HttpResult::Status)
Q_DECLARE_METATYPE(once::HttpHeaders)

namespace {

// A fixed "now" keeps the HTTP-date cases exact.
const qint64 Now = QDateTime(QDate(2026, 12, 1), QTime(9, 0, 0), Qt::UTC).toMSecsSinceEpoch();

QByteArray httpDate(qint64 msSinceEpoch)
{
    return QLocale::c()
        .toString(QDateTime::fromMSecsSinceEpoch(msSinceEpoch, Qt::UTC), QStringLiteral("ddd, dd MMM yyyy HH:mm:ss 'GMT'"))
        .toLatin1();
}

HttpResult response(int status, const HttpHeaders &headers = {}, const QByteArray &body = {})
{
    HttpResult result;
    result.status = HttpResult::Status::Response;
    result.httpStatus = status;
    result.headers = headers;
    result.body = body;
    result.latencyMs = 42;
    return result;
}

} // namespace

class TestSendOutcome : public QObject
{
    Q_OBJECT

private slots:
    void classifiesResponses_data();
    void classifiesResponses();
    void classifiesTransportFailures_data();
    void classifiesTransportFailures();
    void errorTextCarriesStatusAndReason();
    void providerRequestIdFromHeader();
    void providerRequestIdFromJsonBody();
    void providerRequestIdHeaderWinsOverBody();
    void echoedTokenIsRedactedEverywhere_data();
    void echoedTokenIsRedactedEverywhere();
    void providerRequestIdIsOnePrintableBoundedLine_data();
    void providerRequestIdIsOnePrintableBoundedLine();
    void errorExcerptIsOnePrintableLine();
    void parsesRetryAfter_data();
    void parsesRetryAfter();
    void retryAfterDateInThePastIsZero();
    void retryAfterDateIgnoresLocalDaylightSaving();
    void retryDelayNeverBelowRetryAfter();
    void retryDelayNeverAboveCap();
    void retryDelayGrowsWithAttempts();
    void breakerOpensAfterThreshold();
    void breakerSuccessResetsFailureRun();
    void breakerHalfOpenAllowsOneProbe();
    void breakerSuccessfulProbeCloses();
    void breakerFailedProbeDoublesCooldown();
    void breakerCooldownIsCapped();
};

void TestSendOutcome::classifiesResponses_data()
{
    QTest::addColumn<int>("status");
    QTest::addColumn<QByteArray>("retryAfter");
    QTest::addColumn<SendOutcome::Kind>("kind");
    QTest::addColumn<QString>("errorClass");
    QTest::addColumn<qint64>("retryAfterMs");

    using K = SendOutcome::Kind;
    QTest::newRow("200") << 200 << QByteArray() << K::Applied << QString() << qint64(-1);
    QTest::newRow("201") << 201 << QByteArray() << K::Applied << QString() << qint64(-1);
    QTest::newRow("204") << 204 << QByteArray() << K::Applied << QString() << qint64(-1);
    QTest::newRow("408") << 408 << QByteArray() << K::Transient << QStringLiteral("http-408") << qint64(-1);
    QTest::newRow("409") << 409 << QByteArray() << K::Transient << QStringLiteral("key-in-flight") << qint64(-1);
    QTest::newRow("422") << 422 << QByteArray() << K::PayloadChanged << QStringLiteral("payload-changed") << qint64(-1);
    QTest::newRow("425") << 425 << QByteArray() << K::Transient << QStringLiteral("http-425") << qint64(-1);
    QTest::newRow("429") << 429 << QByteArray() << K::Transient << QStringLiteral("rate-limited") << qint64(-1);
    QTest::newRow("429 Retry-After seconds") << 429 << QByteArray("7") << K::Transient << QStringLiteral("rate-limited")
                                             << qint64(7000);
    QTest::newRow("429 Retry-After date") << 429 << httpDate(Now + 30000) << K::Transient
                                          << QStringLiteral("rate-limited") << qint64(30000);
    QTest::newRow("429 unreadable Retry-After") << 429 << QByteArray("soon") << K::Transient
                                                << QStringLiteral("rate-limited") << qint64(-1);
    QTest::newRow("400") << 400 << QByteArray() << K::Permanent << QStringLiteral("rejected") << qint64(-1);
    // A refused credential fails every reminder alike: an outage to wait out, not a bad reminder.
    QTest::newRow("401") << 401 << QByteArray() << K::CredentialsRefused << QStringLiteral("credentials-refused")
                         << qint64(-1);
    QTest::newRow("403") << 403 << QByteArray() << K::CredentialsRefused << QStringLiteral("credentials-refused")
                         << qint64(-1);
    QTest::newRow("407") << 407 << QByteArray() << K::CredentialsRefused << QStringLiteral("credentials-refused")
                         << qint64(-1);
    QTest::newRow("404") << 404 << QByteArray() << K::Permanent << QStringLiteral("rejected") << qint64(-1);
    QTest::newRow("500") << 500 << QByteArray() << K::Transient << QStringLiteral("http-5xx") << qint64(-1);
    QTest::newRow("502") << 502 << QByteArray() << K::Transient << QStringLiteral("http-5xx") << qint64(-1);
    QTest::newRow("503 Retry-After") << 503 << QByteArray("120") << K::Transient << QStringLiteral("http-5xx")
                                     << qint64(120000);
}

void TestSendOutcome::classifiesResponses()
{
    QFETCH(int, status);
    QFETCH(QByteArray, retryAfter);
    QFETCH(SendOutcome::Kind, kind);
    QFETCH(QString, errorClass);
    QFETCH(qint64, retryAfterMs);

    HttpHeaders headers{{"Content-Type", "application/json"}};
    if (!retryAfter.isEmpty())
        headers.append({"Retry-After", retryAfter});
    const SendOutcome outcome = classify(response(status, headers), Now);
    QCOMPARE(outcome.kind, kind);
    QCOMPARE(outcome.errorClass, errorClass);
    QCOMPARE(outcome.httpStatus, status);
    QCOMPARE(outcome.latencyMs, qint64(42));
    QCOMPARE(outcome.retryAfterMs, retryAfterMs);
    if (kind == SendOutcome::Kind::Applied)
        QVERIFY(outcome.error.isEmpty());
    else
        QVERIFY(outcome.error.startsWith(QStringLiteral("HTTP %1").arg(status)));
}

void TestSendOutcome::classifiesTransportFailures_data()
{
    QTest::addColumn<HttpResult::Status>("status");
    QTest::addColumn<SendOutcome::Kind>("kind");
    QTest::addColumn<QString>("errorClass");
    QTest::newRow("not sent") << HttpResult::Status::NotSent << SendOutcome::Kind::Transient
                              << QStringLiteral("connect-failed");
    QTest::newRow("in doubt") << HttpResult::Status::InDoubt << SendOutcome::Kind::InDoubt << QStringLiteral("in-doubt");
}

void TestSendOutcome::classifiesTransportFailures()
{
    QFETCH(HttpResult::Status, status);
    QFETCH(SendOutcome::Kind, kind);
    QFETCH(QString, errorClass);
    HttpResult result;
    result.status = status;
    result.error = QStringLiteral("connection reset by peer");
    result.latencyMs = 10000;
    // Headers of a transport failure mean nothing; they must not be read as an answer.
    result.headers = {{"X-Request-Id", "stale"}, {"Retry-After", "5"}};
    const SendOutcome outcome = classify(result, Now);
    QCOMPARE(outcome.kind, kind);
    QCOMPARE(outcome.errorClass, errorClass);
    QCOMPARE(outcome.error, QStringLiteral("connection reset by peer"));
    QCOMPARE(outcome.latencyMs, qint64(10000));
    QCOMPARE(outcome.httpStatus, 0);
    QCOMPARE(outcome.retryAfterMs, qint64(-1));
    QVERIFY(outcome.providerRequestId.isEmpty());
}

void TestSendOutcome::errorTextCarriesStatusAndReason()
{
    const SendOutcome outcome = classify(response(400, {}, "  bad\n destination \n"), Now);
    QCOMPARE(outcome.error, QStringLiteral("HTTP 400: bad destination"));
    const SendOutcome longBody = classify(response(500, {}, QByteArray(5000, 'x')), Now);
    QVERIFY(longBody.error.size() <= 220);
    QCOMPARE(classify(response(503), Now).error, QStringLiteral("HTTP 503"));
}

void TestSendOutcome::providerRequestIdFromHeader()
{
    const SendOutcome outcome = classify(response(202, {{"x-REQUEST-id", "req-123"}}, "accepted"), Now);
    QCOMPARE(outcome.kind, SendOutcome::Kind::Applied);
    QCOMPARE(outcome.providerRequestId, QStringLiteral("req-123"));
    // Failures keep the id too, so support can find the request.
    QCOMPARE(classify(response(500, {{"X-Request-Id", "req-500"}}), Now).providerRequestId, QStringLiteral("req-500"));
}

void TestSendOutcome::providerRequestIdFromJsonBody()
{
    const SendOutcome outcome = classify(response(201, {}, R"({"status":"queued","request_id":"body-9"})"), Now);
    QCOMPARE(outcome.providerRequestId, QStringLiteral("body-9"));
    QVERIFY(classify(response(201, {}, R"({"status":"queued"})"), Now).providerRequestId.isEmpty());
    QVERIFY(classify(response(201, {}, "request_id=body-9"), Now).providerRequestId.isEmpty());
    QVERIFY(classify(response(201, {}, "{not json"), Now).providerRequestId.isEmpty());
}

void TestSendOutcome::providerRequestIdHeaderWinsOverBody()
{
    const SendOutcome outcome =
        classify(response(200, {{"X-Request-Id", "from-header"}}, R"({"request_id":"from-body"})"), Now);
    QCOMPARE(outcome.providerRequestId, QStringLiteral("from-header"));
}

namespace {
// Has a '/', a '+' and a '=', which JSON writers and URL encoders write differently.
const QByteArray Token = "tok_9fZq/Ab+c=xY7w";

bool holdsToken(const SendOutcome &outcome)
{
    const QString token = QString::fromLatin1(Token);
    // Eight characters of it are already too many: an excerpt cut inside the token.
    const QString part = token.left(8);
    for (const QString &text : {outcome.error, outcome.providerRequestId}) {
        if (text.contains(part, Qt::CaseInsensitive) || text.contains(QLatin1String("9fZq"), Qt::CaseInsensitive))
            return true;
    }
    return false;
}
} // namespace

void TestSendOutcome::echoedTokenIsRedactedEverywhere_data()
{
    QTest::addColumn<int>("status");
    QTest::addColumn<HttpHeaders>("headers");
    QTest::addColumn<QByteArray>("body");
    QTest::addColumn<QString>("expectedError");
    QTest::addColumn<QString>("expectedRequestId");

    const QByteArray bearer = "Bearer " + Token;
    QTest::newRow("401 body echoes the header")
        << 401 << HttpHeaders{} << QByteArray("invalid credentials in Authorization: " + bearer) << QStringLiteral("HTTP 401: invalid credentials in Authorization: Bearer [redacted]") << QString();
    // A body cut at 200 bytes before redaction kept the token's first characters.
    QTest::newRow("echo across the excerpt's end")
        << 503 << HttpHeaders{} << QByteArray(190, '.') + " " + bearer + " and more"
        << QStringLiteral("HTTP 503: ") + QString(190, u'.') + QStringLiteral(" Bearer [") + QChar(0x2026) << QString();
    QTest::newRow("request id header is the header")
        << 500 << HttpHeaders{{"X-Request-Id", bearer}} << QByteArray() << QStringLiteral("HTTP 500")
        << QStringLiteral("Bearer [redacted]");
    QTest::newRow("request id in the JSON body of a 2xx")
        << 200 << HttpHeaders{} << QByteArray(R"({"request_id":"req-1 )" + bearer + R"("})") << QString()
        << QStringLiteral("req-1 Bearer [redacted]");
    QTest::newRow("request id JSON with \\u escapes")
        << 202 << HttpHeaders{} << QByteArray(R"({"request_id":"\u0074ok_9fZq\/Ab+c=xY7w"})") << QString()
        << QStringLiteral("[redacted]");
    QTest::newRow("JSON-escaped slash in the excerpt")
        << 400 << HttpHeaders{} << QByteArray(R"({"error":"bad token tok_9fZq\/Ab+c=xY7w"})")
        << QStringLiteral(R"(HTTP 400: {"error":"bad token [redacted]"})") << QString();
    QTest::newRow("percent-encoded in the excerpt")
        << 403 << HttpHeaders{} << QByteArray("token=tok_9fZq%2FAb%2Bc%3DxY7w") << QStringLiteral("HTTP 403: token=[redacted]")
        << QString();
    QTest::newRow("letter case changed")
        << 401 << HttpHeaders{} << QByteArray("AUTHORIZATION: " + bearer.toUpper())
        << QStringLiteral("HTTP 401: AUTHORIZATION: BEARER [redacted]") << QString();
    QTest::newRow("several times, with line breaks")
        << 502 << HttpHeaders{{"X-Request-Id", Token}} << QByteArray(bearer + "\r\n" + bearer + "\n\n" + Token)
        << QStringLiteral("HTTP 502: Bearer [redacted] Bearer [redacted] [redacted]") << QStringLiteral("[redacted]");
}

void TestSendOutcome::echoedTokenIsRedactedEverywhere()
{
    QFETCH(int, status);
    QFETCH(HttpHeaders, headers);
    QFETCH(QByteArray, body);
    QFETCH(QString, expectedError);
    QFETCH(QString, expectedRequestId);
    const SecretRedactor redactor({Token});
    const SendOutcome outcome = classify(response(status, headers, body), Now, redactor);
    QVERIFY2(!holdsToken(outcome), qPrintable(outcome.error + QStringLiteral(" | ") + outcome.providerRequestId));
    QCOMPARE(outcome.error, expectedError);
    QCOMPARE(outcome.providerRequestId, expectedRequestId);
}

void TestSendOutcome::providerRequestIdIsOnePrintableBoundedLine_data()
{
    QTest::addColumn<HttpHeaders>("headers");
    QTest::addColumn<QByteArray>("body");
    QTest::addColumn<QString>("expected");

    const QString replacement(QChar::ReplacementCharacter);
    QTest::newRow("plain") << HttpHeaders{{"X-Request-Id", "req_42"}} << QByteArray() << QStringLiteral("req_42");
    QTest::newRow("terminal escape in the header")
        << HttpHeaders{{"X-Request-Id", "req\x1b[2J\x1b]0;owned\x07"}} << QByteArray()
        << QStringLiteral("req") + replacement + QStringLiteral("[2J") + replacement + QStringLiteral("]0;owned") + replacement;
    QTest::newRow("line breaks and NUL in the JSON body")
        << HttpHeaders{} << QByteArray(R"({"request_id":"a\r\nb\u0000c\td"})") << QStringLiteral("a b") + replacement + QStringLiteral("c d");
    QTest::newRow("bidi override") << HttpHeaders{} << QByteArray(R"({"request_id":"abc\u202Efdp.exe"})")
                                   << QStringLiteral("abc") + replacement + QStringLiteral("fdp.exe");
    QTest::newRow("10000 characters") << HttpHeaders{{"X-Request-Id", QByteArray(10000, 'r')}} << QByteArray()
                                      << QString(127, u'r') + QChar(0x2026);
    QTest::newRow("no half surrogate pair at the cut")
        << HttpHeaders{} << QByteArray(R"({"request_id":")" + QByteArray(127, 'q') + R"(\ud83d\ude00"})")
        << QString(127, u'q') + QChar(0x2026);
    QTest::newRow("a formula stays text") << HttpHeaders{{"X-Request-Id", "=HYPERLINK(\"x\")"}} << QByteArray()
                                          << QStringLiteral("=HYPERLINK(\"x\")");
}

void TestSendOutcome::providerRequestIdIsOnePrintableBoundedLine()
{
    QFETCH(HttpHeaders, headers);
    QFETCH(QByteArray, body);
    QFETCH(QString, expected);
    const SendOutcome outcome = classify(response(200, headers, body), Now);
    QCOMPARE(outcome.providerRequestId, expected);
    QVERIFY(outcome.providerRequestId.size() <= MaxRequestIdChars);
}

void TestSendOutcome::errorExcerptIsOnePrintableLine()
{
    const SendOutcome outcome = classify(response(500, {}, "\x1b[31mred\x1b[0m\r\nline two\0end"_qba), Now);
    const QString replacement(QChar::ReplacementCharacter);
    QCOMPARE(outcome.error, QStringLiteral("HTTP 500: ") + replacement + QStringLiteral("[31mred") + replacement
                                + QStringLiteral("[0m line two") + replacement + QStringLiteral("end"));
    // A 64 KiB body is cut to its excerpt.
    const SendOutcome big = classify(response(503, {}, QByteArray(64 * 1024, 'b')), Now);
    QCOMPARE(big.error, QStringLiteral("HTTP 503: ") + QString(MaxReasonChars - 1, u'b') + QChar(0x2026));
}

void TestSendOutcome::parsesRetryAfter_data()
{
    QTest::addColumn<QByteArray>("value");
    QTest::addColumn<bool>("valid");
    QTest::addColumn<qint64>("expectedMs");
    QTest::newRow("5") << QByteArray("5") << true << qint64(5000);
    QTest::newRow("0") << QByteArray("0") << true << qint64(0);
    QTest::newRow("padded 10") << QByteArray(" 10 ") << true << qint64(10000);
    QTest::newRow("-1") << QByteArray("-1") << false << qint64(0);
    QTest::newRow("abc") << QByteArray("abc") << false << qint64(0);
    QTest::newRow("1.5") << QByteArray("1.5") << false << qint64(0);
    QTest::newRow("empty") << QByteArray() << false << qint64(0);
    QTest::newRow("blank") << QByteArray("   ") << false << qint64(0);
    QTest::newRow("date +30 s") << httpDate(Now + 30000) << true << qint64(30000);
    QTest::newRow("date +1 h") << httpDate(Now + 3600 * 1000) << true << qint64(3600 * 1000);
    // More than a day is read as a day: the attempt budget and the operator take over.
    QTest::newRow("date a month ahead is capped") << httpDate(Now + 31LL * 24 * 3600 * 1000) << true
                                                  << qint64(24 * 3600 * 1000);
    QTest::newRow("huge seconds are capped") << QByteArray("99999999999999999") << true << qint64(24 * 3600 * 1000);
    // Beyond 64-bit range is a partner asking for very long, not for nothing: capped too.
    QTest::newRow("seconds beyond 64 bits are capped") << QByteArray("99999999999999999999999") << true
                                                      << qint64(24 * 3600 * 1000);
    QTest::newRow("19 digits are capped") << QByteArray("9223372036854775808") << true << qint64(24 * 3600 * 1000);
    QTest::newRow("a day exactly") << QByteArray("86400") << true << qint64(24 * 3600 * 1000);
    QTest::newRow("leading zeros") << QByteArray("0007") << true << qint64(7000);
    QTest::newRow("+5 is not delay-seconds") << QByteArray("+5") << false << qint64(0);
    QTest::newRow("5 s") << QByteArray("5 s") << false << qint64(0);
    QTest::newRow("garbage date") << QByteArray("Tue, 99 Foo 2026 25:61:00 GMT") << false << qint64(0);
}

void TestSendOutcome::parsesRetryAfter()
{
    QFETCH(QByteArray, value);
    QFETCH(bool, valid);
    QFETCH(qint64, expectedMs);
    const auto parsed = parseRetryAfterMs(value, Now);
    QCOMPARE(bool(parsed), valid);
    if (valid)
        QCOMPARE(*parsed, expectedMs);
}

void TestSendOutcome::retryAfterDateInThePastIsZero()
{
    const QByteArray past = httpDate(Now - 60000);
    const auto parsed = parseRetryAfterMs(past, Now);
    QVERIFY(parsed);
    QCOMPARE(*parsed, qint64(0));
    // The real clock works too: a date 30 s ahead of now is about 30 s away.
    const qint64 now = QDateTime::currentMSecsSinceEpoch();
    const auto ahead = parseRetryAfterMs(httpDate(now + 30000), now);
    QVERIFY(ahead);
    QVERIFY2(*ahead > 28000 && *ahead <= 30000, qPrintable(QString::number(*ahead)));
}

void TestSendOutcome::retryAfterDateIgnoresLocalDaylightSaving()
{
    // An HTTP date is GMT: the process's own time zone must not matter, not even for a
    // wall-clock time that does not exist locally (the spring-forward hour in New York).
    const QByteArray savedTz = qgetenv("TZ");
    const bool hadTz = qEnvironmentVariableIsSet("TZ");
    qputenv("TZ", "America/New_York");
    tzset();
    const auto restore = qScopeGuard([&] {
        if (hadTz)
            qputenv("TZ", savedTz);
        else
            qunsetenv("TZ");
        tzset();
    });
    if (QDateTime(QDate(2026, 1, 15), QTime(12, 0), Qt::LocalTime).offsetFromUtc() != -5 * 3600)
        QSKIP("no time zone data for America/New_York here");
    const qint64 now = QDateTime(QDate(2026, 3, 8), QTime(2, 30, 0), Qt::UTC).toMSecsSinceEpoch();
    // An ordinary hour works in any zone.
    const auto ordinary = parseRetryAfterMs("Sun, 08 Mar 2026 05:30:30 GMT", now);
    QVERIFY(ordinary);
    QCOMPARE(*ordinary, qint64(3 * 3600 * 1000 + 30000));
    const auto parsed = parseRetryAfterMs("Sun, 08 Mar 2026 02:30:30 GMT", now);
    QVERIFY(parsed);
    if (parsed)
        QCOMPARE(*parsed, qint64(30000));
}

void TestSendOutcome::retryDelayNeverBelowRetryAfter()
{
    for (int sends = 1; sends <= 10; ++sends) {
        for (int i = 0; i < 200; ++i) {
            const qint64 delay = retryDelayMs(sends, 100, 1000, 5000);
            QVERIFY2(delay >= 5000, qPrintable(QString::number(delay)));
            // Retry-After is honoured even beyond the cap, and not inflated.
            QCOMPARE(delay, qint64(5000));
        }
        for (int i = 0; i < 200; ++i)
            QVERIFY(retryDelayMs(sends, 1000, 60000, 700) >= 700);
    }
}

void TestSendOutcome::retryDelayNeverAboveCap()
{
    const qint64 cap = 3000;
    qint64 largest = 0;
    for (int sends : {1, 2, 5, 10, 31, 40, 1000}) {
        for (int i = 0; i < 500; ++i) {
            const qint64 delay = retryDelayMs(sends, 1000, cap, -1);
            QVERIFY(delay >= 0);
            QVERIFY2(delay <= cap, qPrintable(QString::number(delay)));
            largest = std::max(largest, delay);
        }
    }
    // Full jitter over the capped range reaches well past half of the cap.
    QVERIFY(largest > cap / 2);
    // Degenerate inputs stay sane.
    QCOMPARE(retryDelayMs(0, 1000, cap, -1) <= 1000, true);
    QCOMPARE(retryDelayMs(3, 0, cap, -1), qint64(0));
}

void TestSendOutcome::retryDelayGrowsWithAttempts()
{
    const qint64 base = 100;
    const qint64 cap = 1000000;
    const int samples = 2000;
    double previousMean = 0;
    for (int sends = 1; sends <= 8; ++sends) {
        const qint64 ceiling = base << (sends - 1);
        qint64 largest = 0;
        double sum = 0;
        for (int i = 0; i < samples; ++i) {
            const qint64 delay = retryDelayMs(sends, base, cap, -1);
            QVERIFY2(delay >= 0 && delay <= ceiling,
                     qPrintable(QStringLiteral("try %1: %2 > %3").arg(sends).arg(delay).arg(ceiling)));
            largest = std::max(largest, delay);
            sum += double(delay);
        }
        const double mean = sum / samples;
        // The upper bound doubles per try, and the samples use that room: the largest
        // exceeds the previous try's bound, and the mean grows.
        if (sends > 1) {
            QVERIFY2(largest > ceiling / 2, qPrintable(QStringLiteral("try %1: largest %2").arg(sends).arg(largest)));
            QVERIFY2(mean > previousMean, qPrintable(QStringLiteral("try %1: mean %2 <= %3").arg(sends).arg(mean).arg(previousMean)));
        }
        // Full jitter: the mean sits near half the ceiling.
        QVERIFY2(mean > ceiling * 0.35 && mean < ceiling * 0.65,
                 qPrintable(QStringLiteral("try %1: mean %2 of %3").arg(sends).arg(mean).arg(ceiling)));
        previousMean = mean;
    }
}

void TestSendOutcome::breakerOpensAfterThreshold()
{
    CircuitBreaker breaker(3, 1000, 30000);
    qint64 now = 1000000;
    QCOMPARE(breaker.state(now), CircuitBreaker::State::Closed);
    QCOMPARE(breaker.allowance(now, 16, 4), 12);
    breaker.recordFailure(now);
    breaker.recordFailure(now);
    QCOMPARE(breaker.state(now), CircuitBreaker::State::Closed);
    QCOMPARE(breaker.allowance(now, 16, 0), 16);
    breaker.recordFailure(now);
    QCOMPARE(breaker.state(now), CircuitBreaker::State::Open);
    QCOMPARE(breaker.allowance(now, 16, 0), 0);
    QCOMPARE(breaker.allowance(now + 999, 16, 0), 0);
    QCOMPARE(breaker.reopensInMs(now), qint64(1000));
    QCOMPARE(breaker.reopensInMs(now + 400), qint64(600));
    // Failures of sends that were already in flight do not extend an open breaker.
    breaker.recordFailure(now + 500);
    QCOMPARE(breaker.reopensInMs(now + 500), qint64(500));
}

void TestSendOutcome::breakerSuccessResetsFailureRun()
{
    CircuitBreaker breaker(3, 1000, 30000);
    const qint64 now = 5000;
    breaker.recordFailure(now);
    breaker.recordFailure(now);
    breaker.recordSuccess();
    breaker.recordFailure(now);
    breaker.recordFailure(now);
    QCOMPARE(breaker.state(now), CircuitBreaker::State::Closed);
    breaker.recordFailure(now);
    QCOMPARE(breaker.state(now), CircuitBreaker::State::Open);
}

void TestSendOutcome::breakerHalfOpenAllowsOneProbe()
{
    CircuitBreaker breaker(2, 1000, 30000);
    const qint64 openedAt = 10000;
    breaker.recordFailure(openedAt);
    breaker.recordFailure(openedAt);
    QCOMPARE(breaker.state(openedAt + 999), CircuitBreaker::State::Open);
    QCOMPARE(breaker.state(openedAt + 1000), CircuitBreaker::State::HalfOpen);
    QCOMPARE(breaker.reopensInMs(openedAt + 1000), qint64(0));
    // Exactly one probe: one when nothing is in flight, none while the probe runs.
    QCOMPARE(breaker.allowance(openedAt + 1000, 16, 0), 1);
    QCOMPARE(breaker.allowance(openedAt + 1000, 16, 1), 0);
    QCOMPARE(breaker.allowance(openedAt + 50000, 16, 1), 0);
}

void TestSendOutcome::breakerSuccessfulProbeCloses()
{
    CircuitBreaker breaker(2, 1000, 30000);
    const qint64 openedAt = 10000;
    breaker.recordFailure(openedAt);
    breaker.recordFailure(openedAt);
    QCOMPARE(breaker.state(openedAt + 1000), CircuitBreaker::State::HalfOpen);
    breaker.recordSuccess();
    QCOMPARE(breaker.state(openedAt + 1000), CircuitBreaker::State::Closed);
    QCOMPARE(breaker.allowance(openedAt + 1000, 16, 0), 16);
    // The failure run starts again from zero, and the cooldown is back to its start.
    breaker.recordFailure(openedAt + 2000);
    QCOMPARE(breaker.state(openedAt + 2000), CircuitBreaker::State::Closed);
    breaker.recordFailure(openedAt + 2000);
    QCOMPARE(breaker.state(openedAt + 2000), CircuitBreaker::State::Open);
    QCOMPARE(breaker.reopensInMs(openedAt + 2000), qint64(1000));
}

void TestSendOutcome::breakerFailedProbeDoublesCooldown()
{
    CircuitBreaker breaker(2, 1000, 30000);
    qint64 now = 10000;
    breaker.recordFailure(now);
    breaker.recordFailure(now);
    QCOMPARE(breaker.reopensInMs(now), qint64(1000));

    now += 1000; // half-open; the probe fails
    QCOMPARE(breaker.state(now), CircuitBreaker::State::HalfOpen);
    breaker.recordFailure(now);
    QCOMPARE(breaker.state(now), CircuitBreaker::State::Open);
    QCOMPARE(breaker.reopensInMs(now), qint64(2000));
    QCOMPARE(breaker.state(now + 1999), CircuitBreaker::State::Open);
    QCOMPARE(breaker.allowance(now + 1999, 16, 0), 0);

    now += 2000; // half-open again; the second probe fails too
    QCOMPARE(breaker.state(now), CircuitBreaker::State::HalfOpen);
    breaker.recordFailure(now);
    QCOMPARE(breaker.reopensInMs(now), qint64(4000));
}

void TestSendOutcome::breakerCooldownIsCapped()
{
    CircuitBreaker breaker(1, 1000, 5000);
    qint64 now = 0;
    breaker.recordFailure(now);
    QList<qint64> cooldowns;
    for (int probe = 0; probe < 6; ++probe) {
        now += breaker.reopensInMs(now);
        QCOMPARE(breaker.state(now), CircuitBreaker::State::HalfOpen);
        breaker.recordFailure(now);
        cooldowns.append(breaker.reopensInMs(now));
    }
    QCOMPARE(cooldowns, (QList<qint64>{2000, 4000, 5000, 5000, 5000, 5000}));
}

QTEST_GUILESS_MAIN(TestSendOutcome)
#include "tst_sendoutcome.moc"
