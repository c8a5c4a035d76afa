#include "partners/profiles/twilioprofile.h"

#include "model/reminder.h"
#include "partners/partnerprofile.h"

#include <QJsonDocument>
#include <QJsonObject>

namespace once {

namespace {

QByteArray formField(const char *name, const QString &value)
{
    return QByteArray(name) + '=' + QUrl::toPercentEncoding(value);
}

class TwilioProfile final : public PartnerProfile
{
public:
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
            outcome.kind = SendOutcome::Kind::CredentialsRefused;
            outcome.errorClass = QStringLiteral("credentials-refused");
        } else if (result.httpStatus == 422) {
            outcome.kind = SendOutcome::Kind::Permanent;
            outcome.errorClass = QStringLiteral("rejected");
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
