#pragma once

#include "delivery/circuitbreaker.h"
#include "delivery/enginestore.h"
#include "delivery/partnerpace.h"
#include "store/ledger.h"
#include "queues/messagequeue.h"
#include "http/partnertls.h"
#include "model/partnerpolicy.h"
#include "partners/partnersettings.h"
#include "monitoring/sendstatistics.h"

#include <QJsonObject>
#include <QObject>
#include <QSet>
#include <QThread>
#include <QTimer>
#include <QUrl>

#include <deque>
#include <limits>
#include <memory>

namespace once {

class EngineStore;
class PartnerProfile;
struct KeyReconciliation;
class PartnerSender;
class Store;
struct SendOutcome;

struct EngineConfig
{
    QString storeUrl;
    QString queueUrl; // a broker's queue (amqp://, redis://); empty: the store's own
    QUrl partnerUrl;
    QByteArray partnerToken; // kept in memory only
    QString workerId;
    int concurrency = 16;
    int maxAttempts = 8;
    qint64 leaseMs = 30000;
    int requestTimeoutMs = 10000;
    InDoubtPolicy inDoubtPolicy = InDoubtPolicy::Resend;
    qint64 backoffBaseMs = 1000;
    qint64 backoffCapMs = 5 * 60 * 1000;
    qint64 idlePollMs = 100;
    bool untilIdle = false;       // finish once nothing is ready, in flight or due within a minute
    qint64 untilIdleHorizonMs = 60000;
    int breakerThreshold = 5;
    qint64 retentionMs = 30LL * 24 * 3600 * 1000;
    PartnerTls partnerTls; // CAs to trust for the partner, a client certificate for mutual TLS
    // The partners and routes (--partners FILE); when empty, the one webhook above takes
    // every channel (partnersOrSingle()).
    PartnersConfig partners;

    PartnersConfig partnersOrSingle() const;
};

// One partner as a worker sees it: its breaker and its current spell of failures.
struct PartnerCounters
{
    QString name;
    QString profile;
    CircuitBreaker::State breaker = CircuitBreaker::State::Closed;
    int consecutiveFailures = 0;
    qint64 failingSinceMs = 0; // the spell's first failure; 0: the last send was accepted
    qint64 lastFailureAtMs = 0;
    QString lastErrorClass;
    int lastHttpStatus = 0;
    qint64 applied = 0;
    qint64 failures = 0;
    int sending = 0;
    int capacity = 0;
    double ratePerSecond = 0; // 0: no limit
    InDoubtPolicy inDoubtPolicy = InDoubtPolicy::Resend;
    // Keys left in doubt this worker asked the partner for (reconciliation), by answer.
    qint64 lookupsFound = 0;
    qint64 lookupsNotFound = 0;
    qint64 lookupsFailed = 0;
    bool paused = false; // an operator paused it (once partners NAME --pause)
    // Sending at the partner's pace (AIMD): the rate this worker allows itself now, within
    // ratePerSecond (0: no limit now); when the partner last throttled it (a 429, or a 503
    // with Retry-After; 0: never); whether it is ramping up after its breaker closed.
    // JSON: pace_per_second, throttled_at, slow_start.
    double paceNowPerSecond = 0;
    qint64 throttledAtMs = 0;
    bool slowStart = false;

