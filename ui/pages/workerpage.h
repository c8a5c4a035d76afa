#pragma once

#include "pages/page.h"
#include "session/enginecontroller.h"

#include "store/workerregistry.h"

#include <optional>

#include <QElapsedTimer>

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QStackedWidget;
class QTableView;
class QTableWidget;

namespace once::ui {

class Tile;
class WorkersModel;

// Runs the same worker as `once worker` inside the console: its settings, the buttons
// that drive it, and its live counters. It shows the engine's state whoever started it.
// Below, every worker registered on the store: headless ones anywhere, and this one.
class WorkerPage final : public Page
{
    Q_OBJECT

public:
    explicit WorkerPage(EngineController *engine, QWidget *parent = nullptr);
    ~WorkerPage() override;

    QString title() const override { return tr("Worker"); }
    void setSession(StoreSession *session) override;
    void refresh() override;
    // Heartbeat ages and gone workers change with the clock alone, notifications or not.
    int refreshIntervalMs(bool) const override { return PollIntervalMs; }

    WorkersModel *workersModel() const { return m_workersModel; }
    QTableView *workersView() const { return m_workersView; }
    QTableWidget *partnersView() const { return m_partnersView; }
    // Pauses (with the operator's reason) or resumes a partner for every worker on the
    // store, as `once partners NAME --pause` does; the Pause… button asks for the reason.
    void setPartnerPaused(const QString &partner, bool paused, const QString &reason = QString());

protected:
    void changeEvent(QEvent *event) override;

private:
    void buildWorkersTable();
    void start();
    // The partner URL as typed, if it is one the engine can use; otherwise explains why not.
    std::optional<QUrl> partnerUrl(QString *problem) const;
    void validateUrl();
    void onStateChanged(EngineController::State state);
    void onCounters(const once::EngineCounters &counters);
    void updateControls();
    void onWorkersLoaded(quint64 token, const QList<once::WorkerRecord> &workers);
    void updateWorkersSummary();
    void onPartnersLoaded(quint64 token, const QList<once::PartnerPolicy> &partners);
    QString selectedPartner() const;
    void updatePartnerButtons();

    StoreSession *m_session = nullptr;
    QList<QMetaObject::Connection> m_sessionConnections;
    quint64 m_workersToken = 0;
    QElapsedTimer m_workersPendingSince;
    bool m_workersLoaded = false;
    QString m_workersError;
    EngineController *m_engine = nullptr;
    bool m_startedHere = false;

    QLineEdit *m_url = nullptr;
    QLineEdit *m_partnersFile = nullptr; // when set, replaces m_url: several partners, routed by channel
    QLabel *m_urlError = nullptr;
    QSpinBox *m_concurrency = nullptr;
    QSpinBox *m_maxAttempts = nullptr;
    QComboBox *m_inDoubtPolicy = nullptr;
    QLabel *m_token = nullptr;
    QString m_tokenProblem; // why ONCE_PARTNER_TOKEN cannot be sent, read once like the token
    QLabel *m_hint = nullptr;
    QPushButton *m_start = nullptr;
    QPushButton *m_pause = nullptr;
    QPushButton *m_resume = nullptr;
    QPushButton *m_stop = nullptr;
    QLabel *m_status = nullptr;
    QLabel *m_engineError = nullptr;
    QLabel *m_countersCaption = nullptr;
    Tile *m_applied = nullptr;
    Tile *m_duplicates = nullptr;
    Tile *m_retries = nullptr;
    Tile *m_deadLettered = nullptr;
    Tile *m_held = nullptr;
    Tile *m_resent = nullptr;
    Tile *m_invalid = nullptr;
    Tile *m_inFlight = nullptr;

    WorkersModel *m_workersModel = nullptr;
    QTableView *m_workersView = nullptr;
    QStackedWidget *m_workersStack = nullptr;
    QLabel *m_workersEmpty = nullptr;
    QLabel *m_workersSummary = nullptr; // every worker on the store, counted
    QLabel *m_workersDetail = nullptr;  // what the counts mean for deliveries

    // The partners on record: each one's state as its workers report it, or its pause.
    quint64 m_partnersToken = 0;
    quint64 m_partnerActionToken = 0;
    QList<once::PartnerPolicy> m_partners;
    QTableWidget *m_partnersView = nullptr;
    QPushButton *m_pausePartner = nullptr;
    QPushButton *m_resumePartner = nullptr;
    QLabel *m_partnerStatus = nullptr;
};

} // namespace once::ui
