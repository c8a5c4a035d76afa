#include "model/reminder.h"

#include "text/quotedtext.h"
#include "text/strictjson.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QStringDecoder>
#include <QUrl>

namespace once {

std::optional<Rfc3339Time> parseRfc3339(const QString &text, QString *why)
{
    // \A and \z, not ^ and $: "$" also matches before a final "\n", so "…Z\n" passed.
    // [0-9], not \d: only ASCII digits are RFC 3339's, and the fraction is copied into the
    // key as written.
    static const QRegularExpression pattern(QStringLiteral(
        R"(\A([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?(?:([Zz])|([+-])([0-9]{2}):([0-9]{2}))\z)"));
    const auto refuse = [why](const QString &reason) -> std::optional<Rfc3339Time> {
        if (why)
            *why = reason;
        return std::nullopt;
    };
    const QString notRfc3339 = QStringLiteral("is not an RFC 3339 time with an offset");
    const auto m = pattern.match(text);
    if (!m.hasMatch())
        return refuse(notRfc3339);
    // Views, not captured() copies: every reminder published or leased comes through here.
    const auto number = [&m](int group) { return m.capturedView(group).toInt(); };
    // RFC 3339's year 0000 is the year before 0001, which Qt, having no year 0, calls -1.
    const int year = number(1);
    const QDate date(year == 0 ? -1 : year, number(2), number(3));
    // QTime has no second 60: a leap second is read as :59 and checked below.
    const bool leapSecond = number(6) == 60;
    const QTime time(number(4), number(5), leapSecond ? 59 : number(6));
    if (!date.isValid() || !time.isValid())
        return refuse(notRfc3339);
    int offsetSeconds = 0;
    if (m.capturedView(8).isEmpty()) {
        const int hours = number(10);
        const int minutes = number(11);
        if (hours > 23 || minutes > 59)
            return refuse(notRfc3339);
        offsetSeconds = (hours * 60 + minutes) * 60 * (m.capturedView(9) == QLatin1String("-") ? -1 : 1);
    }
    const QDateTime local(date, time, Qt::OffsetFromUTC, offsetSeconds);
    const QDateTime whole = local.toUTC();
    // The key writes the year as four digits: year 0 would be "-0001" and year 10000 five
    // digits, neither of them RFC 3339.
    if (whole.date().year() < 1 || whole.date().year() > 9999)
        return refuse(QStringLiteral("is outside the years 0001 to 9999 in UTC"));
    // Leap seconds are inserted at the end of a UTC month (RFC 3339 section 5.7).
    if (leapSecond && (whole.time() != QTime(23, 59, 59) || whole.date().day() != whole.date().daysInMonth()))
        return refuse(QStringLiteral("has second 60, which is a leap second only at 23:59:60 UTC on a month's last day"));
    QString fraction = m.captured(7);
    while (fraction.endsWith(QLatin1Char('0')))
        fraction.chop(1);
    QDateTime utc = whole;
    if (leapSecond)
        utc = utc.addMSecs(999);
    else if (!fraction.isEmpty())
        utc = utc.addMSecs(fraction.left(3).leftJustified(3, QLatin1Char('0')).toInt());
    // Written digit by digit: QDateTime::toString with a format goes through the locale
    // and the calendar, and cost more than the rest of this function.
    QString canonical;
    canonical.reserve(32);
    const auto digits = [&canonical](int value, int width, char after) {
        char text[5] = {};
        for (int i = width - 1; i >= 0; --i, value /= 10)
            text[i] = char('0' + value % 10);
        canonical += QLatin1StringView(text, width);
        if (after)
            canonical += QLatin1Char(after);
    };
    digits(whole.date().year(), 4, '-');
    digits(whole.date().month(), 2, '-');
    digits(whole.date().day(), 2, 'T');
    digits(whole.time().hour(), 2, ':');
    digits(whole.time().minute(), 2, ':');
    digits(whole.time().second(), 2, 0);
    if (leapSecond)
        canonical.replace(canonical.size() - 2, 2, QStringLiteral("60"));
    if (!fraction.isEmpty())
        canonical += QLatin1Char('.') + fraction;
    canonical += QLatin1Char('Z');
    return Rfc3339Time{utc, canonical};
}

namespace {

QByteArray sendKeyOf(const QString &userId, const QString &reminderId, const Rfc3339Time &time)
{
    // Qt writes '?' for an unpaired surrogate when it converts to UTF-8, so two ids that
    // differ only there (or one and a literal '?') would share a key.
    if (!userId.isValidUtf16() || !reminderId.isValidUtf16())
        return {};
    // Percent-encoding leaves only unreserved characters, so ':' only ever separates.
    return QUrl::toPercentEncoding(userId) + ':' + QUrl::toPercentEncoding(reminderId) + ':'
           + time.canonical.toLatin1();
}

} // namespace

QByteArray makeSendKey(const QString &userId, const QString &reminderId, const QString &scheduledAt)
{
    const auto time = parseRfc3339(scheduledAt);
    if (!time)
        return {};
    return sendKeyOf(userId, reminderId, *time);
}

std::optional<SendKeyParts> parseSendKey(const QByteArray &key)
{
    const qsizetype first = key.indexOf(':');
    const qsizetype second = first < 0 ? -1 : key.indexOf(':', first + 1);
    if (second < 0)
        return std::nullopt;
    // Only the one spelling makeSendKey writes (upper-case hex, unreserved characters
    // left as they are, UTF-8): decoding and encoding again must give the same bytes.
    const auto decodeId = [](const QByteArray &encoded) -> std::optional<QString> {
        // Not QString::fromUtf8, which drops a byte order mark at the start: an id may
        // begin with U+FEFF like with any other character.
        QStringDecoder utf8(QStringDecoder::Utf8, QStringDecoder::Flag::ConvertInitialBom);
        const QString text = utf8(QByteArray::fromPercentEncoding(encoded));
        if (QUrl::toPercentEncoding(text) != encoded)
            return std::nullopt;
        return text;
    };
    const auto userId = decodeId(key.left(first));
    const auto reminderId = decodeId(key.mid(first + 1, second - first - 1));
    const QString canonicalTime = QString::fromLatin1(key.mid(second + 1));
    const auto time = parseRfc3339(canonicalTime);
    if (!userId || !reminderId || !time || time->canonical != canonicalTime)
        return std::nullopt;
    return SendKeyParts{*userId, *reminderId, canonicalTime};
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

ReminderParseResult refused(const QString &error)
{
    return {std::nullopt, error};
}

} // namespace

ReminderParseResult parseReminder(const QByteArray &line)
{
    // The limit is the message's: a line ending after it does not count.
    qsizetype size = line.size();
    if (line.endsWith('\n'))
        size -= line.endsWith("\r\n") ? 2 : 1;
    if (size > MaxMessageBytes)
        return refused(QStringLiteral("message is %1 bytes, over the 256 KiB limit (%2 bytes)")
                           .arg(QString::number(size), QString::number(MaxMessageBytes)));
    if (const QString problem = strictJsonProblem(line); !problem.isEmpty())
        return refused(problem);
    QJsonParseError parseError;
    const auto document = QJsonDocument::fromJson(line, &parseError);
    if (parseError.error != QJsonParseError::NoError)
        return refused(QStringLiteral("malformed JSON at offset %1: %2")
                           .arg(QString::number(parseError.offset), parseError.errorString()));
    if (!document.isObject())
        return refused(QStringLiteral("a reminder must be a JSON object"));
    const QJsonObject object = document.object();

    QString error;
    const auto userId = requiredString(object, QLatin1String("user_id"), &error);
    const auto reminderId = userId ? requiredString(object, QLatin1String("reminder_id"), &error) : std::nullopt;
    const auto scheduledAt = reminderId ? requiredString(object, QLatin1String("scheduled_at"), &error) : std::nullopt;
    const auto destination = scheduledAt ? requiredString(object, QLatin1String("destination"), &error) : std::nullopt;
    const auto body = destination ? requiredString(object, QLatin1String("body"), &error) : std::nullopt;
    if (!body)
        return refused(error);
    for (const auto field : {QLatin1String("channel"), QLatin1String("event_id")}) {
        const auto value = object.value(field);
        if (!value.isUndefined() && !value.isNull() && !value.isString())
            return refused(QStringLiteral("field \"%1\" must be a string").arg(field));
    }
    const QString channel = object.value(QLatin1String("channel")).toString();
    const QString eventId = object.value(QLatin1String("event_id")).toString();

    for (const auto &[field, id] : {std::pair{QLatin1String("user_id"), *userId}, {QLatin1String("reminder_id"), *reminderId}}) {
        if (const qsizetype bytes = id.toUtf8().size(); bytes > MaxIdBytes)
            return refused(QStringLiteral("field \"%1\" is %2 bytes of UTF-8, over the limit of %3")
                               .arg(field, QString::number(bytes), QString::number(MaxIdBytes)));
    }
    if (scheduledAt->size() > MaxScheduledAtChars)
        return refused(QStringLiteral("field \"scheduled_at\" is %1 characters, over the limit of %2")
                           .arg(QString::number(scheduledAt->size()), QString::number(MaxScheduledAtChars)));
    // These fields are kept in text columns, and PostgreSQL's text cannot hold U+0000: one
    // such message would fail a whole batch of claims, again at every try.
    for (const auto &[field, text] : {std::pair{QLatin1String("user_id"), *userId},
                                      {QLatin1String("reminder_id"), *reminderId},
                                      {QLatin1String("destination"), *destination},
                                      {QLatin1String("channel"), channel},
                                      {QLatin1String("event_id"), eventId}}) {
        if (text.contains(QChar(0)))
            return refused(QStringLiteral("field \"%1\" contains U+0000, which a store cannot keep").arg(field));
    }
    QString why;
    const auto time = parseRfc3339(*scheduledAt, &why);
    if (!time)
        return refused(QStringLiteral("scheduled_at %1 %2").arg(quotedForError(*scheduledAt), why));

    Reminder reminder;
    reminder.userId = *userId;
    reminder.reminderId = *reminderId;
    reminder.scheduledAt = time->utc;
    reminder.destination = *destination;
    reminder.channel = channel;
    reminder.eventId = eventId;
    reminder.sendKey = sendKeyOf(*userId, *reminderId, *time);
    reminder.payload = line.trimmed();
    return {std::move(reminder), {}};
}

} // namespace once
