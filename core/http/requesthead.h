#pragma once

#include <QByteArray>
#include <QByteArrayView>
#include <QHostAddress>
#include <QList>

#include <utility>

namespace once {

// A request as far as its head (what HttpServer's Admit decides on).
struct HttpHead
{
    QByteArray method;                                // as sent ("GET", "HEAD", "POST", ...)
    QByteArray path;                                  // raw (still percent-encoded), without the query
    QByteArray query;                                 // raw, what follows '?', may be empty
    QByteArray version;                               // "HTTP/1.1" or "HTTP/1.0"
    QList<std::pair<QByteArray, QByteArray>> headers; // as sent, in order, duplicates kept
    QHostAddress peer;

    // The first value, the name compared case-insensitively; empty if absent.
    QByteArray header(QByteArrayView name) const;
    int headerCount(QByteArrayView name) const;
};

// Why a head's framing must be refused with a 400 (one reader could take its body's end
// for another than this server does: request smuggling), or nullptr when it is plain:
// more than one Content-Length or one that is not all digits, more than one
// Transfer-Encoding or one other than "chunked", both headers, Transfer-Encoding before
// HTTP/1.1, a method or header name that is not a token, a control character in a value.
const char *framingProblem(const HttpHead &head);

// The bytes of the head as sent: request line, header lines and the empty line.
qsizetype headSize(const HttpHead &head);

} // namespace once
