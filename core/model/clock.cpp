#include "model/clock.h"

#include <QDateTime>

#include <algorithm>
#include <limits>

namespace once {

qint64 nowMs()
{
    return QDateTime::currentMSecsSinceEpoch();
}

int wholeSecondsUp(qint64 ms)
{
    return int(std::min<qint64>((std::max<qint64>(ms, 0) + 999) / 1000, std::numeric_limits<int>::max()));
}

} // namespace once
