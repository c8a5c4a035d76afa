#include "partners/profiles/twilioprofile.h"

#include "model/reminder.h"
#include "partners/partnerprofile.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QUrlQuery>

namespace once {

namespace {

QByteArray formField(const char *name, const QString &value)
{
    return QByteArray(name) + '=' + QUrl::toPercentEncoding(value);
}

// twilio.com/docs/messaging/guides/track-outbound-message-status: MessageStatus.
PartnerEvent::Kind twilioKind(const QByteArray &status)
{
    if (status == "delivered")
        return PartnerEvent::Kind::Delivered;
    if (status == "undelivered")
        return PartnerEvent::Kind::Bounced;
    if (status == "failed")
        return PartnerEvent::Kind::Failed;
    if (status == "read")
        return PartnerEvent::Kind::Opened;
    return PartnerEvent::Kind::Other; // accepted, scheduled, queued, sending, sent, canceled
}

QByteArray fieldOf(const QList<std::pair<QByteArray, QByteArray>> &fields, QByteArrayView name)
{
    for (const auto &[key, value] : fields) {
        if (key == name)
            return value;
    }
    return {};
}

class TwilioProfile final : public PartnerProfile
{
public:
    // events_url: the public URL of `once serve`'s events endpoint for this partner, as
    // Twilio calls it (through whatever proxy): the signature covers it, and every send
    // asks Twilio to post its status there (StatusCallback) with the send key in its query.
    QStringList optionNames() const override { return {QStringLiteral("events_url")}; }

    // twilio.com/docs/usage/webhooks/webhooks-security: X-Twilio-Signature is the base64
    // HMAC-SHA1, keyed with the auth token, of the URL Twilio requested followed by every
    // POST parameter's name and value, sorted by name.
    EventsReading readEvents(const PartnerSettings &partner, const IncomingEvents &request) const override
    {
        const QString eventsUrl = partner.options.value(QLatin1String("events_url")).toString();
        if (eventsUrl.isEmpty())
            return EventsReading::refused(
                QStringLiteral("partner \"%1\" has no \"events_url\": the URL Twilio signs").arg(partner.name));
        const QByteArray signature = request.head.header("X-Twilio-Signature");
        if (signature.isEmpty())
            return EventsReading::refused(QStringLiteral("unsigned: no X-Twilio-Signature"));
        const QByteArray url = eventsUrl.toUtf8() + (request.head.query.isEmpty() ? QByteArray() : '?' + request.head.query);
        const auto fields = formFields(request.body);
        if (!eventsignatures::sameBytes(signature.trimmed(), eventsignatures::twilioSignature(partner.token, url, fields)))
            return EventsReading::refused(QStringLiteral("X-Twilio-Signature does not match the URL and parameters under "
                                                         "this partner's auth token"));
        const QByteArray sid = fieldOf(fields, "MessageSid");
        const QByteArray status = fieldOf(fields, "MessageStatus");
        if (sid.isEmpty() || status.isEmpty())
            return EventsReading::malformed(QStringLiteral("a status callback carries MessageSid and MessageStatus"));
        const SecretRedactor redactor(partner.secrets());
        PartnerEvent event;
        event.kind = twilioKind(status);
        event.providerKind = partnerText(QString::fromUtf8(status), redactor, 40);
        event.providerMessageId = partnerText(QString::fromUtf8(sid), redactor, MaxRequestIdChars);
        event.carriedKey = QUrlQuery(QString::fromLatin1(request.head.query))
                               .queryItemValue(QStringLiteral("once_key"), QUrl::FullyDecoded)
                               .toUtf8();
        // Twilio posts each status once per message, and again only as a retry.
        event.eventId = event.providerMessageId + QLatin1Char(':') + event.providerKind;
        event.atMs = request.nowMs; // a status callback carries no time of its own
        if (const QByteArray code = fieldOf(fields, "ErrorCode"); !code.isEmpty())
            event.detail = partnerText(QStringLiteral("error %1").arg(QString::fromUtf8(code)), redactor, MaxReasonChars);
        return {EventsReading::Status::Accepted, {}, {event}};
    }

    QLatin1StringView id() const override { return QLatin1StringView("twilio"); }
    QString name() const override { return QStringLiteral("Twilio"); }
    KeyHonouring honoursKey() const override { return KeyHonouring::Ignored; }
    QStringList requiredFields() const override
    {
        return {QStringLiteral("destination"), QStringLiteral("body")};
    }

    QString settingsProblem(const PartnerSettings &partner) const override
    {
        if (QString problem = PartnerProfile::settingsProblem(partner); !problem.isEmpty())
            return problem;
        if (partner.account.isEmpty())
            return QStringLiteral("needs \"account\": the Account SID");
        if (partner.account.contains(':') || partner.account.contains('/'))
            return QStringLiteral("\"account\" must be an Account SID (AC...), without ':' or '/'");
        if (partner.token.isEmpty())
            return QStringLiteral("needs \"token\": the auth token");
        if (partner.from.trimmed().isEmpty())
            return QStringLiteral("needs \"from\": the sending number");
        if (partner.options.contains(QLatin1String("events_url"))) {
            const QUrl events(partner.options.value(QLatin1String("events_url")).toString(), QUrl::StrictMode);
            if (!events.isValid() || events.host().isEmpty() || events.hasQuery() || !events.userInfo().isEmpty()
                || (events.scheme() != QLatin1String("https") && events.scheme() != QLatin1String("http")))
                return QStringLiteral("\"events_url\" must be the http(s) URL Twilio posts status callbacks to, "
                                      "without a query or credentials");
        }
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
            QStringLiteral("/2010-04-01/Accounts/%1/Messages.json")
                .arg(QString::fromLatin1(QUrl::toPercentEncoding(QString::fromUtf8(partner.account)))));
        request.body = formField("To", content->destination) + '&' + formField("From", partner.from) + '&' +
                       formField("Body", content->body);
        // Twilio knows only its own SID: the status it posts later finds the key by the
        // callback URL's query.
        if (const QString events = partner.options.value(QLatin1String("events_url")).toString(); !events.isEmpty())
            request.body += '&' + formField("StatusCallback",
                                            events + QStringLiteral("?once_key=")
                                                + QString::fromLatin1(QUrl::toPercentEncoding(QString::fromUtf8(reminder.sendKey))));
        request.headers = {
            {"Content-Type", "application/x-www-form-urlencoded"},
            {"Authorization", "Basic " + QByteArray(partner.account + ':' + partner.token).toBase64()}};
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
                partnerText(reply.value(QLatin1String("sid")).toString(), redactor, MaxRequestIdChars);
            return outcome;
        }
        // 20404: no such account for these credentials, whichever SMS is sent.
        if (result.httpStatus == 404 && reply.value(QLatin1String("code")).toInt() == 20404) {
            outcome.setCredentialsRefused();
        } else if (result.httpStatus == 422) {
            outcome.setRejected();
        }
        return outcome;
    }
};

} // namespace

const PartnerProfile &twilioProfile()
{
    static const TwilioProfile profile;
    return profile;
}

} // namespace once
