#include "partners/profiles/mailgunprofile.h"

#include "model/reminder.h"
#include "partners/partnerprofile.h"

#include <QJsonDocument>
#include <QJsonObject>

namespace once {

namespace {

// A custom variable travels in every event of the message; a key kept well inside what
// a form field and an event hold. A longer one travels as its digest.
constexpr qsizetype MaxVariableChars = 1000;

QByteArray formField(const char *name, const QString &value)
{
    return QByteArray(name) + '=' + QUrl::toPercentEncoding(value);
}

// The id Mailgun answers a send with is "<ID>", the Message-Id its events name is ID.
QString bareMessageId(QString id)
{
    id = id.trimmed();
    if (id.startsWith(QLatin1Char('<')) && id.endsWith(QLatin1Char('>')))
        id = id.mid(1, id.size() - 2);
    return id;
}

// documentation.mailgun.com/docs/mailgun/user-manual/webhooks/webhook-payloads: "event",
// and for "failed" a "severity" of permanent or temporary.
PartnerEvent::Kind mailgunKind(const QString &event, const QString &severity)
{
    if (event == QLatin1String("delivered"))
        return PartnerEvent::Kind::Delivered;
    if (event == QLatin1String("failed"))
        return severity == QLatin1String("temporary") ? PartnerEvent::Kind::Deferred
                                                      : PartnerEvent::Kind::Bounced;
    if (event == QLatin1String("rejected"))
        return PartnerEvent::Kind::Failed;
    if (event == QLatin1String("opened"))
        return PartnerEvent::Kind::Opened;
    if (event == QLatin1String("clicked"))
        return PartnerEvent::Kind::Clicked;
    if (event == QLatin1String("complained"))
        return PartnerEvent::Kind::Complained;
    return PartnerEvent::Kind::Other; // accepted, unsubscribed, stored
}

class MailgunProfile final : public PartnerProfile
{
public:
    QLatin1StringView id() const override { return QLatin1StringView("mailgun"); }
    QString name() const override { return QStringLiteral("Mailgun"); }
    KeyHonouring honoursKey() const override { return KeyHonouring::Ignored; }
    QStringList requiredFields() const override
    {
        return {QStringLiteral("destination"), QStringLiteral("subject"), QStringLiteral("body")};
    }
    QStringList optionNames() const override
    {
        return {QStringLiteral("domain"), QStringLiteral("events_secret")};
    }
    QStringList secretOptionNames() const override { return {QStringLiteral("events_secret")}; }

    QString settingsProblem(const PartnerSettings &partner) const override
    {
        if (QString problem = PartnerProfile::settingsProblem(partner); !problem.isEmpty())
            return problem;
        if (partner.from.trimmed().isEmpty())
            return QStringLiteral("needs \"from\": the sender's address");
        if (partner.token.isEmpty())
            return QStringLiteral("needs \"token\": the API key");
        const QString domain = partner.options.value(QLatin1String("domain")).toString();
        if (domain.isEmpty() || domain.contains(QLatin1Char('/')) || domain.contains(QLatin1Char('?')))
            return QStringLiteral("needs \"domain\": the sending domain (mg.example.com)");
        return {};
    }

    std::optional<HttpRequest> sendRequest(const PartnerSettings &partner, const Reminder &reminder,
                                           QString *problem) const override
    {
        const auto content = contentFor(*this, partner, reminder, problem);
        if (!content)
            return std::nullopt;
        HttpRequest request;
        request.url = endpoint(
            partner.url,
            QStringLiteral("/v3/%1/messages").arg(partner.options.value(QLatin1String("domain")).toString()));
        request.body =
            formField("from", partner.from) + '&' + formField("to", content->destination) + '&' +
            formField("subject", content->subject) + '&' + formField("text", content->body) + '&' +
            formField("v:once-send-key", QString::fromUtf8(keyWithin(reminder.sendKey, MaxVariableChars)));
        request.headers = {{"Content-Type", "application/x-www-form-urlencoded"},
                           {"Authorization", "Basic " + QByteArray("api:" + partner.token).toBase64()}};
        return request;
    }

