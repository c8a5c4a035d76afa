#include "http/httpresponseparser.h"

#include "text/hexdigits.h"
#include "http/httpsyntax.h"

#include <algorithm>
#include <optional>

namespace once::http {

namespace {

QString byteCount(qint64 bytes)
{
    if (bytes >= 1024 && bytes % 1024 == 0)
        return QString::number(bytes / 1024) + QStringLiteral(" KiB");
    return QString::number(bytes) + QStringLiteral(" bytes");
}

// 1*DIGIT, as RFC 9110 writes Content-Length; no sign, no space, no list, no overflow.
bool parseDigits(QByteArrayView text, qint64 *value)
{
    if (text.isEmpty() || text.size() > 18)
        return false;
    qint64 result = 0;
    for (const char c : text) {
        if (c < '0' || c > '9')
            return false;
        result = result * 10 + (c - '0');
    }
    *value = result;
    return true;
}

// 1*HEXDIG, as RFC 9112 7.1 writes a chunk size; no sign, no "0x", no overflow.
bool parseHexDigits(QByteArrayView text, qint64 *value)
{
    if (text.isEmpty() || text.size() > 15)
        return false;
    qint64 result = 0;
    for (const char c : text) {
        const int digit = hexDigitValue(uchar(c));
        if (digit < 0)
            return false;
        result = result * 16 + digit;
    }
    *value = result;
    return true;
}

// The last item of a comma-separated list, empty items skipped.
QByteArrayView lastItem(QByteArrayView list)
{
    while (!list.isEmpty()) {
        const qsizetype comma = list.lastIndexOf(',');
        if (const QByteArrayView item = list.sliced(comma + 1).trimmed(); !item.isEmpty())
            return item;
        list = list.first(std::max<qsizetype>(comma, 0));
    }
    return {};
}

struct FieldLine
{
    QByteArrayView name;
    QByteArrayView value;
};

// "name: value" (RFC 9112 5), or nothing when another parser could read the line
// differently: the name is a token right up to the colon (no space before it, no folded
// line, which starts with one), and the value holds no CR or NUL, which some read as
// the end of the line.
std::optional<FieldLine> splitFieldLine(QByteArrayView line)
{
    const qsizetype colon = line.indexOf(':');
    if (colon <= 0 || !isToken(line.first(colon)))
        return std::nullopt;
    const QByteArrayView value = line.sliced(colon + 1).trimmed();
    if (value.contains('\r') || value.contains('\0'))
        return std::nullopt;
    return FieldLine{line.first(colon), value};
}

} // namespace

void ResponseParser::reset(bool headRequest, qint64 maxBodyBytes)
{
    m_state = State::StatusLine;
    m_headRequest = headRequest;
    m_maxBodyBytes = std::max<qint64>(0, maxBodyBytes);
    m_result = HttpResult();
    m_error.clear();
    m_remaining = 0;
    m_headerBytes = 0;
    m_framingBytes = 0;
    m_minorVersion = 1;
    forgetFraming();
    m_tooLarge = false;
    // Any leftover bytes of a previous exchange would be a protocol violation; the
    // connection is not reused in that case, so dropping them here is safe.
    m_buffer.resize(0);
    m_pos = 0;
    m_scannedTo = 0;
}

void ResponseParser::feed(QByteArrayView bytes)
{
    if (bytes.isEmpty())
        return;
    // Drop what was consumed, so that the buffer holds at most an unfinished line (which
    // takeLine() bounds) plus what was just fed, however long the response goes on.
    if (m_pos > 0) {
        m_buffer.remove(0, m_pos);
        m_scannedTo = std::max<qsizetype>(0, m_scannedTo - m_pos);
        m_pos = 0;
    }
    m_buffer.append(bytes.data(), bytes.size());
}

ResponseParser::Progress ResponseParser::finishAtEof()
{
    if (m_state == State::Done)
        return Progress::Done;
    if (m_state == State::Failed)
        return Progress::Error;
    if (m_state == State::UntilClose) {
        m_state = State::Done;
        return Progress::Done;
    }
    return Progress::NeedMore;
}

bool ResponseParser::keepAlive() const
{
    if (m_bodyUntilClose || m_connectionClose)
        return false;
    // Transfer-Encoding beside Content-Length, or in HTTP/1.0 which predates it, is how
    // responses are smuggled (RFC 9112 6.1): the connection ends with this response.
    if (m_transferEncoding && (m_contentLength >= 0 || m_minorVersion == 0))
        return false;
    return m_minorVersion >= 1 || m_connectionKeepAlive;
}

ResponseParser::Line ResponseParser::takeLine(QByteArrayView *line, qsizetype maxLength)
{
    const qsizetype nl = m_buffer.indexOf('\n', std::max(m_pos, m_scannedTo));
    if (nl < 0) {
        m_scannedTo = m_buffer.size();
        return m_buffer.size() - m_pos > maxLength ? Line::TooLong : Line::NeedMore;
    }
    if (nl - m_pos > maxLength)
        return Line::TooLong;
    qsizetype end = nl;
    if (end > m_pos && m_buffer.at(end - 1) == '\r')
        --end;
    *line = QByteArrayView(m_buffer.constData() + m_pos, end - m_pos);
    m_pos = nl + 1;
    m_scannedTo = m_pos;
    return Line::Got;
}

ResponseParser::Progress ResponseParser::fail(const QString &why)
{
    m_error = why;
    m_state = State::Failed;
    return Progress::Error;
}

ResponseParser::Progress ResponseParser::failTooLarge(const QString &why)
{
    m_tooLarge = true;
    return fail(why);
}

void ResponseParser::forgetFraming()
{
    m_contentLength = -1;
    m_chunked = false;
    m_transferEncoding = false;
    m_connectionClose = false;
    m_connectionKeepAlive = false;
    m_bodyUntilClose = false;
}

QString ResponseParser::bodyLimitText() const
{
    return byteCount(m_maxBodyBytes);
}

ResponseParser::Progress ResponseParser::parseStatusLine(QByteArrayView line)
{
    // "HTTP/1.1 200 OK"; the reason phrase is optional.
    if (line.size() < 12 || !line.startsWith("HTTP/1.") || line.at(8) != ' ')
        return fail(QStringLiteral("malformed status line"));
    const char minor = line.at(7);
    if (minor < '0' || minor > '9')
        return fail(QStringLiteral("malformed status line"));
    qint64 code = 0;
    if (!parseDigits(line.sliced(9, 3), &code) || code < 100 || (line.size() > 12 && line.at(12) != ' '))
        return fail(QStringLiteral("malformed status line"));
    m_minorVersion = minor - '0';
    m_result.httpStatus = int(code);
    m_result.headers.clear();
    forgetFraming(); // an interim response's (1xx) headers do not frame the final one
    m_state = State::Headers;
    return Progress::NeedMore;
}

ResponseParser::Progress ResponseParser::parseHeader(QByteArrayView line)
{
    const auto field = splitFieldLine(line);
    if (!field)
        return fail(QStringLiteral("malformed response header"));
    if (m_result.headers.size() >= m_limits.headerCount)
        return failTooLarge(QStringLiteral("more than %1 response headers").arg(m_limits.headerCount));
    const QByteArrayView name = field->name;
    const QByteArrayView value = field->value;
    if (equalsCi(name, "content-length")) {
        // A length over the body limit fails once the headers are complete, before any
        // body is read; one beyond 64-bit range already here.
        qint64 length = 0;
        if (!parseDigits(value, &length) || (m_contentLength >= 0 && m_contentLength != length)) {
            const bool allDigits =
                std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
            if (allDigits && value.size() > 18)
                return failTooLarge(QStringLiteral("HTTP %1 announced a body of more than 10^18 bytes, over the %2 limit")
                                        .arg(QString::number(m_result.httpStatus), bodyLimitText()));
            return fail(QStringLiteral("invalid Content-Length"));
        }
        m_contentLength = length;
    } else if (equalsCi(name, "transfer-encoding")) {
        // The last coding of all the field's lines decides (RFC 9112 6.3).
        m_transferEncoding = true;
        if (const QByteArrayView coding = lastItem(value); !coding.isEmpty())
            m_chunked = equalsCi(coding, "chunked");
    } else if (equalsCi(name, "connection")) {
        m_connectionClose = m_connectionClose || hasToken(value, "close");
        m_connectionKeepAlive = m_connectionKeepAlive || hasToken(value, "keep-alive");
    }
    m_result.headers.append({name.toByteArray(), value.toByteArray()});
    return Progress::NeedMore;
}

ResponseParser::Progress ResponseParser::headersComplete()
{
    const int code = m_result.httpStatus;
    if (code >= 100 && code < 200 && code != 101) {
        // Interim response (100 Continue, 103 Early Hints): the real one follows. Its
        // header lines count towards the same bound as the final response's.
        m_state = State::StatusLine;
        return Progress::NeedMore;
    }
    if (m_headRequest || code == 204 || code == 304 || code == 101) {
        m_state = State::Done;
        m_bodyUntilClose = code == 101;
        return Progress::Done;
    }
    // RFC 9112 6.3: Transfer-Encoding overrides Content-Length; a body whose last coding
    // is not chunked ends with the connection.
    if (m_transferEncoding && m_chunked) {
        m_state = State::ChunkSize;
        return Progress::NeedMore;
    }
    if (m_contentLength >= 0 && !m_transferEncoding) {
        // A claim, checked against the limit; the body grows only with what arrives.
        if (m_contentLength > m_maxBodyBytes)
            return failTooLarge(QStringLiteral("HTTP %1 announced a body of %2 bytes, over the %3 limit")
                                    .arg(QString::number(code), QString::number(m_contentLength), bodyLimitText()));
        m_remaining = m_contentLength;
        m_state = m_remaining > 0 ? State::Body : State::Done;
        return m_state == State::Done ? Progress::Done : Progress::NeedMore;
    }
    m_bodyUntilClose = true;
    m_state = State::UntilClose;
    return Progress::NeedMore;
}

ResponseParser::Progress ResponseParser::appendBody(qint64 bytes, QLatin1String framing)
{
    if (m_result.body.size() + bytes > m_maxBodyBytes)
        return failTooLarge(QStringLiteral("HTTP %1 sent a %2 body longer than the %3 limit")
                                .arg(QString::number(m_result.httpStatus), framing, bodyLimitText()));
    m_result.body.append(m_buffer.constData() + m_pos, bytes);
    m_pos += bytes;
    return Progress::NeedMore;
}

ResponseParser::Progress ResponseParser::parse()
{
    for (;;) {
        switch (m_state) {
        case State::StatusLine:
        case State::Headers:
        case State::Trailers: {
            const qsizetype before = m_pos;
            QByteArrayView line;
            const Line got = takeLine(&line, m_limits.lineBytes);
            if (got == Line::TooLong)
                return failTooLarge(QStringLiteral("a response header line longer than %1")
                                        .arg(byteCount(m_limits.lineBytes)));
            if (got == Line::NeedMore)
                return Progress::NeedMore;
            m_headerBytes += m_pos - before;
            if (m_headerBytes > m_limits.headerBytes)
                return failTooLarge(
                    QStringLiteral("response headers longer than %1").arg(byteCount(m_limits.headerBytes)));
            if (m_state == State::StatusLine) {
                if (line.isEmpty())
                    continue; // tolerate stray CRLF between responses (RFC 9112 2.2)
                if (parseStatusLine(line) == Progress::Error)
                    return Progress::Error;
            } else if (m_state == State::Headers) {
                if (line.isEmpty()) {
                    const Progress p = headersComplete();
                    if (p != Progress::NeedMore)
                        return p;
                } else if (parseHeader(line) == Progress::Error) {
                    return Progress::Error;
                }
            } else if (line.isEmpty()) {
                m_state = State::Done;
                return Progress::Done;
            } else if (!splitFieldLine(line)) {
                return fail(QStringLiteral("malformed trailer")); // trailers are read, not kept
            }
            break;
        }
        case State::Body:
        case State::ChunkData: {
            const qint64 available = m_buffer.size() - m_pos;
            if (available == 0)
                return Progress::NeedMore;
            const qint64 take = std::min(available, m_remaining);
            if (appendBody(take, m_state == State::Body ? QLatin1String("fixed-length")
                                                        : QLatin1String("chunked")) == Progress::Error)
                return Progress::Error;
            m_remaining -= take;
            if (m_remaining > 0)
                return Progress::NeedMore;
            if (m_state == State::Body) {
                m_state = State::Done;
                return Progress::Done;
            }
            m_state = State::ChunkEnd;
            break;
        }
        case State::ChunkEnd:
        case State::ChunkSize: {
            const qsizetype before = m_pos;
            QByteArrayView line;
            const Line got = takeLine(&line, m_limits.chunkLineBytes);
            if (got == Line::NeedMore)
                return Progress::NeedMore;
            if (got == Line::Got)
                m_framingBytes += m_pos - before;
            if (m_framingBytes > m_limits.framingBytes)
                return failTooLarge(
                    QStringLiteral("chunk framing longer than %1").arg(byteCount(m_limits.framingBytes)));
            if (m_state == State::ChunkEnd) {
                if (got == Line::TooLong || !line.isEmpty())
                    return fail(QStringLiteral("malformed chunk terminator"));
                m_state = State::ChunkSize;
                break;
            }
            if (got == Line::TooLong)
                return fail(QStringLiteral("chunk size line too long"));
            const qsizetype semicolon = line.indexOf(';'); // chunk extensions are ignored
            const QByteArrayView hex = (semicolon < 0 ? line : line.first(semicolon)).trimmed();
            qint64 size = 0;
            if (!parseHexDigits(hex, &size))
                return fail(QStringLiteral("malformed chunk size"));
            if (size == 0) {
                m_state = State::Trailers;
            } else if (m_result.body.size() + size > m_maxBodyBytes) {
                // Said before the data arrives: no need to wait for it.
                return failTooLarge(QStringLiteral("HTTP %1 sent a chunked body longer than the %2 limit")
                                        .arg(QString::number(m_result.httpStatus), bodyLimitText()));
            } else {
                m_remaining = size;
                m_state = State::ChunkData;
            }
            break;
        }
        case State::UntilClose: {
            const qint64 available = m_buffer.size() - m_pos;
            if (available > 0 && appendBody(available, QLatin1String("close-delimited")) == Progress::Error)
                return Progress::Error;
            return Progress::NeedMore;
        }
        case State::Done:
            return Progress::Done;
        case State::Failed:
            return Progress::Error;
        }
    }
}

} // namespace once::http
