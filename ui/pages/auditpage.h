#pragma once

#include "operator/storereader.h" // the metatypes of its signal's argument
#include "pages/page.h"

#include <QElapsedTimer>

class QAction;
class QLabel;
class QSortFilterProxyModel;
class QStackedWidget;
class QTableView;

namespace once::ui {

class AuditModel;

// The audit log: every operator decision taken on the store (redrive, discard, resolve),
// from this console or the command line. Each row opens the events it touched (double-click
// or Show Events), on the Events page.
class AuditPage final : public Page
{
    Q_OBJECT

public:
    explicit AuditPage(QWidget *parent = nullptr);
    ~AuditPage() override;

    QString title() const override { return tr("Audit log"); }
    void setSession(StoreSession *session) override;
    void refresh() override;

    QTableView *view() const { return m_view; }

signals:
    void eventsRequested(const once::AuditEntry &entry);

private:
    void showEvents();
    void onAuditLoaded(quint64 token, const QList<once::AuditEntry> &entries);
    void onFailed(quint64 token, const QString &error);
    void showState();

    StoreSession *m_session = nullptr;
    QList<QMetaObject::Connection> m_sessionConnections;
    quint64 m_pendingToken = 0;
    QElapsedTimer m_pendingSince;
    bool m_loaded = false;
    QString m_loadError;

    AuditModel *m_model = nullptr;
    QSortFilterProxyModel *m_proxy = nullptr;
    QTableView *m_view = nullptr;
    QStackedWidget *m_stack = nullptr;
    QLabel *m_placeholder = nullptr;
    QLabel *m_summary = nullptr;
    QAction *m_showEventsAction = nullptr;
};

} // namespace once::ui
