// The HTTP response parser on its own (no sockets): framing, and the bounds that keep a
// partner from sizing our buffers. Every case is parsed from bytes fed in pieces of
// several sizes, so that a bound cannot depend on how the network split the response.
#include "http/httpresponseparser.h"

#include <QTest>

using namespace once;
using once::http::ResponseParser;

Q_DECLARE_METATYPE(ResponseParser::Progress)

namespace {

struct Parsed
{
    ResponseParser::Progress progress = ResponseParser::Progress::NeedMore;
    HttpResult result;
    QString error;
    bool tooLarge = false;
    bool keepAlive = false;
    qsizetype mostBuffered = 0;
};

// Feeds `wire` in pieces of `piece` bytes (0: all at once), then the end of the stream
// when `eof`; stops at the first verdict, as the client does.
Parsed parseInPieces(const QByteArray &wire, qsizetype piece, bool eof, qint64 maxBody = DefaultMaxResponseBodyBytes)
{
    ResponseParser parser;
    parser.reset(false, maxBody);
    Parsed parsed;
    const qsizetype step = piece > 0 ? piece : std::max<qsizetype>(1, wire.size());
    for (qsizetype at = 0; at < wire.size(); at += step) {
        parser.feed(QByteArrayView(wire).sliced(at, std::min(step, wire.size() - at)));
        parsed.progress = parser.parse();
        parsed.mostBuffered = std::max(parsed.mostBuffered, parser.heldBytes());
        if (parsed.progress != ResponseParser::Progress::NeedMore)
            break;
    }
    if (eof && parsed.progress == ResponseParser::Progress::NeedMore)
        parsed.progress = parser.finishAtEof();
    parsed.error = parser.error();
    parsed.tooLarge = parser.tooLarge();
    parsed.keepAlive = parser.keepAlive();
    parsed.result = parser.takeResult();
    return parsed;
}

QByteArray chunked(const QList<QByteArray> &chunks, const QByteArray &extension = {})
{
    QByteArray wire = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (const QByteArray &chunk : chunks)
        wire += QByteArray::number(chunk.size(), 16) + extension + "\r\n" + chunk + "\r\n";
    return wire + "0\r\n\r\n";
}

} // namespace

class tst_HttpResponseParser final : public QObject
{
    Q_OBJECT

private slots:
    void parsesWellFramedResponses_data();
    void parsesWellFramedResponses();
    void refusesWhatPassesTheBounds_data();
    void refusesWhatPassesTheBounds();
    void manyTinyChunksUpToTheLimitAreOneBody();
    void bufferHoldsOnlyAnUnfinishedLine();
    void resetStartsAFreshExchange();
    void boundsOfItsOwnAreKept();
    void transferEncodingDecidesTheFraming_data();
    void transferEncodingDecidesTheFraming();
    void refusesMalformedLines_data();
    void refusesMalformedLines();
    void aVerdictIsFinal_data();
    void aVerdictIsFinal();
};

