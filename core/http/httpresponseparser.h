#pragma once

#include "http/httpmessage.h"

#include <QByteArrayView>

namespace once::http {

// Bounds that keep a misbehaving server from growing our buffers or holding our thread.
// The client uses these; a test or a fuzzer may choose small ones to reach them quickly.
struct ResponseLimits
{
    qsizetype lineBytes = 32 * 1024;   // the status line and each header line
    qsizetype headerBytes = 64 * 1024; // all header lines (and trailers) together
    int headerCount = 256;
    qsizetype chunkLineBytes = 4 * 1024;  // a chunk size with its extensions
    qsizetype framingBytes = 1024 * 1024; // all chunk size lines and chunk ends together
};

// Incremental HTTP/1.x response parser, free of sockets: bytes go in with feed(), parse()
// says whether a response is complete. Bytes are appended to an internal buffer and
// consumed from a read position, so a response split over many reads is parsed once.
//
// Everything a server sends is bounded before it is kept: the status line and each header
// line, the header block, the number of headers, the chunk framing and the body. Nothing
// is ever sized from what the server announces: a Content-Length is a claim checked
// against the body limit, never an allocation size. A body over the limit is an error
// (tooLarge()), and since the request was written by then, the exchange is in doubt.
class ResponseParser final
{
public:
    enum class Progress
    {
        NeedMore,
        Done,
        Error
    };

    ResponseParser() = default;
    explicit ResponseParser(const ResponseLimits &limits) : m_limits(limits) {}

    // Starts a new exchange. A HEAD request's response has no body, whatever its headers
    // say. maxBodyBytes: the most body kept; more is an error.
    void reset(bool headRequest = false, qint64 maxBodyBytes = DefaultMaxResponseBodyBytes);
    void feed(QByteArrayView bytes);
    Progress parse();
    // The server closed the connection: a body delimited by the close is complete now.
    Progress finishAtEof();

    // Bytes fed after the end of the response: a protocol violation, so the connection
    // must not carry another request.
    bool hasTrailingData() const { return m_pos < m_buffer.size(); }
    bool keepAlive() const;
    const QString &error() const { return m_error; }
    // The error is that the response was larger than the limits, not malformed.
    bool tooLarge() const { return m_tooLarge; }
    // Bytes the parser holds, consumed or not: at most an unfinished line and the last
    // bytes fed, however long the response.
    qsizetype heldBytes() const { return m_buffer.size(); }
    const ResponseLimits &limits() const { return m_limits; }
    const HttpResult &result() const { return m_result; }
    HttpResult takeResult() { return std::move(m_result); }

private:
    enum class State
    {
        StatusLine,
        Headers,
        Body,
        ChunkSize,
        ChunkData,
        ChunkEnd,
        Trailers,
        UntilClose,
        Done,
        Failed // an error was reported: nothing more is parsed, the close changes nothing
    };
    enum class Line
    {
        Got,
        NeedMore,
        TooLong
    };

    Line takeLine(QByteArrayView *line, qsizetype maxLength);
    Progress fail(const QString &why);
    Progress failTooLarge(const QString &why);
    Progress parseStatusLine(QByteArrayView line);
    Progress parseHeader(QByteArrayView line);
    Progress headersComplete();
    Progress appendBody(qint64 bytes, QLatin1String framing);
    // What one response's headers said of its body and connection.
    void forgetFraming();
    QString bodyLimitText() const;

    ResponseLimits m_limits;
    QByteArray m_buffer;
    qsizetype m_pos = 0;
    qsizetype m_scannedTo = 0; // no '\n' in [m_pos, m_scannedTo): a slow line is scanned once
    State m_state = State::StatusLine;
    HttpResult m_result;
    QString m_error;
    qint64 m_maxBodyBytes = DefaultMaxResponseBodyBytes;
    qint64 m_remaining = 0;
    qsizetype m_headerBytes = 0;
    qsizetype m_framingBytes = 0;
    int m_minorVersion = 1;
    qint64 m_contentLength = -1;
    bool m_transferEncoding = false;
    bool m_chunked = false; // the last transfer coding is chunked
    bool m_headRequest = false;
    bool m_connectionClose = false;
    bool m_connectionKeepAlive = false;
    bool m_bodyUntilClose = false;
    bool m_tooLarge = false;
};

} // namespace once::http
