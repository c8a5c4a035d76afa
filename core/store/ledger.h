#pragma once

#include "model/reminder.h"

#include <QByteArray>
#include <QList>
#include <QString>

#include <optional>

namespace once {

enum class InDoubtPolicy { Resend, Hold };

// "resend", "hold": the words of --in-doubt, the workers table and JSON.
inline QString inDoubtPolicyName(InDoubtPolicy policy)
{
    return policy == InDoubtPolicy::Hold ? QStringLiteral("hold") : QStringLiteral("resend");
}

// Ledger states of one send key. The full state machine is in docs/state-machine.md.
namespace LedgerState {
inline constexpr QLatin1String Claimed("claimed");   // a worker holds the key and may be sending
inline constexpr QLatin1String Retrying("retrying"); // a send failed transiently; the message waits for its retry
inline constexpr QLatin1String Applied("applied");   // the partner accepted; final
inline constexpr QLatin1String InDoubt("in_doubt");  // outcome unknown, held for an operator
inline constexpr QLatin1String Dead("dead");         // dead-lettered; an operator may redrive
inline constexpr QLatin1String Expired("expired");   // past its expiry before it could be sent: not sent; final
} // namespace LedgerState

struct ClaimRequest
{
    Reminder reminder;
    QString messageId;
    int delivery = 0;
    qint64 leaseUntilMs = 0;
    // What a key found in doubt leads to: that of the partner the reminder goes to.
    std::optional<InDoubtPolicy> policy{};
    // How long that partner keeps a key (PartnerProfile::keyWindowMs); 0: forever. A key
    // in doubt whose first send may be older is held, not resent: the partner may have
    // forgotten the key and would act again.
    qint64 keyWindowMs{};
    // That partner's name and profile, for the claim's history row: where a claim holds a
    // key whose worker died, that row is the only record of where the unrecorded send
    // went, and what once reconcile asks.
    QString partner{};
    QString partnerProfile{};
    // When the reminder stops being worth sending (effectiveExpiryMs); 0: never. The claim
    // records it in the ledger, where dead letters and the console find it.
    qint64 expiresAtMs{};
};

// A reminder's expiry: its own expires_at, else its scheduled time plus the default of the
// partner or route it goes to (expireAfterMs, 0: none); 0: it never expires.
inline qint64 effectiveExpiryMs(const Reminder &reminder, qint64 expireAfterMs)
{
    if (reminder.expiresAt.isValid())
        return reminder.expiresAt.toMSecsSinceEpoch();
    return expireAfterMs > 0 ? reminder.scheduledAt.toMSecsSinceEpoch() + expireAfterMs : 0;
}

struct ClaimResult
{
    enum class Outcome {
        Claimed,      // this delivery owns the key: send
        Resend,       // the key was in doubt (a claim whose holder vanished): send again with the same key
        Duplicate,    // already applied, or owned by another message: ack without sending
        Held,         // in doubt under the hold policy: ack without sending, the operator decides
        Busy,         // this same message is still being worked on elsewhere: leave it for later
    };
    Outcome outcome = Outcome::Claimed;
    int sendsThisRound = 0;   // sends since the key was (re)opened, for the attempt budget
    qint64 firstSentAtMs = 0; // 0 when never sent
    qint64 busyForMs = 0;     // Busy: how long the other holder's claim still runs
    // Duplicate or Held of a key that has not taken effect (held in doubt, dead-lettered):
    // why, for a queue that shows what became of each message. Empty where it took effect.
    QString notApplied;
};

// ClaimResult::notApplied (and the engine's) for a key held in doubt for an operator.
inline QString heldForOperator(const QString &why)
{
    return QStringLiteral("in doubt (%1): held for an operator").arg(why);
}

// One row of an event's history: a step of one delivery.
struct Attempt
{
    QByteArray sendKey; // empty for a message that did not parse
    QString eventId;
    QString messageId;
    int delivery = 0;
    QString workerId;
    qint64 atMs = 0;
    QString step;    // claim | send | ack | retry | dead-letter | operator
    QString outcome; // claimed, duplicate, resend, held, busy, applied, transient, ...
    int httpStatus = 0;
    qint64 latencyMs = -1;
    QString errorClass;
    QString error;
    QString providerRequestId;
    // An operator's row (step operator): the audit log row of the action that wrote it.
    qint64 auditId = 0;
    // The partner the delivery went (or was to go) to, and its profile (schema 19).
    QString partner{};
    QString partnerProfile{};
};

// The new state of a key after a send. It applies only while the delivery that
// claimed the key still holds the claim: a holder that stalled past its lease, and whose
// key another delivery has since taken over, must not overwrite that delivery's outcome.
struct LedgerUpdate
{
    QByteArray sendKey;
    QString messageId; // the claim holder
    int delivery = 0;
    QLatin1String state = LedgerState::Applied;
    bool countsAsSend = false; // a request reached (or may have reached) the partner
    qint64 sentAtMs = 0;
    int httpStatus = 0;
    QString errorClass;
    QString error;
    QString providerRequestId;
    // countsAsSend, and against the reminder's retry budget: not when the partner refused
    // everyone alike (a revoked credential), which says nothing of this reminder.
    bool spendsBudget = true;
};

// The claim ledger: one row per send key, unique on the whole key. Claims are atomic
// inserts (never read-then-write), so two workers can never both own a key.
class Ledger
{
public:
    virtual ~Ledger() = default;

    virtual QList<ClaimResult> claim(const QList<ClaimRequest> &requests, const QString &workerId,
                                     InDoubtPolicy policy, QString *error) = 0;
    // Writes state changes and history rows in one durable step. Updates from a delivery
    // that no longer holds its claim are ignored; their history rows are kept.
    virtual bool record(const QList<LedgerUpdate> &updates, const QList<Attempt> &attempts, QString *error) = 0;
    // An operator put a dead key back on the queue: any delivery of it may claim it again,
    // with a fresh attempt budget.
    virtual bool reopen(const QList<QByteArray> &keys, QString *error) = 0;
    // Retention: removes final keys (applied, expired) and their history last touched before beforeMs,
    // in small batches so that no worker waits long on a lock.
    virtual bool purgeFinished(qint64 beforeMs, QString *error) = 0;
};

} // namespace once
