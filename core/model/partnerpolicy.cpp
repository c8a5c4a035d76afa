#include "model/partnerpolicy.h"

#include "text/jsonvalues.h"

namespace once {

QString keyHonouringName(KeyHonouring honouring)
{
    switch (honouring) {
    case KeyHonouring::Honoured:
        return QStringLiteral("yes");
    case KeyHonouring::Ignored:
        return QStringLiteral("no");
    case KeyHonouring::Unknown:
        break;
    }
    return QStringLiteral("unknown");
}

std::optional<KeyHonouring> keyHonouringFromName(const QString &name)
{
    if (name == QLatin1String("yes"))
        return KeyHonouring::Honoured;
    if (name == QLatin1String("no"))
        return KeyHonouring::Ignored;
    if (name == QLatin1String("unknown"))
        return KeyHonouring::Unknown;
    return std::nullopt;
}

QString partnerName(const QUrl &partnerUrl)
{
    return partnerUrl.toDisplayString(QUrl::RemoveUserInfo);
}

QJsonObject PartnerPolicy::toJson() const
{
    return QJsonObject{
        {QStringLiteral("partner"), partner},
        {QStringLiteral("honours_idempotency_key"), keyHonouringName(honoursKey)},
        {QStringLiteral("set_by"), setBy.isEmpty() ? QJsonValue(QJsonValue::Null) : QJsonValue(setBy)},
        {QStringLiteral("set_at"), setAtMs > 0 ? QJsonValue(formatTime(setAtMs)) : QJsonValue(QJsonValue::Null)},
        {QStringLiteral("last_seen_at"), lastSeenMs > 0 ? QJsonValue(formatTime(lastSeenMs)) : QJsonValue(QJsonValue::Null)},
        {QStringLiteral("profile"), profile.isEmpty() ? QJsonValue(QJsonValue::Null) : QJsonValue(profile)},
        {QStringLiteral("state"), state},
        {QStringLiteral("paused"), pause.has_value()},
        {QStringLiteral("paused_by"), pause ? QJsonValue(pause->by) : QJsonValue(QJsonValue::Null)},
        {QStringLiteral("paused_at"), pause ? QJsonValue(formatTime(pause->atMs)) : QJsonValue(QJsonValue::Null)},
        {QStringLiteral("pause_reason"), pause && !pause->reason.isEmpty() ? QJsonValue(pause->reason) : QJsonValue(QJsonValue::Null)},
    };
}

QString PartnerPause::describe() const
{
    QString text = QStringLiteral("paused (by %1 at %2").arg(by, formatTime(atMs));
    if (!reason.isEmpty())
        text += QStringLiteral(": ") + reason;
    return text + QLatin1Char(')');
}

} // namespace once
