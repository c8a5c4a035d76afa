#include "partners/partnerlookups.h"

#include "operator/inspector.h"
#include "partners/partnerprofile.h"

namespace once {

namespace {
// Lookups are one question at a time per key; a few connections are plenty.
constexpr int LookupConnections = 4;
constexpr int LookupTimeoutMs = 10000;
} // namespace

PartnerLookups::~PartnerLookups()
{
    qDeleteAll(m_senders);
}

QString PartnerLookups::partnerOf(const EventRow &event, const KeyReconciliation &state) const
{
    return state.partner.isEmpty() ? m_partners.routes.partnerFor(event.channel) : state.partner;
}

PartnerSender *PartnerLookups::lookupFor(const QString &partner, QString *why)
{
    if (PartnerSender *sender = m_senders.value(partner))
        return sender;
    const PartnerSettings *settings = m_partners.find(partner);
    if (!settings) {
        *why = partner.isEmpty() ? QStringLiteral("no partner is known for it")
                                 : QStringLiteral("the partners file names no partner \"%1\"").arg(partner);
        return nullptr;
    }
    const PartnerProfile *profile = partnerProfile(settings->profile);
    if (!profile) {
        *why = QStringLiteral("partner %1: no profile \"%2\"").arg(partner, settings->profile);
        return nullptr;
    }
    std::unique_ptr<PartnerSender> sender = profile->createSender(*settings, LookupConnections, LookupTimeoutMs, nullptr);
    if (!sender->canLookUp()) {
        *why = QStringLiteral("%1 (%2) has no lookup to ask").arg(partner, settings->profile);
        return nullptr;
    }
    m_senders.insert(partner, sender.get());
    return sender.release();
}

} // namespace once
