#pragma once

#include "partners/partnersettings.h"

#include <optional>

namespace once::cli {

class Command;

// What --partner means besides a partners file: the one partner's URL (once worker,
// where giving both is an error), or one partner of the file by name (once reconcile).
enum class PartnerWithFile { Refused, NamesOne };

// --partners FILE, or --partner URL [--partner-profile NAME] with its TLS files, for the
// commands that speak to the partners; each falls back on what a systemd unit's
// environment sets (ONCE_PARTNERS, ONCE_PARTNER, ONCE_PARTNER_TOKEN, ONCE_PARTNER_CA...).
void addPartnerOptions(Command &command, const QString &partnerHelp);

struct PartnerChoice
{
    PartnersConfig partners;
    QString file;       // the partners file read; empty for the one --partner URL
    QString onlyNamed;  // NamesOne: the partner of the file --partner names, else empty
};

// Prints the usage error and returns nullopt when the options do not name partners.
std::optional<PartnerChoice> choosePartners(const Command &command, PartnerWithFile partnerWithFile);

} // namespace once::cli
