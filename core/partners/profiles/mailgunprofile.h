#pragma once

namespace once {

class PartnerProfile;

// Mailgun's messages API (documentation.mailgun.com, "Send an email"): POST
// {url}/v3/{domain}/messages, form-encoded from, to, subject, text and the send key as the
// custom variable v:once-send-key, HTTP basic auth api:KEY. No idempotency and no lookup
// by our key here: an in-doubt send is held for an operator, and its delivery events
// (user-variables carry the key) can settle it.
const PartnerProfile &mailgunProfile();

} // namespace once
