#include "operator/brokerdeadletters.h"

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
    return deadLetterPage(*letters, filter);
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
        if (each.id == id)
            return each;
    }
    *error = QStringLiteral("no dead letter with message id \"%1\" now: it was redriven or discarded").arg(id);
    return std::nullopt;
}

} // namespace once
