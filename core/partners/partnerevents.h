#pragma once

#include "http/requesthead.h"

#include <QByteArray>
#include <QJsonValue>
#include <QList>
#include <QString>

#include <optional>

namespace once {

// What a provider says happened to a message after it accepted it, as its delivery
// webhook posts it to `once serve` (POST /v1/partners/NAME/events, docs/partners.md,
// "Delivery events"). Each profile reads its provider's own shape and checks its
// provider's own signature (PartnerProfile::readEvents).
struct PartnerEvent
{
    enum class Kind
    {
        Delivered, // the receiving server (or the handset) took it
        Bounced,   // refused for good (a hard bounce, an undeliverable number)
        Failed,    // the provider gave up on it (dropped, failed)
        Deferred,  // the provider will try again (a soft bounce, a delay)
        Opened,
        Clicked,
        Complained, // marked as spam
        Other,      // a kind the provider has and we do not tell apart (sent, queued, processed)
    };

    // The key the send carried (Metadata, custom_args, tags, the StatusCallback's query), as
    // the provider echoes it: the send key, or "once-sha256-..." where the provider's field
    // was too short for it (keyWithin). Empty when the event names only the provider's id.
    QByteArray carriedKey;
    QString providerMessageId; // the provider's id of the message (MessageID, email_id, sid)
    Kind kind = Kind::Other;
    QString providerKind; // the provider's own word ("HardBounce", "undelivered"), one line
    QString eventId;      // what the provider's retries of this one event share
    qint64 atMs = 0;      // when it happened, by the provider's clock (0: unknown)
    QString detail;       // the provider's reason (a bounce's description), one line
    // Where a signature does not cover the whole body (Mailgun signs a timestamp and a
    // token only), what it was made for once: a second request with it is a replay,
    // whatever event it now carries.
    QString signatureId;
};

// "delivered", "bounced", ... : the history's outcome of an event of this kind.
QString partnerEventKindName(PartnerEvent::Kind kind);

// A request at the events endpoint, as the profile reads it.
struct IncomingEvents
{
    const HttpHead &head;
    const QByteArray &body;
    qint64 nowMs = 0;
};

// What a profile made of an events request.
struct EventsReading
{
    enum class Status
    {
        Accepted,     // signed as the provider signs; events holds what it says
        Unauthorized, // unsigned, signed with another secret, changed after signing, or stale
        Malformed,    // signed, but not the provider's shape
    };
    Status status = Status::Accepted;
    QString error; // one line, never a secret
    QList<PartnerEvent> events;

    static EventsReading refused(const QString &why) { return {Status::Unauthorized, why, {}}; }
    static EventsReading malformed(const QString &why) { return {Status::Malformed, why, {}}; }
};

// The signatures providers put on their events, one function per scheme, so that a
// profile checks them and the simulator makes them alike.
namespace eventsignatures {

// Compares in time that does not depend on where the two first differ.
bool sameBytes(const QByteArray &a, const QByteArray &b);

QByteArray hmacSha256(const QByteArray &key, const QByteArray &message);
QByteArray hmacSha1(const QByteArray &key, const QByteArray &message);

// Svix (Resend): the key of a "whsec_BASE64" secret (its base64 part decoded), or
// nothing when the secret is not one.
std::optional<QByteArray> svixKey(const QByteArray &secret);
// "v1,BASE64" of HMAC-SHA256 over "id.timestamp.body".
QByteArray svixSignature(const QByteArray &key, const QByteArray &id, const QByteArray &timestamp,
                         const QByteArray &body);
// Svix's tolerance: a timestamp further than this from now is refused (a replay).
inline constexpr qint64 SvixToleranceMs = 5 * 60 * 1000;

// Twilio: base64 HMAC-SHA1 over the URL Twilio requested and then each form parameter's
// name and value, sorted by name, with no separators.
QByteArray twilioSignature(const QByteArray &authToken, const QByteArray &url,
                           const QList<std::pair<QByteArray, QByteArray>> &formFields);

// The webhook profile's own scheme (docs/partners.md): Once-Signature: t=UNIX,v1=BASE64,
// the HMAC-SHA256 of "t.body" keyed with the partner's events_secret; 5 minutes' tolerance.
QByteArray onceSignature(const QByteArray &secret, qint64 unixSeconds, const QByteArray &body);

// SendGrid: ECDSA P-256 with SHA-256 over timestamp + body, the signature base64 DER and
// the public key base64 DER (SubjectPublicKeyInfo), as SendGrid's settings show it.
bool ecdsaVerify(const QByteArray &publicKeyBase64, const QByteArray &message,
                 const QByteArray &signatureBase64, QString *error);
// Signs as SendGrid does, with a base64 DER (PKCS#8) private key; empty on failure.
QByteArray ecdsaSign(const QByteArray &privateKeyBase64, const QByteArray &message);
// A fresh P-256 key pair, base64 DER: {private (PKCS#8), public (SubjectPublicKeyInfo)}.
// For an imitation of SendGrid and for tests.
std::pair<QByteArray, QByteArray> newEcdsaKeyPair();

} // namespace eventsignatures

// A provider's time: RFC 3339 with any number of fractional digits ("2014-08-01T13:28:10.2735393-04:00"),
// or a number of Unix seconds (with a fraction); 0 when it is neither.
qint64 providerTimeMs(const QJsonValue &value);

// An application/x-www-form-urlencoded body as name/value pairs, decoded ('+' is a space).
QList<std::pair<QByteArray, QByteArray>> formFields(const QByteArray &body);

} // namespace once
