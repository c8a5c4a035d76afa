#include "models/attemptsmodel.h"

#include "display/displaytime.h"
#include "display/eventstory.h"
#include "display/humanunits.h"
#include "operator/inspector.h"

namespace once::ui {

namespace {

bool sameAttempt(const Attempt &a, const Attempt &b)
{
    return a.atMs == b.atMs && a.step == b.step && a.outcome == b.outcome && a.messageId == b.messageId &&
           a.delivery == b.delivery && a.workerId == b.workerId;
}

// The badge of the ledger state a history row leads to, so the story reads at a glance.
QString stateOfOutcome(const Attempt &a)
{
    if (a.outcome == QLatin1String("applied") || a.outcome == QLatin1String("marked-delivered"))
        return LedgerState::Applied;
    if (a.outcome == QLatin1String("claimed"))
        return LedgerState::Claimed;
    if (a.outcome == QLatin1String("transient") || a.step == QLatin1String("retry"))
        return LedgerState::Retrying;
    if (a.outcome == QLatin1String("in-doubt") || a.outcome == QLatin1String("held") ||
        a.outcome == QLatin1String("resend"))
        return LedgerState::InDoubt;
    if (a.outcome == QLatin1String("permanent") || a.step == QLatin1String("dead-letter"))
        return LedgerState::Dead;
    if (a.outcome == QLatin1String("expired"))
        return LedgerState::Expired;
    return QString(); // suppressed, acked, busy: nothing happened at the partner
}

QString errorText(const Attempt &a)
{
    if (a.errorClass.isEmpty())
        return a.error;
    if (a.error.isEmpty() || a.error == a.errorClass)
        return a.errorClass;
    return a.errorClass + QStringLiteral(": ") + a.error;
}

} // namespace

AttemptsModel::AttemptsModel(QObject *parent) : QAbstractTableModel(parent)
{
    connect(&DisplayTime::instance(), &DisplayTime::changed, this, [this] {
        emit headerDataChanged(Qt::Horizontal, 0, Count - 1);
        if (rowCount() > 0)
            emit dataChanged(index(0, 0), index(rowCount() - 1, Count - 1), {Qt::DisplayRole});
    });
}

AttemptsModel::~AttemptsModel() = default;

void AttemptsModel::setAttempts(const QList<Attempt> &attempts)
{
    const qsizetype shown = m_attempts.size();
    bool extends = !m_attempts.isEmpty() && attempts.size() >= shown;
    for (qsizetype i = 0; extends && i < shown; ++i)
        extends = sameAttempt(m_attempts.at(i), attempts.at(i));
    if (extends) {
        if (attempts.size() == shown)
            return;
        beginInsertRows(QModelIndex(), int(shown), int(attempts.size()) - 1);
        m_attempts = attempts;
        endInsertRows();
        return;
    }
    beginResetModel();
    m_attempts = attempts;
    endResetModel();
}

void AttemptsModel::clear()
{
    if (m_attempts.isEmpty())
        return;
    beginResetModel();
    m_attempts.clear();
    endResetModel();
}

int AttemptsModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : int(m_attempts.size());
}

int AttemptsModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : Count;
}

QVariant AttemptsModel::data(const QModelIndex &index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const Attempt &a = m_attempts.at(index.row());
    const auto column = Column(index.column());

    if (role == RawRole) {
        switch (column) {
        case Time:
            return a.atMs;
        case Summary:
            return attemptSummary(a);
        case Step:
            return a.step;
        case Outcome:
            return a.outcome;
        case MessageId:
            return a.messageId;
        case EventId:
            return a.eventId;
        case Delivery:
            return a.delivery;
        case Worker:
            return a.workerId;
        case HttpStatus:
            return a.httpStatus;
        case Latency:
            return a.latencyMs;
        case ProviderRequestId:
            return a.providerRequestId;
        case Error:
            return a.errorClass;
        case Count:
            break;
        }
        return {};
    }
    if (role == Qt::DisplayRole) {
        switch (column) {
        case Time:
            return formatDisplayTime(a.atMs, true);
        case Summary:
            return attemptSummary(a);
        case Step:
            return a.step;
        case Outcome:
            return a.outcome;
        case MessageId:
            return a.messageId;
        case EventId:
            return a.eventId;
        case Delivery:
            return a.delivery > 0 ? QVariant(a.delivery) : QVariant();
        case Worker:
            return a.workerId;
        case HttpStatus:
            return a.httpStatus ? QVariant(a.httpStatus) : QVariant();
        case Latency:
            return a.latencyMs >= 0 ? preciseDuration(a.latencyMs) : QString();
        case ProviderRequestId:
            return a.providerRequestId;
        case Error:
            return errorText(a);
        case Count:
            break;
        }
        return {};
    }
    switch (role) {
    case Qt::DecorationRole:
        if (column == Summary)
            return stateIcon(stateOfOutcome(a));
        break;
    case Qt::ToolTipRole:
        if (column == Time)
            return formatTime(a.atMs);
        if (column == Summary)
            return attemptSummary(a);
        if (column == Error)
            return errorText(a);
        if (column == Latency && a.step == QLatin1String("retry"))
            return tr("The delay before the next try");
        break;
    case Qt::TextAlignmentRole:
        if (column == Delivery || column == HttpStatus || column == Latency)
            return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
        break;
    default:
        break;
    }
    return {};
}

QVariant AttemptsModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || section < 0 || section >= Count || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    switch (Column(section)) {
    case Time:
        return tr("Time (%1)").arg(DisplayTime::instance().zoneLabel());
    case Summary:
        return tr("What happened");
    case Step:
        return tr("Step");
    case Outcome:
        return tr("Outcome");
    case MessageId:
        return tr("Message");
    case EventId:
        return tr("Event id");
    case Delivery:
        return tr("Delivery");
    case Worker:
        return tr("Worker");
    case HttpStatus:
        return tr("HTTP");
    case Latency:
        return tr("Latency");
    case ProviderRequestId:
        return tr("Provider request id");
    case Error:
        return tr("Error");
    case Count:
        break;
    }
    return {};
}

} // namespace once::ui
