#pragma once

#include "operator/eventverdict.h"

#include <QColor>
#include <QIcon>
#include <QString>

namespace once::ui {

// The plain-language reading of an event's history, shared by the timeline, its export
// and the events table, so that a support agent sees the same words everywhere.

// One history row in a sentence, e.g. "Sent: HTTP 200 in 12 ms (req_123), recorded and acked".
QString attemptSummary(const once::Attempt &attempt);

// What a ledger state means, for tooltips.
QString stateDescription(const QString &state);
// A mid-tone colour per state that stays legible on light and dark palettes alike.
QColor stateColor(const QString &state);
// A coloured badge with a glyph per state: the glyph carries the meaning for readers who
// cannot tell the colours apart.
QIcon stateIcon(const QString &state);

} // namespace once::ui
