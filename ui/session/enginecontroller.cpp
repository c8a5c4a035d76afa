#include "session/enginecontroller.h"

namespace once::ui {

EngineController::EngineController(QObject *parent) : QObject(parent)
{
    qRegisterMetaType<once::EngineCounters>();
}

EngineController::~EngineController()
{
    if (m_thread) {
        if (m_engine)
            QMetaObject::invokeMethod(m_engine, &Engine::stop, Qt::QueuedConnection);
        // Give in-flight sends their chance to finish and record, as `once worker` does on SIGTERM.
        if (!m_thread->wait(15000)) {
            m_thread->quit();
            m_thread->wait();
        }
    }
}

QString EngineController::describe(State state)
{
    switch (state) {
    case State::Stopped:
        return tr("Stopped");
    case State::Starting:
        return tr("Starting");
    case State::Running:
        return tr("Running");
    case State::Paused:
        return tr("Paused");
    case State::BreakerOpen:
        return tr("Breaker open");
    case State::Stopping:
        return tr("Stopping");
    }
    return {};
}

void EngineController::start(const EngineConfig &config)
{
    if (m_thread)
        return;
    m_config = config;
    m_config.partnerToken.clear();
    m_thread = new QThread(this);
    m_thread->setObjectName(QStringLiteral("engine"));
    auto *engine = new Engine(config);
    engine->moveToThread(m_thread);
    m_engine = engine;
    connect(m_thread, &QThread::started, engine, &Engine::start);
    connect(engine, &Engine::countersChanged, this, &EngineController::onCounters);
    connect(engine, &Engine::errorOccurred, this, &EngineController::errorOccurred);
    connect(engine, &Engine::finished, m_thread, &QThread::quit);
    connect(m_thread, &QThread::finished, engine, &QObject::deleteLater);
    connect(m_thread, &QThread::finished, this, &EngineController::onFinished);
    setState(State::Starting);
    m_thread->start();
}

void EngineController::pause()
{
    if (m_engine)
        QMetaObject::invokeMethod(m_engine, &Engine::pause, Qt::QueuedConnection);
}

void EngineController::resume()
{
    if (m_engine)
        QMetaObject::invokeMethod(m_engine, &Engine::resume, Qt::QueuedConnection);
}

void EngineController::stop()
{
    if (!m_engine)
        return;
    setState(State::Stopping);
    QMetaObject::invokeMethod(m_engine, &Engine::stop, Qt::QueuedConnection);
}

void EngineController::onCounters(const EngineCounters &counters)
{
    m_counters = counters;
    emit countersChanged(counters);
    if (m_state == State::Stopping || !counters.running)
        return;
    if (counters.paused)
        setState(State::Paused);
    else if (counters.breaker != CircuitBreaker::State::Closed)
        setState(State::BreakerOpen);
    else
        setState(State::Running);
}

void EngineController::onFinished()
{
    m_thread->deleteLater();
    m_thread = nullptr;
    setState(State::Stopped);
}

void EngineController::setState(State state)
{
    if (m_state == state)
        return;
    m_state = state;
    emit stateChanged(state);
}

} // namespace once::ui
