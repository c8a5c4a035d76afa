#pragma once

namespace once {

class PartnerProfile;

// Postmark's e-mail API (postmarkapp.com/developer/user-guide/sending-with-api,
// postmarkapp.com/developer/api/messages-api): POST {url}/email with
// X-Postmark-Server-Token; no idempotency, so the send key travels in Metadata
// ("once_key") and an in-doubt send is looked up by it in the outbound message search.
const PartnerProfile &postmarkProfile();

} // namespace once
