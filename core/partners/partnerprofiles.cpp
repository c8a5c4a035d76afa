// The registry of partner profiles: one line per profile in profiles/.
#include "partners/partnerprofile.h"

#include "partners/profiles/smtpprofile.h"
#include "partners/profiles/webhookprofile.h"

namespace once {

const QList<const PartnerProfile *> &partnerProfiles()
{
    static const QList<const PartnerProfile *> profiles{
        &webhookProfile(),
        &smtpProfile(),
    };
    return profiles;
}

} // namespace once
