#include "partners/profiles/sendgridprofile.h"

#include "model/reminder.h"
#include "partners/partnerprofile.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>

namespace once {

namespace {

// SendGrid caps all custom_args of a message at 10,000 bytes; a key kept well inside it
// leaves room for what a team adds. A longer key travels (and is searched) as its digest.
constexpr qsizetype MaxCustomArgChars = 1000;

// twilio.com/docs/sendgrid/for-developers/tracking-events/event: the "event" of each entry.
PartnerEvent::Kind sendgridKind(const QString &event)
{
    if (event == QLatin1String("delivered"))
        return PartnerEvent::Kind::Delivered;
    if (event == QLatin1String("bounce"))
        return PartnerEvent::Kind::Bounced;
    if (event == QLatin1String("dropped"))
        return PartnerEvent::Kind::Failed;
    if (event == QLatin1String("deferred"))
        return PartnerEvent::Kind::Deferred;
    if (event == QLatin1String("open"))
        return PartnerEvent::Kind::Opened;
    if (event == QLatin1String("click"))
        return PartnerEvent::Kind::Clicked;
    if (event == QLatin1String("spamreport"))
        return PartnerEvent::Kind::Complained;
    return PartnerEvent::Kind::Other; // processed, unsubscribe, group_unsubscribe, ...
}

class SendgridProfile final : public PartnerProfile
{
public:
    QLatin1StringView id() const override { return QLatin1StringView("sendgrid"); }
    QString name() const override { return QStringLiteral("SendGrid"); }
    KeyHonouring honoursKey() const override { return KeyHonouring::Ignored; }
    QStringList requiredFields() const override
    {
        return {QStringLiteral("destination"), QStringLiteral("subject"), QStringLiteral("body")};
    }
    QStringList optionNames() const override
    {
        return {QStringLiteral("activity_api"), QStringLiteral("events_public_key")};
    }

    // twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features:
    // X-Twilio-Email-Event-Webhook-Signature is a base64 ECDSA (P-256, SHA-256) signature
    // over X-Twilio-Email-Event-Webhook-Timestamp followed by the raw body, checked with
    // the account's verification key (base64 DER, as the Mail Settings show it). The body
    // is a JSON array of events, each carrying the send's custom_args at its top level.
    EventsReading readEvents(const PartnerSettings &partner, const IncomingEvents &request) const override
    {
        const QByteArray publicKey = partner.options.value(QLatin1String("events_public_key")).toString().toLatin1();
        if (publicKey.isEmpty())
            return EventsReading::refused(
                QStringLiteral("partner \"%1\" has no \"events_public_key\" (SendGrid's verification key)").arg(partner.name));
        const QByteArray signature = request.head.header("X-Twilio-Email-Event-Webhook-Signature");
        const QByteArray timestamp = request.head.header("X-Twilio-Email-Event-Webhook-Timestamp");
        if (signature.isEmpty() || timestamp.isEmpty())
            return EventsReading::refused(QStringLiteral("unsigned: no X-Twilio-Email-Event-Webhook-Signature and -Timestamp"));
        QString why;
        if (!eventsignatures::ecdsaVerify(publicKey, timestamp + request.body, signature, &why))
            return EventsReading::refused(why);
        QJsonParseError parseError;
        const QJsonDocument document = QJsonDocument::fromJson(request.body, &parseError);
        if (parseError.error != QJsonParseError::NoError || !document.isArray())
            return EventsReading::malformed(QStringLiteral("SendGrid's events are one JSON array"));
        const SecretRedactor redactor(partner.secrets());
        EventsReading reading;
        for (const QJsonValue &value : document.array()) {
            const QJsonObject entry = value.toObject();
            PartnerEvent event;
            const QString kind = entry.value(QLatin1String("event")).toString();
            event.kind = sendgridKind(kind);
            event.providerKind = partnerText(kind, redactor, 40);
            // sg_message_id is the send's X-Message-Id, a dot and the recipient's part.
            event.providerMessageId = partnerText(
                entry.value(QLatin1String("sg_message_id")).toString().section(QLatin1Char('.'), 0, 0), redactor,
                MaxRequestIdChars);
            event.carriedKey = entry.value(QLatin1String("once_key")).toString().toUtf8();
            event.eventId = partnerText(entry.value(QLatin1String("sg_event_id")).toString(), redactor, MaxRequestIdChars);
            event.atMs = providerTimeMs(entry.value(QLatin1String("timestamp")));
            event.detail = partnerText(entry.value(QLatin1String("reason")).toString(
                                           entry.value(QLatin1String("response")).toString()),
                                       redactor, MaxReasonChars);
            if (event.eventId.isEmpty() || (event.providerMessageId.isEmpty() && event.carriedKey.isEmpty()))
                return EventsReading::malformed(
                    QStringLiteral("each event needs sg_event_id and sg_message_id or once_key"));
            reading.events.append(event);
        }
        return reading;
    }

    QString settingsProblem(const PartnerSettings &partner) const override
    {
        if (QString problem = PartnerProfile::settingsProblem(partner); !problem.isEmpty())
            return problem;
        if (partner.from.trimmed().isEmpty())
            return QStringLiteral("needs \"from\": a verified sender's address");
        if (partner.token.isEmpty())
            return QStringLiteral("needs \"token\": the API key");
        const QJsonValue activity = partner.options.value(QLatin1String("activity_api"));
        if (!activity.isUndefined() && !activity.isBool())
            return QStringLiteral("\"activity_api\" must be true or false");
        return {};
    }

