#include "session/storesession.h"

#include "display/queueurl.h"
#include "display/storeurl.h"

namespace once::ui {

StoreSession::StoreSession(const QString &storeUrl, const QString &queueUrl, StoreReader::IfMissing ifMissing,
                           Database::Access access, QObject *parent)
    : QObject(parent), m_storeUrl(storeUrl), m_displayName(storeDisplayName(storeUrl)), m_queueUrl(queueUrl),
      m_queueDisplayName(queueUrl.isEmpty() ? QString() : ui::queueDisplayName(queueUrl)),
      m_brokerName(queueUrl.isEmpty() ? QString() : queueBrokerName(queueUrl)), m_access(access)
{
    // Asked for, it holds before the store opens: nothing may start a write meanwhile.
    if (access == Database::Access::ReadOnly)
        m_readOnlyReason = tr("it was opened read-only");
    m_thread.setObjectName(QStringLiteral("store reader"));
    m_reader = new StoreReader(storeUrl, queueUrl, ifMissing, access);
    m_reader->moveToThread(&m_thread);
    connect(&m_thread, &QThread::finished, m_reader, &QObject::deleteLater);
    connect(m_reader, &StoreReader::queueOpened, this,
            [this](bool ok, const QString &displayName, const QString &brokerName) {
                m_queueFailed = !ok;
                // The broker's own word, should the URL have parsed differently here.
                if (!displayName.isEmpty())
                    m_queueDisplayName = displayName;
                if (!brokerName.isEmpty())
                    m_brokerName = brokerName;
            });
    connect(m_reader, &StoreReader::storeMissing, this, [this] { m_storeMissing = true; });
    connect(m_reader, &StoreReader::openedReadOnly, this,
            [this](const QString &reason) { m_readOnlyReason = reason; });
    connect(m_reader, &StoreReader::opened, this, [this](bool ok, const QString &error, bool liveUpdates) {
        // A broker's queue changes without the store hearing of it: with one, pages poll
        // as often as on SQLite, and the store's notifications only bring refreshes sooner.
        m_liveUpdates = ok && liveUpdates && !hasBrokerQueue();
        m_hasOpened = true;
        m_openedOk = ok;
        m_openError = error;
        emit opened(ok, error);
    });
    connect(m_reader, &StoreReader::overviewLoaded, this, &StoreSession::overviewLoaded);
    connect(m_reader, &StoreReader::eventsLoaded, this, &StoreSession::eventsLoaded);
    connect(m_reader, &StoreReader::eventsCounted, this, &StoreSession::eventsCounted);
    connect(m_reader, &StoreReader::historyLoaded, this, &StoreSession::historyLoaded);
    connect(m_reader, &StoreReader::deadLettersLoaded, this, &StoreSession::deadLettersLoaded);
    connect(m_reader, &StoreReader::deadLetterLoaded, this, &StoreSession::deadLetterLoaded);
    connect(m_reader, &StoreReader::deadLettersCounted, this, &StoreSession::deadLettersCounted);
    connect(m_reader, &StoreReader::inDoubtLoaded, this, &StoreSession::inDoubtLoaded);
    connect(m_reader, &StoreReader::auditLoaded, this, &StoreSession::auditLoaded);
    connect(m_reader, &StoreReader::auditRecorded, this, &StoreSession::auditRecorded);
    connect(m_reader, &StoreReader::workersLoaded, this, &StoreSession::workersLoaded);
    connect(m_reader, &StoreReader::partnersLoaded, this, &StoreSession::partnersLoaded);
    connect(m_reader, &StoreReader::readinessLoaded, this, &StoreSession::readinessLoaded);
    connect(m_reader, &StoreReader::healthLoaded, this, &StoreSession::healthLoaded);
    connect(m_reader, &StoreReader::storeChanged, this, &StoreSession::storeChanged);
    connect(m_reader, &StoreReader::incidentsLoaded, this, &StoreSession::incidentsLoaded);
    connect(m_reader, &StoreReader::incidentReportLoaded, this, &StoreSession::incidentReportLoaded);
    connect(m_reader, &StoreReader::redriveProgress, this, &StoreSession::redriveProgress);
    connect(m_reader, &StoreReader::redrivePreviewed, this, &StoreSession::redrivePreviewed);
    connect(m_reader, &StoreReader::redriveFinished, this, [this](quint64 token, const RedriveResult &result) {
        emit redriveFinished(token, result);
        emit storeChanged();
    });
    connect(m_reader, &StoreReader::exportProgress, this, &StoreSession::exportProgress);
    connect(m_reader, &StoreReader::exportFinished, this, &StoreSession::exportFinished);
    connect(m_reader, &StoreReader::operationFinished, this,
            [this](quint64 token, bool ok, const QString &message) {
                emit operationFinished(token, ok, message);
                emit storeChanged();
            });
    connect(m_reader, &StoreReader::failed, this, &StoreSession::failed);
    m_thread.start();
    QMetaObject::invokeMethod(m_reader, &StoreReader::open, Qt::QueuedConnection);
}

StoreSession::~StoreSession()
{
    // The connection must close on the thread that opened it.
    QMetaObject::invokeMethod(m_reader, &StoreReader::close, Qt::BlockingQueuedConnection);
    m_thread.quit();
    m_thread.wait();
}

quint64 StoreSession::loadOverview(qint64 windowMs, qint64 bucketMs)
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader,
        [reader = m_reader, token, windowMs, bucketMs] { reader->loadOverview(token, windowMs, bucketMs); },
        Qt::QueuedConnection);
    return token;
}

