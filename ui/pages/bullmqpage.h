#pragma once

#include "pages/page.h"
#include "session/bullmqsession.h"

#include <memory>

class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QStandardItemModel;
class QTabBar;
class QTableView;

namespace once::ui {

// BullMQ's queues on a Redis server, as a better Bull Board: every queue found with its
// counts by state, a state's jobs newest first (a page at a time), a job's data, options,
// attempts, failure, stack trace, logs, lock and the ledger entry of its send key, a
// search by id and text that runs off the GUI thread and can be cancelled, and actions
// (retry, promote, remove, clean, pause/resume, drain, obliterate; on several selected
// jobs, and retry of every failed job across every queue) through BullMQ's own scripts,
// each confirmed and written to the store's audit log. Without supported scripts the
// queues are shown read-only, and the page says why.
class BullMqPage final : public Page
{
    Q_OBJECT

public:
    explicit BullMqPage(QWidget *parent = nullptr);
    ~BullMqPage() override;

    QString title() const override { return tr("BullMQ"); }
    void setSession(StoreSession *session) override;
    void refresh() override;
    void focusSearch() override;

    // Connects to a Redis server: redis://[[USER]:PASSWORD@]HOST[:PORT]/DB; the password
    // is kept in memory only. scriptsFolder: the team's bullmq commands folder.
    void connectTo(const QString &redisUrl, const QString &scriptsFolder);

    static constexpr int PageSize = 200;

signals:
    // The ledger's story of a job's send key, on the Events page.
    void storyRequested(const QByteArray &sendKey);

private:
    void connectFromFields();
    void onQueuesLoaded(const QList<BullMqQueueSummary> &queues);
    void onJobsListed(const once::BullMqQueueName &queue, once::BullMqState state, qint64 offset,
                      const QList<once::BullMqJobRow> &rows);
    void onDetailsLoaded(const once::BullMqJobDetails &job);
    void onSearchDone(const QString &text, const QList<once::BullMqJobRow> &rows, bool cancelled);
    void onScriptsChecked(const QString &readOnlyReason);
    void showRows(const QList<once::BullMqJobRow> &rows, bool append);
    void listCurrent();
    void selectQueue();
    void startSearch();
    void act(BullMqAction action);
    std::optional<once::BullMqQueueName> currentQueue() const;
    once::BullMqState currentState() const;
    QStringList selectedJobIds() const;
    void updateActions();
    void onActed(BullMqAction action, int jobs, const QString &error);

    std::unique_ptr<BullMqSession> m_bullmq;
    StoreSession *m_store = nullptr;
    QList<BullMqQueueSummary> m_queues;
    QString m_readOnlyReason;
    bool m_searching = false;
    bool m_discovering = false;
    QStringList m_actionsAsked; // the audit details of the actions not answered yet, in order
    QByteArray m_shownSendKey;
    QString m_shownJobId;  // the job whose details are on show
    QString m_lastOutcome; // what the last action did, kept on the status line
    qint64 m_listed = 0;   // rows of the current state shown so far

    QLineEdit *m_url = nullptr;
    QLineEdit *m_password = nullptr;
    QLineEdit *m_scripts = nullptr;
    QLabel *m_status = nullptr;
    QTableView *m_queueView = nullptr;
    QStandardItemModel *m_queueModel = nullptr;
    QTabBar *m_states = nullptr;
    QLineEdit *m_search = nullptr;
    QPushButton *m_cancelSearch = nullptr;
    QTableView *m_jobView = nullptr;
    QStandardItemModel *m_jobModel = nullptr;
    QPushButton *m_more = nullptr;
    QPlainTextEdit *m_details = nullptr;
    QPushButton *m_story = nullptr;
    QList<QPair<BullMqAction, QPushButton *>> m_actionButtons;
};

} // namespace once::ui
