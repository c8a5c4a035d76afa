#include "text/quantities.h"

#include <QCoreApplication>
#include <QLocale>
#include <QRegularExpression>

namespace once {

QString formatDuration(qint64 ms)
{
    if (ms < 0)
        return QChar(0x2212) + formatDuration(-ms);
    const QLocale locale;
    constexpr qint64 Second = 1000;
    constexpr qint64 Minute = 60 * Second;
    constexpr qint64 Hour = 60 * Minute;
    constexpr qint64 Day = 24 * Hour;
    if (ms < Second)
        return QCoreApplication::translate("once::ui", "%1 ms").arg(locale.toString(ms));
    if (ms < Minute)
        return QCoreApplication::translate("once::ui", "%1 s").arg(locale.toString(ms / Second));
    if (ms < Hour)
        return QCoreApplication::translate("once::ui", "%1 min").arg(locale.toString(ms / Minute));
    // Up to two days in hours: "36 h" says more than "1 d" about a stuck queue.
    if (ms < 2 * Day)
        return QCoreApplication::translate("once::ui", "%1 h").arg(locale.toString(ms / Hour));
    return QCoreApplication::translate("once::ui", "%1 d").arg(locale.toString(ms / Day));
}

QString formatCount(qint64 count)
{
    QLocale locale;
    if (locale.language() == QLocale::C)
        locale = QLocale(QLocale::English, QLocale::UnitedStates);
    return locale.toString(count);
}

QString formatQuantity(qint64 count, const QString &singular, const QString &plural)
{
    return formatCount(count) + QLatin1Char(' ') + (count == 1 ? singular : plural);
}

std::optional<qint64> parseDurationSetting(const QString &text)
{
    static const QRegularExpression form(QStringLiteral("^([0-9]{1,7})(s|m|h|d)?$"));
    const auto match = form.match(text.trimmed());
    if (!match.hasMatch())
        return std::nullopt;
    constexpr qint64 Second = 1000;
    const QString unit = match.captured(2);
    const qint64 scale = unit == QLatin1String("m")   ? 60 * Second
                         : unit == QLatin1String("h") ? 3600 * Second
                         : unit == QLatin1String("d") ? 24 * 3600 * Second
                                                      : Second;
    return match.captured(1).toLongLong() * scale;
}

} // namespace once
