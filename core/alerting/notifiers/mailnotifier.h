#pragma once

#include "alerting/notifiers/notifier.h"

namespace once {

// A notification mailed with the channels' SMTP client (partners/smtpsender.h):
// smtp://[USER:PASSWORD@]HOST:PORT?from=ADDRESS&to=ADDRESS (STARTTLS where offered;
// &starttls=required insists), smtps:// for TLS from the start. One recipient per URL:
// give --notify again for another. The transaction runs on a thread of its own, bounded
// by a timeout, so that a server that does not answer holds up nothing but this queue.
std::unique_ptr<Notifier> createMailNotifier(const QUrl &url, QString *error);

} // namespace once
