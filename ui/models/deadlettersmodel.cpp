#include "models/deadlettersmodel.h"

#include "display/displaytime.h"
#include "session/storesession.h"

#include <QColor>
#include <QDateTime>
#include <QLocale>
#include <QSet>

#include <algorithm>

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

DeadLettersModel::DeadLettersModel(QObject *parent) : RowTableModel(parent)
{
    m_filter.limit = PageSize;
    m_filter.withPayload = false;
    // The time columns and their headers follow View > Times in UTC.
    connect(&DisplayTime::instance(), &DisplayTime::changed, this, [this] {
        emit headerDataChanged(Qt::Horizontal, 0, Count - 1);
        if (rowCount() > 0)
            emit dataChanged(index(0, FirstAttempt), index(rowCount() - 1, DeadAt), {Qt::DisplayRole});
    });
}

void DeadLettersModel::setSession(StoreSession *session)
{
    if (session == m_session)
        return;
    if (m_session)
        m_session->disconnect(this);
    m_session = session;
    if (m_session) {
        connect(m_session, &StoreSession::deadLettersLoaded, this, &DeadLettersModel::onLoaded);
        connect(m_session, &StoreSession::failed, this, &DeadLettersModel::onFailed);
    }
    // Rows of another store mean nothing here; nothing is read until a page asks.
    reset(m_filter);
}

void DeadLettersModel::setFilter(const DeadLetterFilter &filter)
{
    reset(filter);
    ensureLoaded();
}

void DeadLettersModel::reset(const DeadLetterFilter &filter)
{
    const bool wasLoading = isLoading();
    beginResetModel();
    m_filter = filter;
    m_filter.limit = PageSize;
    m_filter.withPayload = false;
    m_filter.afterId.clear();
    m_filter.afterDeadAtMs = 0;
    m_rows.clear();
    m_index.clear();
    m_atEnd = false;
    m_loaded = false;
    // Forgetting the tokens is what drops the answers to the old filter.
    m_pageToken = 0;
    m_refreshToken = 0;
    endResetModel();
    if (wasLoading)
        emit loadingChanged(false);
}

void DeadLettersModel::ensureLoaded()
{
    if (m_session && !m_loaded && !m_pageToken)
        requestPage();
}

void DeadLettersModel::requestPage()
{
    DeadLetterFilter page = m_filter;
    if (!m_rows.isEmpty())
        page.continueAfter(m_rows.constLast());
    m_pageToken = m_session->loadDeadLetters(page);
    emit loadingChanged(true);
}

void DeadLettersModel::refresh()
{
    if (!m_session)
        return;
    if (!m_loaded) {
        ensureLoaded();
        return;
    }
    if (m_refreshToken || m_pageToken)
        return; // the store is slower than the refresh timer: don't pile up requests
    DeadLetterFilter top = m_filter;
    m_refreshLimit = std::clamp(int(m_rows.size()), PageSize, 2 * PageSize);
    top.limit = m_refreshLimit;
    m_refreshToken = m_session->loadDeadLetters(top);
}

void DeadLettersModel::removeLetters(const QStringList &ids)
{
    QList<DeadLetter> kept = m_rows;
    const QSet<QString> gone(ids.cbegin(), ids.cend());
    kept.removeIf([&gone](const DeadLetter &letter) { return gone.contains(letter.id); });
    if (kept.size() != m_rows.size())
        setLetters(kept);
}

void DeadLettersModel::onLoaded(quint64 token, const QList<DeadLetter> &letters)
{
    if (token == 0)
        return;
    if (token == m_pageToken) {
        m_atEnd = letters.size() < m_filter.limit;
        const int offset = int(m_rows.size());
        m_loaded = true;
        if (!letters.isEmpty()) {
            beginInsertRows(QModelIndex(), offset, offset + int(letters.size()) - 1);
            for (const DeadLetter &letter : letters) {
                m_index.insert(letter.id, int(m_rows.size()));
                m_rows.append(letter);
            }
            endInsertRows();
        }
        // Only now: a view that asks for more while the rows go in (they are not all there
        // yet, so the next page's cursor is not known) waits for its next look.
        m_pageToken = 0;
        emit loadingChanged(false);
        emit pageLoaded(offset, int(letters.size()));
    } else if (token == m_refreshToken) {
        m_refreshToken = 0;
        // The answer is the true head of the list; the rows loaded below it stay. The rows
        // are in the list's order, so those below are found by the answer's last letter.
        QList<DeadLetter> rows = letters;
        if (letters.size() < m_refreshLimit) {
            m_atEnd = true;
        } else {
            const DeadLetter &last = letters.constLast();
            const auto below =
                std::find_if(m_rows.cbegin(), m_rows.cend(), [this, &last](const DeadLetter &row) {
                    return m_filter.listsBefore(last, row);
                });
            for (auto it = below; it != m_rows.cend(); ++it)
                rows.append(*it);
        }
        setLetters(rows);
        emit pageLoaded(0, int(letters.size()));
    }
}

