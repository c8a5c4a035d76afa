#include "httpresponseparser.h"

#include "httpsyntax.h"

#include <algorithm>

namespace once::http {

namespace {

// Bounds that keep a misbehaving server from growing our buffers without limit.
constexpr qsizetype kMaxLineLength = 64 * 1024;
constexpr qsizetype kMaxHeaderBytes = 256 * 1024;
constexpr int kMaxHeaderCount = 256;

} // namespace

void ResponseParser::reset(bool headRequest)
{
    m_state = State::StatusLine;
    m_headRequest = headRequest;
    m_result = HttpResult();
    m_error.clear();
    m_remaining = 0;
    m_headerBytes = 0;
    m_minorVersion = 1;
    m_connectionClose = false;
    m_connectionKeepAlive = false;
    // Any leftover bytes of a previous exchange would be a protocol violation; the
    // connection is not reused in that case, so dropping them here is safe.
    m_buffer.resize(0);
    m_pos = 0;
}

void ResponseParser::feed(QByteArrayView bytes)
{
    if (bytes.isEmpty())
        return;
    if (m_pos > 0 && m_pos == m_buffer.size()) {
        m_buffer.resize(0);
        m_pos = 0;
    }
    m_buffer.append(bytes.data(), bytes.size());
}

ResponseParser::Progress ResponseParser::finishAtEof()
{
    if (m_state == State::Done)
        return Progress::Done;
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
    return m_minorVersion >= 1 || m_connectionKeepAlive;
}

ResponseParser::Line ResponseParser::takeLine(QByteArrayView *line)
{
    const qsizetype nl = m_buffer.indexOf('\n', m_pos);
    if (nl < 0)
        return m_buffer.size() - m_pos > kMaxLineLength ? Line::TooLong : Line::NeedMore;
    qsizetype end = nl;
    if (end > m_pos && m_buffer.at(end - 1) == '\r')
        --end;
    *line = QByteArrayView(m_buffer.constData() + m_pos, end - m_pos);
    m_headerBytes += nl + 1 - m_pos;
    m_pos = nl + 1;
    return Line::Got;
}

ResponseParser::Progress ResponseParser::fail(const QString &why)
{
    m_error = why;
    return Progress::Error;
}

ResponseParser::Progress ResponseParser::parseStatusLine(QByteArrayView line)
{
    // "HTTP/1.1 200 OK"; the reason phrase is optional.
    if (line.size() < 12 || !line.startsWith("HTTP/1.") || line.at(8) != ' ')
        return fail(QStringLiteral("malformed status line"));
    const char minor = line.at(7);
    if (minor < '0' || minor > '9')
        return fail(QStringLiteral("malformed status line"));
    bool ok = false;
    const int code = line.sliced(9, 3).toInt(&ok);
    if (!ok || code < 100 || code > 999 || (line.size() > 12 && line.at(12) != ' '))
        return fail(QStringLiteral("malformed status line"));
    m_minorVersion = minor - '0';
    m_result.httpStatus = code;
    m_result.headers.clear();
    m_contentLength = -1;
    m_chunked = false;
    m_connectionClose = false;
    m_connectionKeepAlive = false;
    m_bodyUntilClose = false;
    m_state = State::Headers;
    return Progress::NeedMore;
}

ResponseParser::Progress ResponseParser::parseHeader(QByteArrayView line)
{
    const qsizetype colon = line.indexOf(':');
    if (colon <= 0)
        return fail(QStringLiteral("malformed response header"));
    if (m_result.headers.size() >= kMaxHeaderCount)
        return fail(QStringLiteral("too many response headers"));
    const QByteArrayView name = line.first(colon).trimmed();
    const QByteArrayView value = line.sliced(colon + 1).trimmed();
    if (equalsCi(name, "content-length")) {
        bool ok = false;
        const qint64 length = value.toLongLong(&ok);
        if (!ok || length < 0 || (m_contentLength >= 0 && m_contentLength != length))
            return fail(QStringLiteral("invalid Content-Length"));
        m_contentLength = length;
    } else if (equalsCi(name, "transfer-encoding")) {
        m_chunked = hasToken(value, "chunked");
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
        // Interim response (100 Continue, 103 Early Hints): the real one follows.
        m_state = State::StatusLine;
        return Progress::NeedMore;
    }
    if (m_headRequest || code == 204 || code == 304 || code == 101) {
        m_state = State::Done;
        m_bodyUntilClose = code == 101;
        return Progress::Done;
    }
    if (m_chunked) {
        m_state = State::ChunkSize;
        return Progress::NeedMore;
    }
    if (m_contentLength >= 0) {
        m_remaining = m_contentLength;
        m_result.body.reserve(m_contentLength);
        m_state = m_remaining > 0 ? State::Body : State::Done;
        return m_state == State::Done ? Progress::Done : Progress::NeedMore;
    }
    m_bodyUntilClose = true;
    m_state = State::UntilClose;
    return Progress::NeedMore;
}

ResponseParser::Progress ResponseParser::parse()
{
    for (;;) {
        switch (m_state) {
        case State::StatusLine:
        case State::Headers:
        case State::Trailers: {
            QByteArrayView line;
            const Line got = takeLine(&line);
            if (got == Line::TooLong)
                return fail(QStringLiteral("response header line too long"));
            if (got == Line::NeedMore)
                return Progress::NeedMore;
            if (m_headerBytes > kMaxHeaderBytes)
                return fail(QStringLiteral("response headers too large"));
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
            }
            break;
        }
        case State::Body:
        case State::ChunkData: {
            const qint64 available = m_buffer.size() - m_pos;
            if (available == 0)
                return Progress::NeedMore;
            const qint64 take = std::min(available, m_remaining);
            m_result.body.append(m_buffer.constData() + m_pos, take);
            m_pos += take;
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
        case State::ChunkEnd: {
            QByteArrayView line;
            const Line got = takeLine(&line);
            if (got == Line::NeedMore)
                return Progress::NeedMore;
            if (got == Line::TooLong || !line.isEmpty())
                return fail(QStringLiteral("malformed chunk terminator"));
            m_state = State::ChunkSize;
            break;
        }
        case State::ChunkSize: {
            QByteArrayView line;
            const Line got = takeLine(&line);
            if (got == Line::TooLong)
                return fail(QStringLiteral("chunk size line too long"));
            if (got == Line::NeedMore)
                return Progress::NeedMore;
            const qsizetype semicolon = line.indexOf(';'); // chunk extensions are ignored
            const QByteArrayView hex = (semicolon < 0 ? line : line.first(semicolon)).trimmed();
            bool ok = false;
            const qint64 size = hex.toLongLong(&ok, 16);
            if (!ok || size < 0 || hex.size() > 15)
                return fail(QStringLiteral("malformed chunk size"));
            if (size == 0) {
                m_state = State::Trailers;
            } else {
                m_remaining = size;
                m_state = State::ChunkData;
            }
            break;
        }
        case State::UntilClose:
            if (m_pos < m_buffer.size()) {
                m_result.body.append(m_buffer.constData() + m_pos, m_buffer.size() - m_pos);
                m_pos = m_buffer.size();
            }
            return Progress::NeedMore;
        case State::Done:
            return Progress::Done;
        }
    }
}

} // namespace once::http
