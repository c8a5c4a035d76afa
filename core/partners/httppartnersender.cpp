#include "partners/httppartnersender.h"

#include "model/reminder.h"
#include "partners/partnerprofile.h"

#include <QDateTime>

namespace once {

HttpPartnerSender::HttpPartnerSender(const PartnerProfile &profile, const PartnerSettings &partner,
                                     int maxConnections, int timeoutMs, QObject *parent)
    : PartnerSender(parent)
    , m_profile(profile)
    , m_partner(partner)
    , m_client(maxConnections)
    , m_timeoutMs(timeoutMs)
    , m_redactor(partner.secrets())
{
    m_client.setSslConfiguration(partner.tls.sslConfiguration());
}

QString HttpPartnerSender::displayUrl() const
{
    return m_profile.displayUrl(m_partner);
}

void HttpPartnerSender::send(const Reminder &reminder, QObject *context,
                             std::function<void(const SendOutcome &)> onFinished)
{
    QString problem;
    std::optional<HttpRequest> request = m_profile.sendRequest(m_partner, reminder, &problem);
    if (!request) {
        SendOutcome outcome;
        outcome.kind = SendOutcome::Kind::Unsendable;
        outcome.errorClass = QStringLiteral("missing-field");
        outcome.error = problem;
        QMetaObject::invokeMethod(context, [onFinished = std::move(onFinished), outcome] { onFinished(outcome); },
                                  Qt::QueuedConnection);
        return;
    }
    request->timeoutMs = m_timeoutMs;
    m_client.send(*request, context, [this, onFinished = std::move(onFinished)](const HttpResult &result) {
        onFinished(m_profile.classify(result, QDateTime::currentMSecsSinceEpoch(), m_redactor));
    });
}

bool HttpPartnerSender::canLookUp() const
{
    return m_profile.canLookUp(m_partner);
}

void HttpPartnerSender::lookUp(const QByteArray &sendKey, QObject *context,
                               std::function<void(const LookupResult &)> onFinished)
{
    std::optional<HttpRequest> request = m_profile.lookupRequest(m_partner, sendKey);
    if (!request) {
        PartnerSender::lookUp(sendKey, context, std::move(onFinished));
        return;
    }
    request->timeoutMs = m_timeoutMs;
    m_client.send(*request, context, [this, sendKey, onFinished = std::move(onFinished)](const HttpResult &result) {
        onFinished(m_profile.readLookup(result, sendKey, m_redactor));
    });
}

} // namespace once
