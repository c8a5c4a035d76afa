#pragma once

namespace once {

class PartnerProfile;

// SendGrid's v3 Mail Send (twilio.com/docs/sendgrid/api-reference/mail-send): POST
// {url}/v3/mail/send with a bearer key, 202 with X-Message-Id; no idempotency. The send
// key travels in custom_args ("once_key"); with "activity_api": true (SendGrid's paid
// Email Activity add-on) an in-doubt send is looked up by it.
const PartnerProfile &sendgridProfile();

} // namespace once
