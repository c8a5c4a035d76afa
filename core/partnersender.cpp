#include "partnersender.h"

#include <QDateTime>
#include <QTimeZone>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLocale>
#include <QRandomGenerator>

namespace once {

std::optional<qint64> parseRetryAfterMs(const QByteArray &value, qint64 nowMs)
{
    const QByteArray trimmed = value.trimmed();
    if (trimmed.isEmpty())
        return std::nullopt;
    bool isNumber = false;
    const qint64 seconds = trimmed.toLongLong(&isNumber);
    if (isNumber)
        return seconds < 0 ? std::nullopt : std::optional<qint64>(seconds * 1000);
    // IMF-fixdate, e.g. "Wed, 21 Oct 2015 07:28:00 GMT".
    const QDateTime date = QLocale::c().toDateTime(QString::fromLatin1(trimmed).section(QLatin1Char(' '), 1, 4),
                                                   QStringLiteral("dd MMM yyyy HH:mm:ss"));
    if (!date.isValid())
        return std::nullopt;
    QDateTime utc = date;
    utc.setTimeZone(QTimeZone::utc());
    return std::max<qint64>(0, utc.toMSecsSinceEpoch() - nowMs);
}

qint64 retryDelayMs(int sendsSoFar, qint64 baseMs, qint64 capMs, qint64 retryAfterMs)
{
    const int exponent = std::clamp(sendsSoFar - 1, 0, 30);
    const qint64 ceiling = std::min<qint64>(capMs, baseMs << exponent);
    const qint64 jittered = ceiling > 0 ? qint64(QRandomGenerator::global()->bounded(quint64(ceiling) + 1)) : 0;
    return std::max(jittered, retryAfterMs);
}

SendOutcome classify(const HttpResult &result, qint64 nowMs)
{
    SendOutcome outcome;
    outcome.latencyMs = result.latencyMs;
    outcome.httpStatus = result.httpStatus;
    switch (result.status) {
    case HttpResult::Status::NotSent:
        outcome.kind = SendOutcome::Kind::Transient;
        outcome.errorClass = QStringLiteral("connect-failed");
        outcome.error = result.error;
        return outcome;
    case HttpResult::Status::InDoubt:
        outcome.kind = SendOutcome::Kind::InDoubt;
        outcome.errorClass = QStringLiteral("in-doubt");
        outcome.error = result.error;
        return outcome;
    case HttpResult::Status::Response:
        break;
    }

    const int status = result.httpStatus;
    outcome.providerRequestId = QString::fromLatin1(result.header("x-request-id"));
    if (outcome.providerRequestId.isEmpty() && result.body.startsWith('{')) {
        const auto reply = QJsonDocument::fromJson(result.body).object();
        outcome.providerRequestId = reply.value(QLatin1String("request_id")).toString();
    }
    if (status >= 200 && status < 300) {
        outcome.kind = SendOutcome::Kind::Applied;
        return outcome;
    }
    const QString reason = QString::fromUtf8(result.body.left(200)).simplified();
    outcome.error = QStringLiteral("HTTP %1%2").arg(status).arg(reason.isEmpty() ? QString() : QStringLiteral(": ") + reason);
    if (const auto after = parseRetryAfterMs(result.header("retry-after"), nowMs))
        outcome.retryAfterMs = *after;
    if (status == 429) {
        outcome.kind = SendOutcome::Kind::Transient;
        outcome.errorClass = QStringLiteral("rate-limited");
    } else if (status == 409) {
        // An idempotent API's way of saying "this key is still in flight".
        outcome.kind = SendOutcome::Kind::Transient;
        outcome.errorClass = QStringLiteral("key-in-flight");
    } else if (status == 408 || status == 425 || status >= 500) {
        outcome.kind = SendOutcome::Kind::Transient;
        outcome.errorClass = status >= 500 ? QStringLiteral("http-5xx") : QStringLiteral("http-%1").arg(status);
    } else if (status == 422) {
        outcome.kind = SendOutcome::Kind::PayloadChanged;
        outcome.errorClass = QStringLiteral("payload-changed");
    } else {
        outcome.kind = SendOutcome::Kind::Permanent;
        outcome.errorClass = QStringLiteral("rejected");
    }
    return outcome;
}

PartnerSender::PartnerSender(const QUrl &partnerUrl, int maxConnections, int timeoutMs,
                             const QByteArray &bearerToken, QObject *parent)
    : QObject(parent)
    , m_client(maxConnections)
    , m_url(partnerUrl)
    , m_timeoutMs(timeoutMs)
    , m_authorization(bearerToken.isEmpty() ? QByteArray() : "Bearer " + bearerToken)
{
}

QString PartnerSender::displayUrl() const
{
    return m_url.toDisplayString(QUrl::RemoveUserInfo);
}

void PartnerSender::send(const QByteArray &sendKey, const QByteArray &payload, QObject *context,
                         std::function<void(const SendOutcome &)> onFinished)
{
    HttpRequest request;
    request.url = m_url;
    request.body = payload;
    request.timeoutMs = m_timeoutMs;
    request.headers = {{"Content-Type", "application/json"}, {"Idempotency-Key", sendKey}};
    if (!m_authorization.isEmpty())
        request.headers.append({"Authorization", m_authorization});
    m_client.send(request, context, [onFinished = std::move(onFinished)](const HttpResult &result) {
        onFinished(classify(result, QDateTime::currentMSecsSinceEpoch()));
    });
}

} // namespace once
