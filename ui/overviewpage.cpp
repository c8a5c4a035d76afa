#include "overviewpage.h"

#include "alertbanner.h"
#include "enginecontroller.h"
#include "humanunits.h"
#include "metricchart.h"
#include "settings.h"
#include "storesession.h"
#include "tile.h"

#include <QComboBox>
#include <QDateTime>
#include <QGridLayout>
#include <QHBoxLayout>
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
// StoreReader asks Metrics for this many buckets over the window.
constexpr qint64 ReaderBuckets = 120;
// Above these error rates the tile turns amber, then red; a few percent is a normal partner.
constexpr double ErrorRateWarning = 5.0;
constexpr double ErrorRateAlert = 50.0;

// The reader groups sends into buckets and leaves out those without sends; on a
// throughput chart a quiet minute is a zero, not a line drawn straight across to the
// next busy one. The bucket still running is scaled to the part of it that has elapsed,
// so "now" does not always look like a drop; while too little of it has elapsed for a
// steady rate, it is left out rather than drawn as a spike.
QList<QPointF> ratePerMinute(const QList<QPointF> &points, qint64 fromMs, qint64 toMs, qint64 windowMs)
{
    const double width = double(std::max<qint64>(1000, windowMs / ReaderBuckets));
    const double to = double(toMs);
    // Bucket centres lie on a grid anchored at the reader's window start; any point gives its phase.
    const double anchor = points.isEmpty() ? to - width / 2 : points.constFirst().x();
    double x = anchor - std::floor((anchor - double(fromMs - qint64(width))) / width) * width;
    QList<QPointF> filled;
    filled.reserve(ReaderBuckets + 4);
    qsizetype next = 0;
    const auto take = [&](const QPointF &point) {
        const double elapsed = to - (point.x() - width / 2);
        if (elapsed >= width)
            filled << point;
        else if (elapsed >= std::max(1000.0, width / 4))
            filled << QPointF(to, point.y() * width / elapsed);
    };
    for (; x <= to; x += width) {
        while (next < points.size() && points.at(next).x() < x - width / 2)
            take(points.at(next++));
        if (next < points.size() && std::abs(points.at(next).x() - x) <= width / 2)
            take(points.at(next++));
        else
            filled << QPointF(x, 0);
    }
    while (next < points.size())
        take(points.at(next++));
    return filled;
}

// Round intervals on the time axis: 3 min, 10 min, 4 h.
int tickCountFor(qint64 windowMs)
{
    if (windowMs <= 15 * MinuteMs)
        return 6;
    return 7;
}

Tile *makeTile(const QString &objectName, const QString &caption)
{
    auto *tile = new Tile(caption);
    tile->setObjectName(objectName);
    return tile;
}

} // namespace

