#pragma once

#include "text/quantities.h"

#include <QString>

#include <optional>

namespace once::ui {

// Numbers as an operator reads them at a glance, in the user's locale.

// Durations and counts as the core words them for everyone (text/quantities.h).
using once::formatCount;
using once::formatDuration;
using once::formatQuantity;
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
// "2.5 %" below 10 %, "42 %" above; "0 %" for nothing.
QString formatPercent(double percent);

} // namespace once::ui
