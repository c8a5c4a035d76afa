#include "partners/profiles/webhookprofile.h"

#include "model/reminder.h"
#include "partners/partnerprofile.h"

#include <QJsonDocument>
#include <QJsonArray>
#include <QJsonObject>

#include <cstdlib>

namespace once {

namespace {

std::optional<PartnerEvent::Kind> kindNamed(const QString &name)
{
    for (const auto kind : {PartnerEvent::Kind::Delivered, PartnerEvent::Kind::Bounced, PartnerEvent::Kind::Failed,
                            PartnerEvent::Kind::Deferred, PartnerEvent::Kind::Opened, PartnerEvent::Kind::Clicked,
                            PartnerEvent::Kind::Complained, PartnerEvent::Kind::Other}) {
        if (partnerEventKindName(kind) == name)
            return kind;
    }
    return std::nullopt;
}

class WebhookProfile final : public PartnerProfile
{
public:
    QStringList optionNames() const override { return {QStringLiteral("events_secret")}; }
    QStringList secretOptionNames() const override { return {QStringLiteral("events_secret")}; }

    // A webhook of the team's own signs its events the way docs/partners.md ("Delivery
    // events", webhook) lays down: Once-Signature: t=UNIX,v1=BASE64(HMAC-SHA256(secret,
    // "t.body"))), and a body {"events": [{"key", "kind", "id", "at", "message_id",
    // "detail"}]}.
    EventsReading readEvents(const PartnerSettings &partner, const IncomingEvents &request) const override
    {
        const QByteArray secret = partner.secretOptions.value(QStringLiteral("events_secret"));
        if (secret.isEmpty())
            return EventsReading::refused(QStringLiteral("partner \"%1\" has no \"events_secret\"").arg(partner.name));
        const QByteArray header = request.head.header("Once-Signature");
        if (header.isEmpty())
            return EventsReading::refused(QStringLiteral("unsigned: no Once-Signature"));
        QByteArray t;
        QByteArray v1;
        for (const QByteArray &part : header.split(',')) {
            if (part.trimmed().startsWith("t="))
                t = part.trimmed().mid(2);
            else if (part.trimmed().startsWith("v1="))
                v1 = part.trimmed().mid(3);
        }
        bool number = false;
        const qint64 seconds = t.toLongLong(&number);
        if (!number || std::abs(request.nowMs - seconds * 1000) > eventsignatures::SvixToleranceMs)
            return EventsReading::refused(QStringLiteral("Once-Signature's t is more than 5 minutes from now"));
        if (!eventsignatures::sameBytes("t=" + t + ",v1=" + v1, eventsignatures::onceSignature(secret, seconds, request.body)))
            return EventsReading::refused(QStringLiteral("Once-Signature does not match the body under this partner's secret"));
        QJsonParseError parseError;
        const QJsonDocument document = QJsonDocument::fromJson(request.body, &parseError);
        if (parseError.error != QJsonParseError::NoError || !document.object().value(QLatin1String("events")).isArray())
            return EventsReading::malformed(QStringLiteral("the body must be {\"events\": [...]}"));
        const SecretRedactor redactor(partner.secrets());
        EventsReading reading;
        for (const QJsonValue &value : document.object().value(QLatin1String("events")).toArray()) {
            const QJsonObject entry = value.toObject();
            const auto kind = kindNamed(entry.value(QLatin1String("kind")).toString());
            PartnerEvent event;
            event.carriedKey = entry.value(QLatin1String("key")).toString().toUtf8();
            event.providerMessageId = partnerText(entry.value(QLatin1String("message_id")).toString(), redactor, MaxRequestIdChars);
            event.eventId = partnerText(entry.value(QLatin1String("id")).toString(), redactor, MaxRequestIdChars);
            if (!kind || event.eventId.isEmpty() || (event.carriedKey.isEmpty() && event.providerMessageId.isEmpty()))
                return EventsReading::malformed(QStringLiteral("each event needs \"kind\" (delivered, bounced, failed, "
                                                               "deferred, opened, clicked, complained, other), \"id\" and "
                                                               "\"key\" or \"message_id\""));
            event.kind = *kind;
            event.providerKind = partnerEventKindName(*kind);
            event.atMs = providerTimeMs(entry.value(QLatin1String("at")));
            event.detail = partnerText(entry.value(QLatin1String("detail")).toString(), redactor, MaxReasonChars);
            reading.events.append(event);
        }
        return reading;
    }

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