OverviewPage::OverviewPage(EngineController *engine, QWidget *parent) : Page(parent), m_engine(engine)
{
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
    m_queueUnavailable = new QLabel;
    m_queueUnavailable->setObjectName(QStringLiteral("queueUnavailable"));
    m_queueUnavailable->setWordWrap(true);
    m_queueUnavailable->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_queueUnavailable->hide();

    m_ready = makeTile(QStringLiteral("readyTile"), tr("Ready"));
    m_inFlight = makeTile(QStringLiteral("inFlightTile"), tr("In flight"));
    m_delayed = makeTile(QStringLiteral("delayedTile"), tr("Delayed"));
    m_dead = makeTile(QStringLiteral("deadLettersTile"), tr("Dead letters"));
    m_inDoubt = makeTile(QStringLiteral("inDoubtTile"), tr("In doubt"));
    m_oldest = makeTile(QStringLiteral("oldestReadyTile"), tr("Oldest ready message"));
    m_applied = makeTile(QStringLiteral("appliedTile"), tr("Applied, last 5 min"));
    m_duplicates = makeTile(QStringLiteral("duplicatesTile"), tr("Duplicates suppressed"));
    m_errorRate = makeTile(QStringLiteral("errorRateTile"), tr("Partner error rate"));
    m_lateness = makeTile(QStringLiteral("latenessTile"), tr("Lateness p50 / p95"));
    auto *tiles = new QGridLayout;
    tiles->setSpacing(8);
    const QList<Tile *> order{m_ready, m_inFlight, m_delayed, m_dead, m_inDoubt,
                              m_oldest, m_applied, m_duplicates, m_errorRate, m_lateness};
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
    m_throughputChart = new MetricChart(tr("Throughput (applied / min)"), Severity::Good);
    m_failuresChart = new MetricChart(tr("Failures (failed sends / min)"), Severity::Alert);
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
    contentLayout->addWidget(m_error);
    contentLayout->addLayout(historyRow);
    contentLayout->addLayout(charts, 1);

    m_stack = new QStackedWidget;
    m_stack->addWidget(emptyState);
    m_stack->addWidget(content);

    auto *layout = new QVBoxLayout(this);
    layout->addWidget(m_banner);
    layout->addWidget(m_stack, 1);

    if (m_engine)
        connect(m_engine, &EngineController::stateChanged, this, &OverviewPage::updateAlerts);
    clearStats();
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
    clearStats();
    if (m_session) {
        m_sessionConnections << connect(m_session, &StoreSession::overviewLoaded, this, &OverviewPage::onOverviewLoaded)
                             << connect(m_session, &StoreSession::failed, this, &OverviewPage::onFailed);
    }
    m_stack->setCurrentIndex(m_session ? 1 : 0);
    showQueuePlace();
    updateAlerts();
}

