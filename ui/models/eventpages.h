#pragma once

#include "operator/inspector.h"

#include <QHash>
#include <QList>

#include <limits>

namespace once::ui {

// The rows of a long list of events, kept as the keyset pages they were loaded in, of
// which only some hold their rows (are resident); the others stand for their rows by
// count alone, so that memory follows what is looked at, not how deep a view scrolled.
//
// A page keeps the list position just above its first row (EventFilter::below for the
// query that loaded it) even while evicted: the rows it stands for are those at or above
// the next page's position and below its own, so it is loaded again by position, never
// by an offset that rows written or purged since would have moved. The list is newest
// first (positions fall); the first page's position is 0, "the top".
//
// The table never shows a payload, and one may be 256 KiB: rows are kept without theirs.
// No Qt model signals here: EventsModel says what changes around each call.
class EventPages final
{
public:
    struct Page
    {
        qint64 above = 0; // the list position just above its rows (0: the top)
        int count = 0;    // the rows it stands for, resident or not
        bool resident = false;
        QList<EventRow> rows;    // its rows while resident (count of them), none while evicted
        quint64 reloadToken = 0; // a reload of an evicted page on its way
        int reloadLimit = 0;     // the rows that reload asked for
        bool reloadFailed = false;
        QList<EventRow> incoming; // a reload's answers so far, when it needed more than one
        // Touched from data(): when a view last asked for one of its rows, and the order
        // of use that eviction goes by (least recently used first).
        mutable qint64 shownAtMs = std::numeric_limits<qint64>::min(); // never
        mutable quint64 lastUse = 0;
    };

    void clear();
    int pageCount() const { return int(m_pages.size()); }
    int rowCount() const { return m_rowCount; }
    int residentRows() const { return m_residentRows; }
    const QList<int> &residentPages() const { return m_resident; }
    const Page &page(int page) const { return m_pages.at(page); }
    // For its reload fields only: what it holds changes through the calls below.
    Page &page(int page) { return m_pages[page]; }
    int firstRow(int page) const;
    // The page holding this row (-1 outside the list); an empty page holds none.
    int pageOfRow(int row) const;
    // The page whose positions include this one.
    int pageOfPosition(qint64 listPosition) const;
    // The lowest position a page's rows may have (the next page's), or -1 for the last page.
    qint64 floorOf(int page) const;
    // nullptr while the row's page is evicted.
    const EventRow *row(int row) const;
    // A fresher copy of a resident row; false if its page is evicted.
    bool replace(int row, EventRow event);
    // Resident rows only; -1 for any other.
    int rowOfKey(const QByteArray &sendKey) const;

    void touch(int page, qint64 nowMs) const;
    // The resident page holding rows that was used longest ago, other than keep and than
    // the pages shown at or after shownSinceMs; -1 if there is none.
    int leastRecentlyUsed(int keep, qint64 shownSinceMs) const;

    // A new last page, resident.
    int append(qint64 above, QList<EventRow> rows);
    void evict(int page);
    // The page's rows as loaded again (their number may differ from its count).
    void setRows(int page, QList<EventRow> rows);
    // One row into a resident page, at offset (0..count).
    void insert(int page, int offset, EventRow row);
    // Rows first..first+count-1, across pages; an evicted page only counts fewer.
    void remove(int first, int count);
    // A resident page's rows from offset at on become a page of their own just below it
    // (the pages below move one down): a page that grew, as new events came in at the
    // top, is let go and loaded again in pieces of a usual size.
    void split(int page, int at);

private:
    void countChanged(int page, int delta);
    void ensureFirsts() const;
    void ensureIndex() const;

    QList<Page> m_pages;
    QList<int> m_resident; // the pages holding rows, in no order
    int m_rowCount = 0;
    int m_residentRows = 0;
    mutable quint64 m_uses = 0;
    // Each page's first row, valid for the first m_firstsValid pages: a row inserted on
    // the first page moves every page below it, counted again only when asked.
    mutable QList<int> m_firsts;
    mutable int m_firstsValid = 0;
    // Send key -> row over the resident rows; rebuilt when rows move.
    mutable QHash<QByteArray, int> m_index;
    mutable bool m_indexValid = true;
};

} // namespace once::ui
