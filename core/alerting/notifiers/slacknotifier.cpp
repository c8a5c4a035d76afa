#include "alerting/notifiers/slacknotifier.h"

#include "alerting/notifiers/webhooknotifier.h"

#include <QDateTime>
#include <QHostAddress>
#include <QJsonDocument>
#include <QJsonObject>

namespace once {

std::unique_ptr<Notifier> createSlackNotifier(const QUrl &url, QString *error)
{
    QUrl target = url;
    const bool plain = url.scheme().compare(QLatin1String("slack+http"), Qt::CaseInsensitive) == 0;
    target.setScheme(plain ? QStringLiteral("http") : QStringLiteral("https"));
    const QHostAddress host(url.host());
    if (plain &&
        !(host.isLoopback() || url.host().compare(QLatin1String("localhost"), Qt::CaseInsensitive) == 0)) {
        *error = QStringLiteral(
                     "--notify slack+http://%1: plain HTTP only to a loopback address; use slack+https://")
                     .arg(url.host());
        return nullptr;
    }
    return std::make_unique<WebhookNotifier>(
        target,
        [](const Notification &notification) {
            // Slack's mrkdwn would read * and _ in a partner's name; plain text reads the same everywhere.
            const QJsonObject body{
                {QStringLiteral("text"), notification.text(QDateTime::currentMSecsSinceEpoch())}};
            return QJsonDocument(body).toJson(QJsonDocument::Compact);
        },
        url);
}

} // namespace once