void DeadLettersModel::onFailed(quint64 token, const QString &error)
{
    if (token == 0)
        return;
    if (token == m_pageToken) {
        m_pageToken = 0;
        // Stop here rather than let the view ask again at once; the next refresh retries.
        m_atEnd = true;
        emit loadingChanged(false);
        emit errorOccurred(error);
    } else if (token == m_refreshToken) {
        m_refreshToken = 0;
        emit errorOccurred(error);
    }
}

void DeadLettersModel::setLetters(const QList<DeadLetter> &letters)
{
    replaceRows(
        letters, [](const DeadLetter &letter) { return letter.id; }, sameLetter);
    rebuildIndex();
}

void DeadLettersModel::rebuildIndex()
{
    m_index.clear();
    m_index.reserve(m_rows.size());
    for (int row = 0; row < m_rows.size(); ++row)
        m_index.insert(m_rows.at(row).id, row);
}

int DeadLettersModel::rowOfKey(const QByteArray &sendKey) const
{
    for (int row = 0; row < m_rows.size(); ++row) {
        if (m_rows.at(row).sendKey == sendKey)
            return row;
    }
    return -1;
}

bool DeadLettersModel::canFetchMore(const QModelIndex &parent) const
{
    return !parent.isValid() && m_session && m_loaded && !m_atEnd;
}

void DeadLettersModel::fetchMore(const QModelIndex &parent)
{
    // Views ask again and again while they scroll: one page at a time.
    if (!canFetchMore(parent) || m_pageToken)
        return;
    requestPage();
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
        case Expires:
            return letter.expiresAtMs;
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
        case Expires:
            if (!letter.expiresAtMs)
                return QString();
            return letter.hasExpired(QDateTime::currentMSecsSinceEpoch())
                       ? tr("expired %1").arg(formatDisplayTime(letter.expiresAtMs))
                       : formatDisplayTime(letter.expiresAtMs);
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
        case Expires: {
            const QString expired = deadLetterExpiryText(letter, QDateTime::currentMSecsSinceEpoch());
            if (expired.isEmpty())
                return letter.expiresAtMs ? utcToolTip(letter.expiresAtMs) : QVariant();
            // Why a redrive would not send it: the worker settles it expired.
            return tr("Its reminder %1: a redrive would settle it expired, not send it").arg(expired);
        }
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
    if (role == Qt::ForegroundRole && column == Expires && letter.hasExpired(QDateTime::currentMSecsSinceEpoch()))
        return QColor(0xa1, 0x5c, 0x00); // too late to be worth sending: look before redriving
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
        // Each says its zone, as the Events page's do: support reads them against a
        // customer's "I sent it at 9". On a line of its own, so that a column as wide as
        // its times shows it whole.
        case FirstAttempt:
            return tr("First attempt\n(%1)").arg(DisplayTime::instance().zoneLabel());
        case LastAttempt:
            return tr("Last attempt\n(%1)").arg(DisplayTime::instance().zoneLabel());
        case DeadAt:
            return tr("Dead at\n(%1)").arg(DisplayTime::instance().zoneLabel());
        case Expires:
            return tr("Expires\n(%1)").arg(DisplayTime::instance().zoneLabel());
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
            return tr("When it was first sent to the partner");
        case Expires:
            return tr("When its reminder stops being worth sending (its expires_at, or its partner's "
                      "expire_after); a letter past it is settled expired if redriven, not sent");
        default:
            return {};
        }
    }
    return {};
}

} // namespace once::ui
