#include "queues/kafka/kafkaoffsets.h"

#include <algorithm>

namespace once {

void KafkaOffsets::take(qint64 offset)
{
    m_open.insert(offset);
    m_first = m_first < 0 ? offset : std::min(m_first, offset);
    m_next = std::max(m_next, offset + 1);
}

void KafkaOffsets::settle(qint64 offset)
{
    m_open.erase(offset);
}

qint64 KafkaOffsets::commitPoint() const
{
    return m_open.empty() ? m_next : *m_open.begin();
}

qint64 KafkaOffsets::uncommitted() const
{
    const qint64 point = commitPoint();
    return point > m_committed ? point : -1;
}

} // namespace once
