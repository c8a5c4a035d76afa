#pragma once

#include <QJsonObject>
#include <QString>
#include <QUrl>

#include <optional>

namespace once {

// Whether a partner applies a request with an Idempotency-Key it has already seen only
// once. Only the operator can know (from the partner's documentation or a rehearsal with
// the simulator), so it is recorded per partner URL in the store, where every console
// and `once history` read the same answer and word their verdicts from it.
enum class KeyHonouring { Unknown, Honoured, Ignored };

// "unknown", "yes", "no": the words of `once partners --honours-key` and of JSON.
QString keyHonouringName(KeyHonouring honouring);
std::optional<KeyHonouring> keyHonouringFromName(const QString &name);

// A partner as the store names it: its URL without credentials, exactly as workers
// register it, so that a policy set for a URL applies to the sends made to it.
QString partnerName(const QUrl &partnerUrl);

// An operator's pause of a partner (once partners NAME --pause): workers send it nothing
// until it is resumed, and put its reminders back without spending their tries.
struct PartnerPause
{
    QString partner;
    qint64 atMs = 0;
    QString by;
    QString reason; // may be empty

    // "paused (by X at T: reason)", as `once partners`, the console and the history say it.
    QString describe() const;
};

struct PartnerPolicy
{
    QString partner;
    KeyHonouring honoursKey = KeyHonouring::Unknown;
    QString setBy;          // empty while unknown
    qint64 setAtMs = 0;
    qint64 lastSeenMs = 0;  // the latest heartbeat of a worker sending to it; 0: none on record
    QString profile;        // as its workers' last heartbeats name it; empty before schema 19
    // As its live workers saw it: "sending", "failing" (a spell of failures), "held back"
    // (a breaker open); "no worker" when none runs.
    QString state;
    std::optional<PartnerPause> pause; // set while an operator has it paused

    QJsonObject toJson() const;
};

} // namespace once
