#pragma once

#include <QByteArray>
#include <QDateTime>
#include <QString>

#include <optional>

namespace once {

// Limits from the design: one message is one JSON line of at most 256 KiB (not counting
// its line ending), and a producer may delay a message by at most seven days.
inline constexpr qsizetype MaxMessageBytes = 256 * 1024;
inline constexpr qint64 MaxDelaySeconds = 7 * 24 * 3600;
// The ids are bounded so that a send key, sent as the Idempotency-Key header, stays short
// enough for any partner: percent-encoding writes at most three bytes for each byte of
// UTF-8, so a key is at most 2 * 3 * 128 + 2 + 64 bytes (834).
inline constexpr qsizetype MaxIdBytes = 128;
inline constexpr qsizetype MaxScheduledAtChars = 64;

// One reminder as the producer sent it. The original bytes are kept and forwarded to
// the partner unchanged, so unknown fields survive and the payload under a send key
// never changes between tries.
struct Reminder
{
    QString userId;
    QString reminderId;
    QDateTime scheduledAt; // UTC
    QString destination;
    QString channel;  // optional
    QString eventId;  // optional, producer-assigned, carried through every retry
    QByteArray sendKey;
    QByteArray payload; // the JSON object exactly as the producer sent it, trimmed
    // When the reminder stops being worth sending (expires_at, UTC); null: never. Not part
    // of the send key: it says how long to try, not which send this is.
    QDateTime expiresAt;
};

struct ReminderParseResult
{
    std::optional<Reminder> reminder;
    QString error; // one line, set when reminder is empty
};

// Validates one JSON message (a trailing LF or CRLF is allowed) and derives its send key.
// Strict: what it accepts it understands exactly (strictjson.h), and everything else is
// refused with a one-line reason, so no two different messages can share a key by way of
// a lenient reading.
ReminderParseResult parseReminder(const QByteArray &line);

// The send key: user + reminder + scheduled time, with the time normalised to UTC
// and the ids percent-encoded (as UTF-8) so that no ':' inside an id can make two
// different triples collide. Returns an empty key when scheduledAt is not RFC 3339 with
// an offset, or when an id is not Unicode text (an unpaired surrogate has no UTF-8 form).
QByteArray makeSendKey(const QString &userId, const QString &reminderId, const QString &scheduledAt);

// The inverse of makeSendKey: the ids and the canonical UTC time a key was made from.
// Only keys exactly as makeSendKey writes them decode, so for every key it made,
// parseSendKey(makeSendKey(u, r, t)) gives back u, r and t's canonical form: the key is
// injective.
struct SendKeyParts
{
    QString userId;
    QString reminderId;
    QString canonicalTime;
};
std::optional<SendKeyParts> parseSendKey(const QByteArray &key);

// Parses RFC 3339 with a mandatory offset ("Z" or "+hh:mm"), any number of fraction
// digits, and a leap second (23:59:60 UTC on a month's last day). Returns the instant in
// UTC and the canonical UTC text used in send keys (fraction kept, trailing zeros cut; a
// leap second stays :60 there, while the QDateTime, which has no second 60, says
// :59.999). The UTC result must lie in the years 0001 to 9999. When it refuses, *why (if
// given) says why, as a predicate: "is not an RFC 3339 time with an offset".
struct Rfc3339Time
{
    QDateTime utc;
    QString canonical;
};
std::optional<Rfc3339Time> parseRfc3339(const QString &text, QString *why = nullptr);

} // namespace once
