#include "delivery/partnersender.h"

#include "model/partnerpolicy.h"
#include "delivery/partnertext.h"
#include "http/retryafter.h"

#include <QDateTime>
#include <QTimeZone>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRandomGenerator>

namespace once {

qint64 retryDelayMs(int sendsSoFar, qint64 baseMs, qint64 capMs, qint64 retryAfterMs)
{
    const int exponent = std::clamp(sendsSoFar - 1, 0, 30);
    const qint64 ceiling = std::min<qint64>(capMs, baseMs << exponent);
    const qint64 jittered = ceiling > 0 ? qint64(QRandomGenerator::global()->bounded(quint64(ceiling) + 1)) : 0;
    return std::max(jittered, retryAfterMs);
}

SendOutcome classify(const HttpResult &result, qint64 nowMs, const SecretRedactor &redactor)
{
    SendOutcome outcome;
    outcome.latencyMs = result.latencyMs;
    outcome.httpStatus = result.httpStatus;
    switch (result.status) {
    case HttpResult::Status::NotSent:
        outcome.kind = SendOutcome::Kind::Transient;
        outcome.errorClass = QStringLiteral("connect-failed");
        outcome.error = partnerText(result.error, redactor, MaxErrorChars);
        return outcome;
    case HttpResult::Status::InDoubt:
        outcome.kind = SendOutcome::Kind::InDoubt;
        outcome.errorClass = QStringLiteral("in-doubt");
        outcome.error = partnerText(result.error, redactor, MaxErrorChars);
        return outcome;
    case HttpResult::Status::Response:
        break;
    }

    // Everything below comes from the partner: redacted and made one printable line
    // before it is cut, stored or shown.
    const int status = result.httpStatus;
    QString requestId = QString::fromUtf8(result.header("x-request-id"));
    if (requestId.isEmpty() && result.body.startsWith('{')) {
        const auto reply = QJsonDocument::fromJson(result.body).object();
        requestId = reply.value(QLatin1String("request_id")).toString();
    }
    outcome.providerRequestId = partnerText(requestId, redactor, MaxRequestIdChars);
    if (status >= 200 && status < 300) {
        outcome.kind = SendOutcome::Kind::Applied;
        return outcome;
    }
    const QString reason = partnerText(QString::fromUtf8(result.body), redactor, MaxReasonChars);
    outcome.error = QStringLiteral("HTTP ") + QString::number(status)
                    + (reason.isEmpty() ? QString() : QStringLiteral(": ") + reason);
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
    } else if (status == 401 || status == 403 || status == 407) {
        outcome.setCredentialsRefused();
    } else if (status == 422) {
        outcome.kind = SendOutcome::Kind::PayloadChanged;
        outcome.errorClass = QStringLiteral("payload-changed");
    } else {
        outcome.setRejected();
    }
    return outcome;
}

QString partnerTokenProblem(const QByteArray &token)
{
    bool lineBreak = false;
    bool nul = false;
    bool control = false;
    for (const char ch : token) {
        const auto c = static_cast<unsigned char>(ch);
        lineBreak = lineBreak || c == '\r' || c == '\n';
        nul = nul || c == 0;
        control = control || c < 0x20 || c == 0x7f;
    }
    if (lineBreak)
        return QStringLiteral("contains a line break (CR or LF), which cannot be sent in an HTTP header");
    if (nul)
        return QStringLiteral("contains a NUL byte, which cannot be sent in an HTTP header");
    if (control)
        return QStringLiteral("contains a control character, which cannot be sent in an HTTP header");
    if (!token.isEmpty() && (token.front() == ' ' || token.back() == ' '))
        return QStringLiteral("starts or ends with a space, which a partner would not see in the header");
    return {};
}

void PartnerSender::lookUp(const QByteArray &, QObject *context, std::function<void(const LookupResult &)> onFinished)
{
    QMetaObject::invokeMethod(context, [onFinished = std::move(onFinished), name = displayUrl()] {
        LookupResult result;
        result.error = QStringLiteral("%1 has no lookup").arg(name);
        onFinished(result);
    }, Qt::QueuedConnection);
}

} // namespace once
