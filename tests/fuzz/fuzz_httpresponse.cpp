// A partner's HTTP response, as the client drives the parser: fed in the pieces the
// network happens to deliver, parsed after each, the end of the stream last. The same
// bytes fed whole and split at points the input chooses reach the same verdict (status,
// headers, body, keep-alive, trailing data, or the same error); the parser never holds
// more than an unfinished line and the last piece, never keeps a body over its limit;
// a response it accepts has a real final status and a body framed the way RFC 9112
// section 6.3 reads the headers it reports; and a verdict, once given, stays.
//
// The input: four bytes of settings, then the bytes from the server.
//   [0] bit 0: a HEAD request; bit 1: the server closes after the last byte;
//       bits 2-3: the body limit: 64 KiB (0), [1] bytes (1), [1] * 256 bytes (2), 1 MiB (3);
//       bit 4: tiny bounds for lines, headers and chunk framing (TinyLimits), which
//       inputs of a few KiB reach, instead of the client's
//   [1] the body limit's value for modes 1 and 2
//   [2] pieces of 1 to 2^([2] % 16) bytes, their sizes drawn from a generator seeded
//   [3] with [2] and [3]
#include "fuzzcheck.h"
#include "http/httpresponseparser.h"
#include "http/httpsyntax.h"

#include <algorithm>
#include <optional>

using namespace once;
using once::http::ResponseParser;

namespace {

using Progress = ResponseParser::Progress;

struct Settings
{
    bool head = false;
    bool eof = false;
    bool tinyLimits = false;
    qint64 maxBody = DefaultMaxResponseBodyBytes;
    int pieceBits = 0;
    quint32 seed = 0;
};

Settings readSettings(const uint8_t *data)
{
    Settings settings;
    settings.head = data[0] & 1;
    settings.eof = data[0] & 2;
    settings.tinyLimits = data[0] & 16;
    switch ((data[0] >> 2) & 3) {
    case 0:
        settings.maxBody = DefaultMaxResponseBodyBytes;
        break;
    case 1:
        settings.maxBody = data[1];
        break;
    case 2:
        settings.maxBody = qint64(data[1]) * 256;
        break;
    case 3:
        settings.maxBody = 1024 * 1024;
        break;
    }
    settings.pieceBits = data[2] % 16;
    settings.seed = (quint32(data[2]) << 8 | data[3]) * 2654435761u + 1;
    return settings;
}

// Unlike the client's, each a few bytes, and in other proportions: a chunk line shorter
// than a header line, fewer headers than would fill the header bytes.
const http::ResponseLimits TinyLimits{
    .lineBytes = 40, .headerBytes = 200, .headerCount = 6, .chunkLineBytes = 12, .framingBytes = 150};

// What the client learns from one exchange.
struct Outcome
{
    Progress progress = Progress::NeedMore;
    bool atEof = false; // Done only because the server closed
    HttpResult result;
    QString error;
    bool tooLarge = false;
    bool keepAlive = false;
    bool trailingData = false; // bytes after the response, fed or not

