#include "models/workersmodel.h"

#include "display/statuscolors.h"

#include "operator/inspector.h"

#include <QFont>
#include <QGuiApplication>
#include <QHash>
#include <QIcon>
#include <QPainter>
#include <QPainterPath>
#include <QPalette>
#include <QPixmap>

namespace once::ui {

namespace {

const QString Running = QStringLiteral("running");
const QString Paused = QStringLiteral("paused");
const QString Stopped = QStringLiteral("stopped");
const QString Gone = QStringLiteral("gone");

bool sameWorker(const WorkerRecord &a, const WorkerRecord &b)
{
    return a.host == b.host && a.pid == b.pid && a.version == b.version && a.partner == b.partner &&
           a.concurrency == b.concurrency && a.state == b.state && a.startedAtMs == b.startedAtMs &&
           a.heartbeatAtMs == b.heartbeatAtMs && a.stoppedAtMs == b.stoppedAtMs && a.applied == b.applied &&
           a.duplicates == b.duplicates && a.retries == b.retries && a.deadLettered == b.deadLettered &&
           a.held == b.held && a.inFlight == b.inFlight && a.breaker == b.breaker &&
           a.failures == b.failures && a.consecutiveFailures == b.consecutiveFailures &&
           a.failingSinceMs == b.failingSinceMs && a.lastFailureAtMs == b.lastFailureAtMs &&
           a.lastErrorClass == b.lastErrorClass && a.lastHttpStatus == b.lastHttpStatus &&
           a.inDoubtPolicy == b.inDoubtPolicy && a.configuredInDoubtPolicy == b.configuredInDoubtPolicy;
}

QString inDoubtText(const WorkerRecord &worker)
{
    if (worker.inDoubtPolicy.isEmpty())
        return QStringLiteral("–"); // a worker of a version that did not say
    if (worker.inDoubtPolicy == QLatin1String("hold"))
        return worker.holdsAgainstItsStart() ? WorkersModel::tr("hold, not resend")
                                            : WorkersModel::tr("hold");
    return WorkersModel::tr("resend");
}

Severity severityOf(const QString &status)
{
    if (status == Running)
        return Severity::Good;
    if (status == Paused)
        return Severity::Warning;
    if (status == Gone)
        return Severity::Alert;
    return Severity::Normal;
}

// Live workers first: running, paused, then the ones to look at (gone), then history.
int statusRank(const QString &status)
{
    if (status == Running)
        return 0;
    if (status == Paused)
        return 1;
    if (status == Gone)
        return 2;
    return 3;
}

// A dot in the status's colour; for a gone worker, a warning triangle, which reads as
// "look here" even to someone who does not tell red from green.
QIcon statusIcon(const QString &status, const QPalette &palette, bool holdingBack)
{
    static QHash<QString, QIcon> cache;
    const QColor colour = status == Stopped ? palette.color(QPalette::Disabled, QPalette::Text)
                          : holdingBack     ? severityTextColor(Severity::Alert, palette)
                                            : severityTextColor(severityOf(status), palette);
    const QString key = status + colour.name();
    if (const auto it = cache.constFind(key); it != cache.cend())
        return *it;
    constexpr int Size = 32; // drawn at twice the size, shown at 16 px: crisp on high-dpi too
    QPixmap pixmap(Size, Size);
    pixmap.fill(Qt::transparent);
    {
        QPainter p(&pixmap);
        p.setRenderHint(QPainter::Antialiasing);
        p.setPen(Qt::NoPen);
        p.setBrush(colour);
        if (status == Gone) {
            QPainterPath triangle;
            triangle.moveTo(16, 2);
            triangle.lineTo(31, 29);
            triangle.lineTo(1, 29);
            triangle.closeSubpath();
            p.drawPath(triangle);
            p.setPen(QPen(Qt::white, 3.5, Qt::SolidLine, Qt::RoundCap));
            p.drawLine(QPointF(16, 11), QPointF(16, 19));
            p.drawPoint(QPointF(16, 24.5));
        } else {
            p.drawEllipse(QRectF(7, 7, Size - 14, Size - 14));
        }
    }
    const QIcon icon(pixmap);
    cache.insert(key, icon);
    return icon;
}

QString ageText(qint64 ageMs)
{
    // Another machine's clock may run a little ahead of this one's.
    if (ageMs < 1000)
        return WorkersModel::tr("just now");
    return WorkersModel::tr("%1 ago").arg(formatDuration(ageMs));
}

} // namespace

WorkersModel::WorkersModel(QObject *parent) : RowTableModel(parent) {}

void WorkersModel::setWorkers(const QList<WorkerRecord> &workers, qint64 nowMs)
{
    replaceRows(
        workers, [](const WorkerRecord &worker) { return worker.id; }, sameWorker);
    if (nowMs != m_nowMs) {
        m_nowMs = nowMs;
        // Every row's age moved, and any row may have become gone: one signal for all.
        if (!m_rows.isEmpty())
            emit dataChanged(index(0, 0), index(int(m_rows.size()) - 1, Count - 1));
    }
}

void WorkersModel::setOwnWorkerId(const QString &id)
{
    if (id == m_ownWorkerId)
        return;
    m_ownWorkerId = id;
    if (!m_rows.isEmpty())
        emit dataChanged(index(0, Id), index(int(m_rows.size()) - 1, Id), {Qt::FontRole, Qt::ToolTipRole});
}

QVariant WorkersModel::data(const QModelIndex &index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const WorkerRecord &worker = m_rows.at(index.row());
    const auto column = Column(index.column());
    const QString status = worker.status(m_nowMs);
    if (role == RawRole || role == SortRole) {
        switch (column) {
        case Id:
            return worker.id;
        case Host:
            return worker.host;
        case Pid:
            return worker.pid;
        case Status:
            return role == SortRole ? QVariant(statusRank(status)) : QVariant(status);
        case Started:
            return worker.startedAtMs;
        case Heartbeat:
            return worker.heartbeatAtMs;
        case Applied:
            return worker.applied;
        case Duplicates:
            return worker.duplicates;
        case Retries:
            return worker.retries;
        case DeadLettered:
            return worker.deadLettered;
        case InFlight:
            return worker.inFlight;
        case InDoubt:
            return worker.inDoubtPolicy;
        case Partner:
            return worker.partner;
        case Count:
            break;
        }
        return {};
    }
    switch (role) {
    case Qt::DisplayRole:
        switch (column) {
        case Id:
            return worker.id;
        case Host:
            return worker.host;
        case Pid:
            return QString::number(worker.pid);
        case Status:
            // A worker with several partners holds back from the failing one only.
            if (worker.isHoldingBack(m_nowMs) && worker.partners.size() > 1 && !worker.failingPartner.isEmpty())
                return tr("holding back from %1").arg(worker.failingPartner);
            return worker.isHoldingBack(m_nowMs) ? tr("holding back") : status;
        case Started:
            return formatDisplayTime(worker.startedAtMs);
        case Heartbeat:
            return ageText(m_nowMs - worker.heartbeatAtMs);
        case Applied:
            return formatCount(worker.applied);
        case Duplicates:
            return formatCount(worker.duplicates);
        case Retries:
            return formatCount(worker.retries);
        case DeadLettered:
            return formatCount(worker.deadLettered);
        case InFlight:
            return formatCount(worker.inFlight);
        case InDoubt:
            return inDoubtText(worker);
        case Partner:
            return worker.partner;
        case Count:
            break;
        }
        return {};
    case Qt::DecorationRole:
        if (column == Status)
            return statusIcon(status, QGuiApplication::palette(), worker.isHoldingBack(m_nowMs));
        return {};
    case Qt::ForegroundRole: {
        const QPalette palette = QGuiApplication::palette();
        if (column == Status && worker.isHoldingBack(m_nowMs))
            return severityTextColor(Severity::Alert, palette);
        if (column == Status && status != Stopped)
            return severityTextColor(severityOf(status), palette);
        // A worker that is no longer there: its row is history, greyed.
        if (status == Gone || status == Stopped)
            return palette.color(QPalette::Disabled, QPalette::Text);
        if (column == DeadLettered && worker.deadLettered > 0)
            return severityTextColor(Severity::Warning, palette);
        if (column == InDoubt && worker.holdsAgainstItsStart())
            return severityTextColor(Severity::Warning, palette);
        return {};
    }
    case Qt::FontRole:
        if (column == Id && !m_ownWorkerId.isEmpty() && worker.id == m_ownWorkerId) {
            QFont font;
            font.setBold(true);
            return font;
        }
        return {};
    case Qt::ToolTipRole:
        switch (column) {
        case Id:
            return worker.id == m_ownWorkerId && !m_ownWorkerId.isEmpty()
                       ? tr("%1: this console's worker (version %2)").arg(worker.id, worker.version)
                       : tr("%1 (version %2, up to %3 sends in flight)")
                             .arg(worker.id, worker.version, QString::number(worker.concurrency));
        case Status:
            if (status == Gone)
                return tr("No heartbeat for %1 (a running worker writes one every %2 s): it crashed, was "
                          "killed or "
                          "lost the store. Messages it had leased come back to the queue when their leases "
                          "expire.")
                    .arg(formatDuration(m_nowMs - worker.heartbeatAtMs))
                    .arg(WorkerRegistry::HeartbeatIntervalMs / 1000);
            if (status == Stopped)
                return tr("Stopped at %1").arg(formatDisplayTime(worker.stoppedAtMs));
            if (worker.isHoldingBack(m_nowMs))
                return tr("Holding back: its circuit breaker is %1 after %2 failed sends in a row (last %3), "
                          "failing since %4; it probes the partner and resumes by itself")
                    .arg(worker.breaker, formatCount(worker.consecutiveFailures), worker.lastErrorClass,
                         formatDisplayTime(worker.failingSinceMs));
            if (status == Paused)
                return tr("Paused: takes no new messages; sends in flight finish");
            return tr("Delivering; heartbeat every %1 s").arg(WorkerRegistry::HeartbeatIntervalMs / 1000);
        case Started:
            return formatTime(worker.startedAtMs);
        case Heartbeat:
            return formatDisplayTime(worker.heartbeatAtMs, true);
        case Applied:
        case Duplicates:
        case Retries:
        case DeadLettered:
        case InFlight:
            return tr("At its last heartbeat (held for an operator: %1)").arg(formatCount(worker.held));
        case InDoubt:
            if (worker.inDoubtPolicy.isEmpty())
                return tr("This worker's version does not say what it does with a send left in doubt");
            if (worker.holdsAgainstItsStart())
                return tr("Started to resend sends left in doubt with the same key, but holds them for an operator: "
                          "the store records that %1 does not honour Idempotency-Key, so a resend could act twice")
                    .arg(worker.partner);
            return worker.inDoubtPolicy == QLatin1String("hold")
                       ? tr("Holds a send left in doubt (no answer after the request was written) for an operator")
                       : tr("Resends a send left in doubt with the same Idempotency-Key; one effect only if the "
                            "partner honours it");
        case Partner:
            return worker.partner;
        default:
            return {};
        }
    case Qt::TextAlignmentRole:
        switch (column) {
        case Pid:
        case Applied:
        case Duplicates:
        case Retries:
        case DeadLettered:
        case InFlight:
            return int(Qt::AlignRight | Qt::AlignVCenter); // Qt 6.4's delegate reads an int
        default:
            return {};
        }
    default:
        return {};
    }
}

QVariant WorkersModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || section < 0 || section >= Count)
        return QAbstractTableModel::headerData(section, orientation, role);
    if (role == Qt::DisplayRole) {
        switch (Column(section)) {
        case Id:
            return tr("Worker");
        case Host:
            return tr("Host");
        case Pid:
            return tr("PID");
        case Status:
            return tr("Status");
        case Started:
            return tr("Started");
        case Heartbeat:
            return tr("Last heartbeat");
        case Applied:
            return tr("Applied");
        case Duplicates:
            return tr("Duplicates");
        case Retries:
            return tr("Retries");
        case DeadLettered:
            return tr("Dead-lettered");
        case InFlight:
            return tr("In flight");
        case InDoubt:
            return tr("In doubt");
        case Partner:
            return tr("Partner");
        case Count:
            break;
        }
    }
    if (role == Qt::ToolTipRole) {
        switch (Column(section)) {
        case Status:
            return tr("Gone: no heartbeat for %1 s, though the worker never said it stopped")
                .arg(WorkerRegistry::GoneAfterMs / 1000);
        case Started:
            return tr("Local time");
        case Applied:
            return tr("Reminders the partner accepted, recorded and acknowledged, since the worker started");
        case Duplicates:
            return tr("Deliveries suppressed without a send: their key had already been claimed");
        case Retries:
            return tr("Sends scheduled again after a transient failure");
        case DeadLettered:
            return tr("Messages that failed permanently or ran out of attempts");
        case InFlight:
            return tr("Sends started and not yet settled");
        case InDoubt:
            return tr("What the worker does with a send left without an answer after the request was written: "
                      "resend it with the same key, or hold it for an operator");
        default:
            break;
        }
    }
    if (role == Qt::TextAlignmentRole) {
        switch (Column(section)) {
        case Pid:
        case Applied:
        case Duplicates:
        case Retries:
        case DeadLettered:
        case InFlight:
            return int(Qt::AlignRight | Qt::AlignVCenter);
        default:
            break;
        }
    }
    return {};
}

} // namespace once::ui
