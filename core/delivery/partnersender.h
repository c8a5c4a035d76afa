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
        // Not sent: the reminder lacks what the partner's profile needs (a field, a route).
        // Nothing reached the partner, and retrying cannot help.
        Unsendable,
    };
    Kind kind = Kind::Transient;
    QString errorClass; // stable, for filters: http-5xx, rate-limited, connect-failed, ...
    QString error;      // one line, free of secrets
    int httpStatus = 0;
    qint64 latencyMs = 0;
    qint64 retryAfterMs = -1; // from Retry-After, when the partner sent one
    QString providerRequestId;

    // The two readings a provider's own answer codes most often call for, each with its
    // error class: it refuses our credentials (every reminder alike), or this reminder.
    void setCredentialsRefused()
    {
        kind = Kind::CredentialsRefused;
        errorClass = QStringLiteral("credentials-refused");
    }
    void setRejected()
    {
        kind = Kind::Permanent;
        errorClass = QStringLiteral("rejected");
    }
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

// What a provider said when asked for the message sent with a key (reconciliation).
struct LookupResult
{
    enum class Kind {
        Found,    // the provider has it: the send took effect
        NotFound, // the provider has no message with the key
        Failed,   // the question went unanswered: nothing is known
    };
    Kind kind = Kind::Failed;
    QString providerMessageId; // Found: the provider's id of the message
    QString error;             // Failed: one line, free of secrets
    int httpStatus = 0;
};

// Sends reminders to one partner, each with its send key as the provider's idempotency
// key or metadata (see PartnerProfile). Secrets go into the request's authentication only;
// they are never part of an outcome.
class PartnerSender : public QObject
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(PartnerSender)

public:
    using QObject::QObject;

    virtual void send(const Reminder &reminder, QObject *context, std::function<void(const SendOutcome &)> onFinished) = 0;
    // Whether lookUp() can ask the provider for a key.
    virtual bool canLookUp() const { return false; }
    virtual void lookUp(const QByteArray &sendKey, QObject *context, std::function<void(const LookupResult &)> onFinished);
    // Where it sends, without credentials, for logs and the UI.
    virtual QString displayUrl() const = 0;
};

} // namespace once
