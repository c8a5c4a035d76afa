#include "text/jsonvalues.h"

#include <QDateTime>
#include <QJsonArray>
#include <QJsonDocument>

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

QByteArray jsonString(const QString &text, bool closed)
{
    QByteArray quoted = QJsonDocument(QJsonArray{text}).toJson(QJsonDocument::Compact);
    quoted = quoted.mid(1, quoted.size() - 2); // ["..."] -> "..."
    if (!closed)
        quoted.chop(1);
    return quoted;
}

} // namespace once
