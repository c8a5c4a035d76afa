#pragma once

#include "http/httpclient.h"
#include "delivery/partnertext.h"
#include "http/partnertls.h"

#include <QObject>
#include <QUrl>

#include <functional>
#include <optional>

namespace once {

struct Reminder;

// What one partner call meant for the reminder.
struct SendOutcome
{
    enum class Kind {
        Applied,        // 2xx: the partner accepted
        Transient,      // retry later with the same key (408, 409, 425, 429, 5xx, nothing sent)
        InDoubt,        // the request was written and no answer came: it may have taken effect
        PayloadChanged, // 422 on a reused key: the payload under the key changed, a bug
        Permanent,      // other 4xx: retrying this reminder cannot help
        // 401, 403, 407: the partner refuses our credentials, whichever the reminder (an
        // expired or revoked token). A partner-wide outage, not a bad reminder: it waits.
        CredentialsRefused,
    };
    Kind kind = Kind::Transient;
    QString errorClass; // stable, for filters: http-5xx, rate-limited, connect-failed, ...
    QString error;      // one line, free of secrets
    int httpStatus = 0;
    qint64 latencyMs = 0;
    qint64 retryAfterMs = -1; // from Retry-After, when the partner sent one
    QString providerRequestId;
};

// Bounds on what is kept of a partner's words, in characters.
constexpr qsizetype MaxReasonChars = 200;     // the excerpt of an error body
constexpr qsizetype MaxRequestIdChars = 128;  // the provider's request id
constexpr qsizetype MaxErrorChars = 500;      // a whole error line

// What a partner's answer means. Everything taken from the partner (the error excerpt,
// the request id from a header or the JSON body) passes the redactor and partnerText()
// first: the partner may echo the request's Authorization header.
SendOutcome classify(const HttpResult &result, qint64 nowMs, const SecretRedactor &redactor = {});

// Exponential backoff with full jitter (a random delay up to base * 2^(n-1), capped),
// never shorter than what the partner asked for with Retry-After.
qint64 retryDelayMs(int sendsSoFar, qint64 baseMs, qint64 capMs, qint64 retryAfterMs);

// Why a bearer token cannot go into an Authorization header, or an empty string when it
// can. A line break would end the header early, so every send would fail before it left
// (and every reminder would be dead-lettered as "connect-failed"): such a token is
// refused at start. The text never quotes the token.
QString partnerTokenProblem(const QByteArray &token);

// Sends a reminder to the partner with its send key as Idempotency-Key. The bearer
// token goes into the Authorization header only; it is never part of an outcome.
class PartnerSender final : public QObject
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(PartnerSender)

public:
    PartnerSender(const QUrl &partnerUrl, int maxConnections, int timeoutMs, const QByteArray &bearerToken,
                  const PartnerTls &tls = {}, QObject *parent = nullptr);

    void send(const QByteArray &sendKey, const QByteArray &payload, QObject *context,
              std::function<void(const SendOutcome &)> onFinished);

    // The URL without credentials, for logs and the UI.
    QString displayUrl() const;

private:
    HttpClient m_client;
    QUrl m_url;
    int m_timeoutMs = 10000;
    QByteArray m_authorization;
    SecretRedactor m_redactor;
};

} // namespace once
