#include "partners/partnerprofile.h"

#include "model/reminder.h"
#include "partners/httppartnersender.h"

#include <QCryptographicHash>
#include <QJsonDocument>
#include <QJsonObject>

namespace once {

ReminderContent ReminderContent::of(const Reminder &reminder, const PartnerSettings &partner)
{
    const QJsonObject fields = QJsonDocument::fromJson(reminder.payload).object();
    ReminderContent content;
    content.destination = reminder.destination;
    content.subject = fields.value(QLatin1String("subject")).toString();
    if (content.subject.isEmpty())
        content.subject = partner.subject;
    content.body = fields.value(QLatin1String("body")).toString();
    return content;
}

QString ReminderContent::missing(const QStringList &fields) const
{
    for (const QString &field : fields) {
        const QString &value = field == QLatin1String("destination") ? destination
                               : field == QLatin1String("subject")   ? subject
                                                                     : body;
        if (value.trimmed().isEmpty())
            return field;
    }
    return {};
}

QByteArray keyWithin(const QByteArray &sendKey, qsizetype maxChars)
{
    if (sendKey.size() <= maxChars)
        return sendKey;
    return "once-sha256-" + QCryptographicHash::hash(sendKey, QCryptographicHash::Sha256).toHex();
}

QUrl endpoint(const QUrl &base, const QString &path)
{
    QUrl url = base;
    QString basePath = base.path();
    while (basePath.endsWith(QLatin1Char('/')))
        basePath.chop(1);
    url.setPath(basePath + path);
    url.setQuery(QString());
    url.setFragment(QString());
    return url;
}

std::optional<ReminderContent> contentFor(const PartnerProfile &profile, const PartnerSettings &partner,
                                          const Reminder &reminder, QString *problem)
{
    ReminderContent content = ReminderContent::of(reminder, partner);
    if (const QString field = content.missing(profile.requiredFields()); !field.isEmpty()) {
        *problem = QStringLiteral("the reminder has no \"%1\", which the %2 profile needs").arg(field, QString(profile.id()));
        return std::nullopt;
    }
    return content;
}

QString PartnerProfile::displayUrl(const PartnerSettings &partner) const
{
    return partnerName(partner.url);
}

QString PartnerProfile::settingsProblem(const PartnerSettings &partner) const
{
    if (!partner.url.isValid() || partner.url.host().isEmpty())
        return QStringLiteral("needs a \"url\"");
    if (partner.url.scheme() != QLatin1String("http") && partner.url.scheme() != QLatin1String("https"))
        return QStringLiteral("\"url\" must be http:// or https://");
    return {};
}

std::optional<HttpRequest> PartnerProfile::sendRequest(const PartnerSettings &, const Reminder &, QString *problem) const
{
    *problem = QStringLiteral("the %1 profile sends no HTTP requests").arg(name());
    return std::nullopt;
}

SendOutcome PartnerProfile::classify(const HttpResult &result, qint64 nowMs, const SecretRedactor &redactor) const
{
    return once::classify(result, nowMs, redactor);
}

bool PartnerProfile::canLookUp(const PartnerSettings &) const
{
    return false;
}

std::optional<HttpRequest> PartnerProfile::lookupRequest(const PartnerSettings &, const QByteArray &) const
{
    return std::nullopt;
}

LookupResult PartnerProfile::readLookup(const HttpResult &result, const QByteArray &, const SecretRedactor &redactor) const
{
    LookupResult lookup;
    lookup.httpStatus = result.httpStatus;
    if (result.status != HttpResult::Status::Response) {
        lookup.error = partnerText(result.error, redactor, MaxErrorChars);
        return lookup;
    }
    lookup.error = QStringLiteral("HTTP %1: %2").arg(result.httpStatus)
                       .arg(partnerText(QString::fromUtf8(result.body), redactor, MaxReasonChars));
    return lookup;
}

EventsReading PartnerProfile::readEvents(const PartnerSettings &, const IncomingEvents &) const
{
    return EventsReading::refused(QStringLiteral("the %1 profile takes no delivery events").arg(QString(id())));
}

std::unique_ptr<PartnerSender> PartnerProfile::createSender(const PartnerSettings &partner, int maxConnections,
                                                            int timeoutMs, QObject *parent) const
{
    return std::make_unique<HttpPartnerSender>(*this, partner, maxConnections, timeoutMs, parent);
}

const PartnerProfile *partnerProfile(QStringView id)
{
    for (const PartnerProfile *profile : partnerProfiles()) {
        if (profile->id() == id)
            return profile;
    }
    return nullptr;
}

QString partnerProfileNames()
{
    QStringList names;
    for (const PartnerProfile *profile : partnerProfiles())
        names.append(QString(profile->id()));
    return names.join(QStringLiteral(", "));
}

QString profileForUrl(const QUrl &url)
{
    if (url.scheme() == QLatin1String("smtp") || url.scheme() == QLatin1String("smtps"))
        return QStringLiteral("smtp");
    return QStringLiteral("webhook");
}

} // namespace once
