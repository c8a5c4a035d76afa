#pragma once

#include <QString>

#include <optional>

namespace once {

// Numbers as a person reads them at a glance, in the user's locale: the console, the
// alerts a watcher sends and the command line say them alike.

// One unit, rounded down: "350 ms", "12 s", "4 min", "2 h", "3 d"; negative values get a
// minus sign (an event applied before its scheduled time).
QString formatDuration(qint64 ms);
// "1,234": grouped digits, even under the C locale, which would print "1234".
QString formatCount(qint64 count);
// "1 dead letter", "1,234 dead letters": English plurals by hand, since without a loaded
// translation tr()'s %n leaves "(s)" in the text.
QString formatQuantity(qint64 count, const QString &singular, const QString &plural);

// A span as a person types it in a setting: "90s", "5m", "2h", "7d", or a bare number of
// seconds. Returns milliseconds, or nullopt for anything else (the caller words the
// error, since it knows the setting and its bounds).
std::optional<qint64> parseDurationSetting(const QString &text);

} // namespace once
