#pragma once

#include "http/partnertls.h"

#include <QByteArray>
#include <QHash>
#include <QJsonObject>
#include <QList>
#include <QString>
#include <QUrl>

#include <optional>

namespace once {

// One partner as a worker sends to it: a profile (the provider's request shape, see
// partnerprofile.h), where it is, and its own limits. Secrets are resolved in memory and
// never written anywhere: they reach only the request's authentication.
struct PartnerSettings
{
    QString name;    // as the partners file names it; for --partner URL, the URL without credentials
    QString profile; // a registered profile's id: "webhook", "resend", "smtp", ...
    QUrl url;        // the provider's API base (or the webhook, or smtp://HOST:PORT), without credentials
    QByteArray token;    // bearer token, server token, auth token, SMTP password
    QByteArray account;  // Twilio's Account SID, SendGrid's nothing; the SMTP user
    QString from;        // the sender's address or number
    QString subject;     // used when a reminder has none
    QString lookup;      // webhook: a GET URL template with {key}; empty: no lookup
    int concurrency = 0;       // sends in flight at once; 0: the worker's --concurrency
    double ratePerSecond = 0;  // 0: no limit
    int maxAttempts = 0;       // sends before a reminder is dead-lettered; 0: the worker's
    qint64 lookupGraceMs = -1; // how long after an in-doubt send a lookup can be trusted; -1: the profile's
    QJsonObject options;       // what only one profile reads (Postmark's message_stream, ...)
    // The profile's secret options (secretOptionNames()), resolved: a delivery webhook's
    // signing secret or password.
    QHash<QString, QByteArray> secretOptions;
    PartnerTls tls;
    // How long a reminder sent through this partner is worth sending, counted from its
    // scheduled time ("expire_after"); 0: for ever. A reminder's own expires_at wins.
    qint64 expireAfterMs = 0;

    // The secrets to redact from anything the partner says back.
    QList<QByteArray> secrets() const;
};

// Which partner a reminder goes to, by its channel.
struct PartnerRoutes
{
    QHash<QString, QString> byChannel; // channel -> partner name
    QString otherwise;                 // "*": every other channel; empty: none
    // A route's own "expire_after" (a route written as an object), by channel and for "*".
    QHash<QString, qint64> expireAfterByChannel;
    qint64 otherwiseExpireAfterMs = 0;

    // The partner's name for a channel, or an empty string: no route.
    QString partnerFor(const QString &channel) const;
    // The route's own expire_after for a channel; 0: the route sets none.
    qint64 expireAfterFor(const QString &channel) const;
};

struct PartnersConfig
{
    QList<PartnerSettings> partners;
    PartnerRoutes routes;

    const PartnerSettings *find(const QString &name) const;
    // The default useful life of a reminder on a channel: its route's expire_after, else
    // its partner's; 0: none.
    qint64 expireAfterFor(const QString &channel) const;
    // One partner taking every channel: `--partner URL [--partner-profile NAME]`.
    static PartnersConfig single(PartnerSettings partner);
};

// A secret as the partners file writes it: "env:NAME" (an environment variable) or
// "file:PATH" (the file's first line, without its line ending). A literal secret is
// refused: a file that holds secrets ends up in backups, tickets and screenshots.
// On failure, *error says why without quoting the secret.
std::optional<QByteArray> resolveSecretReference(const QString &reference, QString *error);

// Reads a partners file (docs/partners.md): every partner's profile known, its settings
// complete for that profile, its secrets resolved, and every route naming a partner.
// On failure, *error is one line naming the partner or route at fault.
std::optional<PartnersConfig> readPartnersFile(const QString &path, QString *error);
std::optional<PartnersConfig> parsePartners(const QByteArray &json, QString *error);

// The one partner of `--partner URL [--partner-profile NAME]`, its token from the
// environment (ONCE_PARTNER_TOKEN). An smtp:// or smtps:// URL carries its user,
// password and sender (smtp://USER:PASSWORD@HOST:PORT?from=ADDRESS); they are taken out
// of the URL, which is what logs and the store show.
std::optional<PartnerSettings> partnerFromUrl(const QString &text, const QString &profileName, const QByteArray &token,
                                              QString *error);

// "expire_after": "90s", "5m", "2h", "7d" -> ms, from one second to 30 days; nullopt and
// a one-line *error for anything else.
std::optional<qint64> parseExpireAfter(const QJsonValue &value, QString *error);

// "5/s", "300/min", "2/h" -> requests per second.
std::optional<double> parseRate(const QString &text);

} // namespace once
