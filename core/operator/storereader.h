#pragma once

#include "alerting/alertrules.h"
#include "alerting/incidentreport.h"
#include "store/database.h"
#include "operator/inspector.h"
#include "operator/metrics.h"
#include "operator/redriverun.h"
#include "store/workerregistry.h"

#include <QElapsedTimer>
#include <QObject>
#include <QTimer>

#include <memory>

namespace once {

class BrokerDeadLetters;
class BrokerQueue;
class PartnerLookups;
class DeadLetterExport;
class Store;

// The console's window on a store: a worker object that lives on its own thread, opens
// its own connection there, and answers requests with copies of the data through
// signals. Every request carries a token that comes back with its answer, so a view can
// drop answers to requests it has since replaced. Nothing here blocks the caller.
//
// On PostgreSQL the reader also listens for the workers' notifications (messages
// enqueued, worker heartbeats) and turns any number of them into at most one
// storeChanged() a second, so that views refresh soon after a change without every
// heartbeat of every worker costing a round of queries. SQLite has no notifications:
// there the views keep polling.
//
// With a queue URL (amqp://, redis://) the queue is read at that broker while the ledger
// stays in the store: the overview's queue counts, the dead letters, and redrive, discard
// and resend go to the broker. Brokers send no notifications to the console; views poll.
// The URL may hold a password: it opens the broker and goes nowhere else.
class StoreReader final : public QObject
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(StoreReader)

public:
    // What open() does when a SQLite store's file is not there: create a new store, or
    // refuse (storeMissing(), then opened(false)), so that a mistyped path or a moved file
    // is asked about rather than answered with an empty store that looks healthy.
    enum class IfMissing { Create, Refuse };

    static constexpr int InDoubtPageRows = 500;

