#pragma once

#include "delivery/engine.h"

#include <QObject>
#include <QPointer>
#include <QThread>

namespace once::ui {

// Runs the same engine as `once worker` on a background thread. The engine is created
// parentless, moved to the thread and deleted there when the thread finishes; every
// call to it is queued, and its counters come back as signals.
class EngineController final : public QObject
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(EngineController)

public:
    enum class State
    {
        Stopped,
        Starting,
        Running,
        Paused,
        BreakerOpen,
        Stopping
    };
    Q_ENUM(State)

    explicit EngineController(QObject *parent = nullptr);
    ~EngineController() override; // stops the engine and waits for its thread

    State state() const { return m_state; }
    once::EngineCounters counters() const { return m_counters; }
    // What the running (or last) engine was started with; its token is not kept here.
    once::EngineConfig config() const { return m_config; }
    static QString describe(State state);

public slots:
    void start(const once::EngineConfig &config);
    void pause();
    void resume();
    void stop();

signals:
    void stateChanged(once::ui::EngineController::State state);
    void countersChanged(const once::EngineCounters &counters);
    void errorOccurred(const QString &message);

private:
    void setState(State state);
    void onCounters(const once::EngineCounters &counters);
    void onFinished();

    QThread *m_thread = nullptr;
    QPointer<once::Engine> m_engine;
    State m_state = State::Stopped;
    once::EngineCounters m_counters;
    once::EngineConfig m_config;
};

} // namespace once::ui
