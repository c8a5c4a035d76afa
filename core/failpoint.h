#pragma once

namespace once {

// Named crash points for tests. ONCE_FAILPOINT=<name> makes the process kill itself
// with SIGKILL when it reaches that point (after ONCE_FAILPOINT_SKIP passes, default 0),
// exactly as an OOM killer or a power cut would. Inert when the variable is unset.
// Names: after-consume, after-claim, after-send, after-record, before-ack.
void failpoint(const char *name);

} // namespace once
