#include "storereader.h"

#include "store.h"

#include <QLoggingCategory>
#include <QSqlDriver>

Q_LOGGING_CATEGORY(lcReader, "once.core.reader")

namespace once {

namespace {
constexpr int RedriveTickMs = 100;
// However many notifications arrive, views refresh at most this often because of them.
constexpr int MinChangeIntervalMs = 1000;
}

StoreReader::StoreReader(const QString &storeUrl, QObject *parent) : QObject(parent), m_storeUrl(storeUrl)
{
    qRegisterMetaType<once::EventFilter>();
    qRegisterMetaType<once::DeadLetterFilter>();
    qRegisterMetaType<once::DeliveryStats>();
    qRegisterMetaType<once::MetricSeries>();
    qRegisterMetaType<once::EventRow>();
    qRegisterMetaType<QList<once::EventRow>>();
    qRegisterMetaType<QList<once::Attempt>>();
    qRegisterMetaType<QList<once::DeadLetter>>();
    qRegisterMetaType<QList<once::AuditEntry>>();
    qRegisterMetaType<once::WorkerRecord>();
    qRegisterMetaType<QList<once::WorkerRecord>>();
    m_redriveTimer.setInterval(RedriveTickMs);
    connect(&m_redriveTimer, &QTimer::timeout, this, &StoreReader::redriveNextBatch);
    m_changeTimer.setSingleShot(true);
    connect(&m_changeTimer, &QTimer::timeout, this, &StoreReader::announceChange);
}

StoreReader::~StoreReader() = default;

void StoreReader::open()
{
    QString error;
    m_store = Store::open(m_storeUrl, &error);
    if (!m_store) {
        // The core quotes stores by their display name; should a driver ever echo the
        // password it was given, it still does not leave this thread.
        QString ignored;
        if (const auto location = StoreLocation::parse(m_storeUrl, &ignored); location && !location->password.isEmpty())
            error.replace(location->password, QStringLiteral("********"));
        emit opened(false, error, false);
        return;
    }
    emit opened(true, QString(), listenForChanges());
}

void StoreReader::close()
{
    m_redriveTimer.stop();
    m_changeTimer.stop();
    m_redrive.reset();
    m_store.reset();
}

bool StoreReader::listenForChanges()
{
    Database &database = m_store->database();
    if (!database.isPostgres())
        return false;
    if (!database.listen(Channel::Queue) || !database.listen(Channel::Activity)) {
        qCWarning(lcReader) << "cannot listen for the store's notifications; the console polls instead";
        return false;
    }
    // The driver lives on this thread (the connection was opened here), so the
    // notification arrives here too. It survives a reconnect: the driver is the same.
    connect(database.connection().driver(), &QSqlDriver::notification, this, &StoreReader::onNotification);
    return true;
}

// The first change after a quiet second is announced at once; changes within the second
// after an announcement wait for its end and are announced together.
void StoreReader::onNotification()
{
    if (m_changeTimer.isActive())
        return;
    const qint64 since = m_sinceChange.isValid() ? m_sinceChange.elapsed() : MinChangeIntervalMs;
    m_changeTimer.start(int(std::max<qint64>(0, MinChangeIntervalMs - since)));
}

void StoreReader::announceChange()
{
    m_sinceChange.start();
    emit storeChanged();
}

bool StoreReader::ensureOpen(quint64 token)
{
    if (m_store)
        return true;
    emit failed(token, QStringLiteral("no store is open"));
    return false;
}

void StoreReader::loadOverview(quint64 token, qint64 windowMs)
{
    if (!ensureOpen(token))
        return;
    QString error;
    const auto stats = m_store->inspector().stats(&error);
    const qint64 now = nowMs();
    const auto series = stats ? m_store->metrics().series(now - windowMs, now, 120, &error) : std::nullopt;
    if (!series) {
        emit failed(token, error);
        return;
    }
    emit overviewLoaded(token, *stats, *series);
}

void StoreReader::loadEvents(quint64 token, const EventFilter &filter)
{
    if (!ensureOpen(token))
        return;
    QString error;
    if (const auto rows = m_store->inspector().events(filter, &error))
        emit eventsLoaded(token, *rows, filter.offset);
    else
        emit failed(token, error);
}

void StoreReader::countEvents(quint64 token, const EventFilter &filter)
{
    if (!ensureOpen(token))
        return;
    QString error;
    if (const auto count = m_store->inspector().countEvents(filter, &error))
        emit eventsCounted(token, *count);
    else
        emit failed(token, error);
}

void StoreReader::loadHistory(quint64 token, const QString &keyOrEventId)
{
    if (!ensureOpen(token))
        return;
    QString error;
    const auto event = m_store->inspector().event(keyOrEventId, &error);
    const auto attempts = event ? m_store->inspector().attempts(event->sendKey, &error) : std::nullopt;
    if (attempts)
        emit historyLoaded(token, *event, *attempts);
    else
        emit failed(token, error);
}

void StoreReader::loadDeadLetters(quint64 token, const DeadLetterFilter &filter)
{
    if (!ensureOpen(token))
        return;
    QString error;
    if (const auto letters = m_store->inspector().deadLetters(filter, &error))
        emit deadLettersLoaded(token, *letters);
    else
        emit failed(token, error);
}

void StoreReader::loadInDoubt(quint64 token)
{
    if (!ensureOpen(token))
        return;
    QString error;
    if (const auto rows = m_store->inspector().inDoubt(&error))
        emit inDoubtLoaded(token, *rows);
    else
        emit failed(token, error);
}

void StoreReader::loadAudit(quint64 token, int limit)
{
    if (!ensureOpen(token))
        return;
    QString error;
    if (const auto entries = m_store->inspector().auditLog(limit, &error))
        emit auditLoaded(token, *entries);
    else
        emit failed(token, error);
}

void StoreReader::loadWorkers(quint64 token)
{
    if (!ensureOpen(token))
        return;
    QString error;
    if (const auto workers = m_store->workers().list(&error))
        emit workersLoaded(token, *workers);
    else
        emit failed(token, error);
}

void StoreReader::redrive(quint64 token, const QList<DeadLetter> &letters, int ratePerSecond, const QString &detail)
{
    if (!ensureOpen(token))
        return;
    if (m_redrive) {
        emit redriveFinished(token, 0, false, QStringLiteral("another redrive is still running"));
        return;
    }
    m_redrive = std::make_unique<Redrive>(Redrive{token, letters, ratePerSecond, 0, 0, detail, false});
    redriveNextBatch();
    if (m_redrive)
        m_redriveTimer.start();
}

void StoreReader::cancelRedrive(quint64 token)
{
    if (m_redrive && m_redrive->token == token)
        m_redrive->cancelled = true;
}

// One tick moves a tenth of a second's worth, so the rate holds without bursts and the
// thread answers other requests between ticks.
void StoreReader::redriveNextBatch()
{
    if (!m_redrive)
        return;
    Redrive &run = *m_redrive;
    QString error;
    const int total = int(run.letters.size());
    if (!run.cancelled && run.next < total) {
        const int batch = run.ratePerSecond > 0 ? std::max(1, run.ratePerSecond * RedriveTickMs / 1000) : 500;
        const auto moved = m_store->operations().redrive(run.letters.mid(run.next, batch), &error);
        if (moved) {
            run.moved += *moved;
            run.next += batch;
            emit redriveProgress(run.token, std::min(run.next, total), total);
        }
    }
    const bool done = !error.isEmpty() || run.cancelled || run.next >= total;
    if (!done)
        return;
    m_redriveTimer.stop();
    QString auditError;
    const QString detail = run.cancelled ? run.detail + QStringLiteral(" (cancelled)") : run.detail;
    if (run.moved > 0 || run.cancelled)
        m_store->operations().audit(QStringLiteral("redrive"), detail, run.moved, &auditError);
    const auto finished = std::move(m_redrive);
    emit redriveFinished(finished->token, finished->moved, finished->cancelled,
                         error.isEmpty() ? auditError : error);
}

void StoreReader::discard(quint64 token, const QList<DeadLetter> &letters, const QString &detail)
{
    if (!ensureOpen(token))
        return;
    QString error;
    const auto removed = m_store->operations().discard(letters, &error);
    if (removed && m_store->operations().audit(QStringLiteral("discard"), detail, *removed, &error))
        emit operationFinished(token, true, QStringLiteral("discarded %1 dead letters").arg(*removed));
    else
        emit operationFinished(token, false, error);
}

void StoreReader::resolve(quint64 token, const QByteArray &sendKey, bool resend)
{
    if (!ensureOpen(token))
        return;
    QString error;
    const bool ok = resend ? m_store->operations().resend(sendKey, &error)
                           : m_store->operations().markDelivered(sendKey, &error);
    emit operationFinished(token, ok,
                           ok ? (resend ? QStringLiteral("queued again under the same key")
                                        : QStringLiteral("marked delivered"))
                              : error);
}

} // namespace once
