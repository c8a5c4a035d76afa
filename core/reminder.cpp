#include "reminder.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QUrl>

namespace once {

std::optional<Rfc3339Time> parseRfc3339(const QString &text)
{
    static const QRegularExpression pattern(QStringLiteral(
        R"(^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$)"));
    const auto m = pattern.match(text);
    if (!m.hasMatch())
        return std::nullopt;
    const QDate date(m.captured(1).toInt(), m.captured(2).toInt(), m.captured(3).toInt());
    const QTime time(m.captured(4).toInt(), m.captured(5).toInt(), m.captured(6).toInt());
    if (!date.isValid() || !time.isValid())
        return std::nullopt;
    int offsetSeconds = 0;
    if (m.captured(8).isEmpty()) {
        const int hours = m.captured(10).toInt();
        const int minutes = m.captured(11).toInt();
        if (hours > 23 || minutes > 59)
            return std::nullopt;
        offsetSeconds = (hours * 60 + minutes) * 60 * (m.captured(9) == QLatin1String("-") ? -1 : 1);
    }
    QString fraction = m.captured(7);
    while (fraction.endsWith(QLatin1Char('0')))
        fraction.chop(1);
    const QDateTime local(date, time, Qt::OffsetFromUTC, offsetSeconds);
    QDateTime utc = local.toUTC();
    if (!fraction.isEmpty())
        utc = utc.addMSecs(fraction.left(3).leftJustified(3, QLatin1Char('0')).toInt());
    QString canonical = local.toUTC().toString(QStringLiteral("yyyy-MM-ddTHH:mm:ss"));
    if (!fraction.isEmpty())
        canonical += QLatin1Char('.') + fraction;
    canonical += QLatin1Char('Z');
    return Rfc3339Time{utc, canonical};
}

QByteArray makeSendKey(const QString &userId, const QString &reminderId, const QString &scheduledAt)
{
    const auto time = parseRfc3339(scheduledAt);
    if (!time)
        return {};
    // Percent-encoding leaves only unreserved characters, so ':' only ever separates.
    return QUrl::toPercentEncoding(userId) + ':' + QUrl::toPercentEncoding(reminderId) + ':'
           + time->canonical.toLatin1();
}

namespace {

std::optional<QString> requiredString(const QJsonObject &object, QLatin1String field, QString *error)
{
    const auto value = object.value(field);
    if (value.isUndefined() || value.isNull()) {
        *error = QStringLiteral("missing field \"%1\"").arg(field);
        return std::nullopt;
    }
    if (!value.isString() || value.toString().isEmpty()) {
        *error = QStringLiteral("field \"%1\" must be a non-empty string").arg(field);
        return std::nullopt;
    }
    return value.toString();
}

} // namespace

ReminderParseResult parseReminder(const QByteArray &line)
{
    if (line.size() > MaxMessageBytes)
        return {std::nullopt, QStringLiteral("message is %1 KiB, over the 256 KiB limit").arg(line.size() / 1024)};
    QJsonParseError parseError;
    const auto document = QJsonDocument::fromJson(line, &parseError);
    if (parseError.error != QJsonParseError::NoError)
        return {std::nullopt,
                QStringLiteral("malformed JSON at offset %1: %2").arg(parseError.offset).arg(parseError.errorString())};
    if (!document.isObject())
        return {std::nullopt, QStringLiteral("a reminder must be a JSON object")};
    const QJsonObject object = document.object();

    QString error;
    Reminder reminder;
    const auto userId = requiredString(object, QLatin1String("user_id"), &error);
    const auto reminderId = userId ? requiredString(object, QLatin1String("reminder_id"), &error) : std::nullopt;
    const auto scheduledAt = reminderId ? requiredString(object, QLatin1String("scheduled_at"), &error) : std::nullopt;
    const auto destination = scheduledAt ? requiredString(object, QLatin1String("destination"), &error) : std::nullopt;
    const auto body = destination ? requiredString(object, QLatin1String("body"), &error) : std::nullopt;
    if (!body)
        return {std::nullopt, error};
    for (const auto field : {QLatin1String("channel"), QLatin1String("event_id")}) {
        const auto value = object.value(field);
        if (!value.isUndefined() && !value.isNull() && !value.isString())
            return {std::nullopt, QStringLiteral("field \"%1\" must be a string").arg(field)};
    }
    const auto time = parseRfc3339(*scheduledAt);
    if (!time)
        return {std::nullopt,
                QStringLiteral("scheduled_at \"%1\" is not an RFC 3339 time with an offset").arg(scheduledAt->left(64))};

    reminder.userId = *userId;
    reminder.reminderId = *reminderId;
    reminder.scheduledAt = time->utc;
    reminder.destination = *destination;
    reminder.channel = object.value(QLatin1String("channel")).toString();
    reminder.eventId = object.value(QLatin1String("event_id")).toString();
    reminder.sendKey = makeSendKey(*userId, *reminderId, *scheduledAt);
    reminder.payload = line.trimmed();
    return {std::move(reminder), {}};
}

} // namespace once
