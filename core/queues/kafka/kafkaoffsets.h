#pragma once

#include <QtGlobal>

#include <set>

namespace once {

// The offsets of one partition that a consumer has taken and not yet committed past.
// Sends run in parallel and finish in any order; a commit may only say "everything below
// here is settled" (acked, dead-lettered or deferred to the retry topic), or a crash
// would skip a message still in flight. So the commit point is the lowest offset taken
// and not settled, or, with none open, the one after the highest taken.
class KafkaOffsets
{
public:
    void take(qint64 offset);
    void settle(qint64 offset);
    bool isOpen(qint64 offset) const { return m_open.contains(offset); }
    // Taken and settled here. A consumer takes a partition's offsets in order from where
    // it was assigned, so every offset from the first it took up to the highest is either
    // still open or settled.
    bool wasSettled(qint64 offset) const { return offset >= m_first && offset < m_next && !m_open.contains(offset); }
    // One after the highest offset taken; -1 before anything was taken.
    qint64 next() const { return m_next; }
    int open() const { return int(m_open.size()); }

    // Where a commit would put the group's offset now; -1 before anything was taken.
    qint64 commitPoint() const;
    // A commit point newer than the last one committed, or -1.
    qint64 uncommitted() const;
    void committed(qint64 point) { m_committed = std::max(m_committed, point); }

private:
    std::set<qint64> m_open;
    qint64 m_first = -1;     // the lowest offset taken
    qint64 m_next = -1;      // one after the highest offset taken
    qint64 m_committed = -1; // the last commit point the group took
};

} // namespace once