    QJsonObject toJson(qint64 nowMs) const;
};

struct EngineCounters
{
    qint64 leased = 0;
    qint64 applied = 0;
    qint64 duplicates = 0;
    qint64 retries = 0;
    qint64 deadLettered = 0;
    qint64 held = 0;
    qint64 resent = 0;
    qint64 invalid = 0;
    qint64 lapsed = 0;   // claims that ran out before their send could start: not sent
    qint64 failures = 0; // partner calls that did not succeed
    // The partner's current spell of failures (transient or in doubt), since the last
    // accepted send: the console tells an outage from a blip by how long it lasts, for
    // every worker on the store (they write this in their heartbeat).
    int consecutiveFailures = 0;
    qint64 failingSinceMs = 0; // the spell's first failure; 0: the last send was accepted
    qint64 lastFailureAtMs = 0;
    QString lastErrorClass;
    int lastHttpStatus = 0; // of the spell's last failure, when the partner answered
    SendStatistics sends; // every partner call by outcome, and how long it took
    // The worker's last spell without its store (its connection lost: a server gone, a
    // network cut, a failover): when it began, and when the store answered again (0 while
    // the spell lasts). Both 0 until the first such spell.
    qint64 storeLostAtMs = 0;
    qint64 storeBackAtMs = 0;
    bool storeLost() const { return storeLostAtMs && !storeBackAtMs; }
    int inFlight = 0;
    // Of the partner failing longest (the spell above is its), else closed.
    CircuitBreaker::State breaker = CircuitBreaker::State::Closed;
    QString failingPartner; // that partner's name, empty while none fails
    QList<PartnerCounters> partners; // each partner this worker sends to
    // What a send left in doubt leads to now: the configured policy, or hold where the
    // store records that the partner does not honour Idempotency-Key.
    InDoubtPolicy inDoubtPolicy = InDoubtPolicy::Resend;
    InDoubtPolicy configuredInDoubtPolicy = InDoubtPolicy::Resend;
    bool paused = false;
    bool running = false;
    // Deliveries past their reminder's expiry before they could be sent: settled as
    // expired and acked, not sent. An outcome, not a failure (the partner had no part).
    qint64 expired = 0;
};

// The delivery state machine (docs/state-machine.md). For every message:
//
//   lease (consume) -> claim the send key in the ledger (atomic insert, committed)
//     -> send with Idempotency-Key = send key -> record the outcome (committed) -> ack
//
// Nothing is acked before its outcome is recorded, and nothing is sent before its claim
// is committed, so a crash anywhere leaves either a message that comes back (its lease
// expires) or a recorded outcome. The one window no store can close, partner accepted
// but outcome not recorded, shows up as a claim that expired without an outcome: the
// next delivery finds it in doubt and resends with the same key, or holds it for an
// operator when the partner has no idempotency.
//
// Many sends are in flight at once on this object's thread; ledger and queue writes are
// grouped into one transaction per batch (group commit). Lives on one thread: call the
// slots through queued connections from elsewhere.
class Engine final : public QObject
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(Engine)

public:
    explicit Engine(const EngineConfig &config, QObject *parent = nullptr);
    ~Engine() override;

    EngineCounters counters() const;

public slots:
    void start();
    void pause();
    void resume();
    // Stops consuming, lets what is in flight finish and record, then emits finished(0).
    void stop();

signals:
    void started();
    void countersChanged(const once::EngineCounters &counters);
    void errorOccurred(const QString &message);
    void finished(int exitCode);

private:
    struct Delivery
    {
        QueueMessage message;
        Reminder reminder;
        int sendsThisRound = 0;
        qint64 firstSentAtMs = 0;
        qint64 claimExpiresAtMs = 0; // when another delivery may take the key over
        int lane = -1;               // the partner it goes to (m_lanes), -1 before routing
        qint64 expiresAtMs = 0;      // ClaimRequest::expiresAtMs; 0: never
    };

    // One partner: its sender, its own send slots, pace, breaker and spell of failures,
    // so that one partner's outage holds back only what goes to it.
    struct PartnerLane
    {
        PartnerSettings settings;
        const PartnerProfile *profile = nullptr;
        PartnerSender *sender = nullptr;
        CircuitBreaker breaker;
        int capacity = 1;
        int maxAttempts = 1;
        int sending = 0;
        std::deque<Delivery> ready; // claimed, waiting for a slot or the pace
        KeyHonouring recorded = KeyHonouring::Unknown; // as the store records it
        // The partner's permanent answers in a row, all with the same status, to distinct keys.
        int refusalStatus = 0;
        QSet<QByteArray> refusedKeys;
        PartnerCounters counters;
        // Pace: adaptive (AIMD, slow start after an outage) within "rate" (partnerpace.h).
        PartnerPace pace;
        bool paceTimerArmed = false;
        qint64 claimLookAtMs = 0; // when deferWaitsOutlastingClaims() looks again (0: no look due)
        int throttledInARow = 0; // 429s since the partner last accepted a send
        // How long after a send left in doubt the partner's lookup can be trusted to
        // find it (its search delay); -1: the partner has no lookup.
        qint64 lookupGraceMs = -1;
        std::optional<PartnerPause> pause; // as the store records it: nothing is sent meanwhile
    };

