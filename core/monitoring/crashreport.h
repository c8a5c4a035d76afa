#pragma once

namespace once {

// Makes a crash say where it happened. On a fatal signal (a bad access, an illegal
// instruction, or abort() from a heap that glibc found corrupted) the process writes
// "<program>: crashed (SIGSEGV)" and the crashing thread's stack to stderr, which is the
// journal under systemd and the failure text of a test, then dies of the same signal: the
// exit status, a core dump and a supervisor's restart see the crash as it was.
//
// Call once, early in main(). program must stay valid for the life of the process.
void reportCrashesOnStderr(const char *program);

} // namespace once
