#pragma once

#include <QtGlobal>

namespace once {

// The wall clock every time the store, the queues and the API record is read from:
// milliseconds since the epoch, UTC.
qint64 nowMs();

} // namespace once