    SendOutcome classify(const HttpResult &result, qint64 nowMs,
                         const SecretRedactor &redactor) const override
    {
        SendOutcome outcome = once::classify(result, nowMs, redactor);
        if (result.status != HttpResult::Status::Response)
            return outcome;
        if (outcome.kind == SendOutcome::Kind::Applied) {
            const QJsonObject reply = QJsonDocument::fromJson(result.body).object();
            outcome.providerRequestId = partnerText(
                bareMessageId(reply.value(QLatin1String("id")).toString()), redactor, MaxRequestIdChars);
        } else if (result.httpStatus == 401 || result.httpStatus == 403) {
            outcome.setCredentialsRefused();
        } else if (result.httpStatus == 422) {
            outcome.setRejected();
        }
        return outcome;
    }

    // documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks: the
    // body's "signature" object holds timestamp, token and signature, the hex HMAC-SHA256
    // of timestamp followed by token, keyed with the HTTP webhook signing key. Mailgun asks
    // receivers to refuse a token seen before: the event id recorded once does that here.
    EventsReading readEvents(const PartnerSettings &partner, const IncomingEvents &request) const override
    {
        const QByteArray key = partner.secretOptions.value(QStringLiteral("events_secret"));
        if (key.isEmpty())
            return EventsReading::refused(
                QStringLiteral("partner \"%1\" has no \"events_secret\" (Mailgun's HTTP webhook signing key)")
                    .arg(partner.name));
        QJsonParseError parseError;
        const QJsonDocument document = QJsonDocument::fromJson(request.body, &parseError);
        const QJsonObject signature = document.object().value(QLatin1String("signature")).toObject();
        const QByteArray timestamp =
            signature.value(QLatin1String("timestamp")).toVariant().toString().toLatin1();
        const QByteArray token = signature.value(QLatin1String("token")).toString().toLatin1();
        const QByteArray given = signature.value(QLatin1String("signature")).toString().toLatin1().toLower();
        if (parseError.error != QJsonParseError::NoError || timestamp.isEmpty() || token.isEmpty() ||
            given.isEmpty())
            return EventsReading::refused(
                QStringLiteral("unsigned: no signature object with timestamp, token and signature"));
        if (!eventsignatures::sameBytes(given, eventsignatures::hmacSha256(key, timestamp + token).toHex()))
            return EventsReading::refused(
                QStringLiteral("the signature does not match under this partner's signing key"));
        // The signature covers the timestamp and token only, not event-data: a token is taken
        // once (PartnerEvent::signatureId), so that a captured request cannot be replayed
        // with other event-data.
        const QJsonObject data = document.object().value(QLatin1String("event-data")).toObject();
        const SecretRedactor redactor(partner.secrets());
        PartnerEvent event;
        const QString kind = data.value(QLatin1String("event")).toString();
        if (kind.isEmpty())
            return EventsReading::malformed(QStringLiteral("\"event-data\" must name its \"event\""));
        event.kind = mailgunKind(kind, data.value(QLatin1String("severity")).toString());
        event.providerKind = partnerText(kind, redactor, 40);
        event.eventId = partnerText(data.value(QLatin1String("id")).toString(), redactor, MaxRequestIdChars);
        if (event.eventId.isEmpty())
            event.eventId = QString::fromLatin1(token.left(MaxRequestIdChars));
        event.signatureId = QString::fromLatin1(token.left(MaxRequestIdChars));
        event.providerMessageId = partnerText(bareMessageId(data.value(QLatin1String("message"))
                                                                .toObject()
                                                                .value(QLatin1String("headers"))
                                                                .toObject()
                                                                .value(QLatin1String("message-id"))
                                                                .toString()),
                                              redactor, MaxRequestIdChars);
        event.carriedKey = data.value(QLatin1String("user-variables"))
                               .toObject()
                               .value(QLatin1String("once-send-key"))
                               .toString()
                               .toUtf8();
        event.atMs = providerTimeMs(data.value(QLatin1String("timestamp")));
        const QJsonObject status = data.value(QLatin1String("delivery-status")).toObject();
        event.detail = partnerText(status.value(QLatin1String("description"))
                                       .toString(status.value(QLatin1String("message")).toString()),
                                   redactor, MaxReasonChars);
        if (event.providerMessageId.isEmpty() && event.carriedKey.isEmpty())
            return EventsReading::malformed(
                QStringLiteral("the event has neither a message-id nor once-send-key"));
        return {EventsReading::Status::Accepted, {}, {event}};
    }
};

} // namespace

const PartnerProfile &mailgunProfile()
{
    static const MailgunProfile profile;
    return profile;
}

} // namespace once
