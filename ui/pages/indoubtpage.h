#pragma once

#include "pages/page.h"

#include "operator/inspector.h"

#include <QHash>
#include <QPointer>

class QAction;
class QLabel;
class QSortFilterProxyModel;
class QStackedWidget;
class QTableView;

namespace once {
struct WorkerRecord;
}

namespace once::ui {

class InDoubtModel;

// Events whose outcome nobody knows: the worker stopped after the partner may have
// accepted them. Under the hold policy they wait here for an operator, who resends them
// with the same key or marks them delivered, knowing what each choice risks.
class InDoubtPage final : public Page
{
    Q_OBJECT

public:
    explicit InDoubtPage(QWidget *parent = nullptr);
    ~InDoubtPage() override;

    QString title() const override { return tr("In doubt"); }
    void setSession(StoreSession *session) override;
    void refresh() override;

private:
    void buildUi();
    void reload();
    QList<QByteArray> selectedKeys() const;
    void confirmResolve(bool resend);
    void resolve(const QList<QByteArray> &keys, bool resend, const QString &reason);
    void checkAtPartner();
    void onOperationFinished(quint64 token, bool ok, const QString &message);
    void sayWhoSendsTheResent(const QList<once::WorkerRecord> &workers);
    void updateActions();
    void updateCounts();
    void updateEmptyState();
    void setStatus(const QString &text, bool problem = false);

    QPointer<StoreSession> m_session;

    InDoubtModel *m_model = nullptr;
    QSortFilterProxyModel *m_proxy = nullptr;
    QTableView *m_table = nullptr;
    QStackedWidget *m_stack = nullptr;
    QLabel *m_emptyLabel = nullptr;
    QLabel *m_countLabel = nullptr;
    QLabel *m_statusLabel = nullptr;
    QAction *m_resendAction = nullptr;
    QAction *m_markDeliveredAction = nullptr;
    QAction *m_checkAction = nullptr;

    quint64 m_loadToken = 0;
    bool m_loadPending = false;
    bool m_loaded = false;
    QList<once::EventRow> m_arriving; // the pages of the load under way
    // The decision being carried out: one request per key, by token.
    QHash<quint64, QByteArray> m_pending;
    enum class Decision { Resend, MarkDelivered, Check };
    Decision m_decision = Decision::Resend;
    int m_succeeded = 0;
    QStringList m_failures;
    QStringList m_answers; // Check: what the partner said of each key
    // After a resend: the workers on the store, to say whether one is there to send it.
    quint64 m_workersToken = 0;
    QString m_resolvedText;
};

} // namespace once::ui
