#include "sim/hostileanswers.h"

#include <QTcpSocket>

#include <functional>

namespace once {

namespace {

// The simulator's own buffer stays below this while it streams.
constexpr qint64 kStreamHighWater = 256 * 1024;

void streamForever(QTcpSocket *socket, std::function<QByteArray()> nextPiece)
{
    const auto more = [socket, nextPiece = std::move(nextPiece)] {
        while (socket->state() == QAbstractSocket::ConnectedState && socket->bytesToWrite() < kStreamHighWater)
            socket->write(nextPiece());
    };
    QObject::connect(socket, &QIODevice::bytesWritten, socket, more);
    more();
}

} // namespace

const QList<HostileModeInfo> &hostileModes()
{
    static const QList<HostileModeInfo> modes{
        {HostileMode::HugeContentLength, QLatin1String("huge-content-length"),
         QLatin1String("apply, then announce a 99999999999999-byte body and send one byte"), true},
        {HostileMode::EndlessChunked, QLatin1String("endless-chunked"),
         QLatin1String("apply, then send a chunked body that never ends"), true},
        {HostileMode::EndlessBody, QLatin1String("endless-body"),
         QLatin1String("apply, then send a body until a close that never comes"), true},
        {HostileMode::EndlessHeaders, QLatin1String("endless-headers"),
         QLatin1String("apply, then send header lines that never end"), true},
        {HostileMode::EchoAuthorization, QLatin1String("echo-authorization"),
         QLatin1String("answer 503, echoing the Authorization header in the body and X-Request-Id"), false},
        {HostileMode::HugeRetryAfter, QLatin1String("huge-retry-after"),
         QLatin1String("answer 429 with Retry-After: 99999999999999999999999"), false},
        {HostileMode::HostileRequestId, QLatin1String("hostile-request-id"),
         QLatin1String("apply, then answer 200 with an 8 KiB request id: a formula, terminal escapes, a bidi override"),
         true},
    };
    return modes;
}

std::optional<HostileMode> hostileModeFromName(const QString &name)
{
    if (name == QLatin1String("none"))
        return HostileMode::None;
    for (const HostileModeInfo &info : hostileModes()) {
        if (info.name == name)
            return info.mode;
    }
    return std::nullopt;
}

QString hostileModeName(HostileMode mode)
{
    for (const HostileModeInfo &info : hostileModes()) {
        if (info.mode == mode)
            return info.name;
    }
    return QStringLiteral("none");
}

bool hostileModeAppliesEffect(HostileMode mode)
{
    for (const HostileModeInfo &info : hostileModes()) {
        if (info.mode == mode)
            return info.appliesEffect;
    }
    return false;
}

void writeHostileAnswer(QTcpSocket *socket, HostileMode mode, const QByteArray &authorization,
                        const QByteArray &acceptedBody)
{
    switch (mode) {
    case HostileMode::None:
        return;
    case HostileMode::HugeContentLength:
        // The connection stays open: a client that waits for the rest waits forever.
        socket->write("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 99999999999999\r\n\r\n{");
        return;
    case HostileMode::EndlessChunked:
        socket->write("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
        streamForever(socket, []() -> QByteArray { return QByteArray("4000\r\n") + QByteArray(0x4000, 'c') + QByteArray("\r\n"); });
        return;
    case HostileMode::EndlessBody:
        socket->write("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n");
        streamForever(socket, []() -> QByteArray { return QByteArray(16 * 1024, 'b'); });
        return;
    case HostileMode::EndlessHeaders:
        socket->write("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n");
        streamForever(socket, [n = 0]() mutable -> QByteArray {
            return QByteArray("X-Filler-") + QByteArray::number(++n) + QByteArray(": ") + QByteArray(2000, 'h')
                   + QByteArray("\r\n");
        });
        return;
    case HostileMode::EchoAuthorization: {
        // A debugging error page that shows the request it got, credentials and all.
        const QByteArray body = R"({"error":"upstream failed for request with Authorization: )" + authorization
                                + R"(","request_id":")" + authorization + R"("})";
        socket->write("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nX-Request-Id: "
                      + authorization + "\r\nContent-Length: " + QByteArray::number(body.size()) + "\r\n\r\n" + body);
        return;
    }
    case HostileMode::HugeRetryAfter: {
        const QByteArray body = R"({"error":"rate limited"})";
        socket->write("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 99999999999999999999999\r\nContent-Length: "
                      + QByteArray::number(body.size()) + "\r\n\r\n" + body);
        return;
    }
    case HostileMode::HostileRequestId: {
        // Starts as a spreadsheet formula, clears an operator's terminal and retitles it,
        // reverses the text after it, and is far longer than any real id.
        const QByteArray id = "=HYPERLINK(\"http://evil.example\",\"x\")\x1b[2J\x1b]0;owned\x07\xe2\x80\xae"
                              + QByteArray(8 * 1024, 'i');
        socket->write("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Request-Id: " + id
                      + "\r\nContent-Length: " + QByteArray::number(acceptedBody.size()) + "\r\n\r\n" + acceptedBody);
        return;
    }
    }
}

} // namespace once
