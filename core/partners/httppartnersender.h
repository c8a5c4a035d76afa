#pragma once

#include "delivery/partnersender.h"
#include "http/httpclient.h"
#include "partners/partnersettings.h"

namespace once {

class PartnerProfile;

// A partner reached over HTTP: the profile builds each request and reads each answer.
class HttpPartnerSender final : public PartnerSender
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(HttpPartnerSender)

public:
    HttpPartnerSender(const PartnerProfile &profile, const PartnerSettings &partner, int maxConnections,
                      int timeoutMs, QObject *parent = nullptr);

    void send(const Reminder &reminder, QObject *context, std::function<void(const SendOutcome &)> onFinished) override;
    bool canLookUp() const override;
    void lookUp(const QByteArray &sendKey, QObject *context, std::function<void(const LookupResult &)> onFinished) override;
    QString displayUrl() const override;

private:
    const PartnerProfile &m_profile;
    PartnerSettings m_partner;
    HttpClient m_client;
    int m_timeoutMs = 10000;
    SecretRedactor m_redactor;
};

} // namespace once
