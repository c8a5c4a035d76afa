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
    QStringList optionNames() const override { return {QStringLiteral("activity_api")}; }

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
            outcome.kind = SendOutcome::Kind::Permanent;
            outcome.errorClass = QStringLiteral("rejected");
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
