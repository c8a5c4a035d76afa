#include "alerting/watcher.h"

#include "alerting/alertsettings.h"
#include "alerting/alerttext.h"
#include "alerting/incidents.h"
#include "store/store.h"

#include <QDateTime>

namespace once {

namespace {

const QString LeaseName = QStringLiteral("watch");
// An incident resolved longer ago than this and never told resolved (a watcher was down
// all along) is history, not news.
constexpr qint64 ResolvedNewsMs = 24 * 3600 * 1000;
constexpr int IncidentsLooked = 200;

Incidents::Notified notifiedOf(Notification::Kind kind)
{
    switch (kind) {
    case Notification::Kind::Firing:
        return Incidents::Notified::Firing;
    case Notification::Kind::Reminder:
        return Incidents::Notified::Reminder;
    case Notification::Kind::Resolved:
        break;
    }
    return Incidents::Notified::Resolved;
}

} // namespace

Watcher::Watcher(WatcherConfig config, std::vector<std::unique_ptr<Notifier>> notifiers, QObject *parent)
    : QObject(parent), m_config(std::move(config))
{
    for (auto &notifier : notifiers) {
        auto *queue =
            new NotifierQueue(std::move(notifier), QStringLiteral("notify %1").arg(m_queues.size() + 1),
                              m_config.retryBaseMs, m_config.retryCapMs, this);
        connect(queue, &NotifierQueue::attempted, this,
                [this, queue](const Notification &notification, bool sent) {
                    onAttempted(queue, notification, sent);
                });
        m_queues.push_back(queue);
    }
    m_timer.setInterval(int(m_config.intervalMs));
    connect(&m_timer, &QTimer::timeout, this, &Watcher::evaluate);
    m_onceDeadline.setSingleShot(true);
    connect(&m_onceDeadline, &QTimer::timeout, this, [this] {
        qCWarning(lcWatch).noquote() << QStringLiteral("--once: %1 notifications not sent within %2 s")
                                            .arg(m_sending.size())
                                            .arg(m_config.onceGraceMs / 1000);
        m_stopping = true;
        m_timer.stop();
        if (m_store && m_holding) {
            QString error;
            StoreLease(m_store->database(), LeaseName).release(m_config.holder, &error);
        }
        emit finished(1);
    });
}

Watcher::~Watcher() = default;

void Watcher::start()
{
    QTimer::singleShot(0, this, &Watcher::evaluate);
    if (m_config.once)
        m_onceDeadline.start(int(m_config.onceGraceMs));
    else
        m_timer.start();
}

void Watcher::stop()
{
    if (m_stopping)
        return;
    m_stopping = true;
    m_timer.stop();
    m_onceDeadline.stop();
    if (m_store && m_holding) {
        // The next watcher takes over at once instead of after the lease's ttl; what this
        // one did not send is unmarked, owed, and sent by that one.
        QString error;
        if (StoreLease(m_store->database(), LeaseName).release(m_config.holder, &error))
            qCInfo(lcWatch).noquote() << QStringLiteral("released the watch lease");
        else
            qCWarning(lcWatch).noquote() << QStringLiteral("could not release the watch lease: ") + error;
    }
    m_holding = false;
    emit finished(0);
}

bool Watcher::readInputs(AlertInputs *inputs, bool *holding, QString *error)
{
    if (!m_store) {
        m_store = Store::open(m_config.storeUrl, error);
        if (!m_store)
            return false;
    }
    Database &db = m_store->database();
    const qint64 nowMs = QDateTime::currentMSecsSinceEpoch();
    *holding = StoreLease(db, LeaseName).hold(m_config.holder, m_config.leaseTtlMs, nowMs, error);
    if (!error->isEmpty())
        return false;
    if (!*holding)
        return true;
    auto thresholds = readAlertThresholds(db, error);
    if (!thresholds)
        return false;
    m_thresholds = std::move(*thresholds);
    inputs->stats = m_store->inspector().stats(error);
    if (!inputs->stats)
        return false;
    auto workers = m_store->workers().list(error);
    if (!workers)
        return false;
    inputs->workers = std::move(*workers);
    return true;
}

void Watcher::evaluate()
{
    if (m_stopping)
        return;
    AlertInputs inputs;
    bool holding = false;
    QString error;
    const bool answered = readInputs(&inputs, &holding, &error);
    const qint64 nowMs = QDateTime::currentMSecsSinceEpoch();
    m_evaluated = true;
    if (!answered) {
        storeFailed(error, nowMs);
        checkOnceDone();
        return;
    }
    if (m_storeFailingSinceMs) {
        qCInfo(lcWatch).noquote() << QStringLiteral("the store answers again");
        m_storeFailingSinceMs = 0;
        m_storeError.clear();
        if (m_storeFiring) {
            Notification resolved = *m_storeFiring;
            resolved.kind = Notification::Kind::Resolved;
            resolved.resolvedAtMs = nowMs;
            m_storeFiring.reset();
            send(resolved);
        }
    }
    if (!holding) {
        if (m_holding) {
            lostLease();
        } else if (!m_standingBy) {
            QString holderError;
            const auto holder = StoreLease(m_store->database(), LeaseName).holder(nowMs, &holderError);
            qCInfo(lcWatch).noquote() << QStringLiteral("standing by: %1 holds the watch lease")
                                             .arg(holder ? *holder : QStringLiteral("another watcher"));
        }
        m_standingBy = true;
        checkOnceDone();
        return;
    }
    if (!m_holding)
        qCInfo(lcWatch).noquote() << QStringLiteral("holding the watch lease as %1").arg(m_config.holder);
    m_holding = true;
    m_standingBy = false;

    // Marks a store failure kept from the incidents, now that it answers.
    for (qsizetype i = m_unmarked.size() - 1; i >= 0; --i) {
        if (mark(m_unmarked.at(i).first, m_unmarked.at(i).second))
            m_unmarked.removeAt(i);
    }

    QList<Alert> alerts = evaluateAlerts(inputs, *m_thresholds, nowMs);
    QStringList summaries;
    for (const Alert &alert : alerts)
        summaries.append(alertText(alert, nowMs));
    Incidents incidents(m_store->database());
    const auto changes = incidents.record(alerts, summaries, nowMs, m_config.clearAfterMs, &error);
    if (!changes) {
        storeFailed(error, nowMs);
        checkOnceDone();
        return;
    }
    for (const Incident &incident : changes->opened)
        qCInfo(lcWatch).noquote()
            << QStringLiteral("incident %1 opened: %2").arg(incident.id).arg(incident.key());
    for (const Incident &incident : changes->resolved)
        qCInfo(lcWatch).noquote()
            << QStringLiteral("incident %1 resolved: %2").arg(incident.id).arg(incident.key());
    // Read back, not taken from the changes: a watcher that took the lease over owes what
    // its predecessor recorded and did not send, and an operator's resolve is news too.
    const auto recent = incidents.list(IncidentsLooked, &error);
    if (!recent) {
        storeFailed(error, nowMs);
        checkOnceDone();
        return;
    }
    notifyOwed(*recent, nowMs);
    checkOnceDone();
}

void Watcher::storeFailed(const QString &error, qint64 nowMs)
{
    if (!m_storeFailingSinceMs) {
        m_storeFailingSinceMs = nowMs;
        qCWarning(lcWatch).noquote() << QStringLiteral("the store does not answer: ") + error;
    }
    m_storeError = error;
    // Opened again at the next evaluation: a connection that broke may not mend itself.
    m_store.reset();
    if (m_holding)
        lostLease();
    AlertInputs inputs;
    inputs.storeError = error;
    inputs.storeFailingSinceMs = m_storeFailingSinceMs;
    const AlertThresholds thresholds = m_thresholds.value_or(AlertThresholds{});
    for (const Alert &alert : evaluateAlerts(inputs, thresholds, nowMs)) {
        if (alert.rule != AlertRule::StoreFailing || m_storeFiring)
            continue;
        // Nothing can be recorded, nor a lease held: every watcher that sees it tells it.
        Notification firing;
        firing.kind = Notification::Kind::Firing;
        firing.rule = alert.rule;
        firing.severity = alert.severity;
        firing.title = alertTitle(alert);
        firing.summary = alertText(alert, nowMs);
        firing.sinceMs = alert.sinceMs;
        firing.details = alert.toJson();
        m_storeFiring = firing;
        send(firing);
    }
}

void Watcher::notifyOwed(const QList<Incident> &incidents, qint64 nowMs)
{
    const auto owes = [this](const Incident &incident, Notification::Kind kind) {
        Notification notification = Notification::of(incident, kind);
        return !m_sending.contains(notification.key()) &&
               std::none_of(m_unmarked.cbegin(), m_unmarked.cend(), [&notification](const auto &unmarked) {
                   return unmarked.first.key() == notification.key();
               });
    };
    const qint64 remindEveryMs = m_thresholds->value(AlertRule::RemindEvery);
    for (const Incident &incident : incidents) {
        const bool firingOnItsWay = !owes(incident, Notification::Kind::Firing);
        if (incident.isOpen()) {
            if (!incident.notifiedFiringAtMs) {
                // A partner's spell is an incident (the banner's warning) before its
                // threshold; a founder is told once it crossed it.
                const bool crossed =
                    incident.severity == AlertSeverity::Critical || incident.peakValue >= incident.threshold;
                if (crossed && !firingOnItsWay)
                    send(Notification::of(incident, Notification::Kind::Firing));
                continue;
            }
            const qint64 lastTold = std::max(incident.notifiedFiringAtMs, incident.remindedAtMs);
            if (!incident.ackedAtMs && nowMs - lastTold >= remindEveryMs && !firingOnItsWay &&
                owes(incident, Notification::Kind::Reminder))
                send(Notification::of(incident, Notification::Kind::Reminder));
            continue;
        }
        if (incident.notifiedResolvedAtMs || nowMs - incident.resolvedAtMs > ResolvedNewsMs)
            continue;
        // Never told it started (it came and went while no watcher held the lease): no news.
        if ((incident.notifiedFiringAtMs || firingOnItsWay) && owes(incident, Notification::Kind::Resolved))
            send(Notification::of(incident, Notification::Kind::Resolved));
    }
}

void Watcher::send(const Notification &notification)
{
    if (m_sending.contains(notification.key()))
        return;
    qCInfo(lcWatch).noquote()
        << QStringLiteral("notifying %1: %2").arg(notification.key(), notification.subject());
    Sending sending;
    sending.notification = notification;
    sending.notifiersLeft = int(m_queues.size());
    sending.marked = notification.incidentId == 0;
    m_sending.insert(notification.key(), sending);
    for (NotifierQueue *queue : m_queues)
        queue->enqueue(notification);
    if (m_queues.empty())
        m_sending.remove(notification.key());
}

void Watcher::onAttempted(NotifierQueue *queue, const Notification &notification, bool sent)
{
    const auto it = m_sending.find(notification.key());
    if (it == m_sending.end())
        return;
    it->tried.insert(queue);
    if (sent) {
        it->sent = true;
        --it->notifiersLeft;
    }
    // Marked once every notifier had its first try and one of them took it: a watcher
    // that takes over sends it to none again. Before that, a crash leaves it owed (those
    // that had it get it twice) rather than lost to a notifier still on its first try;
    // after it, a notifier still retrying is the one that loses it.
    if (!it->marked && it->sent && it->tried.size() == qsizetype(m_queues.size())) {
        it->marked = true;
        const qint64 nowMs = QDateTime::currentMSecsSinceEpoch();
        if (!mark(notification, nowMs))
            m_unmarked.append({notification, nowMs});
    }
    if (it->notifiersLeft <= 0)
        m_sending.erase(it);
    checkOnceDone();
}

bool Watcher::mark(const Notification &notification, qint64 atMs)
{
    if (!m_store)
        return false;
    QString error;
    if (Incidents(m_store->database())
            .markNotified(notification.incidentId, notifiedOf(notification.kind), atMs, &error))
        return true;
    qCWarning(lcWatch).noquote()
        << QStringLiteral("%1 sent, not yet marked on the incident: %2").arg(notification.key(), error);
    return false;
}

void Watcher::lostLease()
{
    m_holding = false;
    qCWarning(lcWatch).noquote() << QStringLiteral(
        "lost the watch lease: leaving what is still owed to its holder");
    // What no notifier took yet is owed by the store's account: the new holder sends it.
    const auto marked = [this](const Notification &notification) {
        const auto it = m_sending.constFind(notification.key());
        return it != m_sending.cend() && it->marked;
    };
    for (NotifierQueue *queue : m_queues)
        queue->drop(marked);
    m_sending.removeIf([](const auto &entry) { return !entry.value().marked; });
}

void Watcher::checkOnceDone()
{
    if (!m_config.once || m_stopping || !m_evaluated || !m_sending.isEmpty())
        return;
    m_stopping = true;
    m_onceDeadline.stop();
    if (m_store && m_holding) {
        QString error;
        StoreLease(m_store->database(), LeaseName).release(m_config.holder, &error);
    }
    emit finished(m_storeError.isEmpty() && m_unmarked.isEmpty() ? 0 : 1);
}

} // namespace once
