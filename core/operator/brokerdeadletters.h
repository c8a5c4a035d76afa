#pragma once

#include "model/deadletter.h"

#include <QList>
#include <QString>

#include <optional>

namespace once {

class BrokerQueue;
class Inspector;

// A broker's dead letters as the console reads them. A broker filters and orders nothing
// and lists its whole dead-letter queue at every look, so the pages, counts and letters
// the console asks for are cut from one listing (a snapshot) rather than each listing
// again: a page that starts the list (no cursor: a new filter, a refresh) lists afresh and
// keeps what it found; the pages after it as the table scrolls, the counts by class and
// the letter an operator selects are cut from that snapshot until the next. The snapshot
// is one listing, bounded as the listing is, and goes when this reader changes the
// broker's letters (forget()).
class BrokerDeadLetters final
{
    Q_DISABLE_COPY_MOVE(BrokerDeadLetters)

public:
    // ledger: where the letters' keys are looked up (their state, their expiry), a page at a
    // time; none: the letters say only what the broker keeps.
    explicit BrokerDeadLetters(BrokerQueue &queue, Inspector *ledger = nullptr) : m_queue(queue), m_ledger(ledger) {}

    // The filter's page (its order, cursor and limit).
    std::optional<QList<DeadLetter>> page(const DeadLetterFilter &filter, QString *error);
    std::optional<DeadLetterCounts> counts(const DeadLetterFilter &filter, qint64 firstSentBeforeMs, QString *error);
    // One letter with its payload; an error when the snapshot does not hold it.
    std::optional<DeadLetter> letter(const QString &id, QString *error);
    // Every letter now: a fresh listing, kept as the snapshot.
    std::optional<QList<DeadLetter>> listAll(QString *error);
    // Lists afresh at the next look: the letters changed (a redrive or discard from here).
    void forget() { m_snapshot.reset(); }

private:
    std::optional<QList<DeadLetter>> snapshot(QString *error);

    bool noteKeyStates(QList<DeadLetter> *letters, QString *error);

    BrokerQueue &m_queue;
    Inspector *m_ledger = nullptr;
    std::optional<QList<DeadLetter>> m_snapshot;
};

} // namespace once
