#pragma once

#include "http/requesthead.h"

#include <QByteArray>
#include <QByteArrayView>
#include <QHostAddress>
#include <QList>
#include <QObject>

#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <variant>

namespace once {

struct HttpAnswer
{
    int status = 200;
    QList<std::pair<QByteArray, QByteArray>> headers; // Content-Length is the server's to write
    QByteArray body;
    bool close = false; // close the connection after this answer
};

struct HttpServerLimits
{
    // Beyond it new connections are not accepted: they wait in the kernel's listen backlog,
    // using no descriptor of this process, until a connection ends (libmicrohttpd stops
    // polling its listening socket at the limit; it has no way to answer a connection it
    // has not read a request from). The deadlines below free a slot within
    // connectionTimeoutSeconds of an attacker stopping to make progress.
    int maxConnections = 900;
    // A connection is closed when it is idle this long, when its head (or its TLS handshake)
    // has not fully arrived this long after it began waiting for one (slowloris), when its
    // body stalls this long between bytes, or when it does not read its answer for this long.
    // A connection waiting for the application's answer has no deadline.
    int connectionTimeoutSeconds = 30;
    // Request line and headers. Beyond it a 431 (414 while still in the request line:
    // libmicrohttpd's own refusal, which never buffers more than twice this), connection closed.
    int headBytes = 32 * 1024;
    // The bodies of all requests being read or waiting for their answer, across connections.
    // A request whose announced length would go past it gets a 503 with Retry-After: 1 before
    // any of its body is read; a chunked body that goes past it while being read is cut off
    // (see HttpServer::Admit).
    qsizetype bufferedBodyBytes = 64 * 1024 * 1024;
};

// An HTTP/1.1 server (libmicrohttpd) that never holds more of a request than its limits
// allow: the application sees each request's head before any of its body is read and bounds
// the body, or answers at once. Answers go out in the order of the requests on a connection
// (the next request is read only once the previous one is answered). Requests whose framing
// could be read two ways (request smuggling) are refused with a 400 before the Admit is
// asked: more than one Content-Length, Transfer-Encoding other than exactly "chunked", both
// headers, Transfer-Encoding on HTTP/1.0, header names that are not tokens, control
// characters in header values, folded header lines. HTTP/1.0 requests get their answer with
// the connection closed. Logs go to the category once.http.server and never hold header
// values or request targets.
class HttpServer final : public QObject
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(HttpServer)

public:
    // Decides, as soon as a request's head has arrived and before any of its body is read,
    // whether to read the body (up to the returned number of bytes) or to answer at once
    // (the body is then not read; the connection is closed when a body was announced, and
    // there is no 100 Continue).
    // A Content-Length over the bound gets a 413 at once, the connection closed. A chunked
    // body that goes past the bound is cut off by closing the connection without an answer:
    // libmicrohttpd 0.9.75 takes a response only before a body or after all of it
    // (MHD_queue_response refuses one in between), and an endless body has no after.
    // Called on libmicrohttpd's thread: must be thread-safe and quick.
    using Admission = std::variant<qsizetype, HttpAnswer>;
    using Admit = std::function<Admission(const HttpHead &)>;

    explicit HttpServer(Admit admit, HttpServerLimits limits = {}, QObject *parent = nullptr);
    ~HttpServer() override; // stops the daemon; answers nothing more

    // TLS: PEM certificate (chain) and key; nullopt: plain HTTP. QHostAddress::Any listens
    // on IPv6 and IPv4. False with a one-line error (never the key) when it cannot listen.
    [[nodiscard]] bool listen(const QHostAddress &host, quint16 port,
                              const std::optional<std::pair<QByteArray, QByteArray>> &tlsPem, QString *error);
    quint16 serverPort() const;
    // Connections libmicrohttpd holds now (accepted and not yet closed). Thread-safe.
    int connectionCount() const;

    // Thread-safe. Answers the request of that id (ignored when the client went away, the id
    // is unknown or it was answered already).
    void answer(quint64 exchange, const HttpAnswer &answer);

    struct State; // shared with libmicrohttpd's callbacks (httpserver.cpp)

Q_SIGNALS:
    // A whole request, its body within the admitted bound, delivered on this object's thread
    // (queued). Answer it with answer(exchange, ...) now or later; the connection waits, suspended.
    void requestArrived(quint64 exchange, const once::HttpHead &head, const QByteArray &body);
    // The connection of a request not yet answered is gone (client closed, timed out, error).
    void exchangeEnded(quint64 exchange);

private:
    void sweep();

    std::unique_ptr<State> m_state;
};

} // namespace once
