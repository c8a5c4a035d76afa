#pragma once

#include "alerting/notifiers/notifier.h"

#include <QByteArray>

namespace once {

class HttpClient;

// A notification POSTed to an HTTP endpoint; delivered at a 2xx. The body is the generic
// JSON (Notification::toJson) unless another shape is given (a chat's webhook).
class WebhookNotifier : public Notifier
{
    Q_OBJECT

public:
    using Body = std::function<QByteArray(const Notification &)>;
    // shownAs: the URL the logs name it by (scheme, host and port), when not url.
    explicit WebhookNotifier(const QUrl &url, Body body = {}, const QUrl &shownAs = {},
                             QObject *parent = nullptr);
    ~WebhookNotifier() override;

    void send(const Notification &notification, Done done) override;

private:
    QUrl m_url;
    Body m_body;
    std::unique_ptr<HttpClient> m_client;
};

} // namespace once
