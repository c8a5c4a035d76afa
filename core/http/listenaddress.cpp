#include "http/listenaddress.h"

namespace once {

std::optional<ListenAddress> ListenAddress::parse(const QString &text, QString *error)
{
    const qsizetype colon = text.lastIndexOf(QLatin1Char(':'));
    QString host = colon > 0 ? text.left(colon) : QString();
    const QString portText = colon > 0 ? text.mid(colon + 1) : QString();
    if (host.startsWith(QLatin1Char('[')) && host.endsWith(QLatin1Char(']')))
        host = host.mid(1, host.size() - 2);
    bool isNumber = false;
    const uint port = portText.toUInt(&isNumber);
    if (host.isEmpty() || !isNumber || port > 65535) {
        *error = QStringLiteral("expected HOST:PORT (e.g. 127.0.0.1:9464), got \"%1\"").arg(text);
        return std::nullopt;
    }
    ListenAddress address;
    address.port = quint16(port);
    if (host == QLatin1String("localhost"))
        address.host = QHostAddress(QHostAddress::LocalHost);
    else if (!address.host.setAddress(host)) {
        *error = QStringLiteral("\"%1\" is not an IP address (or localhost)").arg(host);
        return std::nullopt;
    }
    return address;
}

} // namespace once
