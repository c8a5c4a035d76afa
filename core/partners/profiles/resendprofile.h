#pragma once

namespace once {

class PartnerProfile;

// Resend's e-mail API (resend.com/docs/api-reference/emails/send-email,
// resend.com/docs/dashboard/emails/idempotency-keys): POST {url}/emails with a bearer
// token; the send key as Idempotency-Key, which Resend keeps for 24 hours.
const PartnerProfile &resendProfile();

} // namespace once
