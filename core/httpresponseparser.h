#pragma once

#include "httpmessage.h"

#include <QByteArrayView>

namespace once::http {

// Incremental HTTP/1.x response parser, free of sockets: bytes go in with feed(), parse()
// says whether a response is complete. Bytes are appended to an internal buffer and
// consumed from a read position, so a response split over many reads is parsed once.
class ResponseParser final
{
public:
    enum class Progress
    {
        NeedMore,
        Done,
        Error
    };

    // Starts a new exchange. A HEAD request's response has no body, whatever its headers say.
    void reset(bool headRequest = false);
    void feed(QByteArrayView bytes);
    Progress parse();
    // The server closed the connection: a body delimited by the close is complete now.
    Progress finishAtEof();

    // Bytes fed after the end of the response: a protocol violation, so the connection
    // must not carry another request.
    bool hasTrailingData() const { return m_pos < m_buffer.size(); }
    bool keepAlive() const;
    const QString &error() const { return m_error; }
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
        Done
    };
    enum class Line
    {
        Got,
        NeedMore,
        TooLong
    };

    Line takeLine(QByteArrayView *line);
    Progress fail(const QString &why);
    Progress parseStatusLine(QByteArrayView line);
    Progress parseHeader(QByteArrayView line);
    Progress headersComplete();

    QByteArray m_buffer;
    qsizetype m_pos = 0;
    State m_state = State::StatusLine;
    HttpResult m_result;
    QString m_error;
    qint64 m_remaining = 0;
    qsizetype m_headerBytes = 0;
    int m_minorVersion = 1;
    qint64 m_contentLength = -1;
    bool m_chunked = false;
    bool m_headRequest = false;
    bool m_connectionClose = false;
    bool m_connectionKeepAlive = false;
    bool m_bodyUntilClose = false;
};

} // namespace once::http
