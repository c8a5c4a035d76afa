#include "model/reminder.h"

#include "text/quotedtext.h"
#include "text/strictjson.h"
#include "text/utf8text.h"

#include <QUrl>

#include <algorithm>
#include <array>

namespace once {

namespace {

// The fields of RFC 3339's date-time as written, before any check of their values.
struct Rfc3339Fields
{
    int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
    QStringView fraction; // the digits after '.', as written
    bool utc = false;     // "Z" rather than an offset
    bool behindUtc = false;
    int offsetHours = 0, offsetMinutes = 0;
};

// date-time = full-date ("T" / "t" / " ") full-time, with time-offset = "Z" / "z" /
// ("+" / "-") 2DIGIT ":" 2DIGIT, and nothing before or after it. Only ASCII digits are
// RFC 3339's, and the fraction is copied into the key as written. By hand rather than
// with a regular expression, which cost a fifth of parsing a whole reminder.
std::optional<Rfc3339Fields> scanRfc3339(QStringView text)
{
    qsizetype at = 0;
    const auto number = [&text, &at](int width, int *value) {
        if (text.size() - at < width)
            return false;
        *value = 0;
        for (const qsizetype end = at + width; at < end; ++at) {
            const char16_t c = text[at].unicode();
            if (c < u'0' || c > u'9')
                return false;
            *value = *value * 10 + (c - u'0');
        }
        return true;
    };
    const auto next = [&text, &at](std::u16string_view oneOf) {
        if (at == text.size() || oneOf.find(text[at].unicode()) == std::u16string_view::npos)
            return char16_t(0);
        return text[at++].unicode();
    };
    Rfc3339Fields fields;
    if (!number(4, &fields.year) || !next(u"-") || !number(2, &fields.month) || !next(u"-") ||
        !number(2, &fields.day) || !next(u"Tt ") || !number(2, &fields.hour) || !next(u":") ||
        !number(2, &fields.minute) || !next(u":") || !number(2, &fields.second))
        return std::nullopt;
    if (next(u".")) {
        const qsizetype first = at;
        while (at < text.size() && text[at] >= u'0' && text[at] <= u'9')
            ++at;
        if (at == first)
            return std::nullopt;
        fields.fraction = text.sliced(first, at - first);
    }
    if (next(u"Zz")) {
        fields.utc = true;
    } else if (const char16_t sign = next(u"+-")) {
        fields.behindUtc = sign == u'-';
        if (!number(2, &fields.offsetHours) || !next(u":") || !number(2, &fields.offsetMinutes))
            return std::nullopt;
    } else {
        return std::nullopt;
    }
    if (at != text.size())
        return std::nullopt;
    return fields;
}

// The whole milliseconds of a fraction of a second: its first three digits.
int millisecondsOf(QStringView fraction)
{
    int milliseconds = 0;
    for (qsizetype i = 0; i < 3; ++i)
        milliseconds = milliseconds * 10 + (i < fraction.size() ? fraction[i].unicode() - u'0' : 0);
    return milliseconds;
}

} // namespace

std::optional<Rfc3339Time> parseRfc3339(const QString &text, QString *why)
{
    const auto refuse = [why](const QString &reason) -> std::optional<Rfc3339Time> {
        if (why)
            *why = reason;
        return std::nullopt;
    };
    const QString notRfc3339 = QStringLiteral("is not an RFC 3339 time with an offset");
    const auto fields = scanRfc3339(text);
    if (!fields)
        return refuse(notRfc3339);
    // RFC 3339's year 0000 is the year before 0001, which Qt, having no year 0, calls -1.
    const QDate date(fields->year == 0 ? -1 : fields->year, fields->month, fields->day);
    // QTime has no second 60: a leap second is read as :59 and checked below.
    const bool leapSecond = fields->second == 60;
    const QTime time(fields->hour, fields->minute, leapSecond ? 59 : fields->second);
    if (!date.isValid() || !time.isValid())
        return refuse(notRfc3339);
    int offsetSeconds = 0;
    if (!fields->utc) {
        if (fields->offsetHours > 23 || fields->offsetMinutes > 59)
            return refuse(notRfc3339);
        offsetSeconds =
            (fields->offsetHours * 60 + fields->offsetMinutes) * 60 * (fields->behindUtc ? -1 : 1);
    }
    const QDateTime whole = QDateTime(date, time, Qt::UTC).addSecs(-offsetSeconds);
    const QDate utcDate = whole.date();
    const QTime utcTime = whole.time();
    // The key writes the year as four digits: year 0 would be "-0001" and year 10000 five
    // digits, neither of them RFC 3339.
    if (utcDate.year() < 1 || utcDate.year() > 9999)
        return refuse(QStringLiteral("is outside the years 0001 to 9999 in UTC"));
    // Leap seconds are inserted at the end of a UTC month (RFC 3339 section 5.7).
    if (leapSecond && (utcTime != QTime(23, 59, 59) || utcDate.day() != utcDate.daysInMonth()))
        return refuse(QStringLiteral("has second 60, which is a leap second only at 23:59:60 UTC on a month's last day"));
    QStringView fraction = fields->fraction;
    while (fraction.endsWith(u'0'))
        fraction.chop(1);
    QDateTime utc = whole;
    if (leapSecond)
        utc = utc.addMSecs(999);
    else if (!fraction.isEmpty())
        utc = utc.addMSecs(millisecondsOf(fraction));
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
    digits(utcDate.year(), 4, '-');
    digits(utcDate.month(), 2, '-');
    digits(utcDate.day(), 2, 'T');
    digits(utcTime.hour(), 2, ':');
    digits(utcTime.minute(), 2, ':');
    digits(utcTime.second(), 2, 0);
    if (leapSecond)
        canonical.replace(canonical.size() - 2, 2, QStringLiteral("60"));
    if (!fraction.isEmpty()) {
        canonical += QLatin1Char('.');
        canonical += fraction;
    }
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
        const QString text = textOfUtf8(QByteArray::fromPercentEncoding(encoded));
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
    enum Field
    {
        UserId,
        ReminderId,
        ScheduledAt,
        Destination,
        Body,
        Channel,
        EventId,
        ExpiresAt,
        FieldCount
    };
    std::array<JsonMember, FieldCount> fields{{{QLatin1StringView("user_id")},
                                               {QLatin1StringView("reminder_id")},
                                               {QLatin1StringView("scheduled_at")},
                                               {QLatin1StringView("destination")},
                                               {QLatin1StringView("body")},
                                               {QLatin1StringView("channel")},
                                               {QLatin1StringView("event_id")},
                                               {QLatin1StringView("expires_at")}}};
    bool isObject = false;
    if (const QString problem = readStrictJsonObject(line, fields, &isObject); !problem.isEmpty())
        return refused(problem);
    if (!isObject)
        return refused(QStringLiteral("a reminder must be a JSON object"));
    for (const Field required : {UserId, ReminderId, ScheduledAt, Destination, Body}) {
        const JsonMember &field = fields[required];
        if (field.kind == JsonMember::Kind::Absent || field.kind == JsonMember::Kind::Null)
            return refused(QStringLiteral("missing field \"%1\"").arg(field.name));
        if (field.kind != JsonMember::Kind::String || field.text.isEmpty())
            return refused(QStringLiteral("field \"%1\" must be a non-empty string").arg(field.name));
    }
    for (const Field optional : {Channel, EventId, ExpiresAt}) {
        const JsonMember &field = fields[optional];
        if (field.kind == JsonMember::Kind::Other)
            return refused(QStringLiteral("field \"%1\" must be a string").arg(field.name));
    }
    const QString &userId = fields[UserId].text;
    const QString &reminderId = fields[ReminderId].text;
    const QString &scheduledAt = fields[ScheduledAt].text;
    const QString &destination = fields[Destination].text;
    const QString &channel = fields[Channel].text;
    const QString &eventId = fields[EventId].text;
    const QString &expiresAt = fields[ExpiresAt].text;

    for (const auto &[field, id] :
         {std::pair{QLatin1String("user_id"), userId}, {QLatin1String("reminder_id"), reminderId}}) {
        if (const qsizetype bytes = id.toUtf8().size(); bytes > MaxIdBytes)
            return refused(QStringLiteral("field \"%1\" is %2 bytes of UTF-8, over the limit of %3")
                               .arg(field, QString::number(bytes), QString::number(MaxIdBytes)));
    }
    if (scheduledAt.size() > MaxScheduledAtChars)
        return refused(QStringLiteral("field \"scheduled_at\" is %1 characters, over the limit of %2")
                           .arg(QString::number(scheduledAt.size()), QString::number(MaxScheduledAtChars)));
    // These fields are kept in text columns, and PostgreSQL's text cannot hold U+0000: one
    // such message would fail a whole batch of claims, again at every try.
    for (const auto &[field, text] : {std::pair{QLatin1String("user_id"), userId},
                                      {QLatin1String("reminder_id"), reminderId},
                                      {QLatin1String("destination"), destination},
                                      {QLatin1String("channel"), channel},
                                      {QLatin1String("event_id"), eventId}}) {
        if (text.contains(QChar(0)))
            return refused(QStringLiteral("field \"%1\" contains U+0000, which a store cannot keep").arg(field));
    }
    QString why;
    const auto time = parseRfc3339(scheduledAt, &why);
    if (!time)
        return refused(QStringLiteral("scheduled_at %1 %2").arg(quotedForError(scheduledAt), why));
    // Checked like scheduled_at, and refused rather than ignored when it is not after it:
    // a reminder that could never be sent is a producer's bug, better told at once.
    std::optional<Rfc3339Time> expiry;
    if (fields[ExpiresAt].kind == JsonMember::Kind::String) {
        if (expiresAt.size() > MaxScheduledAtChars)
            return refused(QStringLiteral("field \"expires_at\" is %1 characters, over the limit of %2")
                               .arg(QString::number(expiresAt.size()), QString::number(MaxScheduledAtChars)));
        expiry = parseRfc3339(expiresAt, &why);
        if (!expiry)
            return refused(QStringLiteral("expires_at %1 %2").arg(quotedForError(expiresAt), why));
        if (expiry->utc < time->utc)
            return refused(QStringLiteral("expires_at %1 is before scheduled_at %2")
                               .arg(quotedForError(expiresAt), quotedForError(scheduledAt)));
    }

    Reminder reminder;
    reminder.userId = userId;
    reminder.reminderId = reminderId;
    reminder.scheduledAt = time->utc;
    reminder.destination = destination;
    reminder.channel = channel;
    reminder.eventId = eventId;
    reminder.sendKey = sendKeyOf(userId, reminderId, *time);
    reminder.payload = line.trimmed();
    if (expiry)
        reminder.expiresAt = expiry->utc;
    return {std::move(reminder), {}};
}

} // namespace once
