#pragma once

#include "alerting/alertrules.h"
#include "alerting/notifiers/notifier.h"

#include <QHash>
#include <QObject>
#include <QSet>
#include <QTimer>

#include <memory>
#include <optional>
#include <vector>

namespace once {

class Store;
struct Incident;

struct WatcherConfig
{
    QString storeUrl;
    QString holder;              // this watcher's name in the lease: host:pid
    qint64 intervalMs = 5000;    // between two evaluations
    qint64 leaseTtlMs = 15000;   // how long the lease outlives a watcher that stopped renewing it
    qint64 clearAfterMs = 10000; // an alert gone this long resolves its incident
    qint64 retryBaseMs = 1000;   // a notifier's first retry; doubled up to retryCapMs
    qint64 retryCapMs = 5 * 60 * 1000;
    bool once = false;          // one evaluation, its notifications sent, then finished
    qint64 onceGraceMs = 30000; // how long --once waits for them
};

// `once watch`: every interval, reads a store's numbers, its workers and its thresholds,
// evaluates the alert rules (alertrules.h) and, while it holds the store's "watch" lease,
// records incidents (Incidents::record) and notifies what is owed: an incident's start, its
// end, and a reminder every remind-every while it is open and unacknowledged. What was
// sent is marked on the incident (once every notifier had its first try and one took it), so that a watcher
// that takes the lease over after a failover sends what is still owed and nothing twice.
// A store that does not answer is the store-failing alert: told from memory, not recorded
// (nothing can be written), by every watcher that sees it.
class Watcher final : public QObject
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(Watcher)

public:
    Watcher(WatcherConfig config, std::vector<std::unique_ptr<Notifier>> notifiers,
            QObject *parent = nullptr);
    ~Watcher() override;

    void start();
    // Releases the lease (what was not sent stays owed, for the next holder) and finishes.
    void stop();

signals:
    // 0: stopped, or --once sent everything; 1: --once could not.
    void finished(int exitCode);

private:
    struct Sending
    {
        Notification notification;
        int notifiersLeft = 0;       // not sent by them yet
        QSet<NotifierQueue *> tried; // done with their first try (at least)
        bool sent = false;           // by one notifier at least
        bool marked = false;         // on the incident, or not to be (told from memory)
    };

    void evaluate();
    bool readInputs(AlertInputs *inputs, bool *holding, QString *error);
    void storeFailed(const QString &error, qint64 nowMs);
    void notifyOwed(const QList<Incident> &incidents, qint64 nowMs);
    void send(const Notification &notification);
    void onAttempted(NotifierQueue *queue, const Notification &notification, bool sent);
    bool mark(const Notification &notification, qint64 atMs);
    void lostLease();
    void checkOnceDone();

    WatcherConfig m_config;
    std::vector<NotifierQueue *> m_queues;
    std::unique_ptr<Store> m_store;
    QTimer m_timer;
    QTimer m_onceDeadline;
    bool m_holding = false;
    bool m_stopping = false;
    std::optional<AlertThresholds> m_thresholds;
    QString m_storeError;
    qint64 m_storeFailingSinceMs = 0;
    std::optional<Notification> m_storeFiring;     // told from memory while the store does not answer
    QHash<QString, Sending> m_sending;             // by Notification::key()
    QList<QPair<Notification, qint64>> m_unmarked; // delivered, the store not told yet
    bool m_evaluated = false;
    bool m_standingBy = false;
};

} // namespace once
