#include "pages/overviewpage.h"

#include "display/humanunits.h"
#include "display/statuscolors.h"
#include "session/enginecontroller.h"
#include "session/healthmonitor.h"
#include "session/storesession.h"
#include "widgets/alertbanner.h"
#include "widgets/metricchart.h"
#include "widgets/tile.h"

#include "store/database.h"

#include <QComboBox>
#include <QDateTime>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHash>
#include <QLabel>
#include <QStackedWidget>
#include <QVBoxLayout>

#include <cmath>

namespace once::ui {

namespace {

constexpr qint64 MinuteMs = 60 * 1000;
constexpr qint64 HourMs = 60 * MinuteMs;
// An answer that has not come back by then is given up on, so the page never freezes.
constexpr qint64 PendingTimeoutMs = 15000;
// Above these error rates the tile turns amber, then red; a few percent is a normal partner.
constexpr double ErrorRateWarning = 5.0;
constexpr double ErrorRateAlert = 50.0;
// This many failed sends since the last accepted one is a spell the tile names, whatever
// the rate over five minutes of mostly good sends says.
constexpr qint64 FailedInARowForASpell = 3;

// "12 s late", "35 h early": a negative lateness is a send before scheduled_at (a store
// whose scheduled_at is the appointment, not the time to remind), not a lateness.
QString signedLateness(qint64 ms)
{
    if (ms < 0)
        return OverviewPage::tr("%1 early").arg(formatDuration(-ms));
    return ms == 0 ? OverviewPage::tr("on time") : OverviewPage::tr("%1 late").arg(formatDuration(ms));
}

// Sends per bucket as the chart draws them: whole buckets only, each the count the store
// holds for it (a quiet bucket is a zero, not a line drawn across to the next busy one).
// The bucket still running is left out until it ends: a count of a few seconds would
// look like a drop, and scaled up to a rate it would be a guess.
QList<QPointF> wholeBuckets(const QList<QPointF> &points, qint64 fromMs, qint64 toMs, qint64 bucketMs)
{
    QHash<qint64, double> counts;
    for (const QPointF &point : points)
        counts.insert(qint64(point.x()) / bucketMs, point.y());
    QList<QPointF> filled;
    for (qint64 bucket = fromMs / bucketMs; (bucket + 1) * bucketMs <= toMs; ++bucket) {
        if (bucket * bucketMs < fromMs)
            continue; // starts before the window: only part of it would be counted
        filled << QPointF(double(bucket * bucketMs + bucketMs / 2), counts.value(bucket, 0.0));
    }
    return filled;
}

// Round intervals on the time axis: 3 min, 10 min, 4 h.
int tickCountFor(qint64 windowMs)
{
    if (windowMs <= 15 * MinuteMs)
        return 6;
    return 7;
}

// Round buckets for each window, so a point reads as "sends in these 15 seconds".
qint64 bucketMsFor(qint64 windowMs)
{
    if (windowMs <= 15 * MinuteMs)
        return 15 * 1000;
    if (windowMs <= HourMs)
        return MinuteMs;
    return 15 * MinuteMs;
}

QString perBucket(qint64 bucketMs)
{
    if (bucketMs < MinuteMs)
        return OverviewPage::tr("per %1 s").arg(bucketMs / 1000);
    if (bucketMs == MinuteMs)
        return OverviewPage::tr("per minute");
    return OverviewPage::tr("per %1 min").arg(bucketMs / MinuteMs);
}

Tile *makeTile(const QString &objectName, const QString &caption)
{
    auto *tile = new Tile(caption);
    tile->setObjectName(objectName);
    return tile;
}

// A line of text under the tiles, hidden until there is something to say.
QLabel *makeNote(const QString &objectName, const QString &toolTip = {})
{
    auto *note = new QLabel;
    note->setObjectName(objectName);
    note->setWordWrap(true);
    note->setTextInteractionFlags(Qt::TextSelectableByMouse);
    note->setToolTip(toolTip);
    note->hide();
    return note;
}

} // namespace

OverviewPage::OverviewPage(EngineController *engine, HealthMonitor *health, QWidget *parent)
    : Page(parent), m_engine(engine), m_health(health)
{
    if (!m_health) {
        m_health = new HealthMonitor(engine, this);
        m_ownsHealth = true;
    }
    m_banner = new AlertBanner;

    auto *emptyState = new QLabel(tr("<h3>No store is open</h3>"
                                     "<p>Open one with <b>File › Open Store…</b>, or start the console with "
                                     "<code>--demo</code> to watch a simulated partner.</p>"));
    emptyState->setObjectName(QStringLiteral("emptyState"));
    emptyState->setAlignment(Qt::AlignCenter);
    emptyState->setWordWrap(true);

    m_queuePlace = new QLabel;
    m_queuePlace->setObjectName(QStringLiteral("queueLabel"));
    m_queuePlace->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_queuePlace->setForegroundRole(QPalette::PlaceholderText);
    m_queueUnavailable = makeNote(QStringLiteral("queueUnavailable"));
    m_pausedPartners = makeNote(QStringLiteral("pausedPartners"),
                                tr("Reminders put back because their partner is paused, waiting for its resume "
                                   "(the Worker page's Partners). Those no worker has taken since the pause are "
                                   "not counted: they wait in Ready or Delayed."));
    m_partitionLags = makeNote(QStringLiteral("partitionLags"),
                               tr("Per partition of the topic: the messages past the consumer group's last commit, "
                                  "which wait or are in flight at a worker. A partition far behind the others has a "
                                  "slow or stuck member. Messages the cluster deleted past the commit before any "
                                  "worker read them (retention) are counted apart: those reminders are lost."));

    m_ready = makeTile(QStringLiteral("readyTile"), tr("Ready"));
    m_inFlight = makeTile(QStringLiteral("inFlightTile"), tr("In flight"));
    m_delayed = makeTile(QStringLiteral("delayedTile"), tr("Delayed"));
    m_delayed->setToolTip(tr("Messages waiting for their time: retries backing off after a failed send, and "
                             "messages scheduled for later. Ready ones are not counted here."));
    m_dead = makeTile(QStringLiteral("deadLettersTile"), tr("Dead letters"));
    m_inDoubt = makeTile(QStringLiteral("inDoubtTile"), tr("In doubt"));
    m_oldest = makeTile(QStringLiteral("oldestReadyTile"), tr("Oldest ready message"));
    m_applied = makeTile(QStringLiteral("appliedTile"), tr("Applied, last 5 min"));
    m_duplicates = makeTile(QStringLiteral("duplicatesTile"), tr("Duplicates suppressed"));
    m_errorRate = makeTile(QStringLiteral("errorRateTile"), tr("Partner answers, last 5 min"));
    m_lateness = makeTile(QStringLiteral("latenessTile"), tr("Lateness p50 / p95"));
    m_lateness->setToolTip(tr("When each accepted send ended, against the reminder's scheduled_at, over the last "
                              "hour's accepted sends: half were later than the first figure, one in twenty later "
                              "than the second. Early: sent before scheduled_at, as when scheduled_at is the "
                              "appointment itself rather than the time to remind."));
    auto *tiles = new QGridLayout;
    tiles->setSpacing(8);
    const QList<Tile *> order{m_ready,  m_inFlight, m_delayed,    m_dead,      m_inDoubt,
                              m_oldest, m_applied,  m_duplicates, m_errorRate, m_lateness};
    for (int i = 0; i < order.size(); ++i)
        tiles->addWidget(order.at(i), i / 5, i % 5);

    m_window = new QComboBox;
    m_window->setObjectName(QStringLiteral("windowCombo"));
    m_window->addItem(tr("Last 15 minutes"), 15 * MinuteMs);
    m_window->addItem(tr("Last hour"), HourMs);
    m_window->addItem(tr("Last 24 hours"), 24 * HourMs);
    m_window->setCurrentIndex(0); // what is happening now matters most
    connect(m_window, &QComboBox::currentIndexChanged, this, [this] {
        if (m_session)
            load(); // a new window replaces the pending request; its answer is dropped
    });
    m_updated = new QLabel;
    m_updated->setForegroundRole(QPalette::PlaceholderText);
    m_error = new QLabel;
    m_error->setObjectName(QStringLiteral("loadError"));
    m_error->setWordWrap(true);
    m_error->hide();
    auto *historyLabel = new QLabel(tr("History:"));
    historyLabel->setBuddy(m_window);
    auto *historyRow = new QHBoxLayout;
    historyRow->addWidget(m_updated);
    historyRow->addStretch();
    historyRow->addWidget(historyLabel);
    historyRow->addWidget(m_window);

    m_depthChart = new MetricChart(tr("Queue depth (ready messages)"));
    m_ageChart = new MetricChart(tr("Oldest ready message (s)"));
    m_throughputChart = new MetricChart(tr("Applied sends"), Severity::Good);
    m_failuresChart = new MetricChart(tr("Failed sends"), Severity::Alert);
    m_depthChart->setObjectName(QStringLiteral("depthChart"));
    m_ageChart->setObjectName(QStringLiteral("ageChart"));
    m_throughputChart->setObjectName(QStringLiteral("throughputChart"));
    m_failuresChart->setObjectName(QStringLiteral("failuresChart"));
    auto *charts = new QGridLayout;
    charts->setSpacing(8);
    charts->addWidget(m_depthChart, 0, 0);
    charts->addWidget(m_ageChart, 0, 1);
    charts->addWidget(m_throughputChart, 1, 0);
    charts->addWidget(m_failuresChart, 1, 1);

    auto *content = new QWidget;
    auto *contentLayout = new QVBoxLayout(content);
    contentLayout->setContentsMargins(0, 0, 0, 0);
    contentLayout->addWidget(m_queuePlace);
    contentLayout->addLayout(tiles);
    contentLayout->addWidget(m_queueUnavailable);
    contentLayout->addWidget(m_pausedPartners);
    contentLayout->addWidget(m_partitionLags);
    contentLayout->addWidget(m_error);
    contentLayout->addLayout(historyRow);
    contentLayout->addLayout(charts, 1);

    m_stack = new QStackedWidget;
    m_stack->addWidget(emptyState);
    m_stack->addWidget(content);

    auto *layout = new QVBoxLayout(this);
    layout->addWidget(m_banner);
    layout->addWidget(m_stack, 1);

    connect(m_health, &HealthMonitor::changed, this, &OverviewPage::updateAlerts);
    // A "next due in 4 s" is worked out from the clock each second, never left standing.
    m_clock.setInterval(1000);
    connect(&m_clock, &QTimer::timeout, this, &OverviewPage::showDelayedCaption);
    clearStats();
    updateAlerts();
}

OverviewPage::~OverviewPage() = default;

void OverviewPage::setSession(StoreSession *session)
{
    // The previous session may already be gone, so its connections are dropped by handle.
    for (const auto &connection : std::as_const(m_sessionConnections))
        disconnect(connection);
    m_sessionConnections.clear();
    m_session = session;
    m_pendingToken = 0;
    m_stats.reset();
    if (m_ownsHealth)
        m_health->setSession(session);
    clearStats();
    if (m_session) {
        m_sessionConnections << connect(m_session, &StoreSession::overviewLoaded, this,
                                        &OverviewPage::onOverviewLoaded)
                             << connect(m_session, &StoreSession::failed, this, &OverviewPage::onFailed);
    }
    m_stack->setCurrentIndex(m_session ? 1 : 0);
    showQueuePlace();
    updateAlerts();
}

void OverviewPage::showQueuePlace()
{
    if (m_session && m_session->hasBrokerQueue()) {
        m_queuePlace->setText(
            tr("Queue at %1 — %2").arg(m_session->brokerName(), m_session->queueDisplayName()));
        m_queuePlace->setToolTip(
            tr("Ready, in flight, delayed, dead letters and the oldest message come from the "
               "broker; the rest from the ledger in the store."));
    } else {
        m_queuePlace->setText(tr("Queue in the store"));
        m_queuePlace->setToolTip(QString());
    }
}

void OverviewPage::refresh()
{
    if (!m_session)
        return;
    if (m_ownsHealth)
        m_health->refresh();
    // A slow store must not pile up requests on the reader's thread.
    if (m_pendingToken != 0 && m_pendingSince.elapsed() < PendingTimeoutMs)
        return;
    load();
}

void OverviewPage::load()
{
    m_pendingWindowMs = selectedWindowMs();
    m_pendingToken = m_session->loadOverview(m_pendingWindowMs, bucketMsFor(m_pendingWindowMs));
    m_pendingSince.start();
}

qint64 OverviewPage::selectedWindowMs() const
{
    return m_window->currentData().toLongLong();
}

void OverviewPage::onOverviewLoaded(quint64 token, const DeliveryStats &stats, const MetricSeries &series)
{
    if (token != m_pendingToken)
        return;
    m_pendingToken = 0;
    m_error->hide();
    m_stats = stats;
    m_statsReadAtMs = nowMs();
    showStats(stats);
    showSeries(series, m_pendingWindowMs);
    m_updated->setText(
        tr("Updated %1").arg(QLocale().toString(QTime::currentTime(), QStringLiteral("HH:mm:ss"))));
}

void OverviewPage::onFailed(quint64 token, const QString &error)
{
    if (token != m_pendingToken)
        return;
    m_pendingToken = 0;
    // The last numbers stay: stale but labelled is more useful than blank.
    m_error->setText(tr("Cannot read the store: %1").arg(error));
    QPalette palette = m_error->palette();
    palette.setColor(QPalette::WindowText, severityTextColor(Severity::Alert, this->palette()));
    m_error->setPalette(palette);
    m_error->show();
}

void OverviewPage::clearStats()
{
    const QString none = QStringLiteral("—");
    for (Tile *tile : {m_ready, m_inFlight, m_delayed, m_dead, m_inDoubt, m_oldest, m_applied, m_duplicates,
                       m_errorRate, m_lateness}) {
        tile->setValue(none);
        tile->setSubCaption(QString());
    }
    m_updated->setText(m_session ? tr("Loading…") : QString());
    m_clock.stop();
    m_error->hide();
    m_queueUnavailable->hide();
    m_pausedPartners->hide();
    m_partitionLags->hide();
    for (Tile *tile : {m_inFlight, m_oldest})
        tile->setToolTip(QString());
    const qint64 now = QDateTime::currentMSecsSinceEpoch();
    const qint64 window = selectedWindowMs();
    for (MetricChart *chart : {m_depthChart, m_ageChart, m_throughputChart, m_failuresChart})
        chart->setPoints({}, now - window, now);
}

void OverviewPage::showStats(const DeliveryStats &stats)
{
    const qint64 oldestLimitMs = m_health->thresholds().value(AlertRule::OldestReady);

    m_ready->setValue(formatCount(stats.queue.ready));
    m_ready->setSubCaption(tr("waiting for a worker"));
    // What the broker could not tell is not shown as a zero: those tiles say so, and why.
    const QString unavailable = stats.queue.unavailable;
    const QString notAvailable = tr("not available");
    if (unavailable.isEmpty()) {
        m_inFlight->setValue(formatCount(stats.queue.inFlight));
        m_inFlight->setSubCaption(tr("leased by workers now"));
    } else {
        m_inFlight->setMutedValue(notAvailable);
        m_inFlight->setSubCaption(tr("not reported by the broker"));
    }
    m_delayed->setValue(formatCount(stats.queue.delayed));
    showDelayedCaption();
    m_dead->setValue(formatCount(stats.queue.dead),
                     stats.queue.dead > 0 ? Severity::Warning : Severity::Normal);
    m_dead->setSubCaption(stats.queue.dead > 0 ? tr("an operator may redrive them") : tr("none"));
    // A broker that counts nothing (Pub/Sub without Cloud Monitoring): no zeros at all.
    if (stats.queue.backlogUnknown) {
        for (Tile *tile : {m_ready, m_delayed, m_dead}) {
            tile->setMutedValue(notAvailable);
            tile->setSubCaption(tr("not reported by the broker"));
        }
        m_dead->setSubCaption(tr("listed on the Dead letters page"));
    }
    if (stats.queue.backlogUnknown)
        for (Tile *tile : {m_ready, m_delayed, m_dead})
            tile->setToolTip(unavailable);
    QStringList paused;
    for (const auto &[pause, held] : stats.pausedPartners)
        paused.append(tr("Held for paused partner %1: %2 — %3").arg(pause.partner, formatCount(held), pause.describe()));
    m_pausedPartners->setText(paused.join(QLatin1Char('\n')));
    m_pausedPartners->setVisible(!paused.isEmpty());
    if (!paused.isEmpty()) {
        QPalette palette = m_pausedPartners->palette();
        palette.setColor(QPalette::WindowText, severityTextColor(Severity::Warning, palette));
        m_pausedPartners->setPalette(palette);
    }
    m_partitionLags->setText(tr("Lag by partition — %1").arg(describePartitionLags(stats.queue.partitions)));
    m_partitionLags->setVisible(!stats.queue.partitions.isEmpty());
    m_inDoubt->setValue(formatCount(stats.inDoubt), stats.inDoubt > 0 ? Severity::Warning : Severity::Normal);
    m_inDoubt->setSubCaption(stats.inDoubt > 0 ? tr("need an operator's decision") : tr("nothing to decide"));

    for (Tile *tile : {m_inFlight, m_oldest})
        tile->setToolTip(unavailable);
    if (!unavailable.isEmpty()) {
        m_oldest->setMutedValue(notAvailable);
        m_oldest->setSubCaption(tr("not reported by the broker"));
    } else if (const auto age = stats.queue.oldestReadyAgeMs) {
        m_oldest->setValue(formatDuration(*age), *age > oldestLimitMs ? Severity::Alert : Severity::Normal);
        m_oldest->setSubCaption(tr("alert above %1").arg(formatDuration(oldestLimitMs)));
    } else if (stats.queue.ready > 0) {
        // Messages wait, but the broker dates none of them (RabbitMQ's quorum queues keep
        // no head timestamp): not "nothing is waiting", and no alert either.
        m_oldest->setMutedValue(notAvailable);
        m_oldest->setSubCaption(tr("not reported by the broker"));
        m_oldest->setToolTip(tr("%1 messages are ready, but the broker does not say when the oldest arrived.")
                                 .arg(formatCount(stats.queue.ready)));
    } else {
        m_oldest->setValue(QStringLiteral("—"));
        m_oldest->setSubCaption(tr("nothing is waiting"));
    }
    if (unavailable.isEmpty()) {
        m_queueUnavailable->hide();
    } else {
        const QString broker =
            m_session && m_session->hasBrokerQueue() ? m_session->brokerName() : tr("The queue");
        m_queueUnavailable->setText(stats.queue.backlogUnknown
                                        ? tr("%1 does not report how many messages wait, are in flight, "
                                             "delayed or dead, nor the oldest one's "
                                             "age, so they are not shown: %2")
                                              .arg(broker, unavailable)
                                        : tr("%1 could not report the messages in flight or the oldest "
                                             "message's age, so they are not shown: %2")
                                              .arg(broker, unavailable));
        QPalette palette = m_queueUnavailable->palette();
        palette.setColor(QPalette::WindowText, severityTextColor(Severity::Warning, this->palette()));
        m_queueUnavailable->setPalette(palette);
        m_queueUnavailable->show();
    }

    m_applied->setValue(formatCount(stats.appliedLast5Min));
    // Expired reminders were not sent, and are no failure: told beside what was applied.
    m_applied->setSubCaption(stats.expired > 0 ? tr("%1 applied in all, %2 expired unsent")
                                                     .arg(formatCount(stats.acked), formatCount(stats.expired))
                                               : tr("%1 applied in all").arg(formatCount(stats.acked)));
    m_applied->setToolTip(stats.expired > 0 ? tr("%1 reminders expired before they could be sent: not sent, "
                                                 "by design (their expires_at, or their partner's expire_after)")
                                                  .arg(formatCount(stats.expired))
                                            : QString());
    m_duplicates->setValue(formatCount(stats.duplicateDeliveries));
    m_duplicates->setSubCaption(
        stats.duplicatesSuppressed == 1
            ? tr("deliveries, on 1 event")
            : tr("deliveries, on %1 events").arg(formatCount(stats.duplicatesSuppressed)));

    if (stats.sendsLast5Min > 0 && stats.failedInARowLast5Min >= FailedInARowForASpell) {
        const QString since = formatDisplayTime(stats.failingSinceMs);
        if (stats.failedInARowLast5Min == stats.sendsLast5Min) {
            m_errorRate->setValue(tr("all %1 failed").arg(formatCount(stats.sendsLast5Min)), Severity::Alert);
            m_errorRate->setSubCaption(tr("every send since %1, none accepted").arg(since));
        } else {
            m_errorRate->setValue(tr("last %1 failed").arg(formatCount(stats.failedInARowLast5Min)), Severity::Alert);
            m_errorRate->setSubCaption(tr("in a row since %1; %2 of %3 sends failed")
                                           .arg(since, formatCount(stats.failedSendsLast5Min),
                                                formatCount(stats.sendsLast5Min)));
        }
    } else if (stats.sendsLast5Min > 0) {
        const double percent = 100.0 * double(stats.failedSendsLast5Min) / double(stats.sendsLast5Min);
        const Severity severity = percent >= ErrorRateAlert    ? Severity::Alert
                                  : percent > ErrorRateWarning ? Severity::Warning
                                                               : Severity::Normal;
        m_errorRate->setValue(formatPercent(percent), severity);
        m_errorRate->setSubCaption(
            tr("%1 of %2 sends failed, last 5 min")
                .arg(formatCount(stats.failedSendsLast5Min), formatCount(stats.sendsLast5Min)));
    } else {
        m_errorRate->setValue(QStringLiteral("—"));
        m_errorRate->setSubCaption(tr("no sends in the last 5 min"));
    }

    if (stats.latenessP50Ms && stats.latenessP95Ms) {
        m_lateness->setValue(
            tr("%1 / %2").arg(signedLateness(*stats.latenessP50Ms), signedLateness(*stats.latenessP95Ms)));
        m_lateness->setSubCaption(*stats.latenessP50Ms < 0
                                      ? tr("sent before scheduled_at: is it the appointment's time?")
                                      : tr("accepted − scheduled_at, last hour"));
    } else {
        m_lateness->setValue(QStringLiteral("—"));
        m_lateness->setSubCaption(tr("nothing applied in the last hour"));
    }
}

void OverviewPage::showSeries(const MetricSeries &series, qint64 windowMs)
{
    const qint64 to = QDateTime::currentMSecsSinceEpoch();
    const qint64 from = to - windowMs;
    for (MetricChart *chart : {m_depthChart, m_ageChart, m_throughputChart, m_failuresChart})
        chart->setTickCount(tickCountFor(windowMs));
    m_depthChart->setPoints(series.ready, from, to);

    // Seconds on the axis up to a few minutes, then larger units so the labels stay short.
    double maxAgeS = 0;
    for (const QPointF &point : series.oldestReadyAgeS)
        maxAgeS = std::max(maxAgeS, point.y());
    double divisor = 1;
    QString ageTitle = tr("Oldest ready message (s)");
    if (maxAgeS > 2 * 3600) {
        divisor = 3600;
        ageTitle = tr("Oldest ready message (h)");
    } else if (maxAgeS > 180) {
        divisor = 60;
        ageTitle = tr("Oldest ready message (min)");
    }
    QList<QPointF> ages;
    ages.reserve(series.oldestReadyAgeS.size());
    for (const QPointF &point : series.oldestReadyAgeS)
        ages << QPointF(point.x(), point.y() / divisor);
    m_ageChart->setTitle(ageTitle);
    m_ageChart->setPoints(ages, from, to);

    const qint64 bucketMs = series.bucketMs;
    m_throughputChart->setTitle(tr("Applied sends %1").arg(perBucket(bucketMs)));
    m_failuresChart->setTitle(tr("Failed sends %1").arg(perBucket(bucketMs)));
    m_throughputChart->setPoints(wholeBuckets(series.appliedPerBucket, from, to, bucketMs), from, to);
    m_failuresChart->setPoints(wholeBuckets(series.failedPerBucket, from, to, bucketMs), from, to);
}

// What the Delayed tile counts: messages in the queue waiting for their time, a retry's
// backoff or a later schedule; the caption splits the same number where the queue can
// tell, and says when the first is due, from the clock, so it never outlives its moment.
void OverviewPage::showDelayedCaption()
{
    if (!m_stats) {
        m_clock.stop();
        return;
    }
    const QueueCounts &queue = m_stats->queue;
    if (queue.backlogUnknown) {
        m_clock.stop();
        return;
    }
    QString caption;
    bool counting = false;
    if (queue.delayed == 0) {
        caption = tr("nothing waiting for later");
    } else {
        if (queue.delayedRetries) {
            const qint64 retries = *queue.delayedRetries;
            const qint64 later = queue.delayed - retries;
            QStringList parts;
            if (retries > 0)
                parts << tr("%1 retrying").arg(formatCount(retries));
            if (later > 0)
                parts << tr("%1 later").arg(formatCount(later));
            caption = parts.join(QStringLiteral(", "));
        } else {
            caption = tr("retrying or due later");
        }
        if (queue.nextDelayedInMs) {
            const qint64 dueInMs = m_statsReadAtMs + *queue.nextDelayedInMs - nowMs();
            caption += dueInMs > 500
                           ? tr(" · next in %1").arg(formatDuration(std::max<qint64>(1000, dueInMs)))
                           : tr(" · next due now");
            counting = dueInMs > 500;
        }
    }
    m_delayed->setSubCaption(caption);
    if (counting && !m_clock.isActive())
        m_clock.start();
    else if (!counting)
        m_clock.stop();
}

void OverviewPage::updateAlerts()
{
    QList<AlertBanner::Alert> alerts;
    for (const HealthAlert &alert : m_health->alerts())
        alerts << AlertBanner::Alert{alert.severity, alert.text};
    m_banner->setAlerts(alerts);
}

} // namespace once::ui
