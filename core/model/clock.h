#pragma once

#include <QtGlobal>

namespace once {

// The wall clock every time the store, the queues and the API record is read from:
// milliseconds since the epoch, UTC.
qint64 nowMs();

// A duration in whole seconds, rounded up (a delay is never cut short), 0 for none.
int wholeSecondsUp(qint64 ms);

} // namespace once
