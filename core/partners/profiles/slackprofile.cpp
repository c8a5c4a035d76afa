#include "partners/profiles/slackprofile.h"

#include "model/reminder.h"
#include "partners/partnerprofile.h"

#include <QJsonDocument>
#include <QJsonObject>

namespace once {

namespace {

class SlackProfile final : public PartnerProfile
{
public:
    QLatin1StringView id() const override { return QLatin1StringView("slack"); }
    QString name() const override { return QStringLiteral("Slack"); }
    KeyHonouring honoursKey() const override { return KeyHonouring::Ignored; }
    QStringList requiredFields() const override { return {QStringLiteral("body")}; }

    QString settingsProblem(const PartnerSettings &partner) const override
    {
        if (QString problem = PartnerProfile::settingsProblem(partner); !problem.isEmpty())
            return problem;
        if (partner.url.path().count(QLatin1Char('/')) < 2)
            return QStringLiteral(
                "\"url\" must be the incoming webhook's whole URL (https://hooks.slack.com/services/...)");
        return {};
    }

    // The webhook's path is its only credential: shown nowhere, redacted everywhere.
    QString displayUrl(const PartnerSettings &partner) const override
    {
        return partner.url
            .adjusted(QUrl::RemoveUserInfo | QUrl::RemovePath | QUrl::RemoveQuery | QUrl::RemoveFragment)
            .toDisplayString();
    }

    QList<QByteArray> urlSecrets(const PartnerSettings &partner) const override
    {
        QList<QByteArray> secrets{partner.url.path(QUrl::FullyEncoded).toUtf8()};
        const QString last = partner.url.path().section(QLatin1Char('/'), -1);
        if (!last.isEmpty())
            secrets.append(last.toUtf8());
        return secrets;
    }

    std::optional<HttpRequest> sendRequest(const PartnerSettings &partner, const Reminder &reminder,
                                           QString *problem) const override
    {
        const auto content = contentFor(*this, partner, reminder, problem);
        if (!content)
            return std::nullopt;
        const QString text =
            content->subject.trimmed().isEmpty()
                ? content->body
                : QLatin1Char('*') + content->subject.trimmed() + QStringLiteral("*\n") + content->body;
        HttpRequest request;
        request.url = partner.url;
        request.body =
            QJsonDocument(QJsonObject{{QStringLiteral("text"), text}}).toJson(QJsonDocument::Compact);
        request.headers = {{"Content-Type", "application/json"}};
        return request;
    }

    SendOutcome classify(const HttpResult &result, qint64 nowMs,
                         const SecretRedactor &redactor) const override
    {
        SendOutcome outcome = once::classify(result, nowMs, redactor);
        if (result.status != HttpResult::Status::Response || outcome.kind == SendOutcome::Kind::Applied)
            return outcome;
        // Slack answers in plain words. These refuse the webhook itself (removed,
        // revoked, its channel gone or archived, the workspace disabled), whichever
        // message is sent; invalid_payload and the like are about this message.
        const QByteArray body = result.body.trimmed();
        qsizetype end = 0;
        while (end < body.size() && ((body.at(end) >= 'a' && body.at(end) <= 'z') || body.at(end) == '_'))
            ++end;
        const QByteArray word = body.left(end);
        for (const char *refusal :
             {"invalid_token", "no_service", "no_service_id", "no_team", "team_disabled", "channel_not_found",
              "channel_is_archived", "action_prohibited"}) {
            if (word == refusal) {
                outcome.setCredentialsRefused();
                return outcome;
            }
        }
        if (result.httpStatus == 422) {
            outcome.setRejected();
        }
        return outcome;
    }
};

} // namespace

const PartnerProfile &slackProfile()
{
    static const SlackProfile profile;
    return profile;
}

} // namespace once
