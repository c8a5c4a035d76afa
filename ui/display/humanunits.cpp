#include "display/humanunits.h"

#include "display/displaytime.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QLocale>
#include <QRegularExpression>

namespace once::ui {

QString formatDisplayTime(qint64 msSinceEpoch, bool withMs)
{
    if (msSinceEpoch <= 0)
        return {};
    const QDateTime at = QDateTime::fromMSecsSinceEpoch(msSinceEpoch, Qt::UTC);
    return (DisplayTime::instance().utc() ? at : at.toLocalTime())
        .toString(withMs ? QStringLiteral("yyyy-MM-dd HH:mm:ss.zzz") : QStringLiteral("yyyy-MM-dd HH:mm:ss"));
}

std::optional<TypedTime> parseDisplayTime(const QString &typed, QString *error)
{
    const QString text = typed.trimmed();
    const bool utc = DisplayTime::instance().utc();
    const auto at = [utc](const QDate &date, const QTime &time) {
        return QDateTime(date, time, utc ? Qt::UTC : Qt::LocalTime).toMSecsSinceEpoch();
    };
    struct Form
    {
        const char *format;
        qint64 spanMs;
    };
    static constexpr Form dated[] = {{"yyyy-MM-dd HH:mm:ss", 1000}, {"yyyy-MM-ddTHH:mm:ss", 1000},
                                     {"yyyy-MM-dd HH:mm", 60000},   {"yyyy-MM-ddTHH:mm", 60000},
                                     {"yyyy-MM-dd H:mm:ss", 1000},  {"yyyy-MM-dd H:mm", 60000}};
    for (const Form &form : dated) {
        const QDateTime parsed = QDateTime::fromString(text, QLatin1String(form.format));
        if (parsed.isValid()) {
            const qint64 first = at(parsed.date(), parsed.time());
            return TypedTime{first, first + form.spanMs - 1};
        }
    }
    static constexpr Form timed[] = {
        {"HH:mm:ss", 1000}, {"HH:mm", 60000}, {"H:mm:ss", 1000}, {"H:mm", 60000}};
    for (const Form &form : timed) {
        const QTime parsed = QTime::fromString(text, QLatin1String(form.format));
        if (parsed.isValid()) {
            const QDate today = utc ? QDateTime::currentDateTimeUtc().date() : QDate::currentDate();
            const qint64 first = at(today, parsed);
            return TypedTime{first, first + form.spanMs - 1};
        }
    }
    if (const QDate day = QDate::fromString(text, QStringLiteral("yyyy-MM-dd")); day.isValid())
        return TypedTime{at(day, QTime(0, 0)), at(day.addDays(1), QTime(0, 0)) - 1};
    // An offset says its own zone.
    static const QRegularExpression withOffset(QStringLiteral("T.*(Z|[+-]\\d\\d:\\d\\d)$"));
    if (withOffset.match(text).hasMatch()) {
        const QDateTime parsed = QDateTime::fromString(text, Qt::ISODateWithMs);
        if (parsed.isValid()) {
            const qint64 first = parsed.toMSecsSinceEpoch();
            return TypedTime{first, first + (parsed.time().msec() != 0 ? 0 : 999)};
        }
    }
    *error = QCoreApplication::translate("once::ui", "“%1” is not a time: type it as 2026-12-06 09:30, "
                                                     "2026-12-06 09:30:15, 2026-12-06 or 09:30 (%2)")
                 .arg(text.left(40), DisplayTime::instance().zoneLabel());
    return std::nullopt;
}

QString formatPercent(double percent)
{
    const QLocale locale;
    if (percent <= 0.0)
        return QCoreApplication::translate("once::ui", "%1 %").arg(locale.toString(0));
    // One decimal while small, so 0.4 % does not round to a reassuring 0 %.
    const int decimals = percent < 10.0 ? 1 : 0;
    return QCoreApplication::translate("once::ui", "%1 %").arg(locale.toString(percent, 'f', decimals));
}

} // namespace once::ui
