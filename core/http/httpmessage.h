#pragma once

#include <QByteArray>
#include <QList>
#include <QPair>
#include <QString>
#include <QUrl>

// The value types of one HTTP exchange, apart from the client so that the response parser
// (and a fuzzer driving it) needs no sockets.
namespace once {

using HttpHeaders = QList<QPair<QByteArray, QByteArray>>;

// A partner's answer is an excerpt and a request id: 64 KiB of body is plenty.
constexpr qint64 DefaultMaxResponseBodyBytes = 64 * 1024;

struct HttpRequest
{
    QUrl url;
    QByteArray method = "POST";
    HttpHeaders headers; // extra headers; Host, Content-Length and Connection are added by the client
    QByteArray body;
    int timeoutMs = 10000; // whole exchange, from the first byte written to the last byte read
    // The most response body read; a longer one ends the exchange in doubt (the request
    // was written by then) and closes the connection.
    qint64 maxResponseBodyBytes = DefaultMaxResponseBodyBytes;
};

// What happened to one request. The distinction between NotSent and InDoubt is the
// reason this client exists: a caller may retry NotSent freely, but an InDoubt request
// may already have taken effect at the server.
struct HttpResult
{
    enum class Status {
        Response, // a complete HTTP response arrived (any status code)
        NotSent,  // failed before any byte of the request was written: refused, DNS, TLS handshake
        InDoubt,  // failed after the request was (partly) written: timeout, reset, close without answer
    };
    Status status = Status::NotSent;
    int httpStatus = 0;
    HttpHeaders headers;
    QByteArray body;
    QString error; // human-readable; never contains request headers
    qint64 latencyMs = 0;

    // Case-insensitive, first match.
    QByteArray header(const QByteArray &name) const
    {
        for (const auto &h : headers) {
            if (h.first.compare(name, Qt::CaseInsensitive) == 0)
                return h.second;
        }
        return {};
    }
};

} // namespace once
