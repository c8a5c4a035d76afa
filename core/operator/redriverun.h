#pragma once

#include "model/deadletter.h"
#include "operator/inspector.h"
#include "store/workerregistry.h"

#include <QElapsedTimer>
#include <QList>
#include <QObject>
#include <QString>
#include <QTimer>

#include <memory>
#include <optional>

namespace once {

class BrokerDeadLetters;
class BrokerQueue;
class Operations;
class Store;

// What an operator asked a redrive to do. The same from the console, `once redrive` and
// `once serve`'s dlq/redrive.
struct RedriveOptions
{
    // The letters: picked one by one, or those a filter takes (walked up to now, oldest
    // first, a page at a time).
    QList<DeadLetter> picked;
    std::optional<DeadLetterFilter> matching;
    int ceilingPerSecond = 0;  // at most this many letters a second; 0: no ceiling
    int canary = 0;            // put this many back first and wait for what becomes of them
    int stopAfterFailures = 0; // stop once the redriven letters' sends failed this often; 0: never
    bool includeExpired = false; // put back letters whose reminder has expired too
    QString detail;              // the audit log's words for the letters
    QString reason;              // the operator's own
};

// How late a reminder would be if sent now: now minus the scheduled time its send key
// holds; 0 when the key does not say.
qint64 redriveLateness(const QByteArray &sendKey, qint64 nowMs);

// What a redrive would do now, letter by letter: send it, have it suppressed as a
// duplicate (another delivery of its reminder was applied), or skip it (its reminder has
// expired; included, a worker settles it expired without sending).
struct RedrivePreview
{
    // An expired letter, named: its id and key, when it expired, how late it would be now.
    struct ExpiredLetter
    {
        QString id;
        QByteArray sendKey;
        qint64 expiresAtMs = 0;
        qint64 lateByMs = 0; // now minus its scheduled time; 0 when its key does not say
    };
    static constexpr int NamedExpired = 20;

    qint64 total = 0;
    qint64 wouldSend = 0;
    qint64 alreadyApplied = 0;
    qint64 expired = 0;
    QList<ExpiredLetter> expiredLetters; // the first NamedExpired of them
    QList<DeadLetter> letters;           // the letters looked at, without payloads (a dry run's list)

    void count(const DeadLetter &letter, qint64 nowMs, bool keepLetters);
};

// How a redrive goes, as it goes.
struct RedriveProgress
{
    enum class Phase
    {
        Moving,           // at the ceiling
        Throttled,        // slower than the ceiling: the workers' partner takes less
        HeldBreakerOpen,  // nothing moves: a worker's breaker is open for a partner
        WaitingForCanary, // the canary is back; waiting for what becomes of it
        Finished,
    };
    Phase phase = Phase::Moving;
    qint64 total = 0;          // letters the run walks
    qint64 taken = 0;          // walked so far: moved, skipped or found gone
    qint64 moved = 0;
    qint64 skippedExpired = 0;
    double pacePerSecond = 0;  // the pace now (0 while held; the ceiling, or 0 for none, when moving)
    double achievedPerSecond = 0; // moved over the last few seconds
    QString why;               // the phase in words: whose breaker, which partner's pace
    RedriveEndings endings;    // what became of the moved letters, at the last look

    static QString phaseName(Phase phase);
};

// How a redrive ended.
struct RedriveResult
{
    qint64 auditId = 0;
    qint64 moved = 0;
    qint64 skippedExpired = 0;
    bool cancelled = false;
    QString stoppedBecause; // the stop rule or a failed canary, in words; empty otherwise
    QString error;          // a store or broker error that stopped it
    RedriveEndings endings;

