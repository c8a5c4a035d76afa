#include "partners/profiles/postmarkprofile.h"

#include "model/reminder.h"
#include "partners/partnerprofile.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

namespace once {

namespace {

// Postmark limits a metadata value to 80 characters (and a name to 20); a longer send
// key travels as its digest (keyWithin), which the lookup searches for the same way.
constexpr qsizetype MaxMetadataValueChars = 80;

// Postmark's ErrorCodes (postmarkapp.com/developer/api/overview#error-codes) that refuse
// the account or its sender, whichever reminder is sent: 10 bad or missing server token,
// 400/401 sender signature missing or unconfirmed, 405 not allowed to send (no credits),
// 412 account pending approval, 413 account may not send. Every other ErrorCode with a
// 422 is about this e-mail (300 invalid e-mail request, 406 inactive recipient).
bool refusesAccount(int errorCode)
{
    switch (errorCode) {
    case 10:
    case 400:
    case 401:
    case 405:
    case 412:
    case 413:
        return true;
    default:
        return false;
    }
}

// postmarkapp.com/developer/webhooks/bounce-webhook: the bounce types that refuse the
// address for good, and those Postmark tries again.
PartnerEvent::Kind bounceKind(const QString &type)
{
    static const QStringList hard{QStringLiteral("HardBounce"), QStringLiteral("BadEmailAddress"),
                                  QStringLiteral("ManuallyDeactivated"), QStringLiteral("Blocked"),
                                  QStringLiteral("DMARCPolicy"), QStringLiteral("SMTPApiError"),
                                  QStringLiteral("TemplateRenderingFailed"), QStringLiteral("Unconfirmed")};
    static const QStringList soft{QStringLiteral("SoftBounce"), QStringLiteral("Transient"), QStringLiteral("DnsError")};
    if (hard.contains(type))
        return PartnerEvent::Kind::Bounced;
    if (soft.contains(type))
        return PartnerEvent::Kind::Deferred;
    if (type == QLatin1String("SpamComplaint"))
        return PartnerEvent::Kind::Complained;
    return PartnerEvent::Kind::Other;
}

class PostmarkProfile final : public PartnerProfile
{
public:
    QLatin1StringView id() const override { return QLatin1StringView("postmark"); }
    QString name() const override { return QStringLiteral("Postmark"); }
    KeyHonouring honoursKey() const override { return KeyHonouring::Ignored; }
    QStringList requiredFields() const override
    {
        return {QStringLiteral("destination"), QStringLiteral("subject"), QStringLiteral("body")};
    }
    QStringList optionNames() const override
    {
        return {QStringLiteral("message_stream"), QStringLiteral("events_user"), QStringLiteral("events_password")};
    }
    QStringList secretOptionNames() const override { return {QStringLiteral("events_password")}; }

    QString settingsProblem(const PartnerSettings &partner) const override
    {
        if (QString problem = PartnerProfile::settingsProblem(partner); !problem.isEmpty())
            return problem;
        if (partner.from.trimmed().isEmpty())
            return QStringLiteral("needs \"from\": a sender signature's address");
        if (partner.token.isEmpty())
            return QStringLiteral("needs \"token\": the server token");
        if (partner.options.contains(QLatin1String("events_user"))
            && (!partner.options.value(QLatin1String("events_user")).isString()
                || partner.options.value(QLatin1String("events_user")).toString().contains(QLatin1Char(':'))))
            return QStringLiteral("\"events_user\" must be the webhook URL's user name, without ':'");
        const QJsonValue stream = partner.options.value(QLatin1String("message_stream"));
        if (!stream.isUndefined() && (!stream.isString() || stream.toString().trimmed().isEmpty()))
            return QStringLiteral("\"message_stream\" must be a stream's id, such as \"outbound\"");
        return {};
    }

