#include "operator/brokerdeadletters.h"

#include "operator/inspector.h"
#include "queues/brokerqueue.h"

#include <limits>

namespace once {

std::optional<QList<DeadLetter>> BrokerDeadLetters::listAll(QString *error)
{
    m_snapshot.reset();
    auto letters = m_queue.deadLetters(std::numeric_limits<int>::max(), error);
    if (!letters)
        return std::nullopt;
    m_snapshot = std::move(*letters);
    return m_snapshot;
}

std::optional<QList<DeadLetter>> BrokerDeadLetters::snapshot(QString *error)
{
    return m_snapshot ? m_snapshot : listAll(error);
}

std::optional<QList<DeadLetter>> BrokerDeadLetters::page(const DeadLetterFilter &filter, QString *error)
{
    const auto letters = filter.afterId.isEmpty() ? listAll(error) : snapshot(error);
    if (!letters)
        return std::nullopt;
    QList<DeadLetter> page = deadLetterPage(*letters, filter);
    if (!noteKeyStates(&page, error))
        return std::nullopt;
    return page;
}

// A page at a time: the snapshot may hold thousands of letters, a page a hundred. The
// ledger changes under a snapshot (a redrive's keys become applied), so this is read
// afresh at every look.
bool BrokerDeadLetters::noteKeyStates(QList<DeadLetter> *letters, QString *error)
{
    return !m_ledger || m_ledger->noteKeyStates(letters, error);
}

std::optional<DeadLetterCounts> BrokerDeadLetters::counts(const DeadLetterFilter &filter, qint64 firstSentBeforeMs,
                                                          QString *error)
{
    const auto letters = snapshot(error);
    if (!letters)
        return std::nullopt;
    return countDeadLetters(*letters, filter, firstSentBeforeMs);
}

std::optional<DeadLetter> BrokerDeadLetters::letter(const QString &id, QString *error)
{
    const auto letters = snapshot(error);
    if (!letters)
        return std::nullopt;
    for (const DeadLetter &each : *letters) {
        if (each.id == id) {
            QList<DeadLetter> one{each};
            if (!noteKeyStates(&one, error))
                return std::nullopt;
            return one.constFirst();
        }
    }
    *error = QStringLiteral("no dead letter with message id \"%1\" now: it was redriven or discarded").arg(id);
    return std::nullopt;
}

} // namespace once
