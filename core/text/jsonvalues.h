#pragma once

#include <QByteArray>
#include <QJsonValue>
#include <QString>

namespace once {

// Values as the JSON of the API, the exports and `--json` write them.
QString formatTime(qint64 msSinceEpoch); // RFC 3339 UTC with milliseconds, empty for 0
QJsonValue timeOrNull(qint64 msSinceEpoch); // formatTime, or null for 0
QJsonValue textOrNull(const QString &text); // null for empty text
// A string as compact JSON writes it, quotes included ("\"alice\""), or without the closing
// quote (closed false) for a prefix: how an id sits in a message's payload, so that a
// search finds "alice" there and not "malice".
QByteArray jsonString(const QString &text, bool closed = true);

} // namespace once
