#include "models/eventsmodel.h"

#include "display/displaytime.h"
#include "display/eventstory.h"
#include "display/humanunits.h"
#include "session/storesession.h"

#include <QFontDatabase>

#include <algorithm>
#include <utility>

namespace once::ui {

namespace {

// A reload that keeps the store's reader busy this long is asked for less often, so that
// the other pages' questions still get quick answers (a large ledger without an index on
// the list's order can take a second per reload).
constexpr qint64 SlowReloadMs = 250;
constexpr qint64 SlowReloadPause = 3; // times the reload's cost, between two slow reloads

// What a row shows; two copies that agree here need no repaint.
bool sameContent(const EventRow &a, const EventRow &b)
{
    return a.state == b.state && a.updatedAtMs == b.updatedAtMs && a.sends == b.sends &&
           a.duplicates == b.duplicates && a.redrives == b.redrives && a.lastHttpStatus == b.lastHttpStatus &&
           a.lastErrorClass == b.lastErrorClass && a.lastError == b.lastError &&
           a.providerRequestId == b.providerRequestId && a.appliedAtMs == b.appliedAtMs;
}

QString lastErrorText(const EventRow &row)
{
    if (row.lastErrorClass.isEmpty())
        return row.lastError;
    if (row.lastError.isEmpty())
        return row.lastErrorClass;
    return row.lastErrorClass + QStringLiteral(": ") + row.lastError;
}

} // namespace

EventsModel::EventsModel(QObject *parent) : QAbstractTableModel(parent)
{
    m_filter.limit = PageSize;
    m_clock.start();
    m_wantedTimer.setSingleShot(true);
    m_wantedTimer.setInterval(0);
    connect(&m_wantedTimer, &QTimer::timeout, this, &EventsModel::loadWantedPages);
    connect(&DisplayTime::instance(), &DisplayTime::changed, this, [this] {
        emit headerDataChanged(Qt::Horizontal, 0, Count - 1);
        if (rowCount() > 0)
            emit dataChanged(index(0, 0), index(rowCount() - 1, Count - 1), {Qt::DisplayRole});
    });
}

EventsModel::~EventsModel() = default;

void EventsModel::setSession(StoreSession *session)
{
    if (session == m_session)
        return;
    if (m_session)
        m_session->disconnect(this);
    m_session = session;
    if (m_session) {
        connect(m_session, &StoreSession::eventsLoaded, this, &EventsModel::onEventsLoaded);
        connect(m_session, &StoreSession::eventsCounted, this, &EventsModel::onEventsCounted);
        connect(m_session, &StoreSession::deadLettersCounted, this, &EventsModel::onDeadLettersCounted);
        connect(m_session, &StoreSession::failed, this, &EventsModel::onFailed);
    }
    // Rows of another store mean nothing here. Nothing is read yet: a hidden page must not
    // keep the store busy; the first refresh or a view's fetchMore() loads.
    reset(m_filter);
}

void EventsModel::setFilter(const EventFilter &filter)
{
    reset(filter);
    ensureLoaded();
}

void EventsModel::reset(const EventFilter &filter)
{
    const bool wasLoading = isLoading();
    beginResetModel();
    m_filter = filter;
    m_filter.limit = PageSize;
    m_filter.below = 0;
    m_pages.clear();
    m_reloads.clear();
    m_wanted.clear();
    m_nextBelow = 0;
    m_pageBelow = 0;
    m_atEnd = false;
    m_pageFailed = false;
    m_loaded = false;
    m_total = -1;
    m_deadLetterToken = 0;
    m_error.clear();
    // Forgetting the tokens is what drops the answers to the old filter.
    m_pageToken = 0;
    m_countToken = 0;
    m_refreshToken = 0;
    m_refreshCostMs = 0;
    m_refreshClock.invalidate();
    endResetModel();
    emit totalChanged(m_total);
    setDeadLetterMatches(-1);
    if (wasLoading)
        emit loadingChanged(false);
}

void EventsModel::ensureLoaded()
{
    if (!m_session)
        return;
    if (m_pageFailed && !m_pageToken) {
        m_pageFailed = false;
        m_atEnd = false;
    }
    if (!m_loaded && !m_pageToken)
        requestPage();
    if (m_total < 0 && !m_countToken)
        requestCount();
}

void EventsModel::requestPage()
{
    EventFilter page = m_filter;
    page.below = m_nextBelow;
    page.limit = PageSize;
    m_pageBelow = m_nextBelow;
    m_pageToken = m_session->loadEvents(page);
    emit loadingChanged(true);
}

void EventsModel::requestCount()
{
    m_countToken = m_session->countEvents(m_filter);
}

void EventsModel::refreshRows(int first, int last)
{
    if (!m_session)
        return;
    if (!m_loaded || m_pageFailed) {
        ensureLoaded();
        if (!m_loaded)
            return;
    }
    if (!m_countToken)
        requestCount();
    if (m_refreshToken)
        return; // the store is slower than the refresh timer: don't pile up requests
    if (m_refreshCostMs > SlowReloadMs && m_refreshClock.isValid() &&
        m_refreshClock.elapsed() < m_refreshCostMs * SlowReloadPause)
        return;
    // A page that failed to load again is tried again with the rest.
    for (int page = 0; page < m_pages.pageCount(); ++page)
        m_pages.page(page).reloadFailed = false;
    if (last < first) {
        // Nothing on screen (no rows yet): look at the top for events that arrived since.
        first = 0;
        last = PageSize - 1;
    }
    first = std::clamp(first, 0, m_pages.rowCount());
    // What is on screen is resident; a page still on its way brings fresh rows itself.
    qint64 below = 0;
    if (first > 0) {
        const int page = m_pages.pageOfRow(first < m_pages.rowCount() ? first : first - 1);
        const EventRow *above = m_pages.row(first - 1);
        if (!m_pages.page(page).resident) {
            requestReload(page);
            return;
        }
        below = first == m_pages.firstRow(page) ? m_pages.page(page).above : above->listPosition;
    } else if (m_pages.rowCount() > 0 && !m_pages.page(m_pages.pageOfRow(0)).resident) {
        requestReload(m_pages.pageOfRow(0));
        return;
    }
    EventFilter window = m_filter;
    window.below = below;
    window.limit = std::clamp(last - first + 1, 1, 2 * PageSize);
    m_refreshLimit = window.limit;
    m_refreshFromTop = first == 0;
    m_refreshToken = m_session->loadEvents(window);
    m_refreshClock.start();
}

void EventsModel::updateEvent(const EventRow &event)
{
    const int row = rowOfKey(event.sendKey);
    const EventRow *held = m_pages.row(row);
    if (!held || sameContent(*held, event))
        return;
    m_pages.replace(row, event);
    emit dataChanged(index(row, 0), index(row, Count - 1));
}

void EventsModel::onEventsLoaded(quint64 token, const QList<EventRow> &rows)
{
    if (token == 0)
        return;
    if (token == m_pageToken) {
        m_pageToken = 0;
        appendPage(rows);
        emit loadingChanged(false);
    } else if (token == m_refreshToken) {
        m_refreshToken = 0;
        m_refreshCostMs = m_refreshClock.restart();
        applyRefresh(rows, m_refreshFromTop, m_refreshLimit);
    } else if (const auto reload = m_reloads.constFind(token); reload != m_reloads.cend()) {
        const int page = reload.value();
        m_reloads.erase(reload);
        onPageReloaded(page, rows);
    }
}

void EventsModel::onEventsCounted(quint64 token, qint64 count)
{
    if (token == 0 || token != m_countToken)
        return;
    m_countToken = 0;
    if (count != m_total) {
        m_total = count;
        emit totalChanged(m_total);
    }
    // A search with no event may still name a message: one that died before it became an
    // event (invalid, refused before its claim) is only a dead letter, at the store or the
    // broker. Asked only then, and again at each refresh while nothing matches.
    const bool searching = m_filter.state.isEmpty() && m_filter.userId.isEmpty() && m_filter.auditId == 0 &&
                           EventSearch::parse(m_filter.text).kind != EventSearch::Kind::None;
    if (count != 0 || !searching) {
        m_deadLetterToken = 0;
        setDeadLetterMatches(-1);
    } else if (!m_deadLetterToken) {
        DeadLetterFilter letters;
        letters.text = m_filter.text;
        m_deadLetterToken = m_session->countDeadLetters(letters);
    }
}

void EventsModel::onDeadLettersCounted(quint64 token, const DeadLetterCounts &counts)
{
    if (token == 0 || token != m_deadLetterToken)
        return;
    m_deadLetterToken = 0;
    setDeadLetterMatches(counts.tally().letters);
}

void EventsModel::setDeadLetterMatches(qint64 matches)
{
    if (matches == m_deadLetterMatches)
        return;
    m_deadLetterMatches = matches;
    emit deadLetterMatchesChanged(matches);
}

void EventsModel::onFailed(quint64 token, const QString &error)
{
    if (token == 0)
        return;
    if (token == m_pageToken) {
        m_pageToken = 0;
        // Stop here rather than let the view ask again at once; the next refresh retries.
        m_atEnd = true;
        m_pageFailed = true;
        setError(error);
        emit loadingChanged(false);
    } else if (token == m_deadLetterToken) {
        // Only a hint: the page says "No events match" as it would without it.
        m_deadLetterToken = 0;
    } else if (token == m_countToken) {
        m_countToken = 0;
        setError(error);
    } else if (token == m_refreshToken) {
        m_refreshToken = 0;
        setError(error);
    } else if (const auto reload = m_reloads.constFind(token); reload != m_reloads.cend()) {
        // Not asked again at every repaint: the next refresh tries again.
        EventPages::Page &page = m_pages.page(reload.value());
        m_reloads.erase(reload);
        page.reloadToken = 0;
        page.reloadFailed = true;
        page.incoming.clear();
        setError(error);
    }
}

void EventsModel::setError(const QString &error)
{
    m_error = error;
    emit errorOccurred(error);
}

void EventsModel::appendPage(const QList<EventRow> &rows)
{
    // Before any signal: a view told of the new rows may ask for the next page at once.
    const qint64 above = m_pageBelow;
    // Newer events pushed into the order since the page was asked for can repeat rows
    // already shown (a queued message now in the ledger); the send key is unique, so skip
    // those that are resident. One on an evicted page leaves when that page comes back.
    QList<EventRow> fresh;
    fresh.reserve(rows.size());
    for (const EventRow &row : rows) {
        if (m_pages.rowOfKey(row.sendKey) < 0)
            fresh.append(row);
    }
    // Below the last row this answer saw: rows written since sit above it, where a
    // refresh from the top brings them, so a page never skips one.
    if (!rows.isEmpty())
        m_nextBelow = rows.constLast().listPosition;
    m_atEnd = rows.size() < PageSize;
    const bool first = !m_loaded;
    const int offset = m_pages.rowCount();
    m_loaded = true;
    m_error.clear();
    if (!rows.isEmpty()) {
        // A page even when every row was a repeat: it stands for its stretch of the order.
        if (!fresh.isEmpty())
            beginInsertRows(QModelIndex(), offset, offset + int(fresh.size()) - 1);
        const int page = m_pages.append(above, std::move(fresh));
        if (m_pages.page(page).count > 0)
            endInsertRows();
        evictBeyondLimit(page);
    }
    emit pageLoaded(first ? 0 : offset, m_pages.rowCount() - offset);
}

// Everything at the top was overtaken (or left the filter): the list starts over with
// these rows, its first page.
void EventsModel::startOver(const QList<EventRow> &rows, bool atEnd)
{
    // A next page on its way continues the old list, from far below this one's end.
    const bool wasLoading = isLoading();
    m_pageToken = 0;
    beginResetModel();
    m_pages.clear();
    m_reloads.clear();
    m_wanted.clear();
    if (!rows.isEmpty())
        m_pages.append(0, rows);
    m_nextBelow = rows.isEmpty() ? 0 : rows.constLast().listPosition;
    m_atEnd = atEnd;
    endResetModel();
    if (wasLoading)
        emit loadingChanged(false);
    emit pageLoaded(0, m_pages.rowCount());
}

bool EventsModel::allResident(int firstRow, int lastRow) const
{
    if (firstRow > lastRow)
        return true;
    const int lastPage = m_pages.pageOfRow(lastRow);
    for (int page = m_pages.pageOfRow(firstRow); page >= 0 && page <= lastPage; ++page) {
        if (!m_pages.page(page).resident && m_pages.page(page).count > 0)
            return false;
    }
    return true;
}

// A row a refresh found between rows this model has goes on the page whose stretch of
// the order holds its position, which is one of the pages around that place.
bool EventsModel::insertRow(int position, const EventRow &row)
{
    const int before = position > 0 ? m_pages.pageOfRow(position - 1) : -1;
    const int at = m_pages.pageOfRow(position);
    int page = m_pages.pageOfPosition(row.listPosition);
    const auto fits = [&](int candidate) {
        if (candidate < 0 || !m_pages.page(candidate).resident)
            return false;
        const int offset = position - m_pages.firstRow(candidate);
        return offset >= 0 && offset <= m_pages.page(candidate).count;
    };
    if (!fits(page))
        page = fits(before) ? before : fits(at) ? at : -1;
    if (page < 0 && m_pages.pageCount() > 0 && position == 0 && m_pages.page(0).resident)
        page = 0;
    if (page < 0)
        return false;
    beginInsertRows(QModelIndex(), position, position);
    m_pages.insert(page, position - m_pages.firstRow(page), row);
    endInsertRows();
    return true;
}

// The answer is a contiguous slice of the store's order (created_at, then send key, which
// never change), so between two rows this model already has, it is the truth: rows the
// model has there and the answer lacks left the filter (or were purged), and rows the
// answer has there and the model lacks joined it. That holds only where every row in
// between is resident: a page let go since the request leaves the answer to updates.
void EventsModel::applyRefresh(const QList<EventRow> &rows, bool fromTop, int limit)
{
    QList<int> modelRows(rows.size(), -1);
    int firstKnown = -1;
    int lastKnown = -1;
    bool inOrder = true;
    for (int i = 0, previous = -1; i < rows.size(); ++i) {
        const int row = m_pages.rowOfKey(rows.at(i).sendKey);
        if (row < 0)
            continue;
        if (row <= previous) {
            inOrder = false;
            break;
        }
        previous = row;
        modelRows[i] = row;
        if (firstKnown < 0)
            firstKnown = i;
        lastKnown = i;
    }
    if (inOrder && firstKnown >= 0)
        inOrder = allResident(fromTop ? 0 : modelRows.at(firstKnown), modelRows.at(lastKnown));
    else if (inOrder && fromTop)
        inOrder = allResident(0, 0); // no row known: overtaken, unless the first rows were let go
    if (!inOrder) {
        // Not the order the slice was loaded in, or pages let go: update in place only.
        for (const EventRow &event : rows)
            updateEvent(event);
        return;
    }
    // The end of the list, as far as this model knows it, only if it holds every row to it.
    const bool reachedEnd = rows.size() < limit &&
                            (firstKnown < 0 || allResident(modelRows.at(lastKnown), m_pages.rowCount() - 1));

    if (firstKnown < 0) {
        if (!fromTop || (rows.isEmpty() && m_pages.rowCount() == 0))
            return; // an unknown stretch somewhere below: the next scroll or search brings it
        startOver(rows, rows.size() < limit);
        return;
    }

    const int begin = fromTop ? 0 : firstKnown;
    const int end = reachedEnd ? int(rows.size()) - 1 : lastKnown;
    int position = fromTop ? 0 : modelRows.at(firstKnown);
    int shift = 0; // rows inserted minus rows removed so far, all above the current position
    for (int i = begin; i <= end; ++i) {
        if (modelRows.at(i) < 0) {
            if (insertRow(position, rows.at(i))) {
                ++position;
                ++shift;
            }
            continue;
        }
        const int current = modelRows.at(i) + shift;
        if (current > position) {
            beginRemoveRows(QModelIndex(), position, current - 1);
            m_pages.remove(position, current - position);
            endRemoveRows();
            shift -= current - position;
        }
        if (!sameContent(*m_pages.row(position), rows.at(i))) {
            m_pages.replace(position, rows.at(i));
            emit dataChanged(index(position, 0), index(position, Count - 1));
        }
        ++position;
    }
    if (reachedEnd) {
        if (position < m_pages.rowCount()) {
            const int last = m_pages.rowCount() - 1;
            beginRemoveRows(QModelIndex(), position, last);
            m_pages.remove(position, last - position + 1);
            endRemoveRows();
        }
        m_atEnd = true;
        const EventRow *lastRow = m_pages.row(m_pages.rowCount() - 1);
        m_nextBelow = lastRow ? lastRow->listPosition : 0;
    }
    splitLongPages();
}

int EventsModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : m_pages.rowCount();
}

int EventsModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : Count;
}

bool EventsModel::canFetchMore(const QModelIndex &parent) const
{
    return !parent.isValid() && m_session && !m_atEnd;
}

void EventsModel::fetchMore(const QModelIndex &parent)
{
    // Views ask again and again while they scroll: one page at a time.
    if (!canFetchMore(parent) || m_pageToken)
        return;
    requestPage();
    if (m_total < 0 && !m_countToken)
        requestCount();
}

QVariant EventsModel::data(const QModelIndex &index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const auto column = Column(index.column());
    const EventRow *held = m_pages.row(index.row());
    if (!held) {
        // Its page was let go: asked for again, and shown when it comes (dataChanged).
        if (role != Qt::DisplayRole)
            return {};
        wantPage(index.row());
        return column == State ? tr("loading…") : QVariant();
    }
    const EventRow &row = *held;
    if (role == Qt::DisplayRole)
        m_pages.touch(m_pages.pageOfRow(index.row()), m_clock.elapsed());

    if (role == SendKeyRole)
        return QString::fromLatin1(row.sendKey);
    if (role == RawRole) {
        switch (column) {
        case State:
            return row.state;
        case User:
            return row.userId;
        case Reminder:
            return row.reminderId;
        case ScheduledAt:
            return row.scheduledAtMs;
        case Destination:
            return row.destination;
        case Channel:
            return row.channel;
        case Sends:
            return row.sends;
        case Duplicates:
            return row.duplicates;
        case LastError:
            return row.lastErrorClass;
        case SendKey:
            return QString::fromLatin1(row.sendKey);
        case EventId:
            return row.eventId;
        case Count:
            break;
        }
        return {};
    }
    if (role == Qt::DisplayRole) {
        switch (column) {
        case State:
            return row.state;
        case User:
            return row.userId;
        case Reminder:
            return row.reminderId;
        case ScheduledAt:
            return formatDisplayTime(row.scheduledAtMs);
        case Destination:
            return row.destination;
        case Channel:
            return row.channel;
        case Sends:
            return row.sends;
        case Duplicates:
            return row.duplicates;
        case LastError:
            return lastErrorText(row);
        case SendKey:
            return QString::fromLatin1(row.sendKey);
        case EventId:
            return row.eventId;
        case Count:
            break;
        }
        return {};
    }
    switch (role) {
    case Qt::DecorationRole:
        if (column == State)
            return stateIcon(row.state);
        break;
    case Qt::ToolTipRole:
        if (column == State)
            return stateDescription(row.state);
        if (column == ScheduledAt)
            return formatTime(row.scheduledAtMs);
        if (column == LastError)
            return lastErrorText(row);
        if (column == SendKey)
            return QString::fromLatin1(row.sendKey);
        break;
    case Qt::TextAlignmentRole:
        if (column == Sends || column == Duplicates)
            return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
        break;
    case Qt::FontRole:
        if (column == SendKey || column == EventId)
            return QFontDatabase::systemFont(QFontDatabase::FixedFont);
        break;
    default:
        break;
    }
    return {};
}

QVariant EventsModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || section < 0 || section >= Count)
        return QAbstractTableModel::headerData(section, orientation, role);
    if (role == Qt::DisplayRole) {
        switch (Column(section)) {
        case State:
            return tr("State");
        case User:
            return tr("User");
        case Reminder:
            return tr("Reminder");
        case ScheduledAt:
            return tr("Scheduled at (%1)").arg(DisplayTime::instance().zoneLabel());
        case Destination:
            return tr("Destination");
        case Channel:
            return tr("Channel");
        case Sends:
            return tr("Sends");
        case Duplicates:
            return tr("Duplicates");
        case LastError:
            return tr("Last error");
        case SendKey:
            return tr("Send key");
        case EventId:
            return tr("Event id");
        case Count:
            break;
        }
    } else if (role == Qt::ToolTipRole) {
        switch (Column(section)) {
        case ScheduledAt:
            return tr(
                "The occurrence the reminder names (not when it was sent), in the zone the View menu chose");
        case Sends:
            return tr("Requests that reached, or may have reached, the partner");
        case Duplicates:
            return tr("Deliveries of this reminder acknowledged without a send");
        default:
            break;
        }
    }
    return {};
}

} // namespace once::ui