void OverviewPage::showQueuePlace()
{
    if (m_session && m_session->hasBrokerQueue()) {
        m_queuePlace->setText(tr("Queue at %1 — %2").arg(m_session->brokerName(), m_session->queueDisplayName()));
        m_queuePlace->setToolTip(tr("Ready, in flight, delayed, dead letters and the oldest message come from the "
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
    // A slow store must not pile up requests on the reader's thread.
    if (m_pendingToken != 0 && m_pendingSince.elapsed() < PendingTimeoutMs)
        return;
    load();
}

void OverviewPage::load()
{
    m_pendingWindowMs = selectedWindowMs();
    m_pendingToken = m_session->loadOverview(m_pendingWindowMs);
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
    showStats(stats);
    showSeries(series, m_pendingWindowMs);
    updateAlerts();
    m_updated->setText(tr("Updated %1").arg(QLocale().toString(QTime::currentTime(), QStringLiteral("HH:mm:ss"))));
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
    m_error->hide();
    m_queueUnavailable->hide();
    for (Tile *tile : {m_inFlight, m_oldest})
        tile->setToolTip(QString());
    const qint64 now = QDateTime::currentMSecsSinceEpoch();
    const qint64 window = selectedWindowMs();
    for (MetricChart *chart : {m_depthChart, m_ageChart, m_throughputChart, m_failuresChart})
        chart->setPoints({}, now - window, now);
}

void OverviewPage::showStats(const DeliveryStats &stats)
{
    const Settings settings;
    const qint64 oldestLimitMs = qint64(settings.oldestAgeAlertSeconds()) * 1000;

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
    m_delayed->setSubCaption(stats.retrying == 1 ? tr("1 event between retries")
                                                 : tr("%1 events between retries").arg(formatCount(stats.retrying)));
    m_dead->setValue(formatCount(stats.queue.dead), stats.queue.dead > 0 ? Severity::Warning : Severity::Normal);
    m_dead->setSubCaption(stats.queue.dead > 0 ? tr("an operator may redrive them") : tr("none"));
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
        const QString broker = m_session && m_session->hasBrokerQueue() ? m_session->brokerName() : tr("The queue");
        m_queueUnavailable->setText(
            tr("%1 could not report the messages in flight or the oldest message's age, so they are not shown: %2")
                .arg(broker, unavailable));
        QPalette palette = m_queueUnavailable->palette();
        palette.setColor(QPalette::WindowText, severityTextColor(Severity::Warning, this->palette()));
        m_queueUnavailable->setPalette(palette);
        m_queueUnavailable->show();
    }

    m_applied->setValue(formatCount(stats.appliedLast5Min));
    m_applied->setSubCaption(tr("%1 applied in all").arg(formatCount(stats.acked)));
    m_duplicates->setValue(formatCount(stats.duplicateDeliveries));
    m_duplicates->setSubCaption(stats.duplicatesSuppressed == 1
                                    ? tr("deliveries, on 1 event")
                                    : tr("deliveries, on %1 events").arg(formatCount(stats.duplicatesSuppressed)));

    if (stats.sendsLast5Min > 0) {
        const double percent = 100.0 * double(stats.failedSendsLast5Min) / double(stats.sendsLast5Min);
        const Severity severity = percent >= ErrorRateAlert     ? Severity::Alert
                                  : percent > ErrorRateWarning ? Severity::Warning
                                                               : Severity::Normal;
        m_errorRate->setValue(formatPercent(percent), severity);
        m_errorRate->setSubCaption(tr("%1 of %2 sends failed, last 5 min")
                                       .arg(formatCount(stats.failedSendsLast5Min), formatCount(stats.sendsLast5Min)));
    } else {
        m_errorRate->setValue(QStringLiteral("—"));
        m_errorRate->setSubCaption(tr("no sends in the last 5 min"));
    }

    if (stats.latenessP50Ms && stats.latenessP95Ms) {
        m_lateness->setValue(tr("%1 / %2").arg(formatDuration(*stats.latenessP50Ms), formatDuration(*stats.latenessP95Ms)));
        m_lateness->setSubCaption(tr("applied − scheduled, last hour"));
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

    m_throughputChart->setPoints(ratePerMinute(series.appliedPerMin, from, to, windowMs), from, to);
    m_failuresChart->setPoints(ratePerMinute(series.failedPerMin, from, to, windowMs), from, to);
}

void OverviewPage::updateAlerts()
{
    QList<AlertBanner::Alert> alerts;
    if (m_engine && m_engine->state() == EngineController::State::BreakerOpen)
        alerts << AlertBanner::Alert{Severity::Alert,
                                     tr("The circuit breaker is open: the partner failed several times in a row. "
                                        "The worker holds back and probes it after a cooldown.")};
    if (m_stats) {
        const Settings settings;
        const qint64 oldestLimitMs = qint64(settings.oldestAgeAlertSeconds()) * 1000;
        if (const auto age = m_stats->queue.oldestReadyAgeMs; age && *age > oldestLimitMs)
            alerts << AlertBanner::Alert{Severity::Alert,
                                         tr("The oldest ready message has waited %1 (alert above %2): workers are "
                                            "not keeping up, or none is running.")
                                             .arg(formatDuration(*age), formatDuration(oldestLimitMs))};
        // Core keeps no per-event failure count over time; many failed sends with nothing
        // applied is the same story told by the totals: the partner is refusing everything.
        if (m_stats->failedSendsLast5Min >= settings.partnerFailingAlertSends() && m_stats->appliedLast5Min == 0)
            alerts << AlertBanner::Alert{Severity::Alert,
                                         tr("The partner keeps failing: %1 failed sends and nothing applied in the "
                                            "last 5 minutes.")
                                             .arg(formatCount(m_stats->failedSendsLast5Min))};
        if (m_stats->inDoubt > 0)
            alerts << AlertBanner::Alert{Severity::Warning,
                                         m_stats->inDoubt == 1
                                             ? tr("1 event in doubt needs an operator (see the In doubt page).")
                                             : tr("%1 events in doubt need an operator (see the In doubt page).")
                                                   .arg(formatCount(m_stats->inDoubt))};
    }
    m_banner->setAlerts(alerts);
}

} // namespace once::ui
