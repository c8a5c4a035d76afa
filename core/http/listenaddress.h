#pragma once

#include <QHostAddress>
#include <QString>

#include <optional>

namespace once {

// Where a server of once listens (once serve, a worker's metrics): HOST:PORT, [IPv6]:PORT
// or localhost:PORT; port 0 picks a free one.
struct ListenAddress
{
    QHostAddress host;
    quint16 port = 0;
    // A one-line error naming what is wrong when the text is not one.
    static std::optional<ListenAddress> parse(const QString &text, QString *error);
};

} // namespace once