    std::optional<HttpRequest> sendRequest(const PartnerSettings &partner, const Reminder &reminder,
                                           QString *problem) const override
    {
        const auto content = contentFor(*this, partner, reminder, problem);
        if (!content)
            return std::nullopt;
        const QJsonObject body{
            {QStringLiteral("personalizations"),
             QJsonArray{
                 QJsonObject{{QStringLiteral("to"),
                              QJsonArray{QJsonObject{{QStringLiteral("email"), content->destination}}}}}}},
            {QStringLiteral("from"), QJsonObject{{QStringLiteral("email"), partner.from}}},
            {QStringLiteral("subject"), content->subject},
            {QStringLiteral("content"),
             QJsonArray{QJsonObject{{QStringLiteral("type"), QStringLiteral("text/plain")},
                                    {QStringLiteral("value"), content->body}}}},
            {QStringLiteral("custom_args"),
             QJsonObject{{QStringLiteral("once_key"),
                          QString::fromUtf8(keyWithin(reminder.sendKey, MaxCustomArgChars))}}},
        };
        HttpRequest request;
        request.url = endpoint(partner.url, QStringLiteral("/v3/mail/send"));
        request.body = QJsonDocument(body).toJson(QJsonDocument::Compact);
        request.headers = {{"Content-Type", "application/json"},
                           {"Authorization", "Bearer " + partner.token}};
        return request;
    }

    SendOutcome classify(const HttpResult &result, qint64 nowMs,
                         const SecretRedactor &redactor) const override
    {
        SendOutcome outcome = once::classify(result, nowMs, redactor);
        if (result.status != HttpResult::Status::Response)
            return outcome;
        if (outcome.kind == SendOutcome::Kind::Applied) {
            outcome.providerRequestId =
                partnerText(QString::fromUtf8(result.header("x-message-id")), redactor, MaxRequestIdChars);
            return outcome;
        }
        if (result.httpStatus == 429 && outcome.retryAfterMs < 0) {
            // SendGrid names the moment its limit resets (epoch seconds), not a delay.
            bool ok = false;
            const qint64 resetAt = result.header("x-ratelimit-reset").trimmed().toLongLong(&ok);
            if (ok && resetAt > 0)
                outcome.retryAfterMs = std::clamp<qint64>(resetAt * 1000 - nowMs, 0, 24 * 3600 * 1000);
        } else if (result.httpStatus == 422) {
            // No key was sent as a key: a 422 is about this e-mail, not a changed payload.
            outcome.setRejected();
        }
        return outcome;
    }

    bool canLookUp(const PartnerSettings &partner) const override
    {
        return partner.options.value(QLatin1String("activity_api")).toBool();
    }
    // SendGrid does not say how soon a message shows in the Email Activity feed.
    qint64 lookupGraceMs() const override { return 5 * 60 * 1000; }

    std::optional<HttpRequest> lookupRequest(const PartnerSettings &partner,
                                             const QByteArray &sendKey) const override
    {
        if (!canLookUp(partner))
            return std::nullopt;
        // The Email Activity query language: unique_args['once_key']="VALUE". The value
        // is a send key (or its digest): ids percent-encoded, so no '"' to escape.
        const QByteArray value = keyWithin(sendKey, MaxCustomArgChars);
        const QString query = QStringLiteral("unique_args['once_key']=\"%1\"").arg(QString::fromUtf8(value));
        HttpRequest request;
        request.method = "GET";
        request.url = endpoint(partner.url, QStringLiteral("/v3/messages"));
        request.url.setQuery(QStringLiteral("limit=1&query=") +
                                 QString::fromLatin1(QUrl::toPercentEncoding(query)),
                             QUrl::StrictMode);
        request.headers = {{"Authorization", "Bearer " + partner.token}};
        return request;
    }

    LookupResult readLookup(const HttpResult &result, const QByteArray &sendKey,
                            const SecretRedactor &redactor) const override
    {
        if (result.status != HttpResult::Status::Response || result.httpStatus != 200)
            return PartnerProfile::readLookup(result, sendKey, redactor);
        const QJsonValue messages =
            QJsonDocument::fromJson(result.body).object().value(QLatin1String("messages"));
        LookupResult lookup;
        lookup.httpStatus = result.httpStatus;
        if (!messages.isArray()) {
            lookup.error = QStringLiteral("SendGrid's Email Activity answered without \"messages\"");
            return lookup;
        }
        if (messages.toArray().isEmpty()) {
            lookup.kind = LookupResult::Kind::NotFound;
            return lookup;
        }
        lookup.kind = LookupResult::Kind::Found;
        lookup.providerMessageId =
            partnerText(messages.toArray().first().toObject().value(QLatin1String("msg_id")).toString(),
                        redactor, MaxRequestIdChars);
        return lookup;
    }
};

} // namespace

const PartnerProfile &sendgridProfile()
{
    static const SendgridProfile profile;
    return profile;
}

} // namespace once
