#pragma once

#include <QByteArray>
#include <QDateTime>
#include <QString>

#include <optional>

namespace once {

// Limits from the design: one message is one JSON line of at most 256 KiB, and a
// producer may delay a message by at most seven days.
inline constexpr qsizetype MaxMessageBytes = 256 * 1024;
inline constexpr qint64 MaxDelaySeconds = 7 * 24 * 3600;

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
};

struct ReminderParseResult
{
    std::optional<Reminder> reminder;
    QString error; // one line, set when reminder is empty
};

// Validates one JSON line and derives its send key.
ReminderParseResult parseReminder(const QByteArray &line);

// The send key: user + reminder + scheduled time, with the time normalised to UTC
// and the ids percent-encoded so that no ':' inside an id can make two different
// triples collide. Returns an empty key when scheduledAt is not RFC 3339 with an offset.
QByteArray makeSendKey(const QString &userId, const QString &reminderId, const QString &scheduledAt);

// Parses RFC 3339 with a mandatory offset ("Z" or "+hh:mm"). Returns the instant in
// UTC and the canonical UTC text used in send keys (fraction kept, trailing zeros cut).
struct Rfc3339Time
{
    QDateTime utc;
    QString canonical;
};
std::optional<Rfc3339Time> parseRfc3339(const QString &text);

} // namespace once
