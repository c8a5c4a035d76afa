#pragma once

#include "models/rowtablemodel.h"

#include "operator/inspector.h"

#include <QHash>
#include <QPointer>

namespace once::ui {

class StoreSession;

// The dead letters that match a filter, in the store's order (dead_at, then id), loaded a
// page at a time as a view scrolls (canFetchMore/fetchMore): a store may hold a hundred
// thousand after an outage, and the console must never read them all, nor any payload a
// list does not show. Rows only arrive through StoreSession answers; an answer to a
// request since replaced (a new filter) is dropped by its token. Values are kept raw
// (RawRole); only data() formats them for people.
class DeadLettersModel final : public RowTableModel<once::DeadLetter>
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(DeadLettersModel)

public:
    enum Column
    {
        ErrorClass,
        LastError,
        Attempts,
        Redrives,
        FirstAttempt,
        LastAttempt,
        DeadAt,
        Expires, // its reminder's expiry, as its key's claim recorded it; empty: never
        SendKey,
        EventId,
        MessageId,
        Count
    };
    Q_ENUM(Column)
    enum Role
    {
        RawRole = Qt::UserRole + 1
    };

    static constexpr int PageSize = 500;

    explicit DeadLettersModel(QObject *parent = nullptr);

    void setSession(StoreSession *session);
    // Starts over: drops the rows and every answer on its way, then asks for the first page.
    void setFilter(const once::DeadLetterFilter &filter);
    once::DeadLetterFilter filter() const { return m_filter; }
    // Loads the first page if it was never asked for; otherwise does nothing.
    void ensureLoaded();
    // Reloads the rows at the top (at most two pages) in place, keeping the rows that are
    // still there by message id, so that selections survive; rows further down stay as
    // they are until the operator filters again. One at a time.
    void refresh();
    // Drops these letters (taken by an operation here) without asking the store.
    void removeLetters(const QStringList &ids);
    bool hasLoaded() const { return m_loaded; }
    bool isLoading() const { return m_pageToken != 0; }
    int rowOfKey(const QByteArray &sendKey) const;
    int rowOfId(const QString &id) const { return m_index.value(id, -1); }

    int columnCount(const QModelIndex &parent = {}) const override { return parent.isValid() ? 0 : Count; }
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

    bool canFetchMore(const QModelIndex &parent) const override;
    void fetchMore(const QModelIndex &parent) override;

    // Keeps rows that are still there in place (by message id), so selections survive a reload.
    void setLetters(const QList<once::DeadLetter> &letters);
    const once::DeadLetter &letter(int row) const { return m_rows.at(row); }

signals:
    void loadingChanged(bool loading);
    // A page (or a refresh, at offset 0) of the current filter has arrived.
    void pageLoaded(int offset, int rows);
    void errorOccurred(const QString &message);

private:
    void reset(const once::DeadLetterFilter &filter);
    void requestPage();
    void onLoaded(quint64 token, const QList<once::DeadLetter> &letters);
    void onFailed(quint64 token, const QString &error);
    void rebuildIndex();

    // Null again when a session closes before this model does.
    QPointer<StoreSession> m_session;
    once::DeadLetterFilter m_filter;
    QHash<QString, int> m_index; // message id -> row
    bool m_atEnd = false;
    bool m_loaded = false;
    quint64 m_pageToken = 0;
    quint64 m_refreshToken = 0;
    int m_refreshLimit = 0;
};

} // namespace once::ui