quint64 StoreSession::loadHealth()
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader, [reader = m_reader, token] { reader->loadHealth(token); }, Qt::QueuedConnection);
    return token;
}

quint64 StoreSession::loadEvents(const EventFilter &filter)
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader, [reader = m_reader, token, filter] { reader->loadEvents(token, filter); },
        Qt::QueuedConnection);
    return token;
}

quint64 StoreSession::countEvents(const EventFilter &filter)
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader, [reader = m_reader, token, filter] { reader->countEvents(token, filter); },
        Qt::QueuedConnection);
    return token;
}

quint64 StoreSession::loadHistory(const QString &keyOrEventId)
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader, [reader = m_reader, token, keyOrEventId] { reader->loadHistory(token, keyOrEventId); },
        Qt::QueuedConnection);
    return token;
}

quint64 StoreSession::loadDeadLetters(const DeadLetterFilter &filter)
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader, [reader = m_reader, token, filter] { reader->loadDeadLetters(token, filter); },
        Qt::QueuedConnection);
    return token;
}

quint64 StoreSession::loadDeadLetter(const QString &id)
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader, [reader = m_reader, token, id] { reader->loadDeadLetter(token, id); },
        Qt::QueuedConnection);
    return token;
}

quint64 StoreSession::countDeadLetters(const DeadLetterFilter &filter, qint64 firstSentBeforeMs)
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader,
        [reader = m_reader, token, filter, firstSentBeforeMs] {
            reader->countDeadLetters(token, filter, firstSentBeforeMs);
        },
        Qt::QueuedConnection);
    return token;
}

quint64 StoreSession::loadInDoubt()
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader, [reader = m_reader, token] { reader->loadInDoubt(token); }, Qt::QueuedConnection);
    return token;
}

quint64 StoreSession::loadAudit(int limit)
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader, [reader = m_reader, token, limit] { reader->loadAudit(token, limit); },
        Qt::QueuedConnection);
    return token;
}

quint64 StoreSession::recordAudit(const QString &action, const QString &detail, int count,
                                  const QString &reason)
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader,
        [reader = m_reader, token, action, detail, count, reason] {
            reader->recordAudit(token, action, detail, count, reason);
        },
        Qt::QueuedConnection);
    return token;
}

quint64 StoreSession::loadWorkers()
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader, [reader = m_reader, token] { reader->loadWorkers(token); }, Qt::QueuedConnection);
    return token;
}

