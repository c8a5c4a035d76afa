#include "partners/profiles/resendprofile.h"

#include "model/reminder.h"
#include "partners/partnerprofile.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <cstdlib>

namespace once {

namespace {

// resend.com/docs/dashboard/emails/idempotency-keys: 1 to 256 characters.
constexpr qsizetype MaxIdempotencyKeyChars = 256;
// Tag names and values: ASCII letters, digits, underscores and dashes, at most 256
// characters (resend.com/docs/api-reference/emails/send-email). A send key holds ':'
// and '%', so most keys travel as their digest.
constexpr qsizetype MaxTagChars = 256;

bool isTagText(const QByteArray &text)
{
    for (const char c : text) {
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-'))
            return false;
    }
    return !text.isEmpty();
}

// resend.com/docs/dashboard/webhooks/event-types: the event types and what they mean.
PartnerEvent::Kind resendKind(const QString &type)
{
    if (type == QLatin1String("email.delivered"))
        return PartnerEvent::Kind::Delivered;
    if (type == QLatin1String("email.bounced"))
        return PartnerEvent::Kind::Bounced;
    if (type == QLatin1String("email.failed"))
        return PartnerEvent::Kind::Failed;
    if (type == QLatin1String("email.delivery_delayed"))
        return PartnerEvent::Kind::Deferred;
    if (type == QLatin1String("email.opened"))
        return PartnerEvent::Kind::Opened;
    if (type == QLatin1String("email.clicked"))
        return PartnerEvent::Kind::Clicked;
    if (type == QLatin1String("email.complained"))
        return PartnerEvent::Kind::Complained;
    return PartnerEvent::Kind::Other;
}

// The once_key tag of an event's data: tags as an object ({"once_key": "..."}) or as the
// send's list of {name, value}.
QByteArray onceTag(const QJsonValue &tags)
{
    if (tags.isObject())
        return tags.toObject().value(QLatin1String("once_key")).toString().toUtf8();
    for (const QJsonValue &tag : tags.toArray()) {
        if (tag.toObject().value(QLatin1String("name")).toString() == QLatin1String("once_key"))
            return tag.toObject().value(QLatin1String("value")).toString().toUtf8();
    }
    return {};
}

class ResendProfile final : public PartnerProfile
{
public:
    QStringList optionNames() const override { return {QStringLiteral("events_secret")}; }
    QStringList secretOptionNames() const override { return {QStringLiteral("events_secret")}; }

    // resend.com/docs/webhooks/verify-webhooks-requests and
    // docs.svix.com/receiving/verifying-payloads/how-manual: svix-id, svix-timestamp (Unix
    // seconds) and svix-signature ("v1,BASE64", several separated by spaces while a secret
    // is rolled), the signature an HMAC-SHA256 over "id.timestamp.body" keyed with the
    // base64 part of the "whsec_" secret; a timestamp more than 5 minutes off is a replay.
    EventsReading readEvents(const PartnerSettings &partner, const IncomingEvents &request) const override
    {
        const auto key = eventsignatures::svixKey(partner.secretOptions.value(QStringLiteral("events_secret")));
        if (!key)
            return EventsReading::refused(
                QStringLiteral("partner \"%1\" has no \"events_secret\" (Resend's whsec_... signing secret)").arg(partner.name));
        const QByteArray id = request.head.header("svix-id");
        const QByteArray timestamp = request.head.header("svix-timestamp");
        const QByteArray signatures = request.head.header("svix-signature");
        if (id.isEmpty() || timestamp.isEmpty() || signatures.isEmpty())
            return EventsReading::refused(QStringLiteral("unsigned: svix-id, svix-timestamp and svix-signature are required"));
        bool number = false;
        const qint64 sentMs = timestamp.toLongLong(&number) * 1000;
        if (!number || std::abs(request.nowMs - sentMs) > eventsignatures::SvixToleranceMs)
            return EventsReading::refused(QStringLiteral("svix-timestamp is more than 5 minutes from now (a replay, or a clock off)"));
        const QByteArray expected = eventsignatures::svixSignature(*key, id, timestamp, request.body);
        bool signedRight = false;
        for (const QByteArray &signature : signatures.split(' '))
            signedRight = eventsignatures::sameBytes(signature.trimmed(), expected) || signedRight;
        if (!signedRight)
            return EventsReading::refused(QStringLiteral("svix-signature does not match the body under this partner's secret"));
        QJsonParseError parseError;
        const QJsonDocument document = QJsonDocument::fromJson(request.body, &parseError);
        if (parseError.error != QJsonParseError::NoError || !document.isObject())
            return EventsReading::malformed(QStringLiteral("a Resend event is one JSON object"));
        const QJsonObject root = document.object();
        const QJsonObject data = root.value(QLatin1String("data")).toObject();
        const SecretRedactor redactor(partner.secrets());
        PartnerEvent event;
        const QString type = root.value(QLatin1String("type")).toString();
        if (!type.startsWith(QLatin1String("email.")))
            return EventsReading::malformed(QStringLiteral("\"type\" must be an email.* event"));
        event.kind = resendKind(type);
        event.providerKind = partnerText(type, redactor, 40);
        event.providerMessageId = partnerText(data.value(QLatin1String("email_id")).toString(), redactor, MaxRequestIdChars);
        event.carriedKey = onceTag(data.value(QLatin1String("tags")));
        event.eventId = QString::fromLatin1(id.left(MaxRequestIdChars));
        event.atMs = providerTimeMs(root.value(QLatin1String("created_at")));
        const QJsonObject bounce = data.value(QLatin1String("bounce")).toObject();
        event.detail = partnerText(bounce.value(QLatin1String("message")).toString(), redactor, MaxReasonChars);
        if (event.providerMessageId.isEmpty() && event.carriedKey.isEmpty())
            return EventsReading::malformed(QStringLiteral("the event has neither data.email_id nor a once_key tag"));
        return {EventsReading::Status::Accepted, {}, {event}};
    }

