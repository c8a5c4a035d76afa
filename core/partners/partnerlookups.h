#pragma once

#include "delivery/partnersender.h"
#include "partners/partnersettings.h"

#include <QHash>
#include <QObject>

#include <memory>

namespace once {

struct EventRow;
struct KeyReconciliation;

// The partners whose profile can look a key up (reconciliation), for those who ask
// outside a worker: `once reconcile` and the console's "Check at partner now". Senders
// are made the first time a partner is asked for, on the calling thread.
class PartnerLookups final
{
    Q_DISABLE_COPY_MOVE(PartnerLookups)

public:
    explicit PartnerLookups(PartnersConfig partners) : m_partners(std::move(partners)) {}
    ~PartnerLookups();

    const PartnersConfig &partners() const { return m_partners; }
    // The partner a key left in doubt was sent to (its last send's), else its channel's.
    QString partnerOf(const EventRow &event, const KeyReconciliation &state) const;
    // The sender that can ask this partner, or null (no such partner, or it has no lookup:
    // *why says which).
    PartnerSender *lookupFor(const QString &partner, QString *why);

private:
    PartnersConfig m_partners;
    QHash<QString, PartnerSender *> m_senders; // owned
};

} // namespace once
