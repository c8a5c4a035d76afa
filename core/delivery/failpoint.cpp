#include "delivery/failpoint.h"

#include <QByteArray>
#include <QtGlobal>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

namespace once {

void failpoint(const char *name)
{
    static const QByteArray armed = qgetenv("ONCE_FAILPOINT");
    if (armed.isEmpty() || armed != name)
        return;
    static const int sleepMs = qEnvironmentVariableIntValue("ONCE_FAILPOINT_SLEEP_MS");
    if (sleepMs > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(sleepMs));
        return;
    }
    static std::atomic<int> passesLeft = qEnvironmentVariableIntValue("ONCE_FAILPOINT_SKIP");
    if (passesLeft.fetch_sub(1) > 0)
        return;
    std::raise(SIGKILL);
}

} // namespace once
