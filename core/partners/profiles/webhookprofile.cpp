#include "partners/profiles/webhookprofile.h"

#include "model/reminder.h"
#include "partners/partnerprofile.h"

#include <QJsonDocument>
#include <QJsonObject>

namespace once {

namespace {

class WebhookProfile final : public PartnerProfile
{
public:
    QLatin1StringView id() const override { return QLatin1StringView("webhook"); }
    QString name() const override { return QStringLiteral("Webhook"); }
    // Only the team behind the URL knows whether it deduplicates.
    KeyHonouring honoursKey() const override { return KeyHonouring::Unknown; }

    QString settingsProblem(const PartnerSettings &partner) const override
    {
        if (QString problem = PartnerProfile::settingsProblem(partner); !problem.isEmpty())
            return problem;
        if (!partner.lookup.isEmpty()) {
            const QUrl lookup(QString(partner.lookup).replace(QLatin1String("{key}"), QLatin1String("k")));
            if (!partner.lookup.contains(QLatin1String("{key}")) || !lookup.isValid()
                || (lookup.scheme() != QLatin1String("http") && lookup.scheme() != QLatin1String("https")))
                return QStringLiteral("\"lookup\" must be an http(s) URL with {key} in it");
        }
        return {};
    }

    std::optional<HttpRequest> sendRequest(const PartnerSettings &partner, const Reminder &reminder,
                                           QString *) const override
    {
        HttpRequest request;
        request.url = partner.url;
        request.body = reminder.payload;
        request.headers = {{"Content-Type", "application/json"}, {"Idempotency-Key", reminder.sendKey}};
        if (!partner.token.isEmpty())
            request.headers.append({"Authorization", "Bearer " + partner.token});
        return request;
    }

    bool canLookUp(const PartnerSettings &partner) const override { return !partner.lookup.isEmpty(); }

    std::optional<HttpRequest> lookupRequest(const PartnerSettings &partner, const QByteArray &sendKey) const override
    {
        if (partner.lookup.isEmpty())
            return std::nullopt;
        HttpRequest request;
        request.method = "GET";
        // The key is already percent-encoded where it needs to be; its ':' are kept.
        request.url = QUrl(QString(partner.lookup)
                               .replace(QLatin1String("{key}"),
                                        QString::fromLatin1(QUrl::toPercentEncoding(QString::fromLatin1(sendKey))))
                           ,
                           QUrl::StrictMode);
        if (!partner.token.isEmpty())
            request.headers.append({"Authorization", "Bearer " + partner.token});
        return request;
    }

    LookupResult readLookup(const HttpResult &result, const QByteArray &sendKey,
                            const SecretRedactor &redactor) const override
    {
        if (result.status == HttpResult::Status::Response && result.httpStatus == 404) {
            LookupResult lookup;
            lookup.kind = LookupResult::Kind::NotFound;
            lookup.httpStatus = 404;
            return lookup;
        }
        if (result.status == HttpResult::Status::Response && result.httpStatus >= 200 && result.httpStatus < 300) {
            LookupResult lookup;
            lookup.kind = LookupResult::Kind::Found;
            lookup.httpStatus = result.httpStatus;
            const QJsonObject reply = QJsonDocument::fromJson(result.body).object();
            QString id = reply.value(QLatin1String("id")).toString();
            if (id.isEmpty())
                id = reply.value(QLatin1String("request_id")).toString();
            lookup.providerMessageId = partnerText(id, redactor, MaxRequestIdChars);
            return lookup;
        }
        return PartnerProfile::readLookup(result, sendKey, redactor);
    }
};

} // namespace

const PartnerProfile &webhookProfile()
{
    static const WebhookProfile profile;
    return profile;
}

} // namespace once
