#include "operator/redriverun.h"

#include "model/clock.h"
#include "model/reminder.h"
#include "operator/brokerdeadletters.h"
#include "operator/operations.h"
#include "store/ledger.h"
#include "store/store.h"
#include "text/jsonvalues.h"
#include "text/quantities.h"

#include <QCoreApplication>
#include <QJsonArray>
#include <QJsonObject>
#include <QMap>

#include <cmath>
#include <limits>

namespace once {

namespace {

QString tr(const char *text)
{
    return QCoreApplication::translate("once::RedriveRun", text);
}

// A partner that throttled a worker this recently throttles it still: heartbeats come
// every two seconds, and one 429 between two of them must not read as calm.
constexpr qint64 ThrottledForMs = 5000;
// While a partner throttles and no worker says at what pace it sends, the run goes at this.
constexpr double UnknownThrottledPace = 5;
constexpr qint64 WorkersLookMs = 500; // a few rows; the workers write theirs at once when a partner throttles or fails
constexpr qint64 EndingsLookMs = 1000;
constexpr qint64 EndingsLookIdleMs = 3000; // when neither a canary nor a stop rule waits on them
constexpr int PagesPerTick = 4; // pages read in one tick when they hold only expired letters
constexpr qint64 AchievedWindowMs = 3000;

qint64 timeField(const QJsonObject &object, const QString &name)
{
    const auto time = parseRfc3339(object.value(name).toString());
    return time ? time->utc.toMSecsSinceEpoch() : 0;
}

} // namespace

qint64 redriveLateness(const QByteArray &sendKey, qint64 nowMs)
{
    const auto parts = parseSendKey(sendKey);
    const auto scheduled = parts ? parseRfc3339(parts->canonicalTime) : std::nullopt;
    return scheduled ? std::max<qint64>(0, nowMs - scheduled->utc.toMSecsSinceEpoch()) : 0;
}

void RedrivePreview::count(const DeadLetter &letter, qint64 nowMs, bool keepLetters)
{
    ++total;
    if (letter.hasExpired(nowMs)) {
        ++expired;
        if (expiredLetters.size() < NamedExpired)
            expiredLetters.append({letter.id, letter.sendKey, letter.expiresAtMs, redriveLateness(letter.sendKey, nowMs)});
    } else if (letter.keyState == LedgerState::Applied) {
        ++alreadyApplied;
    } else {
        ++wouldSend;
    }
    if (keepLetters) {
        letters.append(letter);
        letters.last().payload.clear();
    }
}

QString RedriveProgress::phaseName(Phase phase)
{
    switch (phase) {
    case Phase::Moving:
        return QStringLiteral("moving");
    case Phase::Throttled:
        return QStringLiteral("throttled");
    case Phase::HeldBreakerOpen:
        return QStringLiteral("held");
    case Phase::WaitingForCanary:
        return QStringLiteral("waiting-for-canary");
    case Phase::Finished:
        return QStringLiteral("finished");
    }
    return {};
}

QString RedriveResult::summary() const
{
    QString text = moved == 1 ? tr("redrove 1 dead letter") : tr("redrove %1 dead letters").arg(moved);
    if (skippedExpired > 0)
        text += tr("; skipped %1 expired").arg(skippedExpired);
    if (cancelled)
        text += tr("; cancelled");
    if (!stoppedBecause.isEmpty())
        text += QStringLiteral("; ") + stoppedBecause;
    return text;
}

PartnerSendingState PartnerSendingState::of(const QList<WorkerRecord> &workers, qint64 nowMs)
{
    PartnerSendingState state;
    QMap<QString, int> holding;    // partner -> workers whose breaker is open for it
    QMap<QString, double> pace;    // partner -> the throttled workers' pace together
    QMap<QString, qint64> lastThrottled;
    QMap<QString, bool> paceUnknown;
    for (const WorkerRecord &worker : workers) {
        if (!worker.isLive(nowMs))
            continue;
        ++state.liveWorkers;
        if (worker.isHoldingBack(nowMs))
            ++holding[worker.failingPartner.isEmpty() ? worker.partner : worker.failingPartner];
        for (const QJsonValue &value : worker.partners) {
            const QJsonObject partner = value.toObject();
            const QString name = partner.value(QStringLiteral("name")).toString();
            const qint64 throttledAt = timeField(partner, QStringLiteral("throttled_at"));
            const bool slowStart = partner.value(QStringLiteral("slow_start")).toBool();
            if (!slowStart && (!throttledAt || nowMs - throttledAt > ThrottledForMs))
                continue;
            lastThrottled[name] = std::max(lastThrottled.value(name), throttledAt);
            const double workerPace = partner.value(QStringLiteral("pace_per_second")).toDouble();
            if (workerPace > 0)
                pace[name] += workerPace;
            else
                paceUnknown[name] = true;
        }
    }
    if (!holding.isEmpty()) {
        QStringList named;
        for (auto it = holding.cbegin(); it != holding.cend(); ++it)
            named << (it.value() == 1 ? tr("%1's breaker is open on 1 worker").arg(it.key())
                                      : tr("%1's breaker is open on %2 workers").arg(it.key()).arg(it.value()));
        state.heldBy = named.join(QStringLiteral("; "));
    }
    // The slowest partner sets the pace: the letters go to each of them.
    for (auto it = lastThrottled.cbegin(); it != lastThrottled.cend(); ++it) {
        const double partnerPace = paceUnknown.value(it.key()) ? UnknownThrottledPace : pace.value(it.key());
        if (!state.throttledBy.isEmpty() && partnerPace >= state.throttledPace)
            continue;
        state.throttledPace = partnerPace;
        state.throttledBy = it.value() ? tr("%1 throttles the workers (a 429 %2 ago); they send it %3 a second")
                                             .arg(it.key(), formatDuration(std::max<qint64>(0, nowMs - it.value())))
                                             .arg(partnerPace, 0, 'f', 1)
                                       : tr("%1 is ramping up after an outage; the workers send it %2 a second")
                                             .arg(it.key())
                                             .arg(partnerPace, 0, 'f', 1);
    }
    return state;
}

RedriveRun::RedriveRun(Store &store, BrokerQueue *broker, BrokerDeadLetters *brokerLetters, const QString &actor,
                       RedriveOptions options, QObject *parent)
    : QObject(parent), m_store(store), m_broker(broker), m_brokerLetters(brokerLetters),
      m_operations(std::make_unique<Operations>(store.database(), store.queue(), store.ledger(), actor)),
      m_options(std::move(options))
{
    if (m_broker && !m_brokerLetters) {
        m_ownBrokerLetters = std::make_unique<BrokerDeadLetters>(*m_broker, &store.inspector());
        m_brokerLetters = m_ownBrokerLetters.get();
    }
    m_timer.setInterval(TickMs);
    connect(&m_timer, &QTimer::timeout, this, &RedriveRun::tick);
}

RedriveRun::~RedriveRun() = default;

std::optional<QList<DeadLetter>> RedriveRun::readPage(Store &store, BrokerQueue *broker, BrokerDeadLetters &letters,
                                                      const DeadLetterFilter &page, QString *error)
{
    // A broker filters and orders nothing: its pages are cut from one listing.
    return broker ? letters.page(page, error) : store.inspector().deadLetters(page, error);
}

std::optional<RedrivePreview> RedriveRun::preview(Store &store, BrokerQueue *broker,
                                                  BrokerDeadLetters *brokerLetters, const RedriveOptions &options,
                                                  bool keepLetters, QString *error)
{
    std::unique_ptr<BrokerDeadLetters> own;
    if (broker && !brokerLetters) {
        own = std::make_unique<BrokerDeadLetters>(*broker, &store.inspector());
        brokerLetters = own.get();
    }
    RedrivePreview preview;
    const qint64 now = nowMs();
    if (!options.matching) {
        for (const DeadLetter &letter : options.picked)
            preview.count(letter, now, keepLetters);
        return preview;
    }
    if (brokerLetters)
        brokerLetters->forget(); // what is at the broker now, not at the last refresh
    DeadLetterFilter walk = options.matching->walkUntil(now);
    walk.withPayload = false;
    walk.limit = MaxBatch;
    for (;;) {
        const auto page = readPage(store, broker, *brokerLetters, walk, error);
        if (!page)
            return std::nullopt;
        for (const DeadLetter &letter : *page)
            preview.count(letter, now, keepLetters);
        if (page->size() < MaxBatch)
            return preview;
        walk.continueAfter(page->constLast());
    }
}

bool RedriveRun::start(QString *error)
{
    if (m_options.matching) {
        m_options.matching = m_options.matching->walkUntil(nowMs());
        // The run counts what is at a broker now, not at the last refresh.
        if (m_brokerLetters)
            m_brokerLetters->forget();
        const auto counts = m_broker ? m_brokerLetters->counts(*m_options.matching, 0, error)
                                     : m_store.inspector().countDeadLetters(*m_options.matching, 0, error);
        if (!counts)
            return false;
        m_progress.total = counts->tally(m_options.matching->errorClass).letters;
    } else {
        m_progress.total = m_options.picked.size();
    }
    const auto auditId = m_operations->beginAudit(
        {QStringLiteral("redrive"), m_options.detail, m_options.ceilingPerSecond, m_options.reason}, error);
    if (!auditId)
        return false;
    m_auditId = *auditId;
    m_sinceTick.start();
    m_timer.start();
    // The first letters go now: an operator who pressed Redrive sees it move.
    QMetaObject::invokeMethod(this, &RedriveRun::tick, Qt::QueuedConnection);
    return true;
}

void RedriveRun::lookAtWorkers(qint64 now)
{
    QString error;
    const auto workers = m_store.workers().list(&error);
    // A store that does not answer now leaves the last look standing; a move would meet
    // the same error and stop the run with it.
    if (workers)
        m_sending = PartnerSendingState::of(*workers, now);
    m_lastWorkersLookMs = now;
}

bool RedriveRun::lookAtEndings(QString *error)
{
    const auto endings = m_store.inspector().redriveEndings(m_auditId, error);
    if (!endings)
        return false;
    m_progress.endings = *endings;
    return true;
}

std::optional<QList<DeadLetter>> RedriveRun::nextLetters(int count, QString *error)
{
    if (m_options.matching) {
        DeadLetterFilter page = *m_options.matching;
        page.limit = count;
        // A broker moves its own messages; only the store's queue is given the payloads.
        page.withPayload = !m_broker;
        auto letters = readPage(m_store, m_broker, *m_brokerLetters, page, error);
        if (letters && !letters->isEmpty())
            m_options.matching->continueAfter(letters->constLast());
        return letters;
    }
    const QList<DeadLetter> picked = m_options.picked.mid(m_nextPicked, count);
    m_nextPicked += picked.size();
    if (m_broker)
        return picked;
    // Picked from a list without payloads: read them now, a batch at a time. A letter
    // gone meanwhile (another operator) is not found, and so skipped.
    DeadLetterFilter byId;
    for (const DeadLetter &letter : picked)
        byId.ids.append(letter.id);
    return m_store.inspector().deadLetters(byId, error);
}

std::optional<int> RedriveRun::move(const QList<DeadLetter> &letters, QString *error)
{
    if (letters.isEmpty())
        return 0;
    return m_broker ? m_operations->redrive(*m_broker, letters, m_auditId, error)
                    : m_operations->redrive(letters, m_auditId, error);
}

// Each tick: look at the workers and at what became of the letters when due, then move
// what the pace allows. The pace is a credit that grows at the pace and is spent a letter
// at a time, capped at half a second's worth (two letters at least, so that a slow pace
// loses nothing between ticks), so a run held back does not burst when it goes on, and a
// change of pace applies at the next tick.
void RedriveRun::tick()
{
    if (m_finished)
        return;
    if (m_cancelled)
        return finish({});
    const qint64 now = nowMs();
    const qint64 elapsedMs = m_sinceTick.restart();
    if (!m_lastWorkersLookMs || now - m_lastWorkersLookMs >= WorkersLookMs)
        lookAtWorkers(now);
    const bool waitingOnEndings = m_canaryOut || m_options.stopAfterFailures > 0;
    if (m_progress.moved > 0
        && now - m_lastEndingsLookMs >= (waitingOnEndings ? EndingsLookMs : EndingsLookIdleMs)) {
        m_lastEndingsLookMs = now;
        QString error;
        if (!lookAtEndings(&error))
            return finish(error);
    }
    const RedriveEndings &endings = m_progress.endings;
    if (m_options.stopAfterFailures > 0 && endings.failedSends >= m_options.stopAfterFailures) {
        return finish({}, tr("stopped after %1 failed sends of redriven letters (the last: %2)")
                              .arg(endings.failedSends)
                              .arg(endings.lastErrorClass.isEmpty() ? tr("unknown") : endings.lastErrorClass));
    }

    if (m_canaryOut) {
        const qint64 told = std::min(endings.redriven, endings.settled() + endings.keysFailed);
        if (told < endings.redriven) {
            m_progress.phase = RedriveProgress::Phase::WaitingForCanary;
            m_progress.pacePerSecond = 0;
            m_progress.why = tr("waiting for the %1 canary letters: %2 applied, %3 failed")
                                 .arg(endings.redriven)
                                 .arg(endings.applied)
                                 .arg(endings.keysFailed + endings.diedAgain);
            if (m_sending.liveWorkers == 0)
                m_progress.why += tr("; no worker runs on this store");
            emit progressed(m_progress);
            return;
        }
        if (endings.applied == 0 && endings.expired < endings.redriven)
            return finish({}, tr("the canary failed: none of its %1 letters was applied (the last error: %2)")
                                  .arg(endings.redriven)
                                  .arg(endings.lastErrorClass.isEmpty() ? tr("dead again") : endings.lastErrorClass));
        m_canaryOut = false;
        m_canaryDone = true;
    }

    if (m_progress.taken >= m_progress.total)
        return finish({});

    if (!m_sending.heldBy.isEmpty()) {
        m_progress.phase = RedriveProgress::Phase::HeldBreakerOpen;
        m_progress.pacePerSecond = 0;
        m_progress.why = m_sending.heldBy + tr("; waiting until it closes");
        m_credit = 0;
        emit progressed(m_progress);
        return;
    }
    double pace = m_options.ceilingPerSecond;
    m_progress.phase = RedriveProgress::Phase::Moving;
    m_progress.why.clear();
    if (!m_sending.throttledBy.isEmpty() && (pace <= 0 || m_sending.throttledPace < pace)) {
        pace = std::max(1.0, m_sending.throttledPace);
        m_progress.phase = RedriveProgress::Phase::Throttled;
        m_progress.why = m_sending.throttledBy;
    }
    m_progress.pacePerSecond = pace;
    qint64 allowed = MaxBatch;
    if (pace > 0) {
        m_credit = std::min(m_credit + pace * double(elapsedMs) / 1000, std::max(2.0, pace / 2));
        allowed = qint64(std::floor(m_credit));
    }
    const bool canaryGoing = m_options.canary > 0 && !m_canaryDone;
    if (canaryGoing)
        allowed = std::min<qint64>(allowed, m_options.canary - m_progress.moved);

    QString error;
    int pages = 0;
    int batches = 0;
    while (allowed > 0 && m_progress.taken < m_progress.total && pages++ < PagesPerTick) {
        const int count = int(std::min<qint64>({allowed, m_progress.total - m_progress.taken, MaxBatch}));
        const auto letters = nextLetters(count, &error);
        if (!letters)
            return finish(error);
        QList<DeadLetter> going;
        for (const DeadLetter &letter : *letters) {
            if (!m_options.includeExpired && letter.hasExpired(now))
                ++m_progress.skippedExpired;
            else
                going.append(letter);
        }
        const auto moved = move(going, &error);
        if (!moved)
            return finish(error);
        m_progress.moved += *moved;
        m_progress.taken += m_options.matching ? letters->size() : count;
        // Fewer letters match than were counted (moved or discarded elsewhere meanwhile):
        // the walk is at its end.
        if (m_options.matching && letters->size() < count)
            m_progress.taken = m_progress.total;
        allowed -= going.size();
        if (pace > 0)
            m_credit -= double(going.size());
        ++batches;
        emit progressed(m_progress);
    }
    m_movedAt.append({now, m_progress.moved});
    while (m_movedAt.size() > 1 && now - m_movedAt.constFirst().first > AchievedWindowMs)
        m_movedAt.removeFirst();
    const qint64 spanMs = now - m_movedAt.constFirst().first;
    m_progress.achievedPerSecond =
        spanMs > 0 ? double(m_progress.moved - m_movedAt.constFirst().second) * 1000 / double(spanMs) : 0;
    if (canaryGoing && (m_progress.moved >= m_options.canary || m_progress.taken >= m_progress.total)
        && m_progress.moved > 0) {
        m_canaryOut = m_progress.taken < m_progress.total;
        if (!m_canaryOut)
            m_canaryDone = true;
        m_lastEndingsLookMs = 0;
        if (m_canaryOut) {
            m_progress.phase = RedriveProgress::Phase::WaitingForCanary;
            m_progress.pacePerSecond = 0;
            m_progress.why = tr("waiting for the %1 canary letters to be applied or to fail").arg(m_progress.moved);
            emit progressed(m_progress);
        }
    }
    if (batches == 0)
        emit progressed(m_progress); // the pace and its reason, live, while nothing is due
    if (m_progress.taken >= m_progress.total && !m_canaryOut)
        finish({});
}

void RedriveRun::finish(const QString &error, const QString &stoppedBecause)
{
    if (m_finished)
        return;
    m_finished = true;
    m_timer.stop();
    // The walk cut its batches from one listing; what is at the broker now is another.
    if (m_brokerLetters)
        m_brokerLetters->forget();
    QString lookError;
    if (m_progress.moved > 0)
        lookAtEndings(&lookError);
    // The batches counted themselves into the audit row; it says how the run ended. An
    // error's own text may name the store, so the row says only that one stopped it.
    QStringList notes;
    if (m_cancelled)
        notes << QStringLiteral("(cancelled)");
    else if (!error.isEmpty())
        notes << QStringLiteral("(stopped by an error)");
    else if (!stoppedBecause.isEmpty())
        notes << QStringLiteral("(%1)").arg(stoppedBecause);
    if (m_progress.skippedExpired > 0)
        notes << QStringLiteral("(skipped %1 expired)").arg(m_progress.skippedExpired);
    QString noteError;
    if (!notes.isEmpty())
        m_operations->noteInAudit(m_auditId, notes.join(QLatin1Char(' ')), &noteError);
    m_progress.phase = RedriveProgress::Phase::Finished;
    m_progress.pacePerSecond = 0;
    emit progressed(m_progress);
    RedriveResult result;
    result.auditId = m_auditId;
    result.moved = m_progress.moved;
    result.skippedExpired = m_progress.skippedExpired;
    result.cancelled = m_cancelled;
    result.stoppedBecause = stoppedBecause;
    result.error = error.isEmpty() ? noteError : error;
    result.endings = m_progress.endings;
    emit finished(result);
}

} // namespace once