    std::optional<HttpRequest> sendRequest(const PartnerSettings &partner, const Reminder &reminder,
                                           QString *problem) const override
    {
        const auto content = contentFor(*this, partner, reminder, problem);
        if (!content)
            return std::nullopt;
        const QJsonObject body{
            {QStringLiteral("From"), partner.from},
            {QStringLiteral("To"), content->destination},
            {QStringLiteral("Subject"), content->subject},
            {QStringLiteral("TextBody"), content->body},
            {QStringLiteral("MessageStream"),
             partner.options.value(QLatin1String("message_stream")).toString(QStringLiteral("outbound"))},
            {QStringLiteral("Metadata"),
             QJsonObject{{QStringLiteral("once_key"),
                          QString::fromUtf8(keyWithin(reminder.sendKey, MaxMetadataValueChars))}}},
        };
        HttpRequest request;
        request.url = endpoint(partner.url, QStringLiteral("/email"));
        request.body = QJsonDocument(body).toJson(QJsonDocument::Compact);
        request.headers = {{"Accept", "application/json"},
                           {"Content-Type", "application/json"},
                           {"X-Postmark-Server-Token", partner.token}};
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
                partnerText(reply.value(QLatin1String("MessageID")).toString(), redactor, MaxRequestIdChars);
            return outcome;
        }
        const int errorCode = reply.value(QLatin1String("ErrorCode")).toInt(-1);
        if (result.httpStatus == 401 || refusesAccount(errorCode)) {
            outcome.setCredentialsRefused();
        } else if (result.httpStatus == 422) {
            // No key was sent as a key, so a 422 cannot mean "payload changed": Postmark
            // refuses this e-mail, and sending it again cannot help.
            outcome.setRejected();
        }
        return outcome;
    }

    // postmarkapp.com/developer/webhooks/webhooks-overview: Postmark signs nothing; the
    // webhook's URL carries HTTP basic auth credentials (https://USER:PASSWORD@host/...),
    // which it sends as an Authorization header. The body is one event:
    // postmarkapp.com/developer/webhooks/delivery-webhook (RecordType "Delivery",
    // DeliveredAt), .../bounce-webhook ("Bounce", Type, BouncedAt, ID), each with the
    // send's Metadata and MessageID.
    EventsReading readEvents(const PartnerSettings &partner, const IncomingEvents &request) const override
    {
        const QByteArray user = partner.options.value(QLatin1String("events_user")).toString().toUtf8();
        const QByteArray password = partner.secretOptions.value(QStringLiteral("events_password"));
        if (user.isEmpty() || password.isEmpty())
            return EventsReading::refused(
                QStringLiteral("partner \"%1\" has no \"events_user\" and \"events_password\" to check Postmark's "
                               "basic auth by")
                    .arg(partner.name));
        const QByteArray authorization = request.head.header("Authorization");
        if (!authorization.startsWith("Basic "))
            return EventsReading::refused(QStringLiteral("no basic auth (Postmark sends the webhook URL's user and password)"));
        if (!eventsignatures::sameBytes(QByteArray::fromBase64(authorization.mid(6).trimmed()), user + ':' + password))
            return EventsReading::refused(QStringLiteral("the basic auth user or password is not this partner's"));
        QJsonParseError parseError;
        const QJsonDocument document = QJsonDocument::fromJson(request.body, &parseError);
        if (parseError.error != QJsonParseError::NoError || !document.isObject())
            return EventsReading::malformed(QStringLiteral("a Postmark event is one JSON object"));
        const QJsonObject record = document.object();
        const SecretRedactor redactor(partner.secrets());
        PartnerEvent event;
        const QString type = record.value(QLatin1String("RecordType")).toString();
        event.providerMessageId = partnerText(record.value(QLatin1String("MessageID")).toString(), redactor, MaxRequestIdChars);
        event.carriedKey =
            record.value(QLatin1String("Metadata")).toObject().value(QLatin1String("once_key")).toString().toUtf8();
        const QString recipient = record.value(QLatin1String("Recipient")).toString(record.value(QLatin1String("Email")).toString());
        if (type == QLatin1String("Delivery")) {
            event.kind = PartnerEvent::Kind::Delivered;
            event.providerKind = type;
            event.atMs = providerTimeMs(record.value(QLatin1String("DeliveredAt")));
            event.detail = partnerText(record.value(QLatin1String("Details")).toString(), redactor, MaxReasonChars);
            // A delivery has no id of its own: one per message and recipient.
            event.eventId = QStringLiteral("Delivery:%1:%2").arg(event.providerMessageId, recipient);
        } else if (type == QLatin1String("Bounce")) {
            const QString bounceType = record.value(QLatin1String("Type")).toString();
            event.kind = bounceKind(bounceType);
            event.providerKind = partnerText(bounceType, redactor, 40);
            event.atMs = providerTimeMs(record.value(QLatin1String("BouncedAt")));
            event.detail = partnerText(record.value(QLatin1String("Description")).toString(), redactor, MaxReasonChars);
            event.eventId = QStringLiteral("Bounce:%1").arg(record.value(QLatin1String("ID")).toVariant().toString());
        } else if (type == QLatin1String("SpamComplaint") || type == QLatin1String("Open") || type == QLatin1String("Click")) {
            event.kind = type == QLatin1String("Open")    ? PartnerEvent::Kind::Opened
                         : type == QLatin1String("Click") ? PartnerEvent::Kind::Clicked
                                                          : PartnerEvent::Kind::Complained;
            event.providerKind = type;
            event.atMs = providerTimeMs(record.value(QLatin1String("ReceivedAt")).toString(
                record.value(QLatin1String("BouncedAt")).toString()));
            event.eventId = QStringLiteral("%1:%2:%3:%4")
                                .arg(type, event.providerMessageId, recipient, QString::number(event.atMs));
        } else {
            return EventsReading::malformed(QStringLiteral("\"RecordType\" must be Delivery, Bounce, SpamComplaint, Open or "
                                                           "Click"));
        }
        if (event.providerMessageId.isEmpty() && event.carriedKey.isEmpty())
            return EventsReading::malformed(QStringLiteral("the event has neither MessageID nor Metadata.once_key"));
        return {EventsReading::Status::Accepted, {}, {event}};
    }

