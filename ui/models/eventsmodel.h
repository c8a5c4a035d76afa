#pragma once

#include "models/eventpages.h"
#include "operator/inspector.h"

#include <QAbstractTableModel>
#include <QElapsedTimer>
#include <QHash>
#include <QPointer>
#include <QTimer>

namespace once::ui {

class StoreSession;

// The ledger's events matching a filter, newest first, loaded a page at a time as a view
// scrolls (canFetchMore/fetchMore): a store holds millions of events and the console must
// never read them all. Rows only ever arrive through StoreSession answers; an answer to a
// request this model has since replaced (a new filter) is dropped by its token.
//
// Nor does it keep every row scrolled past: beyond a few pages (residentPageLimit), the
// pages used longest ago let their rows go (EventPages) and stand for them by count, so
// rowCount() still grows with fetchMore() as a view scrolls. A view that comes back to
// such a row gets "loading…" in its first column and nothing else; its page is loaded
// again by its list position, without waiting, and dataChanged() repaints it. A page
// that comes back with fewer or more rows (purged, or left or joined the filter
// meanwhile) shrinks or grows in place: the rows below keep their own pages.
class EventsModel final : public QAbstractTableModel
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(EventsModel)

public:
    enum Column
    {
        State,
        User,
        Reminder,
        // What an investigator asks first, within the width a 1280 px window gives the list.
        Sends,
        Duplicates,
        ScheduledAt,
        Destination,
        Channel,
        LastError,
        SendKey,
        EventId,
        Count
    };
    Q_ENUM(Column)
    enum Role
    {
        RawRole = Qt::UserRole + 1, // the unformatted value (a time in ms, a count), for copies and checks
        SendKeyRole,                // the row's send key (QString), on every column
    };
    static constexpr int PageSize = 200;
    // 4,000 rows (about 4 MB): a full-screen view and a good stretch of scrolling back
    // up or down around it without a reload.
    static constexpr int DefaultResidentPages = 20;
    // A page a view showed this recently is on screen, or was a moment ago: it stays.
    static constexpr qint64 ShownKeepMs = 2000;

    explicit EventsModel(QObject *parent = nullptr);
    ~EventsModel() override;

    void setSession(StoreSession *session);
    StoreSession *session() const { return m_session; }
    // Starts over: drops the rows and every answer still on its way, then asks for the
    // first page and the total (when a session is set).
    void setFilter(const once::EventFilter &filter);
    once::EventFilter filter() const { return m_filter; }
    // Loads the first page and the total if they were never asked for (a session set while
    // the page was hidden); otherwise does nothing.
    void ensureLoaded();
    // Reloads rows first..last in place, and the total; at first == 0 it also brings in
    // events created since. At most one such reload is in flight at a time.
    void refreshRows(int first, int last);
    // Takes a fresher copy of one event (from its history), if that event is loaded.
    void updateEvent(const once::EventRow &event);

    // An empty row while the row's page is evicted.
    const once::EventRow &event(int row) const;
    // Resident rows only: -1 for a row whose page was let go.
    int rowOfKey(const QByteArray &sendKey) const { return m_pages.rowOfKey(sendKey); }
    bool isResident(int row) const { return m_pages.row(row) != nullptr; }
    // At most this many pages' worth of rows (PageSize each) stay resident, besides the
    // pages a view showed in the last ShownKeepMs (what is on screen is never let go).
    void setResidentPageLimit(int pages);
    int residentPageLimit() const { return m_residentPageLimit; }
    int residentRows() const { return m_pages.residentRows(); }
    qint64 total() const { return m_total; } // -1 until counted
    // For a search that lists no event: the dead letters the same search finds (a message
    // that never became an event is only there). -1 until counted, and whenever events
    // match (nobody asks then).
    qint64 deadLetterMatches() const { return m_deadLetterMatches; }
    bool isLoading() const { return m_pageToken != 0; }
    // The first page of the current filter has arrived (possibly empty).
    bool hasLoaded() const { return m_loaded; }
    QString errorString() const { return m_error; }

    int rowCount(const QModelIndex &parent = QModelIndex()) const override;
    int columnCount(const QModelIndex &parent = QModelIndex()) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
    bool canFetchMore(const QModelIndex &parent) const override;
    void fetchMore(const QModelIndex &parent) override;

signals:
    void totalChanged(qint64 total);
    void deadLetterMatchesChanged(qint64 matches);
    void loadingChanged(bool loading);
    // A page (or the first page, at offset 0) of the current filter has been added.
    void pageLoaded(int offset, int rows);
    void errorOccurred(const QString &message);

private:
    void reset(const once::EventFilter &filter);
    void requestPage();
    void requestCount();
    void onEventsLoaded(quint64 token, const QList<once::EventRow> &rows);
    void onEventsCounted(quint64 token, qint64 count);
    void onDeadLettersCounted(quint64 token, const once::DeadLetterCounts &counts);
    void setDeadLetterMatches(qint64 matches);
    void onFailed(quint64 token, const QString &error);
    void appendPage(const QList<once::EventRow> &rows);
    void startOver(const QList<once::EventRow> &rows, bool atEnd);
    void applyRefresh(const QList<once::EventRow> &rows, bool fromTop, int limit);
    bool allResident(int firstRow, int lastRow) const;
    bool insertRow(int position, const once::EventRow &row);
    // Evicted pages a view asked for, loaded again by their list position.
    void wantPage(int row) const;
    void loadWantedPages();
    void requestReload(int page);
    void onPageReloaded(int page, const QList<once::EventRow> &rows);
    void evictBeyondLimit(int keep);
    void splitLongPages();
    void setError(const QString &error);

    // Null again when a session closes before this model does.
    QPointer<StoreSession> m_session;
    once::EventFilter m_filter;
    EventPages m_pages;
    int m_residentPageLimit = DefaultResidentPages;
    QElapsedTimer m_clock;         // for when a page was last shown
    QHash<quint64, int> m_reloads; // token -> page
    mutable QList<int> m_wanted;   // evicted pages data() was asked for
    mutable QTimer m_wantedTimer;  // loads them once data() has returned
    qint64 m_nextBelow = 0;        // the next page starts below this list position (0: the top)
    qint64 m_pageBelow = 0;        // the page on its way starts below this one
    bool m_atEnd = false;
    bool m_pageFailed = false;
    bool m_loaded = false;
    qint64 m_total = -1;
    qint64 m_deadLetterMatches = -1;
    quint64 m_deadLetterToken = 0;
    QString m_error;
    quint64 m_pageToken = 0;
    quint64 m_countToken = 0;
    quint64 m_refreshToken = 0;
    int m_refreshLimit = 0;
    bool m_refreshFromTop = false;
    QElapsedTimer m_refreshClock; // since the last reload was asked for, then since it was answered
    qint64 m_refreshCostMs = 0;   // how long the store took to answer the last reload
};

} // namespace once::ui
