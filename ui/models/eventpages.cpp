#include "models/eventpages.h"

#include <algorithm>

namespace once::ui {

namespace {

QList<EventRow> withoutPayloads(QList<EventRow> rows)
{
    for (EventRow &row : rows)
        row.payload = QByteArray();
    return rows;
}

} // namespace

void EventPages::clear()
{
    m_pages.clear();
    m_resident.clear();
    m_rowCount = 0;
    m_residentRows = 0;
    m_firsts.clear();
    m_firstsValid = 0;
    m_index.clear();
    m_indexValid = true;
}

void EventPages::ensureFirsts() const
{
    if (m_firstsValid == m_pages.size())
        return;
    m_firsts.resize(m_pages.size());
    for (int page = m_firstsValid; page < m_pages.size(); ++page)
        m_firsts[page] = page == 0 ? 0 : m_firsts.at(page - 1) + m_pages.at(page - 1).count;
    m_firstsValid = int(m_pages.size());
}

int EventPages::firstRow(int page) const
{
    ensureFirsts();
    return m_firsts.at(page);
}

int EventPages::pageOfRow(int row) const
{
    if (row < 0 || row >= m_rowCount)
        return -1;
    ensureFirsts();
    // The last page starting at or before the row: empty pages share their first row with
    // the page after them, which is the one found.
    const auto after = std::upper_bound(m_firsts.cbegin(), m_firsts.cend(), row);
    return int(after - m_firsts.cbegin()) - 1;
}

int EventPages::pageOfPosition(qint64 listPosition) const
{
    // Positions fall down the list; the first page (at 0, the top) has no upper bound.
    int low = 0;
    int high = int(m_pages.size());
    while (high - low > 1) {
        const int middle = (low + high) / 2;
        if (m_pages.at(middle).above > listPosition)
            low = middle;
        else
            high = middle;
    }
    return m_pages.isEmpty() ? -1 : low;
}

qint64 EventPages::floorOf(int page) const
{
    return page + 1 < m_pages.size() ? m_pages.at(page + 1).above : -1;
}

const EventRow *EventPages::row(int row) const
{
    const int page = pageOfRow(row);
    if (page < 0 || !m_pages.at(page).resident)
        return nullptr;
    return &m_pages.at(page).rows.at(row - m_firsts.at(page));
}

bool EventPages::replace(int row, EventRow event)
{
    const int page = pageOfRow(row);
    if (page < 0 || !m_pages.at(page).resident)
        return false;
    EventRow &held = m_pages[page].rows[row - m_firsts.at(page)];
    // The index stays right only for the same key.
    if (held.sendKey != event.sendKey)
        m_indexValid = false;
    event.payload = QByteArray();
    held = std::move(event);
    return true;
}

void EventPages::ensureIndex() const
{
    if (m_indexValid)
        return;
    ensureFirsts();
    m_index.clear();
    m_index.reserve(m_residentRows);
    for (const int page : m_resident) {
        const QList<EventRow> &rows = m_pages.at(page).rows;
        for (int i = 0; i < rows.size(); ++i)
            m_index.insert(rows.at(i).sendKey, m_firsts.at(page) + i);
    }
    m_indexValid = true;
}

int EventPages::rowOfKey(const QByteArray &sendKey) const
{
    ensureIndex();
    return m_index.value(sendKey, -1);
}

void EventPages::touch(int page, qint64 nowMs) const
{
    const Page &touched = m_pages.at(page);
    touched.shownAtMs = nowMs;
    touched.lastUse = ++m_uses;
}

int EventPages::leastRecentlyUsed(int keep, qint64 shownSinceMs) const
{
    int found = -1;
    for (const int page : m_resident) {
        const Page &candidate = m_pages.at(page);
        if (page == keep || candidate.count == 0 || candidate.shownAtMs >= shownSinceMs)
            continue;
        if (found < 0 || candidate.lastUse < m_pages.at(found).lastUse)
            found = page;
    }
    return found;
}

int EventPages::append(qint64 above, QList<EventRow> rows)
{
    const int page = int(m_pages.size());
    const int first = m_rowCount;
    Page added;
    added.above = above;
    added.count = int(rows.size());
    added.resident = true;
    added.rows = withoutPayloads(std::move(rows));
    added.lastUse = ++m_uses;
    // Nothing above moves: the index only grows.
    if (m_indexValid) {
        for (int i = 0; i < added.rows.size(); ++i)
            m_index.insert(added.rows.at(i).sendKey, first + i);
    }
    m_rowCount += added.count;
    m_residentRows += added.count;
    m_pages.append(std::move(added));
    m_resident.append(page);
    return page;
}

void EventPages::evict(int page)
{
    Page &evicted = m_pages[page];
    if (!evicted.resident)
        return;
    if (m_indexValid) {
        const int first = firstRow(page);
        for (const EventRow &row : std::as_const(evicted.rows)) {
            const auto found = m_index.constFind(row.sendKey);
            if (found != m_index.cend() && found.value() >= first && found.value() < first + evicted.count)
                m_index.erase(found);
        }
    }
    m_residentRows -= evicted.count;
    evicted.rows = QList<EventRow>(); // the memory goes, not only the rows
    evicted.resident = false;
    m_resident.removeOne(page);
}

void EventPages::setRows(int page, QList<EventRow> rows)
{
    Page &loaded = m_pages[page];
    const int delta = int(rows.size()) - loaded.count;
    if (loaded.resident)
        m_residentRows -= loaded.count;
    else
        m_resident.append(page);
    loaded.rows = withoutPayloads(std::move(rows));
    loaded.count = int(loaded.rows.size());
    loaded.resident = true;
    loaded.lastUse = ++m_uses;
    m_residentRows += loaded.count;
    countChanged(page, delta);
    m_indexValid = false;
}

void EventPages::insert(int page, int offset, EventRow row)
{
    Page &target = m_pages[page];
    Q_ASSERT(target.resident && offset >= 0 && offset <= target.count);
    row.payload = QByteArray();
    target.rows.insert(offset, std::move(row));
    ++target.count;
    ++m_residentRows;
    countChanged(page, 1);
}

void EventPages::remove(int first, int count)
{
    while (count > 0) {
        const int page = pageOfRow(first);
        if (page < 0)
            return;
        Page &target = m_pages[page];
        const int offset = first - m_firsts.at(page);
        const int taken = std::min(count, target.count - offset);
        if (target.resident) {
            target.rows.remove(offset, taken);
            m_residentRows -= taken;
        }
        target.count -= taken;
        countChanged(page, -taken);
        count -= taken;
    }
}

void EventPages::split(int page, int at)
{
    Page &first = m_pages[page];
    Q_ASSERT(first.resident && at > 0 && at < first.count);
    Page second;
    second.above = first.rows.at(at - 1).listPosition;
    second.rows = first.rows.mid(at);
    second.count = int(second.rows.size());
    second.resident = true;
    second.lastUse = first.lastUse;
    second.shownAtMs = first.shownAtMs;
    first.rows.resize(at);
    first.count = at;
    m_pages.insert(page + 1, std::move(second));
    for (int &resident : m_resident) {
        if (resident > page)
            ++resident;
    }
    m_resident.append(page + 1);
    // No row moves: the index stays right.
    m_firstsValid = std::min(m_firstsValid, page + 1);
}

void EventPages::countChanged(int page, int delta)
{
    m_rowCount += delta;
    if (delta != 0) {
        m_firstsValid = std::min(m_firstsValid, page + 1);
        m_indexValid = false;
    }
}

} // namespace once::ui
