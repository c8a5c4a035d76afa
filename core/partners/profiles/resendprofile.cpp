#include "partners/profiles/resendprofile.h"

#include "model/reminder.h"
#include "partners/partnerprofile.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

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

class ResendProfile final : public PartnerProfile
{
public:
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
