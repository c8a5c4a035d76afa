#include "widgets/traynotifier.h"

#include "display/humanunits.h"
#include "session/healthmonitor.h"
#include "settings/settings.h"

#include <QApplication>
#include <QIcon>
#include <QMenu>
#include <QSystemTrayIcon>

namespace once::ui {

namespace {

// A run of new dead letters (an outage exhausting attempts) makes one notification a
// minute, each with all that came since the last.
constexpr qint64 DeadLetterNoticeIntervalMs = 60000;

TrayNotifier::Kind notifierKind(HealthAlert::Kind kind)
{
    switch (kind) {
    case HealthAlert::Kind::PartnerDown:
        return TrayNotifier::Kind::PartnerDown;
    case HealthAlert::Kind::PartnerFailing:
        return TrayNotifier::Kind::PartnerFailing;
    case HealthAlert::Kind::NoWorker:
        return TrayNotifier::Kind::NoWorker;
    case HealthAlert::Kind::OldestWaiting:
        return TrayNotifier::Kind::OldestWaiting;
    case HealthAlert::Kind::InDoubt:
    case HealthAlert::Kind::Other:
        return TrayNotifier::Kind::InDoubt;
    }
    return TrayNotifier::Kind::PartnerDown;
}

TrayNotifier::Target targetOf(TrayNotifier::Kind kind)
{
    switch (kind) {
    case TrayNotifier::Kind::PartnerDown:
    case TrayNotifier::Kind::PartnerFailing:
    case TrayNotifier::Kind::OldestWaiting:
        return TrayNotifier::Target::Overview;
    case TrayNotifier::Kind::NoWorker:
        return TrayNotifier::Target::Worker;
    case TrayNotifier::Kind::InDoubt:
        return TrayNotifier::Target::InDoubt;
    case TrayNotifier::Kind::DeadLetters:
        return TrayNotifier::Target::DeadLetters;
    }
    return TrayNotifier::Target::Overview;
}

QString startTitle(TrayNotifier::Kind kind)
{
    switch (kind) {
    case TrayNotifier::Kind::PartnerDown:
        return TrayNotifier::tr("Partner down");
    case TrayNotifier::Kind::PartnerFailing:
        return TrayNotifier::tr("Partner failing");
    case TrayNotifier::Kind::NoWorker:
        return TrayNotifier::tr("No worker running");
    case TrayNotifier::Kind::OldestWaiting:
        return TrayNotifier::tr("Messages waiting too long");
    case TrayNotifier::Kind::InDoubt:
        return TrayNotifier::tr("Events in doubt");
    case TrayNotifier::Kind::DeadLetters:
        return TrayNotifier::tr("New dead letters");
    }
    return {};
}

QString clearedText(TrayNotifier::Kind kind)
{
    switch (kind) {
    case TrayNotifier::Kind::PartnerDown:
    case TrayNotifier::Kind::PartnerFailing:
        return TrayNotifier::tr("The partner accepts sends again; the workers deliver what waited.");
    case TrayNotifier::Kind::NoWorker:
        return TrayNotifier::tr("A worker is running again.");
    case TrayNotifier::Kind::OldestWaiting:
        return TrayNotifier::tr("No ready message has waited too long any more.");
    case TrayNotifier::Kind::InDoubt:
        return TrayNotifier::tr("No event is in doubt any more.");
    case TrayNotifier::Kind::DeadLetters:
        break;
    }
    return {};
}

} // namespace

const QList<TrayNotifier::Kind> &TrayNotifier::kinds()
{
    static const QList<Kind> all{Kind::PartnerDown,   Kind::PartnerFailing, Kind::NoWorker,
                                 Kind::OldestWaiting, Kind::InDoubt,        Kind::DeadLetters};
    return all;
}

QString TrayNotifier::settingsName(Kind kind)
{
    switch (kind) {
    case Kind::PartnerDown:
        return QStringLiteral("partnerDown");
    case Kind::PartnerFailing:
        return QStringLiteral("partnerFailing");
    case Kind::NoWorker:
        return QStringLiteral("noWorker");
    case Kind::OldestWaiting:
        return QStringLiteral("oldestWaiting");
    case Kind::InDoubt:
        return QStringLiteral("inDoubt");
    case Kind::DeadLetters:
        return QStringLiteral("deadLetters");
    }
    return {};
}

QString TrayNotifier::label(Kind kind)
{
    switch (kind) {
    case Kind::PartnerDown:
        return tr("The partner is down, and when it is back");
    case Kind::PartnerFailing:
        return tr("The partner's first failures, before they make an outage (circuit breaker open)");
    case Kind::NoWorker:
        return tr("No worker runs while messages wait, and when one runs again");
    case Kind::OldestWaiting:
        return tr("A ready message has waited too long, and when none has");
    case Kind::InDoubt:
        return tr("Events land in doubt, and when none is left");
    case Kind::DeadLetters:
        return tr("Dead letters grow (at most one notification a minute)");
    }
    return {};
}

bool TrayNotifier::onByDefault(Kind kind)
{
    // A breaker opens on a short blip; the outage alert follows if it lasts.
    return kind != Kind::PartnerFailing;
}

TrayNotifier::TrayNotifier(HealthMonitor *health, QObject *parent) : QObject(parent), m_health(health)
{
    qRegisterMetaType<once::ui::TrayNotifier::Notification>();
    m_tray = new QSystemTrayIcon(QIcon(QStringLiteral(":/once.svg")), this);
    m_tray->setObjectName(QStringLiteral("trayIcon"));
    m_menu = new QMenu;
    m_menu->addAction(tr("Show the Console"), this, &TrayNotifier::showWindowRequested);
    m_menu->addSeparator();
    m_menu->addAction(tr("Quit"), this, &TrayNotifier::quitRequested);
    m_tray->setContextMenu(m_menu);
    connect(m_tray, &QSystemTrayIcon::activated, this, [this](QSystemTrayIcon::ActivationReason reason) {
        if (reason == QSystemTrayIcon::Trigger || reason == QSystemTrayIcon::DoubleClick)
            emit showWindowRequested();
    });
    connect(m_tray, &QSystemTrayIcon::messageClicked, this, [this] { emit pageRequested(m_last.target); });
    connect(m_health, &HealthMonitor::changed, this, &TrayNotifier::onHealthChanged);
    applySettings();
}

TrayNotifier::~TrayNotifier()
{
    delete m_menu;
}

void TrayNotifier::applySettings()
{
    m_tray->setVisible(Settings().showInTray() && QSystemTrayIcon::isSystemTrayAvailable());
}

void TrayNotifier::onHealthChanged()
{
    updateToolTip();
    if (m_health->readAtMs() == 0 || !m_health->stats()) {
        m_primed = false; // a store is opening: what it holds is not news
        return;
    }
    const DeliveryStats stats = *m_health->stats();
    QMap<HealthAlert::Kind, HealthAlert> active;
    // The banner's other alerts (lateness, dead letters, the store) have no desktop
    // notification of their own: dead letters are announced as they land, below.
    for (const HealthAlert &alert : m_health->alerts())
        if (alert.kind != HealthAlert::Kind::Other)
            active.insert(alert.kind, alert);
    if (!m_primed) {
        m_primed = true;
        m_active = active;
        m_deadNoticed = stats.queue.dead;
        m_inDoubtNoticed = stats.inDoubt;
        return;
    }

    for (auto it = active.cbegin(); it != active.cend(); ++it) {
        // Events in doubt are announced as they land, below.
        if (m_active.contains(it.key()) || it.key() == HealthAlert::Kind::InDoubt)
            continue;
        const Kind kind = notifierKind(it.key());
        raise(Notification{kind, false, startTitle(kind), it->text, targetOf(kind)});
    }
    const bool partnerDownNow = active.contains(HealthAlert::Kind::PartnerDown);
    for (auto it = m_active.cbegin(); it != m_active.cend(); ++it) {
        if (active.contains(it.key()))
            continue;
        // A partner's failures that turned into an outage did not end.
        if (it.key() == HealthAlert::Kind::PartnerFailing && partnerDownNow)
            continue;
        const Kind kind = notifierKind(it.key());
        const bool partner = kind == Kind::PartnerDown || kind == Kind::PartnerFailing;
        // Without a running worker nobody tries the partner: that is not "back".
        const QString text = partner && m_health->tally().live() == 0
                                 ? tr("No worker runs to tell whether the partner is back.")
                                 : clearedText(kind);
        raise(Notification{kind, true, tr("%1: cleared").arg(startTitle(kind)), text, targetOf(kind)});
    }
    m_active = active;

    if (stats.inDoubt > m_inDoubtNoticed) {
        const qint64 landed = stats.inDoubt - m_inDoubtNoticed;
        raise(Notification{
            Kind::InDoubt, false, startTitle(Kind::InDoubt),
            tr("%1 landed in doubt (%2 in all): an operator decides whether each was delivered.")
                .arg(formatQuantity(landed, tr("event"), tr("events")), formatCount(stats.inDoubt)),
            Target::InDoubt});
    }
    m_inDoubtNoticed = stats.inDoubt;

    if (stats.queue.dead < m_deadNoticed) {
        m_deadNoticed = stats.queue.dead; // redriven or discarded
    } else if (stats.queue.dead > m_deadNoticed &&
               (!m_sinceDeadNotice.isValid() || m_sinceDeadNotice.elapsed() >= DeadLetterNoticeIntervalMs)) {
        const qint64 added = stats.queue.dead - m_deadNoticed;
        m_sinceDeadNotice.start();
        raise(Notification{Kind::DeadLetters, false, startTitle(Kind::DeadLetters),
                           tr("%1 (%2 in all). Redrive them once the cause is fixed.")
                               .arg(formatQuantity(added, tr("new dead letter"), tr("new dead letters")),
                                    formatCount(stats.queue.dead)),
                           Target::DeadLetters});
        m_deadNoticed = stats.queue.dead;
    }
}

void TrayNotifier::raise(const Notification &notification)
{
    if (!Settings().notifies(settingsName(notification.kind), onByDefault(notification.kind)))
        return;
    m_last = notification;
    emit notified(notification);
    const QSystemTrayIcon::MessageIcon icon =
        notification.cleared ? QSystemTrayIcon::Information
        : notification.kind == Kind::InDoubt || notification.kind == Kind::DeadLetters
            ? QSystemTrayIcon::Warning
            : QSystemTrayIcon::Critical;
    if (m_tray->isVisible())
        m_tray->showMessage(notification.title, notification.text, icon);
}

void TrayNotifier::updateToolTip()
{
    QStringList lines{tr("once console"), workersSummary(m_health->tally())};
    const QList<HealthAlert> alerts = m_health->alerts();
    if (!alerts.isEmpty())
        lines << alerts.constFirst().text;
    m_tray->setToolTip(lines.join(QLatin1Char('\n')));
}

} // namespace once::ui