    void scheduleCycle(qint64 delayMs);
    void cycle();
    bool hasPendingWrites() const;
    void route(Delivery delivery);
    void sendReady();
    void sendReady(int lane);
    bool takePaceToken(PartnerLane &lane, qint64 now);
    qint64 paceWaitMs(const PartnerLane &lane, qint64 now) const;
    void deferForPace(const Delivery &delivery, const PartnerLane &lane, qint64 now);
    void deferWaitsOutlastingClaims(int lane, qint64 now);
    // Puts a claimed delivery back without sending it and without spending its budget:
    // its partner is down or at its pace. The key goes back to retrying.
    void deferUnsent(const Delivery &delivery, qint64 delayMs, const QString &errorClass, const QString &why);
    // Settles a claimed delivery that cannot be sent as it is (no route, a missing field).
    void deadLetterUnsent(const Delivery &delivery, const QString &errorClass, const QString &why);
    void putBackUnsent(const Delivery &delivery, qint64 delayMs, const QString &outcome, const QString &errorClass,
                       const QString &why);
    // Names the partner a delivery goes to in its history row.
    void notePartner(Attempt *attempt, const Delivery &delivery) const;
    int laneIndex(const QString &partner) const;
    QString routedChannels() const; // "email, sms", for a no-route dead letter
    int readyCount() const;
    int sendingCount() const;
    PartnerLane *laneOf(const Delivery &delivery);
    // The turn's in-doubt policy for each channel, from its partner.
    QHash<QString, InDoubtPolicy> policiesByChannel() const;
    // The partner each channel's claims are for: its name, profile and key window.
    void noteClaimPartners(TurnRequest *request) const;
    bool anyLaneOpen(qint64 now) const;
    int leaseRoom(qint64 now, int capacity, int inFlight) const;
    qint64 soonestReopenMs(qint64 now) const;
    bool claimOutlastsSend(const Delivery &delivery, qint64 now) const;
    void releaseUnsent(const Delivery &delivery, qint64 now);
    // A reminder past its expiry is not sent, whatever its partner's state: its key is
    // settled expired and its message acked (checked at routing and, under the claim,
    // immediately before each send).
    static bool hasExpired(const Delivery &delivery, qint64 now);
    void expire(const Delivery &delivery, qint64 now);
    bool claimsAhead() const;
    int leaseAhead() const;
    // What a send left in doubt leads to: the configured policy, or hold where the partner
    // does not honour the key (the store's record, else its profile's rule). Without an
    // argument: of every partner, hold if any holds.
    InDoubtPolicy inDoubtPolicy() const;
    InDoubtPolicy inDoubtPolicy(const PartnerLane &lane) const;
    QString inDoubtPolicyText(const PartnerLane &lane) const;
    // The store's record of whether each partner honours its key, read at start and with
    // every heartbeat: an operator's change applies within seconds.
    void notePartnerRecords(const QHash<QString, KeyHonouring> &records);
    // The store's paused partners, read every PauseReadMs: a pause holds back a partner's
    // sends within a second, on every worker; a resume lets them go at once.
    void readPauses();
    void notePauses(const QList<PartnerPause> &paused);
    bool allLanesPaused() const;
    // A refusal that says nothing of the reminder (a refused credential, or the same
    // permanent answer to every reminder in a row): the partner is down for everyone.
    bool refusesEveryone(PartnerLane &lane, const SendOutcome &outcome, const QByteArray &sendKey);
    bool turnCanWait(qint64 now, bool consuming) const;
    void onSent(const Delivery &delivery, const SendOutcome &outcome, qint64 sentAtMs);
    void deadLetter(const Delivery &delivery, const QString &errorClass, const QString &error, int attempts);
    void failUnsent(const Delivery &delivery, bool inDoubt);
    // notApplied: why the message leaves without having taken effect; see Settlement::failure.
    void acknowledge(const Delivery &delivery, const QString &notApplied = {});
    void checkIdle();
    void fail(const QString &message);
    void finish(int exitCode);
    void publishCounters();
    void purgeExpired();
    void sampleQueue();
    void heartbeat();
    // A heartbeat at the next turn of the event loop, however many ask: a partner that
    // starts throttling or a breaker that opens reaches the store at once, so that a
    // redrive reading the heartbeats slows or holds within a moment, not a beat later.
    void heartbeatSoon();
    // Reconciliation: asks each partner with a lookup for the keys left in doubt with it
    // whose grace period has passed (again, less and less often, while it has no answer),
    // and settles them by its answer (EngineStore::settleLookup).
    void reconcileInDoubt();
    void askPartner(int lane, const QByteArray &sendKey);
    void onLookedUp(int lane, const QByteArray &sendKey, const LookupResult &answer);
    // Whether a key's partner is due to be asked again.
    bool lookupDue(const PartnerLane &lane, const KeyReconciliation &state, qint64 now) const;
    void onNotification(const QString &channel);
    qint64 idleWaitMs() const;
    void noteRetriesDue(const QList<Settlement> &settlements, qint64 committedAtMs);