    // queueUrl: a broker's queue, or empty for the store's own. access: ReadOnly for a
    // console that only looks; AsPermitted opens read-only by itself where the user may
    // not write. Read-only, the reader refuses redrive, discard and resolve itself, and
    // the store's connection could not write them anyway.
    explicit StoreReader(const QString &storeUrl, const QString &queueUrl = QString(),
                         IfMissing ifMissing = IfMissing::Create,
                         Database::Access access = Database::Access::AsPermitted, QObject *parent = nullptr);
    ~StoreReader() override;

public slots:
    void open();
    void close();
    // The numbers and, over the last windowMs, the charts' series in buckets of bucketMs.
    void loadOverview(quint64 token, qint64 windowMs, qint64 bucketMs);
    // What the console watches whatever page is shown: the numbers and every worker.
    void loadHealth(quint64 token);
    void loadEvents(quint64 token, const once::EventFilter &filter);
    void countEvents(quint64 token, const once::EventFilter &filter);
    void loadHistory(quint64 token, const QString &keyOrEventId);
    // A page of dead letters (the filter's order, cursor and limit), at the store or the broker.
    void loadDeadLetters(quint64 token, const once::DeadLetterFilter &filter);
    // One letter with its payload, for the operator's selection.
    void loadDeadLetter(quint64 token, const QString &id);
    // The letters the filter takes, counted by class (see Inspector::countDeadLetters).
    void countDeadLetters(quint64 token, const once::DeadLetterFilter &filter, qint64 firstSentBeforeMs);
    // Every event in doubt, in pages of InDoubtPageRows (oldest first): inDoubtLoaded()
    // once a page, `complete` on the last, so the first rows show while the rest are read.
    void loadInDoubt(quint64 token);
    void loadAudit(quint64 token, int limit);
    // One row in the audit log for a decision taken elsewhere (a BullMQ action, which
    // changes a queue at Redis, not the store): auditRecorded, or failed.
    void recordAudit(quint64 token, const QString &action, const QString &detail, int count,
                     const QString &reason);
    // Every worker registered on the store, live or not.
    void loadWorkers(quint64 token);
    // Who would send redriven letters now: the workers on the store, and what the partner
    // answered over the last windowMs.
    void loadReadiness(quint64 token, qint64 windowMs);
    // What a redrive of these letters would do now: send, suppress as a duplicate, or skip
    // as expired (RedriveRun::preview).
    void previewRedrive(quint64 token, const once::RedriveOptions &options);
    // Redrives the letters picked (they need no payloads: the run reads them a batch at a
    // time) or those the filter takes that died by now, paced, held and stopped as the
    // options say (RedriveRun), reporting progress; the thread stays free for other
    // requests meanwhile. One at a time.
    void redrive(quint64 token, const once::RedriveOptions &options);
    void cancelRedrive(quint64 token);
    // Writes every letter the filter takes (its cursor and limit aside) that died by now to
    // path, CSV or JSON by its name (DeadLetterFile): walked in batches like a redrive of
    // all matching, one batch a turn of this thread, each written as it comes, so that
    // memory stays flat and other requests are answered between batches. Progress counts
    // against the letters counted at the start. The file takes its name only when it is
    // complete: a cancel or an error leaves nothing under it.
    void exportDeadLetters(quint64 token, const once::DeadLetterFilter &filter, const QString &path);
    void cancelExport(quint64 token);
    void discard(quint64 token, const QList<once::DeadLetter> &letters, const QString &detail, const QString &reason);
    void resolve(quint64 token, const QByteArray &sendKey, bool resend, const QString &reason);
    void setPartnerPolicy(quint64 token, const QString &partner, once::KeyHonouring honoursKey);
    // The partners on record (Inspector::partners): partnersLoaded, or failed.
    void loadPartners(quint64 token);
    // Pauses or resumes a partner for every worker on the store (audited with the reason):
    // operationFinished says what became of it.
    void setPartnerPaused(quint64 token, const QString &partner, bool paused, const QString &reason);
    // Asks the partner a key left in doubt went to (as the partners file names it) whether
    // it has the message sent with the key, now, whatever its grace period, and records
    // the answer as `once reconcile` does: found settles it applied. operationFinished says
    // what the partner answered (ok: it answered), in words.
    void checkAtPartner(quint64 token, const QByteArray &sendKey, const QString &partnersFile);
    // Sets one alert threshold for every console and watcher on the store (nullopt: back to
    // its default), audited: operationFinished says so.
    void setAlertThreshold(quint64 token, once::AlertRule rule, const QString &partner, std::optional<qint64> value);
    // The incidents, open ones first, then the latest resolved (Incidents::list):
    // incidentsLoaded, or failed.
    void loadIncidents(quint64 token, int limit);
    // One incident's report (buildIncidentReport): incidentReportLoaded, or failed (also
    // for an incident that is not there).
    void loadIncidentReport(quint64 token, qint64 id);
    // Acknowledges, notes or resolves an incident (audited): operationFinished.
    void actOnIncident(quint64 token, qint64 id, once::Incidents::Action action, const QString &note);

signals:
    // The store, and the broker's queue if there is one, are open (ok) or not; error says
    // which of them failed and why. liveUpdates: storeChanged() will announce changes
    // (PostgreSQL notifications).
    void opened(bool ok, const QString &error, bool liveUpdates);
    // Before opened(false): there is no store file at the path, and IfMissing::Refuse.
    void storeMissing(const QString &path);
    // Just before opened(true), when the store is open read-only: why, in words for a
    // person (Database::readOnlyReason()).
    void openedReadOnly(const QString &reason);
    // Only with a queue URL, just before opened(), once the store is open: whether the
    // broker's queue opened too. The names never hold a password: displayName is
    // QueueLocation::displayName(), brokerName "RabbitMQ" or "Redis Streams".
    void queueOpened(bool ok, const QString &displayName, const QString &brokerName);
    void overviewLoaded(quint64 token, const once::DeliveryStats &stats, const once::MetricSeries &series);
    void eventsLoaded(quint64 token, const QList<once::EventRow> &rows);
    void eventsCounted(quint64 token, qint64 count);
    void historyLoaded(quint64 token, const once::EventRow &event, const QList<once::Attempt> &attempts);
    void deadLettersLoaded(quint64 token, const QList<once::DeadLetter> &letters);
    void deadLetterLoaded(quint64 token, const once::DeadLetter &letter);
    void deadLettersCounted(quint64 token, const once::DeadLetterCounts &counts);
    void inDoubtLoaded(quint64 token, const QList<once::EventRow> &rows, bool complete);
    void auditLoaded(quint64 token, const QList<once::AuditEntry> &entries);
    void auditRecorded(quint64 token);
    void workersLoaded(quint64 token, const QList<once::WorkerRecord> &workers);
    void partnersLoaded(quint64 token, const QList<once::PartnerPolicy> &partners);
    void readinessLoaded(quint64 token, const QList<once::WorkerRecord> &workers, const once::PartnerActivity &partner);
    // With the alert thresholds the store holds, which the health is judged by.
    void healthLoaded(quint64 token, const once::DeliveryStats &stats, const QList<once::WorkerRecord> &workers,
                      const once::AlertThresholds &thresholds);
    void incidentsLoaded(quint64 token, const QList<once::Incident> &incidents);
    void incidentReportLoaded(quint64 token, const once::IncidentReport &report);
    void redrivePreviewed(quint64 token, const once::RedrivePreview &preview);
    void redriveProgress(quint64 token, const once::RedriveProgress &progress);
    // result.error: in one line, without secrets; empty when it went well, was cancelled
    // or stopped by its own rule (result.stoppedBecause).
    void redriveFinished(quint64 token, const once::RedriveResult &result);
    void exportProgress(quint64 token, int written, int total);
    // written: the letters in the file, 0 unless it is complete. error: in one line, empty
    // when it went well or was cancelled.
    void exportFinished(quint64 token, int written, bool cancelled, const QString &error);
    void operationFinished(quint64 token, bool ok, const QString &message);
    void failed(quint64 token, const QString &error);
    // Another process (or this one) changed the store: at most one a second.
    void storeChanged();

private:
    void exportNextBatch();
    std::optional<DeliveryStats> readStats(QString *error);
    // Queue depth and age where no worker sampled them (none runs): this reader's own
    // readings, kept for the session (workers keep theirs in the store).
    void fillFromOwnReadings(MetricSeries *series, qint64 fromMs) const;
    bool ensureOpen(quint64 token);
    // The operator's actions write: on a read-only store they are refused here, in words.
    std::optional<QString> refusalToWrite() const;
    // ensureOpen(), and refuses an operation (operationFinished) while the store is read-only.
    bool ensureWritable(quint64 token);
    // A page of the dead letters, at the store or the broker.
    std::optional<QList<DeadLetter>> readDeadLetterPage(const DeadLetterFilter &filter, QString *error);
    std::optional<DeadLetterCounts> readDeadLetterCounts(const DeadLetterFilter &filter, qint64 firstSentBeforeMs,
                                                          QString *error);
    // Errors leave this thread without the broker's or the store's password.
    QString withoutSecrets(QString error) const;
    void fail(quint64 token, const QString &error);
    bool listenForChanges();
    void onNotification();
    void announceChange();

