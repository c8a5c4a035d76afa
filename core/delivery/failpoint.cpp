#include "delivery/failpoint.h"

#include <QByteArray>
#include <QtGlobal>

#include <atomic>
#include <csignal>

namespace once {

void failpoint(const char *name)
{
    static const QByteArray armed = qgetenv("ONCE_FAILPOINT");
    if (armed.isEmpty() || armed != name)
        return;
    static std::atomic<int> passesLeft = qEnvironmentVariableIntValue("ONCE_FAILPOINT_SKIP");
    if (passesLeft.fetch_sub(1) > 0)
        return;
    std::raise(SIGKILL);
}

} // namespace once