    // One turn at a time is on the store's thread (and, on PostgreSQL, the claims' thread);
    // this is what it was asked to do.
    struct Turn
    {
        TurnRequest request;
        int settling = 0;
        bool consuming = false;
        bool partnersClosed = false; // every breaker open (or partner paused) as it began
        int partsRunning = 0;
        int sendsFinished = 0;   // while the turn ran
        bool slotWaited = false; // a send slot was free with nothing claimed to send
        bool queueNotified = false; // the queue said it has more, perhaps after the lease looked
        TurnResult result; // the parts' results, merged
    };
    enum class TurnPart { Whole, Writes, Claims };
    void runTurnPart(EngineStore *side, const TurnRequest &request, TurnPart part);
    void onTurnPartDone(const TurnResult &result, TurnPart part);
    void onTurnDone(TurnResult result);
    void adjustClaimAhead(const Turn &turn, qsizetype leased);
    bool noteStoreFailure(const TurnResult &result);
    void noteStoreLost(const QString &error);
    void noteStoreBack();
    // The same for a broker's connection, with its own spell: a worker may lose its
    // queue and keep its store, and an operator must know which server to look at.
    void noteQueueLost(const QString &error);
    void noteQueueBack();
    // For a store call beside the turns (heartbeat, sample, clean-up), from the store's
    // thread: what it met, said on the engine's.
    void reportStoreCall(const QString &what, StoreFailure failure, const QString &error);
    void settled(const Turn &turn, qint64 committedAtMs);
    // Runs a store call on the store's thread and waits for it.
    template<typename Function>
    auto onStore(Function function);
    // Queues a store call behind the running turn, without waiting.
    template<typename Function>
    void onStoreLater(Function function);
    bool openSide(EngineStore **side, QThread *thread, const QString &threadName, const QString &queueUrl,
                  int prefetch, EngineStore::Notifications notifications, QString *error);
    void closeSide(EngineStore **side, QThread *thread);
    void closeStore();

    EngineConfig m_config;
    QThread m_storeThread;
    EngineStore *m_storeSide = nullptr; // lives on m_storeThread
    // PostgreSQL: a second connection leases and claims while the first records, as two
    // workers would (see cycle()). Null on SQLite, which has one writer at a time, and
    // with a broker, whose outcomes must commit before its acks.
    QThread m_claimThread;
    EngineStore *m_claimSide = nullptr;
    QString m_storeDisplayName;
    QString m_queueDisplayName; // a broker's, empty for the store's own queue
    qint64 m_queueLostAtMs = 0; // while the broker's connection is lost (0: it is not)
    std::unique_ptr<Turn> m_turn;
    bool m_cycleWanted = false;
    std::vector<std::unique_ptr<PartnerLane>> m_lanes;
    PartnerRoutes m_routes;
    // Children of the engine, so that moveToThread() takes them along.
    QTimer m_cycleTimer{this};
    QTimer m_countersTimer{this};
    QTimer m_retentionTimer{this};
    QTimer m_sampleTimer{this};
    QTimer m_heartbeatTimer{this};
    QTimer m_reconcileTimer{this};
    QTimer m_pauseTimer{this};
    bool m_pausesReading = false;
    bool m_heartbeatSoon = false;
    bool m_reconcileReading = false;  // the store is listing the keys in doubt
    QSet<QByteArray> m_lookingUp;     // keys a partner is being asked for
    bool m_listening = false; // woken by PostgreSQL notifications rather than polling alone
    bool m_idle = false;      // the last turn found nothing to lease
    int m_idleTurns = 0;      // turns in a row that found nothing
    qint64 m_lastLeasedAtMs = 0; // when a turn last leased anything or failed, or the engine started
    qint64 m_nextRetryDueMs = std::numeric_limits<qint64>::max(); // earliest retry this worker scheduled
    qint64 m_lastRetryDueMs = 0; // latest retry this worker scheduled that --until-idle waits for
    bool m_running = false;
    bool m_paused = false;
    bool m_stopping = false;

    int m_inFlight = 0; // leased and not yet settled
    int m_claimAhead = 0; // how far ahead of the free slots turns claim (see leaseAhead())
    // Written by the next cycle, in one transaction; waiting since m_writesWaitingSinceMs.
    qint64 m_writesWaitingSinceMs = 0;
    QList<LedgerUpdate> m_pendingUpdates;
    QList<Attempt> m_pendingAttempts;
    QList<Settlement> m_pendingSettlements;
    EngineCounters m_counters;
    struct StoreFailureSpell
    {
        qint64 permanentSinceMs = 0;
        qint64 lastWarnedMs = 0;
        QString lastError;
    } m_storeFailure; // since the last turn that went through
};

} // namespace once

Q_DECLARE_METATYPE(once::EngineCounters)