    QString m_storeUrl;
    QString m_queueUrl;
    IfMissing m_ifMissing = IfMissing::Create;
    Database::Access m_access = Database::Access::AsPermitted;
    std::unique_ptr<Store> m_store;
    std::unique_ptr<BrokerQueue> m_broker; // null: the store's own queue
    // The broker's dead letters, listed once a refresh (with m_broker only).
    std::unique_ptr<BrokerDeadLetters> m_brokerLetters;
    QString m_openError;                   // why open() failed, without secrets
    // The partners that "Check at partner" asks, read from this file.
    std::unique_ptr<PartnerLookups> m_lookups;
    QString m_lookupsFile;

    // The redrive under way, a child of this reader so that it runs on its thread.
    RedriveRun *m_redrive = nullptr;
    quint64 m_redriveToken = 0;
    std::unique_ptr<DeadLetterExport> m_export;
    QTimer m_exportTimer{this}; // the next batch, at the thread's next turn
    QTimer m_changeTimer{this};  // the next storeChanged(), while one is due
    QElapsedTimer m_sinceChange; // since the last storeChanged()
    struct QueueReading
    {
        qint64 atMs = 0;
        qint64 ready = 0;
        qint64 oldestReadyAgeMs = 0;
    };
    QList<QueueReading> m_ownReadings; // oldest first, at most a day's
};

} // namespace once

Q_DECLARE_METATYPE(once::EventFilter)
Q_DECLARE_METATYPE(once::DeadLetterFilter)
Q_DECLARE_METATYPE(once::DeliveryStats)
Q_DECLARE_METATYPE(once::MetricSeries)
Q_DECLARE_METATYPE(once::EventRow)
Q_DECLARE_METATYPE(once::DeadLetter)
Q_DECLARE_METATYPE(once::DeadLetterCounts)
Q_DECLARE_METATYPE(once::Attempt)
Q_DECLARE_METATYPE(once::AuditEntry)
Q_DECLARE_METATYPE(once::WorkerRecord)
Q_DECLARE_METATYPE(once::PartnerPolicy)
Q_DECLARE_METATYPE(once::PartnerActivity)
Q_DECLARE_METATYPE(once::Incident)
Q_DECLARE_METATYPE(once::IncidentReport)
