// The registry of partner profiles: one line per profile in profiles/.
#include "partners/partnerprofile.h"

#include "partners/profiles/mailgunprofile.h"
#include "partners/profiles/postmarkprofile.h"
#include "partners/profiles/resendprofile.h"
#include "partners/profiles/sendgridprofile.h"
#include "partners/profiles/slackprofile.h"
#include "partners/profiles/smtpprofile.h"
#include "partners/profiles/twilioprofile.h"
#include "partners/profiles/webhookprofile.h"

namespace once {

const QList<const PartnerProfile *> &partnerProfiles()
{
    static const QList<const PartnerProfile *> profiles{
        &webhookProfile(),
        &resendProfile(),
        &postmarkProfile(),
        &sendgridProfile(),
        &mailgunProfile(),
        &twilioProfile(),
        &slackProfile(),
        &smtpProfile(),
    };
    return profiles;
}

} // namespace once
