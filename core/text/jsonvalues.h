#pragma once

#include <QJsonValue>
#include <QString>

namespace once {

// Values as the JSON of the API, the exports and `--json` write them.
QString formatTime(qint64 msSinceEpoch); // RFC 3339 UTC with milliseconds, empty for 0
QJsonValue timeOrNull(qint64 msSinceEpoch); // formatTime, or null for 0
QJsonValue textOrNull(const QString &text); // null for empty text

} // namespace once
