#pragma once

namespace once {

class PartnerProfile;

// A partner's own HTTP endpoint: the reminder's JSON as the producer sent it, the send
// key as Idempotency-Key, a bearer token; optionally a lookup URL ("lookup":
// "https://.../sent/{key}": 200 found, 404 not found).
const PartnerProfile &webhookProfile();

} // namespace once
