#pragma once

namespace once {

// Named crash points for tests. ONCE_FAILPOINT=<name> makes the process kill itself
// with SIGKILL when it reaches that point (after ONCE_FAILPOINT_SKIP passes, default 0),
// exactly as an OOM killer or a power cut would. Inert when the variable is unset.
// Names: after-consume, after-claim, after-send, after-record, before-ack, turn-start.
// With ONCE_FAILPOINT_SLEEP_MS=<ms> the process waits that long at every pass instead
// (a store or disk that has become slow), and goes on.
//
// On the embedded store a turn of the engine is one transaction (record, ack, lease,
// claim), so after-consume, after-record and before-ack all fire before that commit: a
// crash there rolls the whole turn back. after-claim fires after the commit and before
// any send; after-send when the partner has accepted and nothing is recorded yet.
void failpoint(const char *name);

} // namespace once
