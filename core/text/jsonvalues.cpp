#include "text/jsonvalues.h"

#include <QDateTime>

namespace once {

QString formatTime(qint64 msSinceEpoch)
{
    if (msSinceEpoch <= 0)
        return {};
    return QDateTime::fromMSecsSinceEpoch(msSinceEpoch, Qt::UTC).toString(Qt::ISODateWithMs);
}

QJsonValue timeOrNull(qint64 ms)
{
    return ms > 0 ? QJsonValue(formatTime(ms)) : QJsonValue(QJsonValue::Null);
}

QJsonValue textOrNull(const QString &text)
{
    return text.isEmpty() ? QJsonValue(QJsonValue::Null) : QJsonValue(text);
}

} // namespace once
