// EventsModel: letting the pages used longest ago go, and loading a page again when a
// view comes back to it (eventsmodel.cpp has the rest).
#include "models/eventsmodel.h"

#include "session/storesession.h"

#include <algorithm>
#include <utility>

namespace once::ui {

const EventRow &EventsModel::event(int row) const
{
    static const EventRow evicted;
    const EventRow *held = m_pages.row(row);
    return held ? *held : evicted;
}

void EventsModel::setResidentPageLimit(int pages)
{
    m_residentPageLimit = std::max(pages, 1);
    evictBeyondLimit(-1);
}

void EventsModel::wantPage(int row) const
{
    const int page = m_pages.pageOfRow(row);
    if (page < 0)
        return;
    const EventPages::Page &wanted = m_pages.page(page);
    // Counted as shown, so that it stays when it comes.
    m_pages.touch(page, m_clock.elapsed());
    if (wanted.reloadToken || wanted.reloadFailed || m_wanted.contains(page))
        return;
    m_wanted.append(page);
    m_wantedTimer.start();
}

void EventsModel::loadWantedPages()
{
    for (const int page : std::exchange(m_wanted, {})) {
        if (page < m_pages.pageCount())
            requestReload(page);
    }
}

void EventsModel::requestReload(int page)
{
    EventPages::Page &reload = m_pages.page(page);
    if (!m_session || reload.resident || reload.reloadToken)
        return;
    EventFilter filter = m_filter;
    // Its own rows and a page more: rows that joined its stretch since come too, and
    // rows of the next page (after a purge) tell that the stretch was all read.
    filter.below = reload.incoming.isEmpty() ? reload.above : reload.incoming.constLast().listPosition;
    filter.limit = reload.incoming.isEmpty() ? reload.count + PageSize : PageSize;
    reload.reloadLimit = filter.limit;
    reload.reloadFailed = false;
    reload.reloadToken = m_session->loadEvents(filter);
    m_reloads.insert(reload.reloadToken, page);
}

void EventsModel::onPageReloaded(int page, const QList<EventRow> &rows)
{
    EventPages::Page &reload = m_pages.page(page);
    reload.reloadToken = 0;
    if (reload.resident)
        return;
    reload.incoming.append(rows);
    // Its rows sit at or above the next page's position; the last page's go down to the
    // last row read (or the end of the list).
    const bool lastPage = page == m_pages.pageCount() - 1;
    const qint64 floor = lastPage ? (m_atEnd ? -1 : m_nextBelow) : m_pages.floorOf(page);
    const bool more =
        rows.size() == reload.reloadLimit && !rows.isEmpty() && rows.constLast().listPosition > floor;
    if (more) {
        if (page == 0) {
            // More new events than the page held: the top was overtaken, as a refresh says.
            startOver(std::exchange(reload.incoming, {}), false);
            return;
        }
        requestReload(page);
        return;
    }
    QList<EventRow> kept = std::exchange(reload.incoming, {});
    if (floor >= 0) {
        const auto below = std::find_if(kept.cbegin(), kept.cend(),
                                        [floor](const EventRow &row) { return row.listPosition < floor; });
        kept.erase(below, kept.cend());
    }
    // Rows that went leave from the page's end while it still shows "loading…"; then its
    // rows come; rows that joined are added at its end. What a view showed around the
    // rows inserted or removed stays as it was, as views expect.
    const int first = m_pages.firstRow(page);
    const int before = reload.count;
    const int after = int(kept.size());
    if (after < before) {
        beginRemoveRows(QModelIndex(), first + after, first + before - 1);
        m_pages.remove(first + after, before - after);
        endRemoveRows();
    }
    QList<EventRow> joined = after > before ? kept.mid(before) : QList<EventRow>();
    kept.resize(std::min(before, after));
    m_pages.setRows(page, std::move(kept));
    if (std::min(before, after) > 0)
        emit dataChanged(index(first, 0), index(first + std::min(before, after) - 1, Count - 1));
    if (!joined.isEmpty()) {
        beginInsertRows(QModelIndex(), first + before, first + after - 1);
        for (int i = 0; i < joined.size(); ++i)
            m_pages.insert(page, before + i, std::move(joined[i]));
        endInsertRows();
    }
    m_pages.touch(page, m_clock.elapsed());
    splitLongPages();
    evictBeyondLimit(page);
}

void EventsModel::splitLongPages()
{
    for (int page = 0; page < m_pages.pageCount(); ++page) {
        const EventPages::Page &grown = m_pages.page(page);
        if (!grown.resident || grown.count <= 2 * PageSize)
            continue;
        m_pages.split(page, PageSize);
        // The pages below moved one down.
        for (int &reloading : m_reloads) {
            if (reloading > page)
                ++reloading;
        }
        for (int &wanted : m_wanted) {
            if (wanted > page)
                ++wanted;
        }
    }
}

void EventsModel::evictBeyondLimit(int keep)
{
    // Pages a view showed a moment ago stay even over the limit: letting them go would
    // only have the view ask for them again.
    const qint64 shownSince = m_clock.elapsed() - ShownKeepMs;
    while (m_pages.residentRows() > m_residentPageLimit * PageSize) {
        const int page = m_pages.leastRecentlyUsed(keep, shownSince);
        if (page < 0)
            return;
        m_pages.evict(page);
    }
}

} // namespace once::ui
