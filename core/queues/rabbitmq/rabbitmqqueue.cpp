// The queue in RabbitMQ (--queue amqp://USER:PASSWORD@HOST[:PORT]/VHOST?queue=NAME).
//
// Topology, declared by declareTopology() (every declaration is idempotent):
//   exchange NAME          direct, durable: producers publish here, routing key NAME.
//   queue NAME             quorum, durable, bound to exchange NAME with key NAME.
//                          x-delivery-limit 20: a message whose consumers keep dying
//                          before they settle it (a crash loop) ends as a dead letter.
//                          x-dead-letter-exchange "" and x-dead-letter-routing-key
//                          NAME.dead, so what the broker itself dead-letters lands in the
//                          dead-letter queue too (at-least-once dead-lettering, which
//                          needs x-overflow reject-publish).
//   queue NAME.retry.Ns    classic, durable, for N = 1, 5, 30, 120, 600 and 3600 seconds:
//                          x-message-ttl N s, x-dead-letter-exchange NAME with routing key
//                          NAME, so an expired message flows back to the main queue. One
//                          TTL per queue: with per-message TTLs a long delay at the head
//                          of a queue would hold back every shorter one behind it.
//   queue NAME.dead        classic, durable: the dead letters. Classic, because peeking at
//                          them (consume, then requeue) must keep their order.
//
// A delay goes to the shortest tier at least as long (a message is never early, and late
// by less than its tier's step); a delay beyond the longest tier takes several hops: the
// message carries x-once-visible-at, and a consumer that receives it early sends it on
// to the next tier instead of leasing it.
//
// Messages: the JSON body; content_type application/json, delivery_mode 2 (persistent),
// message_id (the id the ledger knows, kept through retries and redrives), timestamp (s);
// headers (integers are 64-bit, times ms since the epoch):
//   x-once-enqueued-at     when the message was first enqueued
//   x-once-redrives        how often an operator redrove it
//   x-once-receives        its deliveries before this publish; the quorum queue's
//                          x-delivery-count adds the deliveries since (crashes)
//   x-once-visible-at      a delayed message is not leased before (delayed only)
//   x-once-send-key, x-once-event-id   copies of what the payload says, for operators
// and on dead letters also x-once-error-class, x-once-last-error, x-once-attempts,
// x-once-first-attempt-at, x-once-last-attempt-at and x-once-dead-at.
//
// Channels: one for the consumer and its acks, one for publishing with publisher
// confirms, one for declarations, counts and the dead-letter queue, so an error there
// (a missing queue closes the channel) never takes the consumer's deliveries with it.

#include "queues/rabbitmq/rabbitmqqueue.h"

#include "model/clock.h"
#include "queues/rabbitmq/rabbitmqmanagement.h"
#include "queues/rabbitmq/rabbitmqsession.h"

#include <QDeadlineTimer>
#include <QUuid>

#include <array>

