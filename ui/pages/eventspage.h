#pragma once

#include "operator/inspector.h"
#include "pages/page.h"

#include <QPointer>
#include <QTimer>

class QComboBox;
class QDateEdit;
class QDateTimeEdit;
class QLabel;
class QLineEdit;
class QPushButton;
class QSplitter;
class QStackedWidget;
class QTableView;

namespace once::ui {

class AttemptsModel;
class EventsModel;
class StoreSession;

// Support's search over every event in the ledger, and beside it the story of the one
// selected: each delivery, claim, send and ack, and a one-line answer to "did this user get
// two reminders?".
class EventsPage final : public Page
{
    Q_OBJECT

public:
    explicit EventsPage(QWidget *parent = nullptr);
    ~EventsPage() override;

    QString title() const override { return tr("Events"); }
    void setSession(StoreSession *session) override;
    void refresh() override;
    void focusSearch() override;

    // Runs the search in the box now (Enter does the same; typing waits a moment first).
    void search();
    // Searches for one send key and opens its story (from another page).
    void showStory(const QByteArray &sendKey);
    // Lists only the events this audit log row's action touched (the search and state
    // filters still apply), until the operator clears it.
    void showAuditEvents(const once::AuditEntry &entry);
    // Lists every event with something in its history between sinceMs and untilMs (the
    // When filter's "Between…", widened to whole minutes), whatever the search and state
    // were: an incident's window, from the Incidents page.
    void showTimeWindow(qint64 sinceMs, qint64 untilMs);
    // The audit row whose events are listed; 0 when none.
    qint64 auditFilter() const { return m_auditFilter; }
    EventsModel *eventsModel() const { return m_model; }
    AttemptsModel *attemptsModel() const { return m_attempts; }
    QTableView *eventsView() const { return m_table; }
    // The send key of the event whose story is open; empty when none.
    QByteArray storyKey() const { return m_storyKey; }
    // The story has been read from the store at least once since it was opened.
    bool storyLoaded() const { return m_storyLoaded; }
    QString verdictText() const;
    // The verdict in plain words, as support reads it to the customer.
    QString customerText() const;
    QString countText() const;
    // Records, for the partner of the open story, whether it honours Idempotency-Key; the
    // story reloads with the verdict worded from it once the store has it.
    void recordPartnerPolicy(once::KeyHonouring honoursKey);
    // Writes the open story to path, as CSV for a .csv name and JSON otherwise.
    bool exportHistory(const QString &path, QString *error) const;

signals:
    // Open Dead Letter in a dead event's story.
    void deadLetterRequested(const QByteArray &sendKey);
    // "show them" under a search that found no event but dead letters: the same search there.
    void deadLettersSearchRequested(const QString &text);

private:
    void buildTimeline(QWidget *timeline);
    void applyFilter(bool force);
    // The time window the "When" controls ask for, [since, until) in ms (0: open).
    std::pair<qint64, qint64> whenWindow() const;
    void updateWhenControls();
    void sortBySends(bool bySends);
    void onSelectionChanged();
    void openStory(const QByteArray &sendKey);
    void closeStory();
    void requestHistory();
    void onHistoryLoaded(quint64 token, const once::EventRow &event, const QList<once::Attempt> &attempts);
    void onFailed(quint64 token, const QString &error);
    void showFacts(const once::EventRow &event);
    void updateVerdict();
    void updateCount();
    void updateEmptyState();
    void selectStoryRow();
    void copyKey();
    void chooseExport();
    void choosePartnerPolicy();
    // The visible rows of the table, as rows of the model (first > last when none).
    std::pair<int, int> visibleRows() const;

    QPointer<StoreSession> m_session;
    QList<QMetaObject::Connection> m_sessionConnections;
    EventsModel *m_model = nullptr;
    AttemptsModel *m_attempts = nullptr;

    QLineEdit *m_search = nullptr;
    QComboBox *m_state = nullptr;
    QComboBox *m_when = nullptr;
    QDateEdit *m_day = nullptr;
    QDateTimeEdit *m_from = nullptr;
    QDateTimeEdit *m_to = nullptr;
    QPushButton *m_applyWhen = nullptr;
    bool m_bySends = false;
    QLabel *m_count = nullptr;
    QLabel *m_error = nullptr;
    QSplitter *m_splitter = nullptr;
    QStackedWidget *m_tableStack = nullptr;
    QTableView *m_table = nullptr;
    QLabel *m_tableEmpty = nullptr;
    QStackedWidget *m_storyStack = nullptr;
    QLabel *m_storyEmpty = nullptr;
    QLabel *m_verdictIcon = nullptr;
    QLabel *m_verdict = nullptr;
    QLabel *m_customer = nullptr;
    QLabel *m_factKey = nullptr;
    QLabel *m_factEventId = nullptr;
    QLabel *m_factUser = nullptr;
    QLabel *m_factReminder = nullptr;
    QLabel *m_factScheduled = nullptr;
    QLabel *m_factState = nullptr;
    QLabel *m_factSends = nullptr;
    QLabel *m_factDuplicates = nullptr;
    QLabel *m_factRequestId = nullptr;
    QLabel *m_factPartner = nullptr;
    QLabel *m_factBody = nullptr;
    QPushButton *m_partnerPolicy = nullptr;
    QPushButton *m_copyKey = nullptr;
    QPushButton *m_export = nullptr;
    QPushButton *m_openDeadLetter = nullptr;
    QWidget *m_auditBar = nullptr;
    QLabel *m_auditLabel = nullptr;
    qint64 m_auditFilter = 0;
    QTableView *m_timeline = nullptr;
    QTimer m_searchDebounce;

    QByteArray m_storyKey;
    once::EventRow m_storyEvent;
    bool m_storyLoaded = false;
    bool m_selectedLoading = false; // the selected row's page is on its way: its story opens when it comes
    QString m_storyError;
    quint64 m_historyToken = 0;
};

} // namespace once::ui
