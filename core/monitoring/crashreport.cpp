#include "monitoring/crashreport.h"

#include <csignal>
#include <cstring>
#include <execinfo.h>
#include <initializer_list>
#include <unistd.h>

namespace once {

namespace {

const char *programName = "once";

// Only async-signal-safe calls from here on: the heap may be what broke.
void writeText(const char *text)
{
    [[maybe_unused]] const auto written = ::write(STDERR_FILENO, text, std::strlen(text));
}

const char *signalName(int signal)
{
    switch (signal) {
    case SIGSEGV:
        return "SIGSEGV";
    case SIGBUS:
        return "SIGBUS";
    case SIGILL:
        return "SIGILL";
    case SIGFPE:
        return "SIGFPE";
    case SIGABRT:
        return "SIGABRT";
    default:
        return "a fatal signal";
    }
}

void onFatalSignal(int signal)
{
    writeText(programName);
    writeText(": crashed (");
    writeText(signalName(signal));
    writeText("); the stack of the thread that crashed:\n");
    void *frames[64];
    backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
    // SA_RESETHAND put the default action back: the signal, blocked while this handler
    // runs, kills the process as soon as it returns (a fault would also repeat itself).
    std::raise(signal);
}

} // namespace

void reportCrashesOnStderr(const char *program)
{
    programName = program;
    // backtrace() loads libgcc's unwinder at its first call, which allocates: load it
    // now, while the heap is sound.
    void *frame = nullptr;
    backtrace(&frame, 1);
    struct sigaction action = {};
    action.sa_handler = onFatalSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    for (const int signal : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT})
        sigaction(signal, &action, nullptr);
}

} // namespace once