    QLatin1StringView id() const override { return QLatin1StringView("resend"); }
    QString name() const override { return QStringLiteral("Resend"); }
    KeyHonouring honoursKey() const override { return KeyHonouring::Honoured; }
    // "Idempotency keys expire after 24 hours" (dashboard/emails/idempotency-keys).
    qint64 keyWindowMs() const override { return 24 * 3600 * 1000; }
    QStringList requiredFields() const override
    {
        return {QStringLiteral("destination"), QStringLiteral("subject"), QStringLiteral("body")};
    }

    QString settingsProblem(const PartnerSettings &partner) const override
    {
        if (QString problem = PartnerProfile::settingsProblem(partner); !problem.isEmpty())
            return problem;
        if (partner.from.trimmed().isEmpty())
            return QStringLiteral("needs \"from\": the sender's address");
        if (partner.token.isEmpty())
            return QStringLiteral("needs \"token\": the API key");
        if (partner.secretOptions.contains(QStringLiteral("events_secret"))
            && !eventsignatures::svixKey(partner.secretOptions.value(QStringLiteral("events_secret"))))
            return QStringLiteral("\"events_secret\" must hold Resend's signing secret, whsec_ and base64");
        return {};
    }

    std::optional<HttpRequest> sendRequest(const PartnerSettings &partner, const Reminder &reminder,
                                           QString *problem) const override
    {
        const auto content = contentFor(*this, partner, reminder, problem);
        if (!content)
            return std::nullopt;
        const QByteArray tag = reminder.sendKey.size() <= MaxTagChars && isTagText(reminder.sendKey)
                                   ? reminder.sendKey
                                   : keyWithin(reminder.sendKey, 0);
        const QJsonObject body{
            {QStringLiteral("from"), partner.from},
            {QStringLiteral("to"), QJsonArray{content->destination}},
            {QStringLiteral("subject"), content->subject},
            {QStringLiteral("text"), content->body},
            {QStringLiteral("tags"),
             QJsonArray{QJsonObject{{QStringLiteral("name"), QStringLiteral("once_key")},
                                    {QStringLiteral("value"), QString::fromLatin1(tag)}}}},
        };
        HttpRequest request;
        request.url = endpoint(partner.url, QStringLiteral("/emails"));
        request.body = QJsonDocument(body).toJson(QJsonDocument::Compact);
        request.headers = {{"Content-Type", "application/json"},
                           {"Authorization", "Bearer " + partner.token},
                           {"Idempotency-Key", keyWithin(reminder.sendKey, MaxIdempotencyKeyChars)}};
        return request;
    }

    SendOutcome classify(const HttpResult &result, qint64 nowMs,
                         const SecretRedactor &redactor) const override
    {
        SendOutcome outcome = once::classify(result, nowMs, redactor);
        if (result.status != HttpResult::Status::Response)
            return outcome;
        const QJsonObject reply = QJsonDocument::fromJson(result.body).object();
        if (outcome.kind == SendOutcome::Kind::Applied) {
            outcome.providerRequestId =
                partnerText(reply.value(QLatin1String("id")).toString(), redactor, MaxRequestIdChars);
            return outcome;
        }
        const QString error = reply.value(QLatin1String("name")).toString();
        const int status = result.httpStatus;
        if (status == 409 && error == QLatin1String("invalid_idempotent_request")) {
            outcome.kind = SendOutcome::Kind::PayloadChanged;
            outcome.errorClass = QStringLiteral("payload-changed");
        } else if (status == 409) {
            // concurrent_idempotent_requests: the first request with the key is still running.
            outcome.kind = SendOutcome::Kind::Transient;
            outcome.errorClass = QStringLiteral("key-in-flight");
        } else if (status == 422 || (status == 403 && error == QLatin1String("validation_error"))) {
            // Resend says "payload changed" with a 409; a 422 (missing_required_field,
            // invalid_parameter) or a 403 validation_error (a test domain's recipient)
            // is about this e-mail only.
            outcome.kind = SendOutcome::Kind::Permanent;
            outcome.errorClass = QStringLiteral("rejected");
        }
        return outcome;
    }
};

} // namespace

const PartnerProfile &resendProfile()
{
    static const ResendProfile profile;
    return profile;
}

} // namespace once
