#include "partneroptions.h"

#include "cli.h"
#include "partners/partnerprofile.h"

namespace once::cli {

void addPartnerOptions(Command &command, const QString &partnerHelp)
{
    command.parser().addOptions({
        {QStringLiteral("partners"), QStringLiteral("A partners file: several partners, each with its profile, limits and secrets (as env:NAME or file:PATH), and the routes from a reminder's channel to its partner (docs/partners.md). Default: $ONCE_PARTNERS."), QStringLiteral("FILE")},
        {QStringLiteral("partner"), partnerHelp, QStringLiteral("URL")},
        {QStringLiteral("partner-profile"), QStringLiteral("How --partner URL is spoken to: %1 (default: webhook, smtp for smtp:// URLs).").arg(partnerProfileNames()), QStringLiteral("NAME")},
        {QStringLiteral("partner-ca"), QStringLiteral("For an https partner behind its own CA: trust only the CAs in this PEM file (default: $ONCE_PARTNER_CA, else the system's CAs)."), QStringLiteral("FILE")},
        {QStringLiteral("partner-cert"), QStringLiteral("Mutual TLS: present this PEM client certificate, with its chain (default: $ONCE_PARTNER_CERT)."), QStringLiteral("FILE")},
        {QStringLiteral("partner-key"), QStringLiteral("Mutual TLS: the unencrypted PEM private key of --partner-cert (default: $ONCE_PARTNER_KEY)."), QStringLiteral("FILE")},
    });
}

std::optional<PartnerChoice> choosePartners(const Command &command, PartnerWithFile partnerWithFile)
{
    const QCommandLineParser &parser = command.parser();
    const auto optionOrEnvironment = [&parser](const QString &option, const char *variable) {
        return parser.isSet(option) ? parser.value(option) : qEnvironmentVariable(variable);
    };
    const QString partnerOption = parser.value(QStringLiteral("partner"));
    QString file = parser.value(QStringLiteral("partners"));
    if (file.isEmpty() && partnerOption.isEmpty())
        file = qEnvironmentVariable("ONCE_PARTNERS");
    PartnerChoice choice;
    QString error;
    if (!file.isEmpty()) {
        if (!partnerOption.isEmpty() && partnerWithFile == PartnerWithFile::Refused) {
            command.usageError(QStringLiteral("give either --partner URL or --partners FILE, not both"));
            return std::nullopt;
        }
        if (parser.isSet(QStringLiteral("partner-profile"))) {
            command.usageError(QStringLiteral("--partner-profile goes with --partner URL; in a partners file each partner names its \"profile\""));
            return std::nullopt;
        }
        const auto read = readPartnersFile(file, &error);
        if (!read) {
            command.usageError(error);
            return std::nullopt;
        }
        choice.partners = *read;
        choice.file = file;
        choice.onlyNamed = partnerOption;
        if (!partnerOption.isEmpty() && !read->find(partnerOption)) {
            command.usageError(QStringLiteral("%1 names no partner \"%2\"").arg(file, partnerOption));
            return std::nullopt;
        }
        return choice;
    }
    const QString url = partnerOption.isEmpty() ? qEnvironmentVariable("ONCE_PARTNER") : partnerOption;
    if (url.isEmpty()) {
        command.usageError(QStringLiteral("give either --partner URL or --partners FILE (or ONCE_PARTNER, ONCE_PARTNERS)"));
        return std::nullopt;
    }
    auto single = partnerFromUrl(url, parser.value(QStringLiteral("partner-profile")), qgetenv("ONCE_PARTNER_TOKEN"), &error);
    if (!single) {
        command.usageError(error);
        return std::nullopt;
    }
    const auto tls = PartnerTls::load(optionOrEnvironment(QStringLiteral("partner-ca"), "ONCE_PARTNER_CA"),
                                      optionOrEnvironment(QStringLiteral("partner-cert"), "ONCE_PARTNER_CERT"),
                                      optionOrEnvironment(QStringLiteral("partner-key"), "ONCE_PARTNER_KEY"), &error);
    if (!tls) {
        command.usageError(error);
        return std::nullopt;
    }
    // smtp:// takes them for its STARTTLS, smtps:// for its TLS from the start.
    if (!tls->isEmpty() && single->url.scheme() == QLatin1String("http")) {
        command.usageError(QStringLiteral("a partner CA or certificate is for an https://, smtp:// or smtps:// partner"));
        return std::nullopt;
    }
    single->tls = *tls;
    choice.partners = PartnersConfig::single(*single);
    return choice;
}

} // namespace once::cli
