#include "storereader.h"

#include "store.h"

#include <QLoggingCategory>

Q_LOGGING_CATEGORY(lcReader, "once.core.reader")

namespace once {

namespace {
constexpr int RedriveTickMs = 100;
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
    m_redriveTimer.setInterval(RedriveTickMs);
    connect(&m_redriveTimer, &QTimer::timeout, this, &StoreReader::redriveNextBatch);
}

StoreReader::~StoreReader() = default;

void StoreReader::open()
{
    QString error;
    m_store = Store::open(m_storeUrl, &error);
    emit opened(m_store != nullptr, error);
}

void StoreReader::close()
{
    m_redriveTimer.stop();
    m_redrive.reset();
    m_store.reset();
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