namespace once {

using namespace amqp;

namespace {

constexpr std::array<int, 6> RetryTierSeconds{1, 5, 30, 120, 600, 3600};
// How long lease() waits for deliveries on their way: long enough to gather a burst,
// short enough never to hold up the engine's turn.
constexpr int LeaseWaitMs = 2;
// Peeking at dead letters ends when this long passes without one (others may hold some).
constexpr int DeadLetterIdleMs = 1000;
// A delayed message this close to its time is due: another hop would only add a tier.
constexpr qint64 DueToleranceMs = 100;
// How long after its tier's TTL a message may take to reach the main queue.
constexpr qint64 TierArrivalMarginMs = 1500;

QByteArray retryQueueName(const QString &name, int seconds)
{
    return QStringLiteral("%1.retry.%2s").arg(name, QString::number(seconds)).toUtf8();
}

// The shortest tier at least as long as the delay, else the longest.
int tierFor(qint64 delayMs)
{
    for (const int seconds : RetryTierSeconds) {
        if (qint64(seconds) * 1000 >= delayMs)
            return seconds;
    }
    return RetryTierSeconds.back();
}

// Sends a message on its way: to the main queue, or to the retry tier of its delay.
// Notes in *arrivals when a message sent to a tier enters the main queue again.
void route(Publication *publication, const QString &name, qint64 delayMs, qint64 now, TierArrivals *arrivals)
{
    if (delayMs > 0) {
        const int tier = tierFor(delayMs);
        publication->exchange = QByteArray(); // the default exchange: routing key = queue
        publication->routingKey = retryQueueName(name, tier);
        publication->headers.setInt(header::VisibleAt, now + delayMs);
        qint64 &arrival = (*arrivals)[tier];
        arrival = std::max(arrival, now + qint64(tier) * 1000);
    } else {
        publication->exchange = name.toUtf8();
        publication->routingKey = name.toUtf8();
        publication->headers.remove(header::VisibleAt);
    }
}

// Sends messages that arrived before their time (a delay beyond the longest tier) on to
// their next tier, as they were.
bool forward(RabbitMqSession &session, const QString &name, const std::vector<Envelope> &early, qint64 now,
             TierArrivals *arrivals, QString *error)
{
    if (early.empty())
        return true;
    std::vector<Publication> hops;
    std::vector<uint64_t> tags;
    for (const auto &envelope : early) {
        const Received received = describe(*envelope, QString(), now);
        Publication hop = copyOf(*envelope, received.id);
        hop.headers.setInt(header::Receives, received.delivery - 1);
        route(&hop, name, *received.visibleAtMs - now, now, arrivals);
        hops.push_back(std::move(hop));
        tags.push_back(envelope->delivery_tag);
    }
    if (session.publish(hops, error) && session.acknowledge(ConsumeChannel, tags, false, error))
        return true;
    QString ignored;
    session.acknowledge(ConsumeChannel, tags, true, &ignored);
    return false;
}

Publication retryCopy(const Lease &lease, const QString &name, qint64 delayMs, qint64 now,
                      TierArrivals *arrivals)
{
    Publication copy = copyOf(*lease.envelope, lease.received.id);
    copy.headers.setInt(header::Receives, lease.received.delivery);
    copy.headers.setInt(header::EnqueuedAt, lease.received.enqueuedAtMs);
    route(&copy, name, delayMs, now, arrivals);
    return copy;
}

Publication deadLetterCopy(const Lease &lease, const QByteArray &deadQueue, const DeadLetterInfo &info, qint64 now)
{
    Publication copy = copyOf(*lease.envelope, lease.received.id);
    copy.exchange = QByteArray(); // the default exchange: routing key = queue
    copy.routingKey = deadQueue;
    copy.headers.remove(header::VisibleAt);
    copy.headers.setInt(header::Receives, lease.received.delivery);
    copy.headers.setInt(header::EnqueuedAt, lease.received.enqueuedAtMs);
    copy.headers.setString(header::ErrorClass, info.errorClass);
    copy.headers.setString(header::LastError, info.lastError);
    copy.headers.setInt(header::Attempts, info.attempts);
    copy.headers.setInt(header::FirstAttemptAt, info.firstAttemptAtMs);
    copy.headers.setInt(header::LastAttemptAt, info.lastAttemptAtMs);
    copy.headers.setInt(header::DeadAt, now);
    if (!info.sendKey.isEmpty())
        copy.headers.setString(header::SendKey, info.sendKey);
    if (!info.eventId.isEmpty())
        copy.headers.setString(header::EventId, info.eventId);
    return copy;
}

// The messages ready in a queue, from a passive declare (which fails if it is missing).
std::optional<qint64> depth(RabbitMqSession &session, const QByteArray &queue, QString *error)
{
    if (!session.channel(AdminChannel, error))
        return std::nullopt;
    const auto *ok =
        amqp_queue_declare(session.connection(), AdminChannel, bytes(queue), 1, 0, 0, 0, amqp_empty_table);
    if (!session.checkLast(AdminChannel, ok,
                           QStringLiteral("looking at queue %1").arg(QString::fromUtf8(queue)), error))
        return std::nullopt;
    return qint64(ok->message_count);
}

// Consumes from the dead-letter queue until wanted letters came or none came for a while
// (others may hold some of those counted). The consumer ends with its channel.
bool consumeDeadLetters(RabbitMqSession &session, const QByteArray &dead, qint64 wanted,
                        std::vector<Envelope> *taken, QString *error)
{
    amqp_connection_state_t connection = session.connection();
    const QByteArray tag = QByteArrayLiteral("once-dead-letters");
    auto &arrived = session.deliveries(AdminChannel);
    // The prefetch keeps the broker from sending more than wanted, when that fits.
    const uint16_t prefetch = wanted <= 65535 ? uint16_t(wanted) : 0;
    if (!session.checkLast(AdminChannel, amqp_basic_qos(connection, AdminChannel, 0, prefetch, 0),
                           QStringLiteral("setting the prefetch"), error) ||
        !session.checkLast(
            AdminChannel,
            amqp_basic_consume(connection, AdminChannel, bytes(dead), bytes(tag), 0, 0, 0, amqp_empty_table),
            QStringLiteral("consuming from queue %1").arg(QString::fromUtf8(dead)), error))
        return false;
    const QString what = QStringLiteral("reading queue %1").arg(QString::fromUtf8(dead));
    for (bool idle = false; !idle && arrived.size() < size_t(wanted) && session.isOpen(AdminChannel);) {
        if (!session.pump(DeadLetterIdleMs, &idle, error))
            return false;
    }
    if (!session.isOpen(AdminChannel))
        return session.fail(QStringLiteral("%1: %2").arg(what, session.takeChannelError(AdminChannel)),
                            error);
    taken->assign(std::make_move_iterator(arrived.begin()), std::make_move_iterator(arrived.end()));
    arrived.clear();
    return true;
}

} // namespace

// ---------------------------------------------------------------------------------------

RabbitMqQueue::RabbitMqQueue(QueueLocation location, QString consumerName, int prefetch)
    : BrokerQueue(std::move(location)), m_consumerName(std::move(consumerName)),
      m_prefetch(std::clamp(prefetch, 1, 65535))
{
}

RabbitMqQueue::~RabbitMqQueue() = default;

std::unique_ptr<RabbitMqQueue> RabbitMqQueue::connect(const QueueLocation &location,
                                                      const QString &consumerName, int prefetch,
                                                      QString *error)
{
    std::unique_ptr<RabbitMqQueue> queue(new RabbitMqQueue(location, consumerName, prefetch));
    if (!queue->session(error))
        return nullptr;
    return queue;
}

bool RabbitMqQueue::connectionLost() const
{
    return !m_session || m_session->broken();
}

RabbitMqSession *RabbitMqQueue::session(QString *error)
{
    if (!m_session || m_session->broken()) {
        // The old connection's deliveries went back to the queue with it, and their
        // leases with this session.
        const bool again = m_session != nullptr;
        m_session.reset();
        auto session = std::make_unique<RabbitMqSession>(location());
        const QString name =
            m_consumerName.isEmpty() ? QStringLiteral("once") : QStringLiteral("once %1").arg(m_consumerName);
        if (!session->open(name, error))
            return nullptr;
        if (again)
            qCInfo(lcRabbitMq).noquote() << "reconnected to" << location().displayName();
        m_session = std::move(session);
    }
    m_session->begin();
    return m_session.get();
}

bool RabbitMqQueue::declareTopology(const QueueTopology &, QString *error)
{
    RabbitMqSession *session = this->session(error);
    if (!session || !session->channel(AdminChannel, error))
        return false;
    amqp_connection_state_t connection = session->connection();
    const QString name = location().name;
    const QByteArray main = name.toUtf8();
    const QByteArray dead = location().deadLetterName().toUtf8();
    const auto declared = [&](const void *ok, const QString &what) {
        return session->checkLast(AdminChannel, ok, what, error);
    };

    if (!declared(amqp_exchange_declare(connection, AdminChannel, bytes(main), amqp_cstring_bytes("direct"),
                                        0, 1, 0, 0, amqp_empty_table),
                  QStringLiteral("declaring exchange %1").arg(name)) ||
        !declared(amqp_queue_declare(connection, AdminChannel, bytes(dead), 0, 1, 0, 0, amqp_empty_table),
                  QStringLiteral("declaring queue %1").arg(QString::fromUtf8(dead))))
        return false;

    FieldTable arguments;
    arguments.setString("x-queue-type", QByteArrayLiteral("quorum"));
    arguments.setInt("x-delivery-limit", DeliveryLimit);
    arguments.setString("x-dead-letter-exchange", QByteArray(""));
    arguments.setString("x-dead-letter-routing-key", dead);
    arguments.setString("x-dead-letter-strategy", QByteArrayLiteral("at-least-once"));
    arguments.setString("x-overflow", QByteArrayLiteral("reject-publish"));
    if (!declared(amqp_queue_declare(connection, AdminChannel, bytes(main), 0, 1, 0, 0, arguments.table()),
                  QStringLiteral("declaring queue %1").arg(name)) ||
        !declared(amqp_queue_bind(connection, AdminChannel, bytes(main), bytes(main), bytes(main),
                                  amqp_empty_table),
                  QStringLiteral("binding queue %1").arg(name)))
        return false;

    for (const int seconds : RetryTierSeconds) {
        const QByteArray retry = retryQueueName(name, seconds);
        FieldTable tier;
        tier.setInt("x-message-ttl", qint64(seconds) * 1000);
        tier.setString("x-dead-letter-exchange", main);
        tier.setString("x-dead-letter-routing-key", main);
        if (!declared(amqp_queue_declare(connection, AdminChannel, bytes(retry), 0, 1, 0, 0, tier.table()),
                      QStringLiteral("declaring queue %1").arg(QString::fromUtf8(retry))))
            return false;
    }
    qCDebug(lcRabbitMq).noquote() << "declared the topology of" << location().displayName();
    return true;
}

bool RabbitMqQueue::enqueue(const QList<OutgoingMessage> &messages, QString *error)
{
    if (messages.isEmpty())
        return true;
    RabbitMqSession *session = this->session(error);
    if (!session)
        return false;
    const qint64 now = nowMs();
    std::vector<Publication> batch;
    batch.reserve(size_t(messages.size()));
    for (const auto &message : messages) {
        Publication publication =
            freshPublication(QUuid::createUuid().toString(QUuid::WithoutBraces), message.payload, now);
        publication.headers.setInt(header::Redrives, message.redriveCount);
        publication.headers.setInt(header::Receives, 0);
        if (!message.sendKey.isEmpty())
            publication.headers.setString(header::SendKey, message.sendKey);
        if (!message.eventId.isEmpty())
            publication.headers.setString(header::EventId, message.eventId);
        route(&publication, location().name, message.delayMs, now, &m_tierArrivals);
        batch.push_back(std::move(publication));
    }
    return session->publish(batch, error);
}

bool RabbitMqQueue::startConsuming(RabbitMqSession &session, QString *error)
{
    if (session.consuming())
        return true;
    if (!session.channel(ConsumeChannel, error))
        return false;
    amqp_connection_state_t connection = session.connection();
    const QByteArray queue = location().name.toUtf8();
    const QByteArray tag = m_consumerName.toUtf8();
    if (!session.checkLast(ConsumeChannel,
                           amqp_basic_qos(connection, ConsumeChannel, 0, uint16_t(m_prefetch), 0),
                           QStringLiteral("setting the prefetch"), error) ||
        !session.checkLast(ConsumeChannel,
                           amqp_basic_consume(connection, ConsumeChannel, bytes(queue), bytes(tag), 0, 0, 0,
                                              amqp_empty_table),
                           QStringLiteral("consuming from queue %1").arg(location().name), error))
        return false;
    session.setConsuming();
    return true;
}

QList<QueueMessage> RabbitMqQueue::lease(int max, qint64 leaseMs, const QString &, QString *error)
{
    QList<QueueMessage> leased;
    if (max <= 0)
        return leased;
    RabbitMqSession *session = this->session(error);
    if (!session || !startConsuming(*session, error))
        return leased;
    auto &arrived = session->deliveries(ConsumeChannel);
    const QDeadlineTimer deadline(LeaseWaitMs);
    while (arrived.size() < size_t(max)) {
        bool idle = false;
        if (!session->pump(int(std::max<qint64>(deadline.remainingTime(), 0)), &idle, error))
            return leased;
        if (idle)
            break;
    }
    if (!session->isOpen(ConsumeChannel)) {
        session->fail(QStringLiteral("consuming from queue %1: %2")
                          .arg(location().name, session->takeChannelError(ConsumeChannel)),
                      error);
        return leased;
    }

    const qint64 now = nowMs();
    std::vector<Envelope> early;
    std::vector<uint64_t> clashes;
    while (!arrived.empty() && leased.size() < max) {
        Envelope envelope = std::move(arrived.front());
        arrived.pop_front();
        // Producers should set message_id: without one, a redelivery looks like another
        // message to the ledger.
        const QString fallbackId = QStringLiteral("amqp-%1-%2-%3")
                                       .arg(m_consumerName, session->connectionToken,
                                            QString::number(envelope->delivery_tag));
        Received received = describe(*envelope, fallbackId, now);
        if (received.visibleAtMs && *received.visibleAtMs - now > DueToleranceMs) {
            early.push_back(std::move(envelope));
            continue;
        }
        auto key = std::pair{received.id, received.delivery};
        if (session->leases.count(key)) {
            // The same message twice at once (a producer reusing an id): back it goes,
            // to come again with the next delivery number.
            clashes.push_back(envelope->delivery_tag);
            continue;
        }
        QueueMessage message;
        message.id = received.id;
        message.payload = toByteArray(envelope->message.body);
        message.delivery = received.delivery;
        message.enqueuedAtMs = received.enqueuedAtMs;
        message.leaseUntilMs = now + leaseMs;
        message.redriveCount = received.redrives;
        const uint64_t tag = envelope->delivery_tag;
        session->leases.emplace(std::move(key), Lease{tag, std::move(envelope), std::move(received)});
        leased.append(std::move(message));
    }
    if (!session->acknowledge(ConsumeChannel, clashes, true, error) ||
        !forward(*session, location().name, early, now, &m_tierArrivals, error)) {
        for (const auto &message : std::as_const(leased))
            session->leases.erase({message.id, message.delivery});
        return {};
    }
    return leased;
}

bool RabbitMqQueue::settle(const QList<Settlement> &settlements, QString *error)
{
    if (settlements.isEmpty())
        return true;
    RabbitMqSession *session = this->session(error);
    if (!session)
        return false;
    const qint64 now = nowMs();
    std::vector<uint64_t> acks;
    std::vector<std::pair<QString, int>> acked;
    std::vector<Publication> copies;
    std::vector<uint64_t> copied;
    std::vector<std::pair<QString, int>> copiedKeys;
    for (const auto &settlement : settlements) {
        const auto key = std::pair{settlement.messageId, settlement.delivery};
        const auto found = session->leases.find(key);
        if (found == session->leases.end()) {
            qCDebug(lcRabbitMq).noquote() << "ignoring a settlement of" << settlement.messageId << "delivery"
                                          << settlement.delivery << "(lease lost)";
            continue;
        }
        const Lease &lease = found->second;
        if (settlement.kind == Settlement::Kind::Ack) {
            acks.push_back(lease.tag);
            acked.push_back(key);
            continue;
        }
        copies.push_back(
            settlement.kind == Settlement::Kind::Retry
                ? retryCopy(lease, location().name, settlement.delayMs, now, &m_tierArrivals)
                : deadLetterCopy(lease, location().deadLetterName().toUtf8(), settlement.deadLetter, now));
        copied.push_back(lease.tag);
        copiedKeys.push_back(key);
    }
    const auto forget = [session](const std::vector<std::pair<QString, int>> &keys) {
        for (const auto &key : keys)
            session->leases.erase(key);
    };
    if (!session->acknowledge(ConsumeChannel, acks, false, error))
        return false;
    forget(acked);
    // The originals are acked only once the broker holds their copies; until then a
    // failed settle can be tried again.
    if (!session->publish(copies, error) || !session->acknowledge(ConsumeChannel, copied, false, error))
        return false;
    forget(copiedKeys);
    return true;
}

std::optional<QueueCounts> RabbitMqQueue::counts(QString *error)
{
    RabbitMqSession *session = this->session(error);
    if (!session || !session->channel(AdminChannel, error))
        return std::nullopt;
    QueueCounts counts;
    // The tiers before the main queue: a message that leaves a tier between the two
    // looks is then counted in the main queue, not in neither.
    for (const int seconds : RetryTierSeconds) {
        const auto delayed = depth(*session, retryQueueName(location().name, seconds), error);
        if (!delayed)
            return std::nullopt;
        counts.delayed += *delayed;
        // The broker does not say when a delayed message is due, only that it is within
        // its tier's TTL.
        if (*delayed > 0 && !counts.nextVisibleInMs)
            counts.nextVisibleInMs = qint64(seconds) * 1000;
    }
    // And while the broker dead-letters a message from its tier to the main queue, it
    // is in neither: what this process sent to a tier is due until it has had time to
    // arrive (tst_delivery_rabbitmq saw an --until-idle worker exit with its retries on
    // their way back, after a 2 s delay went to the 5 s tier).
    const qint64 now = nowMs();
    for (auto it = m_tierArrivals.begin(); it != m_tierArrivals.end();) {
        if (now > it->second + TierArrivalMarginMs) {
            it = m_tierArrivals.erase(it);
            continue;
        }
        const qint64 inMs = std::max<qint64>(it->second - now, 0);
        counts.nextVisibleInMs = std::min(counts.nextVisibleInMs.value_or(inMs), inMs);
        ++it;
    }
    const auto ready = depth(*session, location().name.toUtf8(), error);
    const auto dead = ready ? depth(*session, location().deadLetterName().toUtf8(), error) : std::nullopt;
    if (!dead)
        return std::nullopt;
    counts.ready = *ready;
    counts.dead = *dead;
    counts.unavailable = rabbitMqManagementProblem(location(), &counts);
    // What this consumer holds is in flight even where the management API cannot say,
    // or has not said yet (its statistics lag by seconds): read what is on its way, so
    // that a worker asking whether it is idle counts it.
    for (bool idle = false; !idle && session->consuming();) {
        if (!session->pump(0, &idle, error))
            return std::nullopt;
    }
    counts.inFlight = std::max(counts.inFlight, session->held());
    return counts;
}

std::optional<QList<DeadLetter>> RabbitMqQueue::deadLetters(int limit, QString *error)
{
    return takeDeadLetters(Take::Peek, limit, {}, error);
}

std::optional<QList<DeadLetter>>
RabbitMqQueue::redrive(int max, const std::function<bool(const DeadLetter &)> &select, QString *error)
{
    return takeDeadLetters(Take::Redrive, max, select, error);
}

std::optional<QList<DeadLetter>>
RabbitMqQueue::discard(int max, const std::function<bool(const DeadLetter &)> &select, QString *error)
{
    return takeDeadLetters(Take::Discard, max, select, error);
}

// Takes up to max dead letters from the head of the dead-letter queue with a consumer of
// its own (deliveries stream in, where basic.get would cost a round trip each), then
// acks the selected ones - when redriving, only after the broker confirmed their copies
// on the main queue - and lets the rest go back to their places. A peek selects none.
std::optional<QList<DeadLetter>>
RabbitMqQueue::takeDeadLetters(Take take, int max, const std::function<bool(const DeadLetter &)> &select,
                               QString *error)
{
    RabbitMqSession *session = this->session(error);
    if (!session)
        return std::nullopt;
    const QByteArray dead = location().deadLetterName().toUtf8();
    const auto count = depth(*session, dead, error);
    if (!count)
        return std::nullopt;
    const qint64 wanted = std::min<qint64>(std::max(max, 0), *count);
    QList<DeadLetter> letters;
    if (wanted == 0)
        return letters;
    std::vector<Envelope> taken;
    if (!consumeDeadLetters(*session, dead, wanted, &taken, error))
        return std::nullopt;

    std::vector<uint64_t> chosen;
    std::vector<Publication> copies;
    // Letters beyond the wanted ones came along with the consumer: they stay.
    for (size_t i = 0; i < taken.size() && i < size_t(wanted); ++i) {
        const amqp_envelope_t &envelope = *taken[i];
        DeadLetter letter = toDeadLetter(envelope, contentId(envelope));
        if (take == Take::Peek || !select(letter)) {
            if (take == Take::Peek)
                letters.append(std::move(letter));
            continue;
        }
        chosen.push_back(envelope.delivery_tag);
        if (take == Take::Redrive) {
            // Back on the main queue (the ledger gives the key a fresh budget of attempts).
            // Its deliveries so far go along, so that delivery numbers keep growing and
            // each one names one delivery in the history.
            Publication copy = copyOf(envelope, letter.id);
            copy.exchange = location().name.toUtf8();
            copy.routingKey = copy.exchange;
            copy.headers.setInt(header::Redrives, letter.redriveCount + 1);
            copy.headers.setInt(header::Receives, letter.receiveCount);
            copy.headers.remove(header::VisibleAt);
            copies.push_back(std::move(copy));
        }
        letters.append(std::move(letter));
    }
    // The rest go back in their places when the channel closes. A requeue by nack would
    // do that too, but the broker may answer the next passive declare before it did.
    if (!session->publish(copies, error) || !session->acknowledge(AdminChannel, chosen, false, error)) {
        QString ignored;
        session->closeChannel(AdminChannel, &ignored);
        return std::nullopt;
    }
    if (!session->closeChannel(AdminChannel, error))
        return std::nullopt;
    return letters;
}

} // namespace once
