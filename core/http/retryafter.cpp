#include "http/retryafter.h"

#include <QDateTime>
#include <QLocale>
#include <QStringList>

#include <algorithm>

namespace once {

std::optional<qint64> parseRetryAfterMs(const QByteArray &value, qint64 nowMs)
{
    // A partner that asks for more than a day is treated as asking for a day; the
    // attempt budget and the operator take it from there.
    constexpr qint64 MaxMs = 24 * 3600 * 1000;
    const QByteArray trimmed = value.trimmed();
    if (trimmed.isEmpty())
        return std::nullopt;
    // delay-seconds = 1*DIGIT (RFC 9110 10.2.3), of any length: a number too large for
    // 64 bits asks for longer than the cap, not for nothing.
    if (std::all_of(trimmed.begin(), trimmed.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        bool fits = false;
        const qint64 seconds = trimmed.size() <= 18 ? trimmed.toLongLong(&fits) : 0;
        if (!fits || seconds > MaxMs / 1000)
            return MaxMs;
        return seconds * 1000;
    }
    // IMF-fixdate, e.g. "Wed, 21 Oct 2015 07:28:00 GMT", always in GMT: parse date and
    // time apart so that no local time zone (or its daylight-saving gap) is involved.
    const QStringList parts = QString::fromLatin1(trimmed).split(QLatin1Char(' '), Qt::SkipEmptyParts);
    if (parts.size() != 6 || parts.at(5) != QLatin1String("GMT"))
        return std::nullopt;
    const QDate date = QLocale::c().toDate(parts.mid(1, 3).join(QLatin1Char(' ')), QStringLiteral("dd MMM yyyy"));
    const QTime time = QTime::fromString(parts.at(4), QStringLiteral("HH:mm:ss"));
    if (!date.isValid() || !time.isValid())
        return std::nullopt;
    const qint64 at = QDateTime(date, time, Qt::UTC).toMSecsSinceEpoch();
    return std::clamp<qint64>(at - nowMs, 0, MaxMs);
}

} // namespace once