quint64 StoreSession::loadReadiness(qint64 windowMs)
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader, [reader = m_reader, token, windowMs] { reader->loadReadiness(token, windowMs); },
        Qt::QueuedConnection);
    return token;
}

quint64 StoreSession::previewRedrive(const RedriveOptions &options)
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader, [reader = m_reader, token, options] { reader->previewRedrive(token, options); },
        Qt::QueuedConnection);
    return token;
}

quint64 StoreSession::redrive(const RedriveOptions &options)
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader, [reader = m_reader, token, options] { reader->redrive(token, options); }, Qt::QueuedConnection);
    return token;
}

void StoreSession::cancelRedrive(quint64 token)
{
    QMetaObject::invokeMethod(
        m_reader, [reader = m_reader, token] { reader->cancelRedrive(token); }, Qt::QueuedConnection);
}

quint64 StoreSession::exportDeadLetters(const DeadLetterFilter &filter, const QString &path)
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader,
        [reader = m_reader, token, filter, path] { reader->exportDeadLetters(token, filter, path); },
        Qt::QueuedConnection);
    return token;
}

void StoreSession::cancelExport(quint64 token)
{
    QMetaObject::invokeMethod(
        m_reader, [reader = m_reader, token] { reader->cancelExport(token); }, Qt::QueuedConnection);
}

quint64 StoreSession::discard(const QList<DeadLetter> &letters, const QString &detail, const QString &reason)
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader,
        [reader = m_reader, token, letters, detail, reason] {
            reader->discard(token, letters, detail, reason);
        },
        Qt::QueuedConnection);
    return token;
}

quint64 StoreSession::resolve(const QByteArray &sendKey, bool resend, const QString &reason)
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader,
        [reader = m_reader, token, sendKey, resend, reason] {
            reader->resolve(token, sendKey, resend, reason);
        },
        Qt::QueuedConnection);
    return token;
}

quint64 StoreSession::checkAtPartner(const QByteArray &sendKey, const QString &partnersFile)
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader, [reader = m_reader, token, sendKey, partnersFile] { reader->checkAtPartner(token, sendKey, partnersFile); },
        Qt::QueuedConnection);
    return token;
}

quint64 StoreSession::setPartnerPolicy(const QString &partner, KeyHonouring honoursKey)
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader,
        [reader = m_reader, token, partner, honoursKey] {
            reader->setPartnerPolicy(token, partner, honoursKey);
        },
        Qt::QueuedConnection);
    return token;
}

quint64 StoreSession::loadPartners()
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader, [reader = m_reader, token] { reader->loadPartners(token); }, Qt::QueuedConnection);
    return token;
}

quint64 StoreSession::setPartnerPaused(const QString &partner, bool paused, const QString &reason)
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader, [reader = m_reader, token, partner, paused, reason] { reader->setPartnerPaused(token, partner, paused, reason); },
        Qt::QueuedConnection);
    return token;
}

quint64 StoreSession::setAlertThreshold(AlertRule rule, const QString &partner, std::optional<qint64> value)
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader, [reader = m_reader, token, rule, partner, value] { reader->setAlertThreshold(token, rule, partner, value); },
        Qt::QueuedConnection);
    return token;
}

quint64 StoreSession::loadIncidents(int limit)
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader, [reader = m_reader, token, limit] { reader->loadIncidents(token, limit); }, Qt::QueuedConnection);
    return token;
}

quint64 StoreSession::loadIncidentReport(qint64 id)
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader, [reader = m_reader, token, id] { reader->loadIncidentReport(token, id); }, Qt::QueuedConnection);
    return token;
}

quint64 StoreSession::actOnIncident(qint64 id, Incidents::Action action, const QString &note)
{
    const quint64 token = nextToken();
    QMetaObject::invokeMethod(
        m_reader, [reader = m_reader, token, id, action, note] { reader->actOnIncident(token, id, action, note); },
        Qt::QueuedConnection);
    return token;
}

} // namespace once::ui
