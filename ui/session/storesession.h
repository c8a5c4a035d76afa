#pragma once

#include "operator/storereader.h"

#include <QObject>
#include <QThread>

namespace once::ui {

// The GUI thread's handle on an open store. Requests return a token at once; the
// answer arrives later as a signal carrying the same token (a view keeps the token of
// its latest request and ignores older answers). The reader lives on its own thread,
// so the GUI thread never waits on the store.
//
// storeUrl() may hold a password (typed into the PostgreSQL dialog): it is for opening
// connections only. Whatever is shown or saved uses displayName() or
// urlWithoutPassword() (storeurl.h). The same goes for queueUrl(), a broker's queue
// (amqp://, redis://) the session reads instead of the store's own: shown as
// queueDisplayName(), saved through queueUrlWithoutPassword() (queueurl.h).
class StoreSession final : public QObject
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(StoreSession)

public:
    // queueUrl: a broker's queue, or empty for the store's own.
    // access: Database::Access::ReadOnly for a console that only looks (--read-only, File >
    // Open Read-Only); AsPermitted turns read-only by itself where the user may not write.
    explicit StoreSession(const QString &storeUrl, const QString &queueUrl = QString(),
                          StoreReader::IfMissing ifMissing = StoreReader::IfMissing::Create,
                          Database::Access access = Database::Access::AsPermitted, QObject *parent = nullptr);
    ~StoreSession() override;

    QString storeUrl() const { return m_storeUrl; }
    // The store as a person may see it: never a password.
    QString displayName() const { return m_displayName; }
    QString queueUrl() const { return m_queueUrl; }
    bool hasBrokerQueue() const { return !m_queueUrl.isEmpty(); }
    // The broker's queue as a person may see it ("amqp://once@host:5672/%2F?queue=reminders"),
    // and the broker's name ("RabbitMQ", "Redis Streams"); empty for the store's own queue.
    // Known from the URL alone, before the session opens.
    QString queueDisplayName() const { return m_queueDisplayName; }
    QString brokerName() const { return m_brokerName; }
    // After a failed opened(): whether the broker's queue failed (the store had opened).
    bool queueFailed() const { return m_queueFailed; }
    // The open failed because no store file is at the path (IfMissing::Refuse).
    bool storeMissing() const { return m_storeMissing; }
    // Whether opened() has come, and how: for whoever looks after it may have come (a test
    // waiting on a window that opened its session by itself, as Open Recent does).
    bool hasOpened() const { return m_hasOpened; }
    bool isOpen() const { return m_openedOk; }
    QString openError() const { return m_openError; }
    // Whether nothing this session does may change the store: asked for, or found once
    // opened() came (a file the user may not write, a role without write grants). The
    // reason is for a person: "you may not write the file …".
    bool isReadOnly() const { return !m_readOnlyReason.isEmpty(); }
    QString readOnlyReason() const { return m_readOnlyReason; }
    bool readOnlyRequested() const { return m_access == Database::Access::ReadOnly; }
    // Whether storeChanged() follows the store's changes by itself (PostgreSQL
    // notifications), so that views may poll less often. Known once opened() came; never
    // with a broker's queue, whose changes the store does not hear of.
    bool hasLiveUpdates() const { return m_liveUpdates; }

