#include "deadlettersmodel.h"

#include <QColor>
#include <QLocale>

namespace once::ui {

namespace {

bool sameLetter(const DeadLetter &a, const DeadLetter &b)
{
    return a.errorClass == b.errorClass && a.lastError == b.lastError && a.attempts == b.attempts &&
           a.redriveCount == b.redriveCount && a.firstAttemptAtMs == b.firstAttemptAtMs &&
           a.lastAttemptAtMs == b.lastAttemptAtMs && a.deadAtMs == b.deadAtMs && a.sendKey == b.sendKey &&
           a.eventId == b.eventId && a.payload == b.payload;
}

QString oneLine(QString text)
{
    text.replace(QLatin1Char('\n'), QLatin1Char(' '));
    return text;
}

QString utcToolTip(qint64 ms)
{
    return ms > 0 ? formatTime(ms) : QString();
}

} // namespace

DeadLettersModel::DeadLettersModel(QObject *parent) : RowTableModel(parent) {}

void DeadLettersModel::setLetters(const QList<DeadLetter> &letters)
{
    replaceRows(
        letters, [](const DeadLetter &letter) { return letter.id; }, sameLetter);
}

QMap<QString, int> DeadLettersModel::errorClassCounts() const
{
    QMap<QString, int> counts;
    for (const DeadLetter &letter : m_rows)
        ++counts[letter.errorClass];
    return counts;
}

QVariant DeadLettersModel::data(const QModelIndex &index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const DeadLetter &letter = m_rows.at(index.row());
    const auto column = Column(index.column());
    if (role == RawRole) {
        switch (column) {
        case ErrorClass:
            return letter.errorClass;
        case LastError:
            return letter.lastError;
        case Attempts:
            return letter.attempts;
        case Redrives:
            return letter.redriveCount;
        case FirstAttempt:
            return letter.firstAttemptAtMs;
        case LastAttempt:
            return letter.lastAttemptAtMs;
        case DeadAt:
            return letter.deadAtMs;
        case SendKey:
            return letter.sendKey;
        case EventId:
            return letter.eventId;
        case MessageId:
            return letter.id;
        case Count:
            break;
        }
        return {};
    }
    if (role == Qt::DisplayRole) {
        switch (column) {
        case ErrorClass:
            return letter.errorClass;
        case LastError:
            return oneLine(letter.lastError);
        case Attempts:
            return QLocale().toString(letter.attempts);
        case Redrives:
            return QLocale().toString(letter.redriveCount);
        case FirstAttempt:
            return formatDisplayTime(letter.firstAttemptAtMs);
        case LastAttempt:
            return formatDisplayTime(letter.lastAttemptAtMs);
        case DeadAt:
            return formatDisplayTime(letter.deadAtMs);
        case SendKey:
            // An invalid message never had a key: say so rather than show a blank.
            return letter.sendKey.isEmpty() ? tr("(none)") : QString::fromLatin1(letter.sendKey);
        case EventId:
            return letter.eventId;
        case MessageId:
            return letter.id;
        case Count:
            break;
        }
        return {};
    }
    if (role == Qt::ToolTipRole) {
        switch (column) {
        case LastError:
            return letter.lastError;
        case FirstAttempt:
            return utcToolTip(letter.firstAttemptAtMs);
        case LastAttempt:
            return utcToolTip(letter.lastAttemptAtMs);
        case DeadAt:
            return utcToolTip(letter.deadAtMs);
        case Redrives:
            return letter.redriveCount > 0 ? tr("Redriven before (%1), and it died again")
                                                 .arg(QLocale().toString(letter.redriveCount))
                                           : QVariant();
        case SendKey:
            return QString::fromLatin1(letter.sendKey);
        default:
            return {};
        }
    }
    if (role == Qt::ForegroundRole && column == Redrives && letter.redriveCount > 0)
        return QColor(0xa1, 0x5c, 0x00); // died again after a redrive: look before redriving again
    if (role == Qt::TextAlignmentRole) {
        if (column == Attempts || column == Redrives)
            return int(Qt::AlignRight | Qt::AlignVCenter); // Qt 6.4's delegate reads an int
        return {};
    }
    return {};
}

QVariant DeadLettersModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || section < 0 || section >= Count)
        return QAbstractTableModel::headerData(section, orientation, role);
    if (role == Qt::DisplayRole) {
        switch (Column(section)) {
        case ErrorClass:
            return tr("Error class");
        case LastError:
            return tr("Last error");
        case Attempts:
            return tr("Attempts");
        case Redrives:
            return tr("Redrives");
        case FirstAttempt:
            return tr("First attempt");
        case LastAttempt:
            return tr("Last attempt");
        case DeadAt:
            return tr("Dead at");
        case SendKey:
            return tr("Send key");
        case EventId:
            return tr("Event id");
        case MessageId:
            return tr("Message id");
        case Count:
            break;
        }
    }
    if (role == Qt::ToolTipRole) {
        switch (Column(section)) {
        case ErrorClass:
            return tr("Why it died: the class of its last failure");
        case Attempts:
            return tr("Partner calls since it was last queued");
        case Redrives:
            return tr("How often an operator has put it back on the queue before");
        case FirstAttempt:
            return tr("When it was first sent to the partner (local time)");
        default:
            return {};
        }
    }
    return {};
}

} // namespace once::ui