    bool operator==(const Outcome &other) const
    {
        if (progress != other.progress || error != other.error || tooLarge != other.tooLarge)
            return false;
        if (progress != Progress::Done)
            return true; // an unfinished or refused response is not used
        return atEof == other.atEof && result.httpStatus == other.result.httpStatus &&
               result.headers == other.result.headers && result.body == other.result.body &&
               keepAlive == other.keepAlive && trailingData == other.trailingData;
    }
};

QString describe(const Outcome &outcome)
{
    const char *progress = outcome.progress == Progress::Done    ? "Done"
                           : outcome.progress == Progress::Error ? "Error"
                                                                 : "NeedMore";
    return QLatin1String(progress) + QStringLiteral(" status ") + QString::number(outcome.result.httpStatus) +
           QStringLiteral(" headers ") + QString::number(outcome.result.headers.size()) +
           QStringLiteral(" body ") + QString::number(outcome.result.body.size()) +
           (outcome.atEof ? QStringLiteral(" at eof") : QString()) +
           (outcome.keepAlive ? QStringLiteral(" keep-alive") : QString()) +
           (outcome.trailingData ? QStringLiteral(" trailing") : QString()) + QStringLiteral(" error \"") +
           outcome.error + QLatin1Char('"');
}

Outcome finish(ResponseParser &parser, Progress progress, bool eof, bool unfedBytes)
{
    Outcome outcome;
    if (eof && progress == Progress::NeedMore) {
        progress = parser.finishAtEof();
        outcome.atEof = progress == Progress::Done;
    }
    outcome.progress = progress;
    outcome.error = parser.error();
    outcome.tooLarge = parser.tooLarge();
    outcome.keepAlive = parser.keepAlive();
    outcome.trailingData = parser.hasTrailingData() || unfedBytes;
    outcome.result = parser.result();
    return outcome;
}

// Fed in one piece to a parser of its own.
Outcome parseWhole(QByteArrayView wire, const Settings &settings)
{
    ResponseParser parser = settings.tinyLimits ? ResponseParser(TinyLimits) : ResponseParser();
    parser.reset(settings.head, settings.maxBody);
    parser.feed(wire);
    const Progress progress = parser.parse();
    FUZZ_CHECK(parser.result().body.size() <= settings.maxBody, QString::number(parser.result().body.size()));
    return finish(parser, progress, settings.eof, false);
}

// Fed in pieces to one parser used for every input, as a connection's parser is reused
// across exchanges: reset() must leave nothing of the last one. Stops at the first
// verdict, as the client does; then checks that the verdict stays.
Outcome parseInPieces(QByteArrayView wire, const Settings &settings)
{
    static ResponseParser clientParser;
    static ResponseParser tinyParser(TinyLimits);
    ResponseParser &parser = settings.tinyLimits ? tinyParser : clientParser;
    parser.reset(settings.head, settings.maxBody);
    // What a parser that wants more has not consumed is an unfinished line: no '\n' and
    // within the line bound. So it holds that and the piece just fed, never what it parsed.
    const qsizetype longestLine = std::max(parser.limits().lineBytes, parser.limits().chunkLineBytes);
    quint32 random = settings.seed;
    Progress progress = Progress::NeedMore;
    qsizetype at = 0;
    qsizetype lineStart = 0; // after the last '\n' fed
    while (at < wire.size() && progress == Progress::NeedMore) {
        random ^= random << 13;
        random ^= random >> 17;
        random ^= random << 5;
        const qsizetype piece =
            std::min<qsizetype>(wire.size() - at, 1 + random % (quint32(1) << settings.pieceBits));
        const qsizetype unfinished = std::min(at - lineStart, longestLine);
        parser.feed(wire.sliced(at, piece));
        FUZZ_CHECK(parser.heldBytes() <= unfinished + piece,
                   QString::number(parser.heldBytes()) + QStringLiteral(" bytes held after a piece of ") +
                       QString::number(piece) + QStringLiteral(" and a line of ") +
                       QString::number(unfinished));
        if (const qsizetype newline = wire.sliced(at, piece).lastIndexOf('\n'); newline >= 0)
            lineStart = at + newline + 1;
        at += piece;
        progress = parser.parse();
        FUZZ_CHECK(parser.result().body.size() <= settings.maxBody,
                   QString::number(parser.result().body.size()));
    }
    const Outcome outcome = finish(parser, progress, settings.eof, at < wire.size());

    // A verdict is final: more bytes, another parse or another end of stream change nothing.
    if (outcome.progress != Progress::NeedMore) {
        parser.feed(at < wire.size() ? wire.sliced(at) : QByteArrayView("HTTP/1.1 200 OK\r\n\r\n"));
        FUZZ_CHECK(parser.parse() == outcome.progress, describe(outcome));
        FUZZ_CHECK(parser.finishAtEof() == outcome.progress, describe(outcome));
        Outcome again = finish(parser, outcome.progress, false, at < wire.size());
        again.atEof = outcome.atEof;
        again.trailingData = outcome.trailingData; // more bytes were fed: checked below
        FUZZ_CHECK(again == outcome, describe(outcome) + QStringLiteral(" became ") + describe(again));
        if (outcome.progress == Progress::Done)
            FUZZ_CHECK(parser.hasTrailingData(),
                       QStringLiteral("bytes fed after the response are not trailing data"));
    }
    return outcome;
}

// RFC 9110 5.6.2 tchar. This and finalCoding() are written again here rather than taken
// from the parser's helpers, so that a check does not share the mistake it should catch.
bool isTokenChar(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           QByteArrayView("!#$%&'*+-.^_`|~").contains(c);
}

// The headers as RFC 9112 reads them: names are tokens; values hold no CR, LF or NUL
// and no whitespace at either end.
void checkHeaders(const HttpHeaders &headers)
{
    for (const auto &[name, value] : headers) {
        FUZZ_CHECK(!name.isEmpty() && std::all_of(name.begin(), name.end(), isTokenChar),
                   QStringLiteral("header name ") + QString::fromLatin1(name.toPercentEncoding()));
        FUZZ_CHECK(!value.contains('\r') && !value.contains('\n') && !value.contains('\0'),
                   QStringLiteral("header value ") + QString::fromLatin1(value.toPercentEncoding()));
        FUZZ_CHECK(value.isEmpty() || (value.front() != ' ' && value.front() != '\t' && value.back() != ' ' &&
                                       value.back() != '\t'),
                   QStringLiteral("header value ") + QString::fromLatin1(value.toPercentEncoding()));
    }
}

// Every value of the header, as one comma-separated list.
QByteArray joined(const HttpHeaders &headers, QByteArrayView name)
{
    QByteArray list;
    for (const auto &[key, value] : headers) {
        if (http::equalsCi(key, name))
            list += (list.isEmpty() ? QByteArray() : QByteArray(",")) + value;
    }
    return list;
}

bool hasHeader(const HttpHeaders &headers, QByteArrayView name)
{
    return std::any_of(headers.begin(), headers.end(),
                       [name](const auto &header) { return http::equalsCi(header.first, name); });
}

// The last transfer coding of a Transfer-Encoding list, empty items skipped.
QByteArray finalCoding(const QByteArray &list)
{
    const QList<QByteArray> codings = list.split(',');
    for (auto it = codings.rbegin(); it != codings.rend(); ++it) {
        if (const QByteArray coding = it->trimmed(); !coding.isEmpty())
            return coding;
    }
    return {};
}

// A response the client accepts.
void checkDone(const Outcome &outcome, const Settings &settings)
{
    const HttpResult &result = outcome.result;
    const int status = result.httpStatus;
    // Three digits; an interim 1xx is never the answer, except 101 which ends HTTP here.
    FUZZ_CHECK(status == 101 || (status >= 200 && status <= 999), describe(outcome));
    FUZZ_CHECK(outcome.error.isEmpty() && !outcome.tooLarge, describe(outcome));
    checkHeaders(result.headers);
    if (outcome.keepAlive)
        FUZZ_CHECK(!http::hasToken(joined(result.headers, "connection"), "close"), describe(outcome));
    if (outcome.atEof)
        FUZZ_CHECK(!outcome.keepAlive && !outcome.trailingData, describe(outcome));

    // RFC 9112 6.3, from the headers the parser reports.
    if (settings.head || status == 204 || status == 304 || status == 101) {
        FUZZ_CHECK(result.body.isEmpty() && !outcome.atEof, describe(outcome));
        if (status == 101)
            FUZZ_CHECK(!outcome.keepAlive, describe(outcome));
        return;
    }
    if (hasHeader(result.headers, "transfer-encoding")) {
        // Chunked last: the chunks say where the body ends; anything else: the close does.
        const bool chunked =
            http::equalsCi(finalCoding(joined(result.headers, "transfer-encoding")), "chunked");
        FUZZ_CHECK(outcome.atEof != chunked, describe(outcome));
        // Content-Length beside Transfer-Encoding smells of smuggling: no reuse.
        if (hasHeader(result.headers, "content-length"))
            FUZZ_CHECK(!outcome.keepAlive, describe(outcome));
        return;
    }
    if (hasHeader(result.headers, "content-length")) {
        FUZZ_CHECK(!outcome.atEof, describe(outcome));
        // Every Content-Length line says the body's length, in digits only.
        for (const auto &[name, value] : result.headers) {
            if (!http::equalsCi(name, "content-length"))
                continue;
            bool ok = false;
            const bool digits =
                std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
            FUZZ_CHECK(digits && value.toLongLong(&ok) == result.body.size() && ok,
                       describe(outcome) + QStringLiteral(" Content-Length: ") + QString::fromLatin1(value));
        }
        return;
    }
    FUZZ_CHECK(outcome.atEof, describe(outcome));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    const Settings settings = readSettings(data);
    const QByteArray bytes = oncefuzz::bytes(data + 4, size - 4);
    const QByteArrayView wire(bytes);

    const Outcome whole = parseWhole(wire, settings);
    const Outcome pieces = parseInPieces(wire, settings);
    FUZZ_CHECK(pieces == whole, QStringLiteral("whole: ") + describe(whole) +
                                    QStringLiteral("; in pieces: ") + describe(pieces));

    switch (whole.progress) {
    case Progress::Done:
        checkDone(whole, settings);
        break;
    case Progress::Error:
        FUZZ_CHECK(oncefuzz::isOneLine(whole.error), whole.error);
        break;
    case Progress::NeedMore:
        FUZZ_CHECK(whole.error.isEmpty() && !whole.tooLarge, describe(whole));
        break;
    }
    return 0;
}
