#include "workerpage.h"

#include "humanunits.h"
#include "settings.h"
#include "statuscolors.h"
#include "storesession.h"
#include "tile.h"

#include <QComboBox>
#include <QCoreApplication>
#include <QEvent>
#include <QFormLayout>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHostInfo>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>

namespace once::ui {

namespace {

constexpr char TokenVariable[] = "ONCE_PARTNER_TOKEN";

Tile *makeTile(const QString &objectName, const QString &caption, const QString &subCaption)
{
    auto *tile = new Tile(caption);
    tile->setObjectName(objectName);
    tile->setSubCaption(subCaption);
    tile->setValue(formatCount(0));
    return tile;
}

QPushButton *makeButton(const QString &objectName, const QString &text)
{
    auto *button = new QPushButton(text);
    button->setObjectName(objectName);
    return button;
}

void setTextColour(QLabel *label, const QColor &colour)
{
    QPalette palette = label->palette();
    palette.setColor(QPalette::WindowText, colour);
    label->setPalette(palette);
}

} // namespace

WorkerPage::WorkerPage(EngineController *engine, QWidget *parent) : Page(parent), m_engine(engine)
{
    const Settings settings;
    m_url = new QLineEdit(settings.partnerUrl());
    m_url->setObjectName(QStringLiteral("partnerUrl"));
    m_url->setPlaceholderText(QStringLiteral("http://127.0.0.1:8080/reminders"));
    m_url->setClearButtonEnabled(true);
    m_urlError = new QLabel;
    m_urlError->setObjectName(QStringLiteral("urlError"));
    m_urlError->hide();
    m_concurrency = new QSpinBox;
    m_concurrency->setObjectName(QStringLiteral("concurrency"));
    m_concurrency->setRange(1, 1024);
    m_concurrency->setValue(settings.concurrency());
    m_concurrency->setSuffix(tr(" sends in flight"));
    m_maxAttempts = new QSpinBox;
    m_maxAttempts->setObjectName(QStringLiteral("maxAttempts"));
    m_maxAttempts->setRange(1, 100);
    m_maxAttempts->setValue(settings.maxAttempts());
    m_maxAttempts->setSuffix(tr(" sends, then dead letter"));
    m_inDoubtPolicy = new QComboBox;
    m_inDoubtPolicy->setObjectName(QStringLiteral("inDoubtPolicy"));
    m_inDoubtPolicy->addItem(tr("Resend with the same key"), false);
    m_inDoubtPolicy->addItem(tr("Hold for an operator"), true);
    m_inDoubtPolicy->setCurrentIndex(settings.holdInDoubt() ? 1 : 0);
    m_inDoubtPolicy->setToolTip(tr("When a send's outcome is unknown (the partner may have acted): resend is safe "
                                   "when the partner honours Idempotency-Key; otherwise hold it for a person."));
    // Only whether it is set: the token itself never reaches the screen.
    m_token = new QLabel(qEnvironmentVariableIsEmpty(TokenVariable)
                             ? tr("not set: ONCE_PARTNER_TOKEN is empty, so requests carry no Authorization header")
                             : tr("set from ONCE_PARTNER_TOKEN"));
    m_token->setObjectName(QStringLiteral("partnerToken"));
    m_token->setForegroundRole(QPalette::PlaceholderText);

    auto *form = new QFormLayout;
    form->addRow(tr("Partner &URL:"), m_url);
    form->addRow(QString(), m_urlError);
    form->addRow(tr("&Concurrency:"), m_concurrency);
    form->addRow(tr("&Max attempts:"), m_maxAttempts);
    form->addRow(tr("&In doubt:"), m_inDoubtPolicy);
    form->addRow(tr("Partner token:"), m_token);
    auto *settingsBox = new QGroupBox(tr("Worker settings"));
    settingsBox->setLayout(form);
    // A URL field as wide as the window reads badly; the form keeps to a column.
    settingsBox->setMaximumWidth(720);

    m_start = makeButton(QStringLiteral("startButton"), tr("&Start"));
    m_pause = makeButton(QStringLiteral("pauseButton"), tr("&Pause"));
    m_resume = makeButton(QStringLiteral("resumeButton"), tr("&Resume"));
    m_stop = makeButton(QStringLiteral("stopButton"), tr("S&top"));
    m_pause->setToolTip(tr("Stop taking new messages; sends in flight finish"));
    m_stop->setToolTip(tr("Stop taking new messages, let sends in flight finish and record, then stop"));
    auto *buttons = new QHBoxLayout;
    for (QPushButton *button : {m_start, m_pause, m_resume, m_stop})
        buttons->addWidget(button);
    buttons->addStretch();

    m_status = new QLabel;
    m_status->setObjectName(QStringLiteral("workerStatus"));
    QFont statusFont = m_status->font();
    statusFont.setPointSizeF(statusFont.pointSizeF() * 1.6);
    statusFont.setBold(true);
    m_status->setFont(statusFont);
    m_hint = new QLabel;
    m_hint->setObjectName(QStringLiteral("workerHint"));
    m_hint->setWordWrap(true);
    m_hint->setForegroundRole(QPalette::PlaceholderText);
    m_engineError = new QLabel;
    m_engineError->setObjectName(QStringLiteral("engineError"));
    m_engineError->setWordWrap(true);
    m_engineError->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_engineError->hide();

    m_applied = makeTile(QStringLiteral("appliedTile"), tr("Applied"), tr("partner accepted, recorded, acked"));
    m_duplicates = makeTile(QStringLiteral("duplicatesTile"), tr("Duplicates"), tr("suppressed without a send"));
    m_retries = makeTile(QStringLiteral("retriesTile"), tr("Retries"), tr("scheduled after a failure"));
    m_deadLettered = makeTile(QStringLiteral("deadLetteredTile"), tr("Dead-lettered"), tr("permanent or out of attempts"));
    m_held = makeTile(QStringLiteral("heldTile"), tr("Held"), tr("in doubt, left to an operator"));
    m_resent = makeTile(QStringLiteral("resentTile"), tr("Resent"), tr("in doubt, sent again with the same key"));
    m_invalid = makeTile(QStringLiteral("invalidTile"), tr("Invalid"), tr("messages that do not parse"));
    m_inFlight = makeTile(QStringLiteral("inFlightTile"), tr("In flight"), tr("leased and not yet settled"));
    auto *tiles = new QGridLayout;
    tiles->setSpacing(8);
    const QList<Tile *> order{m_applied, m_duplicates, m_retries, m_deadLettered, m_held, m_resent, m_invalid, m_inFlight};
    for (int i = 0; i < order.size(); ++i)
        tiles->addWidget(order.at(i), i / 4, i % 4);
    m_countersCaption = new QLabel;
    m_countersCaption->setForegroundRole(QPalette::PlaceholderText);

    auto *layout = new QVBoxLayout(this);
    layout->addWidget(settingsBox);
    layout->addLayout(buttons);
    layout->addSpacing(8);
    layout->addWidget(m_status);
    layout->addWidget(m_hint);
    layout->addWidget(m_engineError);
    layout->addSpacing(8);
    layout->addWidget(m_countersCaption);
    layout->addLayout(tiles);
    layout->addStretch();

    connect(m_url, &QLineEdit::textChanged, this, [this] {
        validateUrl();
        updateControls();
    });
    connect(m_url, &QLineEdit::returnPressed, this, [this] {
        if (m_start->isEnabled())
            start();
    });
    connect(m_start, &QPushButton::clicked, this, &WorkerPage::start);
    if (m_engine) {
        connect(m_pause, &QPushButton::clicked, m_engine, &EngineController::pause);
        connect(m_resume, &QPushButton::clicked, m_engine, &EngineController::resume);
        connect(m_stop, &QPushButton::clicked, m_engine, &EngineController::stop);
        connect(m_engine, &EngineController::stateChanged, this, &WorkerPage::onStateChanged);
        connect(m_engine, &EngineController::countersChanged, this, &WorkerPage::onCounters);
        connect(m_engine, &EngineController::errorOccurred, this, [this](const QString &message) {
            m_engineError->setText(tr("Worker error: %1").arg(message));
            m_engineError->show();
        });
        // The demo may have started the engine before this page existed.
        onCounters(m_engine->counters());
    }
    validateUrl();
    updateControls();
}

WorkerPage::~WorkerPage() = default;

void WorkerPage::setSession(StoreSession *session)
{
    m_session = session;
    updateControls();
}

void WorkerPage::refresh()
{
    // Counters arrive from the engine by themselves; nothing to ask the store.
    updateControls();
}

void WorkerPage::changeEvent(QEvent *event)
{
    Page::changeEvent(event);
    if (event->type() == QEvent::PaletteChange) {
        validateUrl();
        updateControls();
        setTextColour(m_engineError, severityTextColor(Severity::Alert, palette()));
    }
}

std::optional<QUrl> WorkerPage::partnerUrl(QString *problem) const
{
    const QString text = m_url->text().trimmed();
    if (text.isEmpty()) {
        *problem = tr("Enter the partner's URL, e.g. http://127.0.0.1:8080/reminders.");
        return std::nullopt;
    }
    const QUrl url(text, QUrl::StrictMode);
    if (!url.isValid() || (url.scheme() != QLatin1String("http") && url.scheme() != QLatin1String("https"))) {
        *problem = tr("The partner URL must start with http:// or https://.");
        return std::nullopt;
    }
    if (url.host().isEmpty()) {
        *problem = tr("The partner URL needs a host, e.g. http://127.0.0.1:8080/reminders.");
        return std::nullopt;
    }
    return url;
}

void WorkerPage::validateUrl()
{
    QString problem;
    const bool ok = partnerUrl(&problem).has_value();
    m_urlError->setText(problem);
    setTextColour(m_urlError, severityTextColor(Severity::Alert, palette()));
    m_urlError->setVisible(!ok);
}

void WorkerPage::start()
{
    QString problem;
    const auto url = partnerUrl(&problem);
    if (!url || !m_session || !m_engine || m_engine->state() != EngineController::State::Stopped) {
        validateUrl();
        return;
    }
    Settings settings;
    settings.setPartnerUrl(url->toString());
    settings.setConcurrency(m_concurrency->value());
    settings.setMaxAttempts(m_maxAttempts->value());
    const bool hold = m_inDoubtPolicy->currentData().toBool();
    settings.setHoldInDoubt(hold);

    EngineConfig config;
    config.storeUrl = m_session->storeUrl();
    config.partnerUrl = *url;
    config.partnerToken = qgetenv(TokenVariable);
    config.workerId = QStringLiteral("console@%1:%2").arg(QHostInfo::localHostName()).arg(QCoreApplication::applicationPid());
    config.concurrency = m_concurrency->value();
    config.maxAttempts = m_maxAttempts->value();
    config.inDoubtPolicy = hold ? InDoubtPolicy::Hold : InDoubtPolicy::Resend;
    m_startedHere = true;
    m_engineError->hide();
    m_engine->start(config);
    updateControls();
}

void WorkerPage::onStateChanged(EngineController::State state)
{
    if (state == EngineController::State::Stopped)
        m_startedHere = false;
    updateControls();
}

void WorkerPage::onCounters(const EngineCounters &counters)
{
    m_applied->setValue(formatCount(counters.applied));
    m_duplicates->setValue(formatCount(counters.duplicates));
    m_retries->setValue(formatCount(counters.retries));
    m_deadLettered->setValue(formatCount(counters.deadLettered),
                             counters.deadLettered > 0 ? Severity::Warning : Severity::Normal);
    m_held->setValue(formatCount(counters.held), counters.held > 0 ? Severity::Warning : Severity::Normal);
    m_resent->setValue(formatCount(counters.resent));
    m_invalid->setValue(formatCount(counters.invalid), counters.invalid > 0 ? Severity::Warning : Severity::Normal);
    m_inFlight->setValue(formatCount(counters.inFlight));
}

void WorkerPage::updateControls()
{
    using State = EngineController::State;
    const State state = m_engine ? m_engine->state() : State::Stopped;
    const bool stopped = state == State::Stopped;
    QString problem;
    const bool urlOk = partnerUrl(&problem).has_value();

    m_start->setEnabled(m_engine && m_session && stopped && urlOk);
    m_pause->setEnabled(state == State::Running || state == State::BreakerOpen);
    m_resume->setEnabled(state == State::Paused);
    m_stop->setEnabled(state == State::Starting || state == State::Running || state == State::Paused
                       || state == State::BreakerOpen);
    // The engine reads its settings once, at start.
    for (QWidget *field : {static_cast<QWidget *>(m_url), static_cast<QWidget *>(m_concurrency),
                           static_cast<QWidget *>(m_maxAttempts), static_cast<QWidget *>(m_inDoubtPolicy)})
        field->setEnabled(stopped);
    if (m_engine && !stopped && !m_startedHere) {
        // An engine started elsewhere (the demo): show what it really runs with.
        const EngineConfig running = m_engine->config();
        const QSignalBlocker blockUrl(m_url);
        const QSignalBlocker blockConcurrency(m_concurrency);
        const QSignalBlocker blockAttempts(m_maxAttempts);
        const QSignalBlocker blockPolicy(m_inDoubtPolicy);
        m_url->setText(running.partnerUrl.toDisplayString(QUrl::RemoveUserInfo));
        m_concurrency->setValue(running.concurrency);
        m_maxAttempts->setValue(running.maxAttempts);
        m_inDoubtPolicy->setCurrentIndex(running.inDoubtPolicy == InDoubtPolicy::Hold ? 1 : 0);
    }

    m_status->setText(EngineController::describe(state));
    Severity severity = Severity::Normal;
    switch (state) {
    case State::Running:
        severity = Severity::Good;
        break;
    case State::BreakerOpen:
        severity = Severity::Alert;
        break;
    case State::Starting:
    case State::Paused:
    case State::Stopping:
        severity = Severity::Warning;
        break;
    case State::Stopped:
        break;
    }
    setTextColour(m_status, severityTextColor(severity, palette()));

    QString hint;
    if (!m_session && stopped)
        hint = tr("Open a store to run a worker on it.");
    else if (stopped)
        hint = tr("Start runs a worker on %1 inside the console, as the once worker command would.").arg(m_session->storeUrl());
    else if (state == State::BreakerOpen)
        hint = tr("The partner failed several times in a row; the worker waits, then lets one probe through.");
    else if (m_startedHere)
        hint = tr("The settings above apply from the next start; stop the worker to change them.");
    else
        hint = tr("This worker was started by the demo; the form shows its settings.");
    m_hint->setText(hint);
    // The controller keeps the counters of a finished run until the next one starts.
    m_countersCaption->setText(stopped ? tr("Counters of the last run:") : tr("Counters of this run:"));
}

} // namespace once::ui
