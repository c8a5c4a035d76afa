#include "model/clock.h"

#include <QDateTime>

namespace once {

qint64 nowMs()
{
    return QDateTime::currentMSecsSinceEpoch();
}

} // namespace once
