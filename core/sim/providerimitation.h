#pragma once

#include "http/httpmessage.h"

#include <QByteArray>
#include <QLatin1StringView>
#include <QStringList>

#include <optional>
#include <variant>

namespace once {

// One request as the partner simulator received it.
struct SimRequest
{
    QByteArray method;
    QByteArray path;  // without the query
    QByteArray query; // as sent, percent-encoded
    HttpHeaders headers;
    QByteArray body;

    QByteArray header(QByteArrayView name) const;
};

// One answer of the simulator: a status, a body and any headers beyond the framing.
struct SimAnswer
{
    SimAnswer() = default;
    SimAnswer(int status, QByteArray body, QByteArray headers = {}, QByteArray contentType = "application/json")
        : status(status), body(std::move(body)), headers(std::move(headers)), contentType(std::move(contentType))
    {
    }

    int status = 200;
    QByteArray body;
    QByteArray headers; // "Name: value\r\n" lines
    QByteArray contentType = "application/json";
};

// What a send request carries, once the provider's imitation has read it.
struct SimSend
{
    QByteArray effectKey;      // what its effect is counted by at /effects
    QByteArray idempotencyKey; // empty: the provider deduplicates nothing
};

// A delivery event as the provider posts it to the sender's webhook, after a send.
struct SimEvent
{
    QByteArray query; // after the events URL's path (Twilio: the StatusCallback's query)
    QByteArray contentType = "application/json";
    QByteArray body;
    HttpHeaders headers; // the signature, once signEvent() ran
};

// How the simulator imitates one provider, as its documentation describes it (the pages
// docs/partners.md names): which requests are sends and lookups, the authentication, the
// request's shape, and the provider's own words for success and failure. The simulator
// around it does the rest alike for every provider: faults, idempotency records, effects.
class ProviderImitation
{
public:
    virtual ~ProviderImitation() = default;

    virtual QLatin1StringView id() const = 0; // as `once partner-sim --profile` names it
    virtual QString sendHelp() const = 0;     // "POST /emails"
    // Whether the provider honours an idempotency key (SimSend::idempotencyKey).
    virtual bool idempotent() const { return false; }
    // How long the provider keeps a key, as documented; 0: forever (or not documented).
    virtual qint64 keyWindowMs() const { return 0; }

    virtual bool isSend(const SimRequest &request) const = 0;
    virtual bool isLookup(const SimRequest &) const { return false; }

    // The provider's refusal of the request's credentials, or nothing when they pass.
    // An empty expected token accepts any non-empty one.
    virtual std::optional<SimAnswer> refuseCredentials(const SimRequest &request,
                                                       const QByteArray &token) const = 0;
    // The send the request makes, or the provider's answer to a malformed one.
    virtual std::variant<SimSend, SimAnswer> readSend(const SimRequest &request) const = 0;
    // The provider's success answer; messageId is the simulator's id of the message.
    virtual SimAnswer accepted(const QByteArray &messageId, const SimRequest &request) const = 0;
    // A failure the simulator was told to imitate (503, 429, a refused token), in the
    // provider's own shape.
    virtual SimAnswer failure(int status, const QByteArray &message) const = 0;
    // How the provider says when to come back after a 429 (or a 503 in an outage).
    virtual QByteArray retryHeaders(int seconds) const { return "Retry-After: " + QByteArray::number(seconds) + "\r\n"; }
    // Idempotency: the key's first request still runs / came with another body.
    virtual SimAnswer keyInProgress() const { return failure(409, "a request with this key is in progress"); }
    virtual SimAnswer keyReused() const { return failure(422, "key reused with a different body"); }

    // Lookup: the effect key a lookup asks for, and the answer (messageId empty: none).
    virtual QByteArray lookupKey(const SimRequest &) const { return {}; }
    virtual SimAnswer lookupAnswer(const QByteArray &) const { return failure(404, "not found"); }

    // Delivery events (docs/partners.md, "Delivery events"): what the provider posts after
    // it accepted send n: delivered, or a bounce. Nothing for a provider without events.
    virtual std::optional<SimEvent> deliveryEvent(const QByteArray &, const SimRequest &, bool, qint64) const
    {
        return std::nullopt;
    }
    // Signs the event as the provider does: url is where it goes (with its query), secret
    // the provider's secret as the sender's partners file holds it (Resend's whsec_...,
    // Postmark's "user:password", SendGrid's private key as base64 DER, Twilio's auth token).
    virtual void signEvent(SimEvent &, const QByteArray &, const QByteArray &, qint64) const {}
};

const ProviderImitation *providerImitation(QStringView id);
QStringList providerImitationIds();

} // namespace once
