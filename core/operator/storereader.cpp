#include "operator/storereader.h"

#include "alerting/alertsettings.h"

#include "operator/brokerdeadletters.h"
#include "operator/deadletterexport.h"
#include "partners/partnerlookups.h"
#include "queues/brokerqueue.h"
#include "store/database.h"
#include "store/store.h"
#include "store/storelocation.h"

#include <QDateTime>
#include <QFileInfo>
#include <QMap>
#include <QSet>
#include <QLoggingCategory>
#include <QSqlDriver>

#include <limits>

Q_LOGGING_CATEGORY(lcReader, "once.core.reader")

namespace once {

namespace {
// However many notifications arrive, views refresh at most this often because of them.
constexpr int MinChangeIntervalMs = 1000;
// The longest window the console charts.
constexpr qint64 OwnReadingsKeptMs = 24LL * 3600 * 1000;

}

StoreReader::StoreReader(const QString &storeUrl, const QString &queueUrl, IfMissing ifMissing,
                         Database::Access access, QObject *parent)
    : QObject(parent), m_storeUrl(storeUrl), m_queueUrl(queueUrl), m_ifMissing(ifMissing), m_access(access)
{
    qRegisterMetaType<once::EventFilter>();
    qRegisterMetaType<once::DeadLetterFilter>();
    qRegisterMetaType<once::DeliveryStats>();
    qRegisterMetaType<once::MetricSeries>();
    qRegisterMetaType<once::EventRow>();
    qRegisterMetaType<QList<once::EventRow>>();
    qRegisterMetaType<QList<once::Attempt>>();
    qRegisterMetaType<QList<once::DeadLetter>>();
    qRegisterMetaType<once::RedriveOptions>();
    qRegisterMetaType<once::RedrivePreview>();
    qRegisterMetaType<once::RedriveProgress>();
    qRegisterMetaType<once::RedriveResult>();
    qRegisterMetaType<once::DeadLetter>();
    qRegisterMetaType<once::DeadLetterCounts>();
    qRegisterMetaType<QList<once::AuditEntry>>();
    qRegisterMetaType<once::WorkerRecord>();
    qRegisterMetaType<QList<once::WorkerRecord>>();
    qRegisterMetaType<once::PartnerActivity>();
    qRegisterMetaType<QList<once::PartnerPolicy>>();
    m_exportTimer.setInterval(0);
    connect(&m_exportTimer, &QTimer::timeout, this, &StoreReader::exportNextBatch);
    m_changeTimer.setSingleShot(true);
    connect(&m_changeTimer, &QTimer::timeout, this, &StoreReader::announceChange);
}

StoreReader::~StoreReader() = default;

void StoreReader::open()
{
    QString error;
    if (m_ifMissing == IfMissing::Refuse) {
        const auto location = StoreLocation::parse(m_storeUrl, &error);
        if (location && location->kind == StoreLocation::Kind::Sqlite && !QFileInfo::exists(location->path)) {
            m_openError = QStringLiteral("There is no store at %1.").arg(location->path);
            emit storeMissing(location->path);
            emit opened(false, m_openError, false);
            return;
        }
    }
    m_store = Store::open(m_storeUrl, &error, m_access);
    if (!m_store) {
        // The core quotes stores by their display name; should a driver ever echo the
        // password it was given, it still does not leave this thread.
        m_openError = withoutSecrets(error);
        emit opened(false, m_openError, false);
        return;
    }
    if (!m_queueUrl.isEmpty()) {
        // The broker after the store: a store that does not open says so first, and the
        // URL's own mistakes (no queue name) come before a connection is tried.
        const auto location = QueueLocation::parse(m_queueUrl, &error);
        if (location)
            m_broker = openBrokerQueue(*location, {}, 1, &error);
        if (!m_broker) {
            // Half open is of no use: without its queue, the store's numbers would be the
            // wrong queue's.
            m_store.reset();
            // The broker's errors name the queue already; the URL's own do not.
            const QString message =
                location && !error.contains(location->displayName())
                    ? QStringLiteral("Cannot open the queue at %1 (%2): %3")
                          .arg(location->brokerName(), location->displayName(), error)
                    : QStringLiteral("Cannot open the queue: %1").arg(error);
            m_openError = withoutSecrets(message);
            emit queueOpened(false, location ? location->displayName() : QString(),
                             location ? location->brokerName() : QString());
            emit opened(false, m_openError, false);
            return;
        }
        m_brokerLetters = std::make_unique<BrokerDeadLetters>(*m_broker, &m_store->inspector());
        emit queueOpened(true, m_broker->location().displayName(), m_broker->location().brokerName());
    }
    m_openError.clear();
    if (m_store->database().isReadOnly())
        emit openedReadOnly(withoutSecrets(m_store->database().readOnlyReason()));
    emit opened(true, QString(), listenForChanges());
}

void StoreReader::close()
{
    m_exportTimer.stop();
    m_changeTimer.stop();
    delete m_redrive; // before the store it runs on
    m_redrive = nullptr;
    m_export.reset(); // its temporary file goes with it
    m_brokerLetters.reset();
    m_broker.reset();
    m_store.reset();
}

QString StoreReader::withoutSecrets(QString error) const
{
    QString ignored;
    if (const auto location = StoreLocation::parse(m_storeUrl, &ignored); location && !location->password.isEmpty())
        error.replace(location->password, QStringLiteral("********"));
    if (!m_queueUrl.isEmpty()) {
        if (const auto location = QueueLocation::parse(m_queueUrl, &ignored); location && !location->password.isEmpty())
            error.replace(location->password, QStringLiteral("********"));
    }
    return error;
}

void StoreReader::fail(quint64 token, const QString &error)
{
    emit failed(token, withoutSecrets(error));
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
    // The views keep asking after a failed open: tell them why, not just that.
    emit failed(token, m_openError.isEmpty() ? QStringLiteral("no store is open") : m_openError);
    return false;
}

bool StoreReader::ensureWritable(quint64 token)
{
    if (!ensureOpen(token))
        return false;
    if (const auto refusal = refusalToWrite()) {
        emit operationFinished(token, false, *refusal);
        return false;
    }
    return true;
}

std::optional<QString> StoreReader::refusalToWrite() const
{
    if (!m_store->database().isReadOnly())
        return std::nullopt;
    return QStringLiteral("the store is open read-only (%1): nothing was changed")
        .arg(withoutSecrets(m_store->database().readOnlyReason()));
}

std::optional<QList<DeadLetter>> StoreReader::readDeadLetterPage(const DeadLetterFilter &filter, QString *error)
{
    // The broker lists its letters in its own order and filters nothing: the page is cut
    // from its listing the way the store's query would, and the pages after it from the
    // same listing (BrokerDeadLetters).
    return m_broker ? m_brokerLetters->page(filter, error) : m_store->inspector().deadLetters(filter, error);
}

std::optional<DeadLetterCounts> StoreReader::readDeadLetterCounts(const DeadLetterFilter &filter,
                                                                  qint64 firstSentBeforeMs, QString *error)
{
    return m_broker ? m_brokerLetters->counts(filter, firstSentBeforeMs, error)
                    : m_store->inspector().countDeadLetters(filter, firstSentBeforeMs, error);
}

std::optional<DeliveryStats> StoreReader::readStats(QString *error)
{
    // The ledger's numbers always come from the store; the queue's from where it lives.
    auto stats = m_broker ? Inspector(m_store->database(), *m_broker).stats(error) : m_store->inspector().stats(error);
    // A queue that counts nothing (Pub/Sub) gives the charts no readings, not zeros.
    if (stats && !stats->queue.backlogUnknown) {
        const qint64 now = nowMs();
        while (!m_ownReadings.isEmpty() && m_ownReadings.constFirst().atMs < now - OwnReadingsKeptMs)
            m_ownReadings.removeFirst();
        m_ownReadings.append({now, stats->queue.ready, stats->queue.oldestReadyAgeMs.value_or(0)});
    }
    return stats;
}

void StoreReader::fillFromOwnReadings(MetricSeries *series, qint64 fromMs) const
{
    const qint64 width = series->bucketMs;
    QMap<qint64, QPair<double, double>> buckets; // bucket -> ready, age in seconds
    for (qsizetype i = 0; i < series->ready.size(); ++i)
        buckets.insert(qint64(series->ready.at(i).x()) / width,
                       {series->ready.at(i).y(), series->oldestReadyAgeS.value(i).y()});
    QSet<qint64> sampled;
    for (auto it = buckets.cbegin(); it != buckets.cend(); ++it)
        sampled.insert(it.key());
    bool added = false;
    for (const QueueReading &reading : m_ownReadings) {
        if (reading.atMs < fromMs)
            continue;
        const qint64 bucket = reading.atMs / width;
        if (sampled.contains(bucket))
            continue;
        auto &[ready, age] = buckets[bucket];
        ready = std::max(ready, double(reading.ready));
        age = std::max(age, double(reading.oldestReadyAgeMs) / 1000.0);
        added = true;
    }
    if (!added)
        return;
    series->ready.clear();
    series->oldestReadyAgeS.clear();
    for (auto it = buckets.cbegin(); it != buckets.cend(); ++it) {
        const double x = double(it.key() * width + width / 2);
        series->ready.append({x, it->first});
        series->oldestReadyAgeS.append({x, it->second});
    }
}

void StoreReader::loadOverview(quint64 token, qint64 windowMs, qint64 bucketMs)
{
    if (!ensureOpen(token))
        return;
    QString error;
    const std::optional<DeliveryStats> stats = readStats(&error);
    const qint64 now = nowMs();
    auto series = stats ? m_store->metrics().series(now - windowMs, now, bucketMs, &error) : std::nullopt;
    if (!series) {
        fail(token, error);
        return;
    }
    fillFromOwnReadings(&*series, now - windowMs);
    emit overviewLoaded(token, *stats, *series);
}

void StoreReader::loadHealth(quint64 token)
{
    if (!ensureOpen(token))
        return;
    QString error;
    const std::optional<DeliveryStats> stats = readStats(&error);
    const auto workers = stats ? m_store->workers().list(&error) : std::nullopt;
    const auto thresholds = workers ? readAlertThresholds(m_store->database(), &error) : std::nullopt;
    if (thresholds)
        emit healthLoaded(token, *stats, *workers, *thresholds);
    else
        fail(token, error);
}

void StoreReader::loadEvents(quint64 token, const EventFilter &filter)
{
    if (!ensureOpen(token))
        return;
    QString error;
    if (const auto rows = m_store->inspector().events(filter, &error))
        emit eventsLoaded(token, *rows);
    else
        fail(token, error);
}

void StoreReader::countEvents(quint64 token, const EventFilter &filter)
{
    if (!ensureOpen(token))
        return;
    QString error;
    if (const auto count = m_store->inspector().countEvents(filter, &error))
        emit eventsCounted(token, *count);
    else
        fail(token, error);
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
        fail(token, error);
}

void StoreReader::loadDeadLetters(quint64 token, const DeadLetterFilter &filter)
{
    if (!ensureOpen(token))
        return;
    QString error;
    if (const auto letters = readDeadLetterPage(filter, &error))
        emit deadLettersLoaded(token, *letters);
    else
        fail(token, error);
}

void StoreReader::loadDeadLetter(quint64 token, const QString &id)
{
    if (!ensureOpen(token))
        return;
    QString error;
    const auto letter = m_broker ? m_brokerLetters->letter(id, &error) : m_store->inspector().deadLetter(id, &error);
    if (letter)
        emit deadLetterLoaded(token, *letter);
    else
        fail(token, error);
}

void StoreReader::countDeadLetters(quint64 token, const DeadLetterFilter &filter, qint64 firstSentBeforeMs)
{
    if (!ensureOpen(token))
        return;
    QString error;
    if (const auto counts = readDeadLetterCounts(filter, firstSentBeforeMs, &error))
        emit deadLettersCounted(token, *counts);
    else
        fail(token, error);
}

void StoreReader::loadInDoubt(quint64 token)
{
    if (!ensureOpen(token))
        return;
    EventFilter filter;
    filter.state = LedgerState::InDoubt;
    filter.limit = InDoubtPageRows;
    // The page lists the longest waiting on top: each page read goes below the last.
    filter.oldestFirst = true;
    for (;;) {
        QString error;
        auto rows = m_store->inspector().events(filter, &error);
        if (!rows || !m_store->inspector().describeReconciliation(*rows, &error)) {
            fail(token, error);
            return;
        }
        const bool complete = rows->size() < filter.limit;
        emit inDoubtLoaded(token, *rows, complete);
        if (complete)
            return;
        filter.below = rows->last().listPosition;
    }
}

void StoreReader::loadAudit(quint64 token, int limit)
{
    if (!ensureOpen(token))
        return;
    QString error;
    if (const auto entries = m_store->inspector().auditLog(limit, &error))
        emit auditLoaded(token, *entries);
    else
        fail(token, error);
}

void StoreReader::recordAudit(quint64 token, const QString &action, const QString &detail, int count,
                              const QString &reason)
{
    if (!ensureOpen(token))
        return;
    if (const auto refusal = refusalToWrite()) {
        fail(token, *refusal);
        return;
    }
    QString error;
    if (m_store->operations().beginAudit({action, detail, 0, reason}, &error, count))
        emit auditRecorded(token);
    else
        fail(token, error);
}

void StoreReader::loadWorkers(quint64 token)
{
    if (!ensureOpen(token))
        return;
    QString error;
    if (const auto workers = m_store->workers().list(&error))
        emit workersLoaded(token, *workers);
    else
        fail(token, error);
}

void StoreReader::loadReadiness(quint64 token, qint64 windowMs)
{
    if (!ensureOpen(token))
        return;
    QString error;
    const auto workers = m_store->workers().list(&error);
    const auto partner = workers ? m_store->inspector().partnerActivity(nowMs() - windowMs, &error) : std::nullopt;
    if (partner)
        emit readinessLoaded(token, *workers, *partner);
    else
        fail(token, error);
}

void StoreReader::previewRedrive(quint64 token, const RedriveOptions &options)
{
    if (!ensureOpen(token))
        return;
    QString error;
    if (const auto preview =
            RedriveRun::preview(*m_store, m_broker.get(), m_brokerLetters.get(), options, false, &error))
        emit redrivePreviewed(token, *preview);
    else
        fail(token, error);
}

void StoreReader::redrive(quint64 token, const RedriveOptions &options)
{
    if (!ensureOpen(token))
        return;
    RedriveResult refused;
    if (const auto refusal = refusalToWrite())
        refused.error = *refusal;
    else if (m_redrive)
        refused.error = QStringLiteral("another redrive is still running");
    if (!refused.error.isEmpty()) {
        emit redriveFinished(token, refused);
        return;
    }
    auto *run = new RedriveRun(*m_store, m_broker.get(), m_brokerLetters.get(), m_store->operations().actor(),
                               options, this);
    connect(run, &RedriveRun::progressed, this,
            [this, token](const RedriveProgress &progress) { emit redriveProgress(token, progress); });
    connect(run, &RedriveRun::finished, this, [this, token, run](RedriveResult result) {
        result.error = withoutSecrets(result.error);
        if (m_redrive == run)
            m_redrive = nullptr;
        run->deleteLater();
        emit redriveFinished(token, result);
    });
    QString error;
    if (!run->start(&error)) {
        delete run;
        refused.error = withoutSecrets(error);
        emit redriveFinished(token, refused);
        return;
    }
    m_redrive = run;
    m_redriveToken = token;
}

void StoreReader::cancelRedrive(quint64 token)
{
    // Not deferred: a cancel that waits behind the batch it means to stop is no use, and
    // it only sets a flag the next tick reads.
    if (m_redrive && m_redriveToken == token)
        m_redrive->cancel();
}

void StoreReader::exportDeadLetters(quint64 token, const DeadLetterFilter &filter, const QString &path)
{
    if (!ensureOpen(token))
        return;
    if (m_export) {
        emit exportFinished(token, 0, false, QStringLiteral("another export is still running"));
        return;
    }
    QString error;
    const DeadLetterFilter walk = filter.walkUntil(nowMs());
    if (m_brokerLetters)
        m_brokerLetters->forget();
    const auto counts = readDeadLetterCounts(walk, 0, &error);
    if (!counts) {
        emit exportFinished(token, 0, false, withoutSecrets(error));
        return;
    }
    const int total = int(std::min<qint64>(counts->tally(walk.errorClass).letters, std::numeric_limits<int>::max()));
    auto job = std::make_unique<DeadLetterExport>(token, path, walk, total);
    if (!job->open(&error)) {
        emit exportFinished(token, 0, false, error);
        return;
    }
    m_export = std::move(job);
    m_exportTimer.start();
}

void StoreReader::cancelExport(quint64 token)
{
    if (m_export && m_export->token() == token)
        m_export->cancel();
}

// One batch a turn: a request that arrives meanwhile (the table's next page, a refresh)
// waits for one batch, not for the whole file.
void StoreReader::exportNextBatch()
{
    if (!m_export) {
        m_exportTimer.stop();
        return;
    }
    DeadLetterExport &run = *m_export;
    QString error;
    auto step = DeadLetterExport::Step::Failed;
    if (!run.isCancelled()) {
        step = run.step(
            [this](const DeadLetterFilter &page, QString *pageError) { return readDeadLetterPage(page, pageError); },
            &error);
        if (step != DeadLetterExport::Step::Failed)
            emit exportProgress(run.token(), run.written(), std::max(run.total(), run.written()));
    }
    if (step == DeadLetterExport::Step::More)
        return;
    m_exportTimer.stop();
    const auto finished = std::move(m_export); // a file not complete goes with it
    emit exportFinished(finished->token(), step == DeadLetterExport::Step::Done ? finished->written() : 0,
                        finished->isCancelled(), withoutSecrets(error));
}

void StoreReader::discard(quint64 token, const QList<DeadLetter> &letters, const QString &detail,
                          const QString &reason)
{
    if (!ensureWritable(token))
        return;
    QString error;
    Operations &operations = m_store->operations();
    std::optional<int> removed;
    if (m_broker) {
        // The broker's letters leave outside any transaction of the store (no lock is held
        // over the network): the audit row comes first and counts those that left.
        if (const auto auditId = operations.beginAudit({QStringLiteral("discard"), detail, 0, reason}, &error))
            removed = operations.discard(*m_broker, letters, *auditId, &error);
        m_brokerLetters->forget();
    } else {
        // The store's own letters go with their audit row, or nothing happens.
        Transaction transaction(m_store->database());
        if (transaction.begin(&error)) {
            if (const auto auditId = operations.beginAudit({QStringLiteral("discard"), detail, 0, reason}, &error))
                removed = operations.discard(letters, *auditId, &error);
            if (removed && !transaction.commit(&error))
                removed.reset();
        }
    }
    if (removed)
        emit operationFinished(token, true, QStringLiteral("discarded %1 dead letters").arg(*removed));
    else
        emit operationFinished(token, false, withoutSecrets(error));
}

void StoreReader::resolve(quint64 token, const QByteArray &sendKey, bool resend, const QString &reason)
{
    if (!ensureWritable(token))
        return;
    QString error;
    bool ok = false;
    if (!resend)
        ok = m_store->operations().markDelivered(sendKey, reason, &error);
    else
        ok = m_broker ? m_store->operations().resend(*m_broker, sendKey, reason, &error)
                      : m_store->operations().resend(sendKey, reason, &error);
    emit operationFinished(token, ok,
                           ok ? (resend ? QStringLiteral("queued again under the same key")
                                        : QStringLiteral("marked delivered"))
                              : withoutSecrets(error));
}

void StoreReader::setPartnerPolicy(quint64 token, const QString &partner, KeyHonouring honoursKey)
{
    if (!ensureWritable(token))
        return;
    QString error;
    const bool ok = m_store->operations().setPartnerPolicy(partner, honoursKey, &error);
    emit operationFinished(token, ok,
                           ok ? QStringLiteral("%1 honours Idempotency-Key: %2").arg(partner, keyHonouringName(honoursKey))
                              : withoutSecrets(error));
}

void StoreReader::loadPartners(quint64 token)
{
    if (!ensureOpen(token))
        return;
    QString error;
    if (const auto partners = m_store->inspector().partners(&error))
        emit partnersLoaded(token, *partners);
    else
        fail(token, error);
}

void StoreReader::setPartnerPaused(quint64 token, const QString &partner, bool paused, const QString &reason)
{
    if (!ensureWritable(token))
        return;
    QString error;
    const bool ok = m_store->operations().setPartnerPaused(partner, paused, reason, &error);
    emit operationFinished(token, ok,
                           !ok       ? withoutSecrets(error)
                           : paused ? QStringLiteral("%1 paused: workers send it nothing until it is resumed").arg(partner)
                                    : QStringLiteral("%1 resumed").arg(partner));
}

void StoreReader::setAlertThreshold(quint64 token, AlertRule rule, const QString &partner, std::optional<qint64> value)
{
    if (!ensureWritable(token))
        return;
    QString error;
    const bool ok = m_store->operations().setAlertThreshold(rule, partner, value, &error);
    const QString name = alertRuleName(rule);
    emit operationFinished(token, ok,
                           !ok     ? withoutSecrets(error)
                           : value ? QStringLiteral("%1 set to %2 for every console and watcher on the store")
                                         .arg(name, formatAlertThreshold(rule, *value))
                                   : QStringLiteral("%1 back to its default").arg(name));
}

void StoreReader::loadIncidents(quint64 token, int limit)
{
    if (!ensureOpen(token))
        return;
    QString error;
    if (const auto incidents = Incidents(m_store->database()).list(limit, &error))
        emit incidentsLoaded(token, *incidents);
    else
        fail(token, error);
}

void StoreReader::loadIncidentReport(quint64 token, qint64 id)
{
    if (!ensureOpen(token))
        return;
    QString error;
    const auto report = buildIncidentReport(m_store->database(), m_store->inspector(), id,
                                            QDateTime::currentMSecsSinceEpoch(), &error);
    if (report)
        emit incidentReportLoaded(token, *report);
    else
        fail(token, error.isEmpty() ? QStringLiteral("no incident %1 on this store").arg(id) : error);
}

void StoreReader::actOnIncident(quint64 token, qint64 id, Incidents::Action action, const QString &note)
{
    if (!ensureWritable(token))
        return;
    QString error;
    const bool ok = m_store->operations().actOnIncident(id, action, note, &error);
    QString done;
    switch (action) {
    case Incidents::Action::Acknowledge:
        done = QStringLiteral("incident %1 acknowledged").arg(id);
        break;
    case Incidents::Action::Note:
        done = QStringLiteral("note added to incident %1").arg(id);
        break;
    case Incidents::Action::Resolve:
        done = QStringLiteral("incident %1 resolved").arg(id);
        break;
    }
    emit operationFinished(token, ok, ok ? done : withoutSecrets(error));
}

void StoreReader::checkAtPartner(quint64 token, const QByteArray &sendKey, const QString &partnersFile)
{
    if (!ensureWritable(token))
        return;
    if (partnersFile.isEmpty()) {
        emit operationFinished(token, false,
                               QStringLiteral("no partners file is set on the Worker page: it names the partners and their lookups"));
        return;
    }
    QString error;
    if (!m_lookups || m_lookupsFile != partnersFile) {
        const auto partners = readPartnersFile(partnersFile, &error);
        if (!partners) {
            emit operationFinished(token, false, error);
            return;
        }
        m_lookups = std::make_unique<PartnerLookups>(*partners);
        m_lookupsFile = partnersFile;
    }
    const auto event = m_store->inspector().event(QString::fromLatin1(sendKey), &error);
    const auto states = event ? m_store->inspector().reconciliation({sendKey}, &error) : std::nullopt;
    if (!states) {
        emit operationFinished(token, false, withoutSecrets(error));
        return;
    }
    const QString partner = m_lookups->partnerOf(*event, states->constFirst());
    PartnerSender *sender = m_lookups->lookupFor(partner, &error);
    if (!sender) {
        emit operationFinished(token, false, error);
        return;
    }
    const QString profile = m_lookups->partners().find(partner)->profile;
    sender->lookUp(sendKey, this, [this, token, sendKey, partner, profile](const LookupResult &answer) {
        QString error;
        if (!m_store || !m_store->operations().recordLookup(sendKey, partner, profile, answer, &error)) {
            emit operationFinished(token, false, withoutSecrets(error));
            return;
        }
        switch (answer.kind) {
        case LookupResult::Kind::Found:
            emit operationFinished(token, true,
                                   answer.providerMessageId.isEmpty()
                                       ? QStringLiteral("found at %1: settled delivered").arg(partner)
                                       : QStringLiteral("found at %1 as %2: settled delivered").arg(partner, answer.providerMessageId));
            return;
        case LookupResult::Kind::NotFound:
            emit operationFinished(token, true, QStringLiteral("not found at %1").arg(partner));
            return;
        case LookupResult::Kind::Failed:
            emit operationFinished(token, false, QStringLiteral("asking %1 failed: %2").arg(partner, answer.error));
            return;
        }
    });
}

} // namespace once
