#pragma once

#include "enginecontroller.h"
#include "page.h"

#include <optional>

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;

namespace once::ui {

class Tile;

// Runs the same worker as `once worker` inside the console: its settings, the buttons
// that drive it, and its live counters. It shows the engine's state whoever started it.
class WorkerPage final : public Page
{
    Q_OBJECT

public:
    explicit WorkerPage(EngineController *engine, QWidget *parent = nullptr);
    ~WorkerPage() override;

    QString title() const override { return tr("Worker"); }
    void setSession(StoreSession *session) override;
    void refresh() override;

protected:
    void changeEvent(QEvent *event) override;

private:
    void start();
    // The partner URL as typed, if it is one the engine can use; otherwise explains why not.
    std::optional<QUrl> partnerUrl(QString *problem) const;
    void validateUrl();
    void onStateChanged(EngineController::State state);
    void onCounters(const once::EngineCounters &counters);
    void updateControls();

    StoreSession *m_session = nullptr;
    EngineController *m_engine = nullptr;
    bool m_startedHere = false;

    QLineEdit *m_url = nullptr;
    QLabel *m_urlError = nullptr;
    QSpinBox *m_concurrency = nullptr;
    QSpinBox *m_maxAttempts = nullptr;
    QComboBox *m_inDoubtPolicy = nullptr;
    QLabel *m_token = nullptr;
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
};

} // namespace once::ui