    bool ok() const { return error.isEmpty(); }
    QString summary() const; // "redrove 380 dead letters; skipped 20 expired"
};

// The workers' partners as their heartbeats tell them: whether any holds back (its
// breaker open for a partner) and whether a partner throttles them now (a 429, slow start)
// and at what pace they send to it then.
struct PartnerSendingState
{
    int liveWorkers = 0;
    QString heldBy;          // "acme's breaker is open on 2 workers"; empty: none holds back
    QString throttledBy;     // "acme throttles (429 at 12:01:02)"; empty: none
    double throttledPace = 0; // the workers' pace together for that partner; 0: not known

    static PartnerSendingState of(const QList<WorkerRecord> &workers, qint64 nowMs);
};

// One redrive: the letters back on the queue at a pace, in batches, each batch one
// transaction (Operations) counted into the redrive's audit row.
//
// The ceiling is only that: while the store's workers report their breaker open for a
// partner the run puts nothing back, and while a partner throttles them it goes at their
// pace, so a redrive never outruns what the partner takes (letters put back faster only
// wait, age and die again). With a canary, the first letters go back alone and the run
// waits for what becomes of them; with a stop rule, it stops once the letters it put back
// failed that often. Lives on the thread of the store it is given and is driven by its
// own timer; finished() says how it ended, and the audit row says so too.
class RedriveRun final : public QObject
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(RedriveRun)

public:
    static constexpr int TickMs = 100;
    static constexpr int MaxBatch = 500; // letters read and moved at once, whatever the pace

    // broker: the queue the letters are at (null: the store's own); brokerLetters: its
    // listing the caller keeps (null: the run lists itself). actor: the audit log's who.
    RedriveRun(Store &store, BrokerQueue *broker, BrokerDeadLetters *brokerLetters, const QString &actor,
               RedriveOptions options, QObject *parent = nullptr);
    ~RedriveRun() override;

    // What the options' letters would come to now (nothing is moved).
    static std::optional<RedrivePreview> preview(Store &store, BrokerQueue *broker, BrokerDeadLetters *brokerLetters,
                                                 const RedriveOptions &options, bool keepLetters, QString *error);

    // Counts the letters, opens the audit row and starts; false (and *error) if it could
    // not, and then it emits nothing.
    bool start(QString *error);
    void cancel() { m_cancelled = true; }

signals:
    void progressed(const once::RedriveProgress &progress);
    void finished(const once::RedriveResult &result);

private:
    void tick();
    void lookAtWorkers(qint64 now);
    bool lookAtEndings(QString *error);
    std::optional<QList<DeadLetter>> nextLetters(int count, QString *error);
    std::optional<int> move(const QList<DeadLetter> &letters, QString *error);
    void finish(const QString &error, const QString &stoppedBecause = {});
    static std::optional<QList<DeadLetter>> readPage(Store &store, BrokerQueue *broker, BrokerDeadLetters &letters,
                                                     const DeadLetterFilter &page, QString *error);

    Store &m_store;
    BrokerQueue *m_broker = nullptr;
    std::unique_ptr<BrokerDeadLetters> m_ownBrokerLetters;
    BrokerDeadLetters *m_brokerLetters = nullptr;
    std::unique_ptr<Operations> m_operations;
    RedriveOptions m_options;
    RedriveProgress m_progress;
    qint64 m_auditId = 0;
    bool m_cancelled = false;
    bool m_finished = false;
    qsizetype m_nextPicked = 0;
    double m_credit = 0; // letters the pace allows now
    QElapsedTimer m_sinceTick;
    qint64 m_lastWorkersLookMs = 0;
    qint64 m_lastEndingsLookMs = 0;
    PartnerSendingState m_sending;
    bool m_canaryOut = false; // the canary is back on the queue and the run waits for it
    bool m_canaryDone = false;
    // Moved counts a second apart, for the achieved pace.
    QList<QPair<qint64, qint64>> m_movedAt;
    QTimer m_timer{this};
};

} // namespace once

Q_DECLARE_METATYPE(once::RedriveOptions)
Q_DECLARE_METATYPE(once::RedriveProgress)
Q_DECLARE_METATYPE(once::RedriveResult)
Q_DECLARE_METATYPE(once::RedrivePreview)
