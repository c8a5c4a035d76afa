#pragma once

namespace once {

class PartnerProfile;

// Twilio Messaging (twilio.com/docs/messaging/api/message-resource#create-a-message-resource):
// POST {url}/2010-04-01/Accounts/{account}/Messages.json, form-encoded To, From, Body,
// HTTP basic auth with the Account SID and auth token. No idempotency and no lookup by
// our key: an in-doubt SMS is held for an operator.
const PartnerProfile &twilioProfile();

} // namespace once
