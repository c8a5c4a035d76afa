#include "alerting/notifiers/webhooknotifier.h"

#include "http/httpclient.h"

#include <QJsonDocument>

namespace once {

namespace {
constexpr int RequestTimeoutMs = 10000;
}

WebhookNotifier::WebhookNotifier(const QUrl &url, Body body, const QUrl &shownAs, QObject *parent)
    : Notifier(shownAs.isEmpty() ? url : shownAs, parent), m_url(url), m_body(std::move(body)),
      m_client(std::make_unique<HttpClient>(1))
{
    if (!m_body)
        m_body = [](const Notification &notification) {
            return QJsonDocument(notification.toJson()).toJson(QJsonDocument::Compact);
        };
}

WebhookNotifier::~WebhookNotifier() = default;

void WebhookNotifier::send(const Notification &notification, Done done)
{
    HttpRequest request;
    request.url = m_url;
    request.method = "POST";
    request.headers = {{"Content-Type", "application/json"}, {"User-Agent", "once-watch"}};
    request.body = m_body(notification);
    request.timeoutMs = RequestTimeoutMs;
    m_client->send(request, this, [done = std::move(done)](const HttpResult &result) {
        if (result.status == HttpResult::Status::Response && result.httpStatus >= 200 &&
            result.httpStatus < 300) {
            done(true, QString());
            return;
        }
        // The client's error names neither the path nor the headers (http/httpclient.h).
        done(false, result.status == HttpResult::Status::Response
                        ? QStringLiteral("HTTP %1").arg(result.httpStatus)
                        : result.error);
    });
}

} // namespace once