void tst_HttpResponseParser::parsesWellFramedResponses_data()
{
    QTest::addColumn<QByteArray>("wire");
    QTest::addColumn<bool>("eof");
    QTest::addColumn<int>("status");
    QTest::addColumn<QByteArray>("body");

    QTest::newRow("content-length") << QByteArray("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello") << false << 200
                                    << QByteArray("hello");
    QTest::newRow("no reason phrase") << QByteArray("HTTP/1.1 204\r\n\r\n") << false << 204 << QByteArray();
    QTest::newRow("interim 100 first") << QByteArray("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\n"
                                                     "Content-Length: 2\r\n\r\nok")
                                       << false << 201 << QByteArray("ok");
    QTest::newRow("chunked with trailer") << QByteArray("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                                        "5;x=1\r\nhello\r\n0\r\nX-T: 1\r\n\r\n")
                                          << false << 200 << QByteArray("hello");
    QTest::newRow("until close") << QByteArray("HTTP/1.0 503 Service Unavailable\r\n\r\nlater") << true << 503
                                 << QByteArray("later");
    QTest::newRow("body exactly at the limit")
        << QByteArray("HTTP/1.1 200 OK\r\nContent-Length: 65536\r\n\r\n" + QByteArray(65536, 'a')) << false << 200
        << QByteArray(65536, 'a');
    QTest::newRow("close-delimited exactly at the limit")
        << QByteArray("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + QByteArray(65536, 'b')) << true << 200
        << QByteArray(65536, 'b');
}

void tst_HttpResponseParser::parsesWellFramedResponses()
{
    QFETCH(QByteArray, wire);
    QFETCH(bool, eof);
    QFETCH(int, status);
    QFETCH(QByteArray, body);
    for (const qsizetype piece : {qsizetype(1), qsizetype(7), qsizetype(1000), qsizetype(0)}) {
        const Parsed parsed = parseInPieces(wire, piece, eof);
        QVERIFY2(parsed.progress == ResponseParser::Progress::Done,
                 qPrintable(QStringLiteral("pieces of %1: %2").arg(QString::number(piece), parsed.error)));
        QCOMPARE(parsed.result.httpStatus, status);
        QCOMPARE(parsed.result.body, body);
    }
}

void tst_HttpResponseParser::refusesWhatPassesTheBounds_data()
{
    QTest::addColumn<QByteArray>("wire");
    QTest::addColumn<bool>("eof");
    QTest::addColumn<qint64>("maxBody");
    QTest::addColumn<bool>("tooLarge");
    QTest::addColumn<QString>("errorSays");

    const qint64 limit = DefaultMaxResponseBodyBytes;
    QTest::newRow("Content-Length of 90 TB") << QByteArray("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999\r\n\r\n{")
                                             << false << limit << true
                                             << QStringLiteral("HTTP 200 announced a body of 99999999999999 bytes, over the 64 KiB limit");
    QTest::newRow("Content-Length beyond 64 bits")
        << QByteArray("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n") << false << limit << true
        << QStringLiteral("more than 10^18 bytes");
    QTest::newRow("Content-Length one over")
        << QByteArray("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 65537\r\n\r\n") << false << limit << true
        << QStringLiteral("HTTP 503 announced a body of 65537 bytes");
    QTest::newRow("Content-Length with a sign") << QByteArray("HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello")
                                                << false << limit << false << QStringLiteral("invalid Content-Length");
    QTest::newRow("Content-Length disagreeing")
        << QByteArray("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello") << false << limit
        << false << QStringLiteral("invalid Content-Length");
    QTest::newRow("one chunk over the limit") << chunked({QByteArray(int(limit) + 1, 'c')}) << false << limit << true
                                              << QStringLiteral("HTTP 200 sent a chunked body longer than the 64 KiB limit");
    QTest::newRow("chunks adding up past the limit")
        << chunked({QByteArray(40000, 'c'), QByteArray(40000, 'd')}) << false << limit << true
        << QStringLiteral("chunked body longer than the 64 KiB limit");
    QTest::newRow("close-delimited past the limit")
        << QByteArray("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + QByteArray(int(limit) + 1, 'e')) << true << limit
        << true << QStringLiteral("HTTP 200 sent a close-delimited body longer than the 64 KiB limit");
    QTest::newRow("a limit of its own") << QByteArray("HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world")
                                        << false << qint64(10) << true << QStringLiteral("over the 10 bytes limit");
    QTest::newRow("endless header line") << QByteArray("HTTP/1.1 200 OK\r\nX-Long: " + QByteArray(70 * 1024, 'h'))
                                         << false << limit << true << QStringLiteral("header line longer than 32 KiB");
    QTest::newRow("endless status line") << QByteArray("HTTP/1.1 200 " + QByteArray(70 * 1024, 's')) << false << limit
                                         << true << QStringLiteral("header line longer than 32 KiB");
    QByteArray manyLines = "HTTP/1.1 200 OK\r\n";
    for (int i = 0; i < 200; ++i)
        manyLines += "X-Filler-" + QByteArray::number(i) + ": " + QByteArray(2000, 'f') + "\r\n";
    QTest::newRow("endless headers") << manyLines << false << limit << true
                                     << QStringLiteral("response headers longer than 64 KiB");
    QByteArray manyHeaders = "HTTP/1.1 200 OK\r\n";
    for (int i = 0; i < 300; ++i)
        manyHeaders += "X-" + QByteArray::number(i) + ": 1\r\n";
    QTest::newRow("too many headers") << manyHeaders << false << limit << true
                                      << QStringLiteral("more than 256 response headers");
    QByteArray interims;
    for (int i = 0; i < 20000; ++i)
        interims += "HTTP/1.1 100 Continue\r\n\r\n";
    QTest::newRow("endless interim responses") << interims << false << limit << true
                                               << QStringLiteral("response headers longer than 64 KiB");
    QTest::newRow("chunk size line too long")
        << QByteArray("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;" + QByteArray(5000, 'x') + "\r\n")
        << false << limit << false << QStringLiteral("chunk size line too long");
    QTest::newRow("malformed status line") << QByteArray("HTTX/1.1 200 OK\r\n\r\n") << false << limit << false
                                           << QStringLiteral("malformed status line");
}

void tst_HttpResponseParser::refusesWhatPassesTheBounds()
{
    QFETCH(QByteArray, wire);
    QFETCH(bool, eof);
    QFETCH(qint64, maxBody);
    QFETCH(bool, tooLarge);
    QFETCH(QString, errorSays);
    for (const qsizetype piece : {qsizetype(1), qsizetype(4096), qsizetype(0)}) {
        const Parsed parsed = parseInPieces(wire, piece, eof, maxBody);
        QVERIFY2(parsed.progress == ResponseParser::Progress::Error,
                 qPrintable(QStringLiteral("pieces of %1: no error").arg(piece)));
        QVERIFY2(parsed.error.contains(errorSays), qPrintable(parsed.error));
        QVERIFY2(!parsed.error.contains(u'\n'), qPrintable(parsed.error));
        QCOMPARE(parsed.tooLarge, tooLarge);
        QVERIFY(parsed.result.body.size() <= maxBody);
    }
}

void tst_HttpResponseParser::manyTinyChunksUpToTheLimitAreOneBody()
{
    // 65536 chunks of one byte: 320 KiB of framing for a body at the limit. Framing has a
    // bound of its own; it is not mistaken for headers.
    const QList<QByteArray> chunks(int(DefaultMaxResponseBodyBytes), QByteArray("t"));
    const Parsed parsed = parseInPieces(chunked(chunks), 1500, false);
    QVERIFY2(parsed.progress == ResponseParser::Progress::Done, qPrintable(parsed.error));
    QCOMPARE(parsed.result.body, QByteArray(int(DefaultMaxResponseBodyBytes), 't'));
}

void tst_HttpResponseParser::bufferHoldsOnlyAnUnfinishedLine()
{
    // 900 one-byte chunks, each with 1000 bytes of chunk extension, fed in pieces that
    // end inside a line: what the parser holds stays one line and one piece, not the
    // whole response.
    const QList<QByteArray> chunks(900, QByteArray("u"));
    const QByteArray wire = chunked(chunks, ";ext=" + QByteArray(1000, 'e'));
    QVERIFY(wire.size() > 900 * 1000);
    const Parsed parsed = parseInPieces(wire, 700, false);
    QVERIFY2(parsed.progress == ResponseParser::Progress::Done, qPrintable(parsed.error));
    QCOMPARE(parsed.result.body, QByteArray(900, 'u'));
    QVERIFY2(parsed.mostBuffered < 4096, qPrintable(QString::number(parsed.mostBuffered)));
}

void tst_HttpResponseParser::resetStartsAFreshExchange()
{
    ResponseParser parser;
    parser.reset();
    parser.feed("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999\r\n\r\n");
    QCOMPARE(parser.parse(), ResponseParser::Progress::Error);
    QVERIFY(parser.tooLarge());
    parser.reset();
    QVERIFY(!parser.tooLarge());
    QVERIFY(parser.error().isEmpty());
    parser.feed("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    QCOMPARE(parser.parse(), ResponseParser::Progress::Done);
    QVERIFY(parser.keepAlive());
    QVERIFY(!parser.hasTrailingData());
    QCOMPARE(parser.result().body, QByteArray("ok"));
}

void tst_HttpResponseParser::boundsOfItsOwnAreKept()
{
    // The client's bounds are the defaults; a parser built with others keeps those.
    const http::ResponseLimits limits{.lineBytes = 30, .headerBytes = 60, .headerCount = 3, .chunkLineBytes = 8,
                                      .framingBytes = 40};
    const auto refusal = [&limits](const QByteArray &wire) {
        ResponseParser parser(limits);
        parser.reset();
        parser.feed(wire);
        return parser.parse() == ResponseParser::Progress::Error && parser.tooLarge() ? parser.error() : QString();
    };
    QCOMPARE(refusal("HTTP/1.1 200 OK\r\nX-Line: 1234567890123456789012345\r\n\r\n"),
             QStringLiteral("a response header line longer than 30 bytes"));
    QCOMPARE(refusal("HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n"), QStringLiteral("more than 3 response headers"));
    QCOMPARE(refusal("HTTP/1.1 200 OK\r\nX-A: 1234567890\r\nX-B: 1234567890\r\nX-C: 1234567890\r\n\r\n"),
             QStringLiteral("response headers longer than 60 bytes"));
    QCOMPARE(refusal("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + QByteArray("1;ab\r\nx\r\n").repeated(6)),
             QStringLiteral("chunk framing longer than 40 bytes"));
    ResponseParser parser(limits);
    parser.reset();
    parser.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;abcdefgh\r\nx\r\n0\r\n\r\n");
    QCOMPARE(parser.parse(), ResponseParser::Progress::Error);
    QCOMPARE(parser.error(), QStringLiteral("chunk size line too long"));
}

void tst_HttpResponseParser::transferEncodingDecidesTheFraming_data()
{
    // RFC 9112 6.3: with Transfer-Encoding, chunked as the last coding frames the body and
    // anything else leaves it to the close; Content-Length no longer counts. Both at once,
    // or chunked in HTTP/1.0, is how responses are smuggled: the connection is not reused.
    QTest::addColumn<QByteArray>("wire");
    QTest::addColumn<bool>("eof");
    QTest::addColumn<QByteArray>("body");
    QTest::addColumn<bool>("keepAlive");

    QTest::newRow("chunked") << QByteArray("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")
                             << false << QByteArray("ok") << true;
    QTest::newRow("chunked beside Content-Length")
        << QByteArray("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n")
        << false << QByteArray("abcdef") << false;
    QTest::newRow("gzip beside Content-Length")
        << QByteArray("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 2\r\n\r\nabcd") << true
        << QByteArray("abcd") << false;
    QTest::newRow("chunked, then gzip")
        << QByteArray("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n3\r\nabc\r\n0\r\n\r\n") << true
        << QByteArray("3\r\nabc\r\n0\r\n\r\n") << false;
    QTest::newRow("gzip, then chunked on a line of its own")
        << QByteArray("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")
        << false << QByteArray("ok") << true;
    QTest::newRow("chunked, then identity on a line of its own")
        << QByteArray("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n"
                      "Content-Length: 1\r\n\r\n2\r\nok\r\n0\r\n\r\n")
        << true << QByteArray("2\r\nok\r\n0\r\n\r\n") << false;
    QTest::newRow("HTTP/1.0 keep-alive with a length")
        << QByteArray("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok") << false
        << QByteArray("ok") << true;
    QTest::newRow("HTTP/1.0 keep-alive, chunked")
        << QByteArray("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")
        << false << QByteArray("ok") << false;
}

void tst_HttpResponseParser::transferEncodingDecidesTheFraming()
{
    QFETCH(QByteArray, wire);
    QFETCH(bool, eof);
    QFETCH(QByteArray, body);
    QFETCH(bool, keepAlive);
    for (const qsizetype piece : {qsizetype(1), qsizetype(6), qsizetype(0)}) {
        const Parsed parsed = parseInPieces(wire, piece, eof);
        QVERIFY2(parsed.progress == ResponseParser::Progress::Done,
                 qPrintable(QStringLiteral("pieces of %1: %2").arg(QString::number(piece), parsed.error)));
        QCOMPARE(parsed.result.body, body);
        QCOMPARE(parsed.keepAlive, keepAlive);
    }
}

void tst_HttpResponseParser::refusesMalformedLines_data()
{
    // A line another parser could read differently (as a Content-Length, as two lines, as
    // another chunk size) is refused, not guessed at: field names are tokens (RFC 9110
    // 5.6.2), values hold no CR or NUL (RFC 9112 5), in the headers and in a chunked
    // body's trailers; a chunk size is hexadecimal digits and nothing else.
    QTest::addColumn<QByteArray>("wire");
    QTest::addColumn<bool>("eof");

    QTest::newRow("space before the colon") << QByteArray("HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\nhello") << false;
    QTest::newRow("folded line") << QByteArray("HTTP/1.1 200 OK\r\nX-Note: a\r\n Content-Length: 5\r\n\r\nhello")
                                 << true;
    QTest::newRow("whitespace before the first header")
        << QByteArray("HTTP/1.1 200 OK\r\n\tContent-Length: 2\r\n\r\nok") << true;
    QTest::newRow("separator in a name") << QByteArray("HTTP/1.1 200 OK\r\nX(a): 1\r\nContent-Length: 0\r\n\r\n") << false;
    QTest::newRow("NUL in a name") << (QByteArray("HTTP/1.1 200 OK\r\nContent-Len") + '\0' + "gth: 2\r\n\r\nok") << true;
    QTest::newRow("bare CR in a value")
        << QByteArray("HTTP/1.1 200 OK\r\nX-Id: a\rContent-Length: 5\r\n\r\nhello") << true;
    QTest::newRow("NUL in a value") << (QByteArray("HTTP/1.1 200 OK\r\nX-Id: a") + '\0' + "b\r\nContent-Length: 0\r\n\r\n")
                                    << false;
    // RFC 9112 7.1: chunk-size = 1*HEXDIG, as strict as Content-Length's digits.
    for (const char *size : {"0x5", "+5", "-0", "5 5", ""}) {
        QTest::addRow("chunk size \"%s\"", size) << QByteArray("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                                             + QByteArray(size) + "\r\nhello\r\n0\r\n\r\n")
                                                  << false;
    }
    QTest::newRow("trailer without a colon")
        << QByteArray("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nHTTP/1.1 200 OK\r\n\r\n")
        << false;
    QTest::newRow("trailer with a space in its name")
        << QByteArray("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX T: 1\r\n\r\n") << false;
}

void tst_HttpResponseParser::refusesMalformedLines()
{
    QFETCH(QByteArray, wire);
    QFETCH(bool, eof);
    for (const qsizetype piece : {qsizetype(1), qsizetype(5), qsizetype(0)}) {
        const Parsed parsed = parseInPieces(wire, piece, eof);
        QVERIFY2(parsed.progress == ResponseParser::Progress::Error,
                 qPrintable(QStringLiteral("pieces of %1: accepted with body \"").arg(piece)
                            + QString::fromLatin1(parsed.result.body) + u'"'));
        QVERIFY2(parsed.error.startsWith(QLatin1String("malformed")), qPrintable(parsed.error));
        QVERIFY(!parsed.tooLarge);
    }
}

void tst_HttpResponseParser::aVerdictIsFinal_data()
{
    QTest::addColumn<QByteArray>("wire");
    QTest::addColumn<qint64>("maxBody");
    QTest::addColumn<ResponseParser::Progress>("verdict");

    const auto done = ResponseParser::Progress::Done;
    const auto error = ResponseParser::Progress::Error;
    QTest::newRow("malformed header, then a good response")
        << QByteArray("HTTP/1.1 200 OK\r\nno colon\r\nContent-Length: 0\r\n\r\n") << DefaultMaxResponseBodyBytes << error;
    QTest::newRow("announced over the limit, then the body")
        << QByteArray("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello") << qint64(4) << error;
    QTest::newRow("close-delimited over the limit, then the close")
        << QByteArray("HTTP/1.1 200 OK\r\n\r\nhello") << qint64(4) << error;
    QTest::newRow("chunk over the limit, then the chunk")
        << QByteArray("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n") << qint64(4)
        << error;
    QTest::newRow("complete, then another response")
        << QByteArray("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") << DefaultMaxResponseBodyBytes << done;
}

void tst_HttpResponseParser::aVerdictIsFinal()
{
    // Whatever the caller does after a verdict (parse again, feed more, report the close),
    // the verdict, the error and the body stay as they were.
    QFETCH(QByteArray, wire);
    QFETCH(qint64, maxBody);
    QFETCH(ResponseParser::Progress, verdict);
    ResponseParser parser;
    parser.reset(false, maxBody);
    parser.feed(wire);
    QCOMPARE(parser.parse(), verdict);
    const QString error = parser.error();
    const bool tooLarge = parser.tooLarge();
    const HttpResult result = parser.result();
    QCOMPARE(parser.parse(), verdict);
    parser.feed("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    QCOMPARE(parser.parse(), verdict);
    QCOMPARE(parser.finishAtEof(), verdict);
    QCOMPARE(parser.error(), error);
    QCOMPARE(parser.tooLarge(), tooLarge);
    QCOMPARE(parser.result().httpStatus, result.httpStatus);
    QCOMPARE(parser.result().headers, result.headers);
    QCOMPARE(parser.result().body, result.body);
    if (verdict == ResponseParser::Progress::Done)
        QVERIFY(parser.hasTrailingData());
}

QTEST_GUILESS_MAIN(tst_HttpResponseParser)
#include "tst_httpresponseparser.moc"
