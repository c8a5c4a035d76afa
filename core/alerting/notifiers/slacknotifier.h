#pragma once

#include "alerting/notifiers/notifier.h"

namespace once {

// A Slack-compatible incoming webhook (Slack, Mattermost, Discord's /slack endpoint):
// slack+https://hooks.slack.com/services/... POSTs {"text": ...} to https://.... The
// path is the token: never logged. slack+http:// is refused but to a loopback address
// (a local relay, the tests): a token in plain text must not cross a network.
std::unique_ptr<Notifier> createSlackNotifier(const QUrl &url, QString *error);

} // namespace once
