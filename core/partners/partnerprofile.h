#pragma once

#include "delivery/partnersender.h"
#include "http/httpmessage.h"
#include "model/partnerpolicy.h"
#include "partners/partnerevents.h"
#include "partners/partnersettings.h"

#include <QLatin1StringView>
#include <QString>
#include <QStringList>

#include <memory>
#include <optional>

namespace once {

struct Reminder;

// What a reminder says for a provider's request: the reminder's own fields, the partner's
// defaults where the reminder has none.
struct ReminderContent
{
    QString destination; // the reminder's "destination": an address, a number
    QString subject;     // the reminder's "subject", else the partner's "subject"
    QString body;        // the reminder's "body"

    static ReminderContent of(const Reminder &reminder, const PartnerSettings &partner);
    // The first of the named fields that is empty, or an empty string.
    QString missing(const QStringList &fields) const;
};

// One provider: its request shape, authentication, idempotency rule, the meaning of its
// answers and, where it has one, a lookup by our key. Each profile is one file under
// core/partners/profiles/, registered once in partnerprofiles.cpp; docs/partners.md says
// which page of the provider's documentation each was built from.
class PartnerProfile
{
public:
    virtual ~PartnerProfile() = default;

    virtual QLatin1StringView id() const = 0;  // "postmark": the partners file's "profile"
    virtual QString name() const = 0;          // "Postmark"
    // Whether the provider applies a repeated call with the same key once: Honoured for
    // an API with documented idempotency, Ignored for one without, Unknown for a webhook
    // (only its operator can know, `once partners --honours-key`).
    virtual KeyHonouring honoursKey() const = 0;
    // How long the provider keeps a key after the first request with it, as documented
    // (Resend: 24 hours): a resend after that may act again, so a key in doubt that long
    // is held, not resent. 0: forever, or no key kept at all.
    virtual qint64 keyWindowMs() const { return 0; }
    // The reminder fields a send needs ("destination", "subject", "body").
    virtual QStringList requiredFields() const { return {}; }
    // The keys a partners file may give this profile beyond the common ones (url, token,
    // from, ...); they reach the profile in PartnerSettings::options.
    virtual QStringList optionNames() const { return {}; }
    // Those of optionNames() that are secrets: written as "env:NAME" or "file:PATH" only,
    // resolved into PartnerSettings::secretOptions and redacted as the token is.
    virtual QStringList secretOptionNames() const { return {}; }
    // What the partner's settings lack for this profile, one line, or an empty string.
    virtual QString settingsProblem(const PartnerSettings &partner) const;

    // The request that sends this reminder, or nothing with *problem saying why.
    virtual std::optional<HttpRequest> sendRequest(const PartnerSettings &partner, const Reminder &reminder,
                                                   QString *problem) const;
    // What the provider's answer means; by default the generic reading (classify()).
    virtual SendOutcome classify(const HttpResult &result, qint64 nowMs, const SecretRedactor &redactor) const;

    // Lookup: asks the provider whether it has a message sent with this key.
    virtual bool canLookUp(const PartnerSettings &partner) const;
    virtual std::optional<HttpRequest> lookupRequest(const PartnerSettings &partner, const QByteArray &sendKey) const;
    virtual LookupResult readLookup(const HttpResult &result, const QByteArray &sendKey,
                                    const SecretRedactor &redactor) const;
    // How long after a send the provider's search can be trusted to show it.
    virtual qint64 lookupGraceMs() const { return 60 * 1000; }

    // Delivery events (`once serve`, POST /v1/partners/NAME/events; docs/partners.md,
    // "Delivery events"): what the provider's webhook request says, its signature checked
    // the way the provider documents it. Unsigned, signed with another secret, changed
    // after signing or stale: Unauthorized, and nothing of it is read. By default a
    // profile takes no events.
    virtual EventsReading readEvents(const PartnerSettings &partner, const IncomingEvents &request) const;

    // Where it sends, for logs, the UI and the store, without anything secret.
    virtual QString displayUrl(const PartnerSettings &partner) const;
    // Secrets the partner's URL itself holds (a Slack webhook's path), redacted from
    // everything the partner says back, as the token is.
    virtual QList<QByteArray> urlSecrets(const PartnerSettings &) const { return {}; }

    // The sender for this provider. By default an HTTP sender built on sendRequest() and
    // classify(); a profile with its own protocol (SMTP) gives its own.
    virtual std::unique_ptr<PartnerSender> createSender(const PartnerSettings &partner, int maxConnections,
                                                        int timeoutMs, QObject *parent) const;
};

// The send key as a provider field that holds at most maxChars: the key itself when it
// fits, else "once-sha256-" followed by the lowercase hex SHA-256 of the key (76
// characters), the same on every try, so a retry carries the same value.
QByteArray keyWithin(const QByteArray &sendKey, qsizetype maxChars);

// A provider's base URL (as a partner's "url" gives it) with an API path after it:
// "https://api.resend.com" and "/emails" make "https://api.resend.com/emails".
QUrl endpoint(const QUrl &base, const QString &path);

// The reminder's content for a profile, or nothing with *problem naming the first field
// the profile needs and the reminder lacks.
std::optional<ReminderContent> contentFor(const PartnerProfile &profile, const PartnerSettings &partner,
                                          const Reminder &reminder, QString *problem);

// Every registered profile, in the order help texts list them.
const QList<const PartnerProfile *> &partnerProfiles();
const PartnerProfile *partnerProfile(QStringView id);
// "webhook, resend, postmark, ...".
QString partnerProfileNames();

// The profile a --partner URL implies when --partner-profile is not given: smtp:// and
// smtps:// are SMTP, everything else a webhook.
QString profileForUrl(const QUrl &url);

} // namespace once
