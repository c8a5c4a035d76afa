#pragma once

namespace once {

class PartnerProfile;

// A Slack incoming webhook (docs.slack.dev/messaging/sending-messages-using-incoming-webhooks):
// POST {"text": ...} to the webhook's URL, whose path is the secret. No idempotency and
// no lookup: an in-doubt message is held for an operator.
const PartnerProfile &slackProfile();

} // namespace once
