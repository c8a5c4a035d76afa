#pragma once

#include <QString>

#include <optional>

namespace once::ui {

// Numbers as an operator reads them at a glance, in the user's locale.

// One unit, rounded down: "350 ms", "12 s", "4 min", "2 h", "3 d"; negative values get a
// minus sign (an event applied before its scheduled time).
QString formatDuration(qint64 ms);
// "1,234": grouped digits, even under the C locale, which would print "1234".
QString formatCount(qint64 count);
// A time for people, in the zone the console shows (DisplayTime: local or UTC):
// "2026-11-30 02:03:12" (".404" with withMs); empty for 0, "never".
QString formatDisplayTime(qint64 msSinceEpoch, bool withMs = false);
// A time an operator typed, read in the zone the console shows (formatDisplayTime's
// forms, and shorter ones): "2026-11-30 02:03:12" is that second, "2026-11-30 02:03" that
// minute, "2026-11-30" that day, "02:03" that minute today; a time with its offset
// ("2026-11-30T02:03:12Z", as tooltips and exports write them) is that moment wherever
// shown. The first and the last millisecond of what was typed, so that a range "from"
// and "to" the same minute takes the whole minute; nullopt and a one-line error else.
struct TypedTime
{
    qint64 firstMs = 0;
    qint64 lastMs = 0;
};
std::optional<TypedTime> parseDisplayTime(const QString &text, QString *error);
// "1 dead letter", "1,234 dead letters": English plurals by hand, since without a loaded
// translation tr()'s %n leaves "(s)" in the text.
QString formatQuantity(qint64 count, const QString &singular, const QString &plural);
// "2.5 %" below 10 %, "42 %" above; "0 %" for nothing.
QString formatPercent(double percent);

} // namespace once::ui