    bool canLookUp(const PartnerSettings &) const override { return true; }
    // Postmark does not say how soon a sent message shows in the search.
    qint64 lookupGraceMs() const override { return 5 * 60 * 1000; }

    std::optional<HttpRequest> lookupRequest(const PartnerSettings &partner,
                                             const QByteArray &sendKey) const override
    {
        HttpRequest request;
        request.method = "GET";
        request.url = endpoint(partner.url, QStringLiteral("/messages/outbound"));
        // Percent-encoded here, every byte outside the unreserved set: a key's '%' and
        // '+' must reach Postmark as themselves.
        request.url.setQuery(QStringLiteral("count=1&offset=0&metadata_once_key=") +
                                 QString::fromLatin1(QUrl::toPercentEncoding(
                                     QString::fromUtf8(keyWithin(sendKey, MaxMetadataValueChars)))),
                             QUrl::StrictMode);
        request.headers = {{"Accept", "application/json"}, {"X-Postmark-Server-Token", partner.token}};
        return request;
    }

    LookupResult readLookup(const HttpResult &result, const QByteArray &sendKey,
                            const SecretRedactor &redactor) const override
    {
        if (result.status != HttpResult::Status::Response || result.httpStatus != 200)
            return PartnerProfile::readLookup(result, sendKey, redactor);
        const QJsonObject reply = QJsonDocument::fromJson(result.body).object();
        LookupResult lookup;
        lookup.httpStatus = result.httpStatus;
        const QJsonValue total = reply.value(QLatin1String("TotalCount"));
        if (!total.isDouble()) {
            lookup.error = QStringLiteral("Postmark's search answered without a TotalCount");
            return lookup;
        }
        if (total.toDouble() <= 0) {
            lookup.kind = LookupResult::Kind::NotFound;
            return lookup;
        }
        lookup.kind = LookupResult::Kind::Found;
        const QJsonObject first = reply.value(QLatin1String("Messages")).toArray().first().toObject();
        lookup.providerMessageId =
            partnerText(first.value(QLatin1String("MessageID")).toString(), redactor, MaxRequestIdChars);
        return lookup;
    }
};

} // namespace

const PartnerProfile &postmarkProfile()
{
    static const PostmarkProfile profile;
    return profile;
}

} // namespace once
