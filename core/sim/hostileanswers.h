#pragma once

#include <QByteArray>
#include <QLatin1String>
#include <QList>
#include <QString>

#include <optional>

class QTcpSocket;

namespace once {

// The ways the partner simulator can misbehave on purpose, so that a worker can be shown
// to survive a partner that is broken or hostile: answers that would size a buffer from
// a header, never end, echo the request's credentials, or carry text meant for someone's
// terminal or spreadsheet.
enum class HostileMode {
    None,
    HugeContentLength, // applies the effect, then announces 99999999999999 bytes and sends one
    EndlessChunked,    // applies the effect, then a chunked body that never ends
    EndlessBody,       // applies the effect, then a body delimited by a close that never comes
    EndlessHeaders,    // applies the effect, then header lines that never end
    EchoAuthorization, // no effect: a 503 whose body and X-Request-Id echo the Authorization header
    HugeRetryAfter,    // no effect: a 429 with Retry-After beyond 64-bit range
    HostileRequestId,  // applies the effect, then a 200 whose request id is 8 KiB of formula and escapes
};

struct HostileModeInfo
{
    HostileMode mode;
    QLatin1String name; // as `once partner-sim --hostile NAME` takes it
    QLatin1String description;
    bool appliesEffect; // whether the partner acts before it misbehaves
};

// Every mode but None, in the order of the CLI's help.
const QList<HostileModeInfo> &hostileModes();
std::optional<HostileMode> hostileModeFromName(const QString &name);
QString hostileModeName(HostileMode mode);
bool hostileModeAppliesEffect(HostileMode mode);

// Writes the misbehaving answer to a request. authorization: the request's header as it
// came; acceptedBody: what a well-behaved answer would carry. The endless modes go on
// writing, paced by what the socket has flushed, until the client goes.
void writeHostileAnswer(QTcpSocket *socket, HostileMode mode, const QByteArray &authorization,
                        const QByteArray &acceptedBody);

} // namespace once