    quint64 loadOverview(qint64 windowMs, qint64 bucketMs = 60000);
    quint64 loadHealth();
    quint64 loadEvents(const once::EventFilter &filter);
    quint64 countEvents(const once::EventFilter &filter);
    quint64 loadHistory(const QString &keyOrEventId);
    quint64 loadDeadLetters(const once::DeadLetterFilter &filter);
    // One letter with its payload (deadLetterLoaded, or failed when it is gone).
    quint64 loadDeadLetter(const QString &id);
    // The letters a filter takes, by class; firstSentBeforeMs for the preview's warning.
    quint64 countDeadLetters(const once::DeadLetterFilter &filter, qint64 firstSentBeforeMs = 0);
    // Every event in doubt, a page at a time: inDoubtLoaded(), `complete` with the last.
    quint64 loadInDoubt();
    quint64 loadAudit(int limit = 500);
    // A row in the audit log for a decision taken outside the store (a BullMQ action).
    quint64 recordAudit(const QString &action, const QString &detail, int count,
                        const QString &reason = QString());
    quint64 loadWorkers();
    // The workers on the store and the partner's answers over the last windowMs.
    quint64 loadReadiness(qint64 windowMs);
    // What a redrive would do now (redrivePreviewed), and the redrive itself: the letters
    // picked, or every letter options.matching takes, walked and moved by the reader.
    quint64 previewRedrive(const once::RedriveOptions &options);
    quint64 redrive(const once::RedriveOptions &options);
    void cancelRedrive(quint64 token);
    // Every letter the filter takes, written to path (CSV for a .csv name, JSON otherwise)
    // by the reader a batch at a time: exportProgress, then exportFinished.
    quint64 exportDeadLetters(const once::DeadLetterFilter &filter, const QString &path);
    void cancelExport(quint64 token);
    quint64 discard(const QList<once::DeadLetter> &letters, const QString &detail,
                    const QString &reason = QString());
    quint64 resolve(const QByteArray &sendKey, bool resend, const QString &reason = QString());
    // Asks the key's partner, as the partners file names it, whether it has the message
    // (StoreReader::checkAtPartner); the answer comes as operationFinished().
    quint64 checkAtPartner(const QByteArray &sendKey, const QString &partnersFile);
    // Records for every reader of the store whether a partner honours Idempotency-Key.
    quint64 setPartnerPolicy(const QString &partner, once::KeyHonouring honoursKey);
    quint64 loadPartners();
    // Pauses (or resumes) a partner for every worker on the store; operationFinished().
    quint64 setPartnerPaused(const QString &partner, bool paused, const QString &reason = QString());
    // One alert threshold for every console and watcher on the store (nullopt: its
    // default); operationFinished().
    quint64 setAlertThreshold(once::AlertRule rule, const QString &partner, std::optional<qint64> value);
    // Open incidents first, then the latest resolved: incidentsLoaded.
    quint64 loadIncidents(int limit = 200);
    // One incident's report (summary, impact, timeline, operator actions): incidentReportLoaded.
    quint64 loadIncidentReport(qint64 id);
    // Acknowledge, note or resolve an incident (audited): operationFinished.
    quint64 actOnIncident(qint64 id, once::Incidents::Action action, const QString &note = QString());

signals:
    void opened(bool ok, const QString &error);
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
    void readinessLoaded(quint64 token, const QList<once::WorkerRecord> &workers,
                         const once::PartnerActivity &partner);
    void healthLoaded(quint64 token, const once::DeliveryStats &stats,
                      const QList<once::WorkerRecord> &workers, const once::AlertThresholds &thresholds);
    void incidentsLoaded(quint64 token, const QList<once::Incident> &incidents);
    void incidentReportLoaded(quint64 token, const once::IncidentReport &report);
    void redrivePreviewed(quint64 token, const once::RedrivePreview &preview);
    void redriveProgress(quint64 token, const once::RedriveProgress &progress);
    void redriveFinished(quint64 token, const once::RedriveResult &result);
    void exportProgress(quint64 token, int written, int total);
    void exportFinished(quint64 token, int written, bool cancelled, const QString &error);
    void operationFinished(quint64 token, bool ok, const QString &message);
    void failed(quint64 token, const QString &error);
    // The store changed, through an operator action here or (with live updates) a
    // notification from any process, at most once a second: views reload.
    void storeChanged();

private:
    quint64 nextToken() { return ++m_lastToken; }

    QString m_storeUrl;
    QString m_displayName;
    QString m_queueUrl;
    QString m_queueDisplayName;
    QString m_brokerName;
    bool m_queueFailed = false;
    bool m_storeMissing = false;
    bool m_hasOpened = false;
    bool m_openedOk = false;
    QString m_openError;
    bool m_liveUpdates = false;
    Database::Access m_access = Database::Access::AsPermitted;
    QString m_readOnlyReason;
    QThread m_thread;
    once::StoreReader *m_reader = nullptr; // lives on m_thread
    quint64 m_lastToken = 0;
};

} // namespace once::ui
