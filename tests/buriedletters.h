#pragma once

// Dead letters made in a store directly, as a worker would leave them (leased, claimed,
// recorded dead, settled as a dead letter), without a partner or a worker to wait for:
// for the suites that test what an operator does with dead letters.
#include "model/clock.h"
#include "model/reminder.h"
#include "operator/operations.h"
#include "store/store.h"

namespace oncetest {

// Buries the reminder as a dead letter of errorClass, first sent at firstAttemptAtMs (0:
// now), after `redrives` redrives that each died again. False and *error on failure.
inline bool buryReminder(once::Store &store, const once::Reminder &reminder, const QString &errorClass,
                         qint64 firstAttemptAtMs, int redrives, QString *error)
{
    using namespace once;
    const QString worker = QStringLiteral("test-worker");
    if (!store.queue().enqueue({OutgoingMessage{reminder.payload, reminder.sendKey, reminder.eventId, 0, 0}}, error))
        return false;
    for (int round = 0; round <= redrives; ++round) {
        const auto leased = store.queue().lease(1, 60000, worker, error);
        if (leased.size() != 1)
            return false;
        const QueueMessage &message = leased.constFirst();
        ClaimRequest request{reminder, message.id, message.delivery, nowMs() + 60000};
        request.expiresAtMs = effectiveExpiryMs(reminder, 0); // as a worker's claim records it
        const QList<ClaimResult> claims = store.ledger().claim({request}, worker, InDoubtPolicy::Resend, error);
        if (claims.size() != 1)
            return false;
        const LedgerUpdate update{reminder.sendKey,
                                  message.id,
                                  message.delivery,
                                  LedgerState::Dead,
                                  true,
                                  firstAttemptAtMs > 0 ? firstAttemptAtMs : nowMs(),
                                  503,
                                  errorClass,
                                  QStringLiteral("HTTP 503 from the partner"),
                                  {}};
        if (!store.ledger().record({update}, {}, error))
            return false;
        const DeadLetterInfo info{errorClass,
                                  QStringLiteral("HTTP 503: Service Unavailable (%1)").arg(reminder.userId),
                                  2,
                                  firstAttemptAtMs,
                                  nowMs(),
                                  reminder.sendKey,
                                  reminder.eventId};
        if (!store.queue().settle({{Settlement::Kind::DeadLetter, message.id, message.delivery, 0, info}}, error))
            return false;
        if (round < redrives) {
            DeadLetterFilter filter;
            filter.sendKeys = {reminder.sendKey};
            const auto letters = store.inspector().deadLetters(filter, error);
            if (!letters || letters->size() != 1 || store.operations().redrive(*letters, 0, error) != std::optional<int>(1))
                return false;
        }
    }
    return true;
}

} // namespace oncetest
