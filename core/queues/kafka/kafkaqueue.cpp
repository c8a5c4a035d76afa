#include "queues/kafka/kafkaqueue.h"

#include "model/clock.h"
#include "model/reminder.h"
#include "queues/deadletteraccount.h"
#include "queues/kafka/kafkalocation.h"
#include "queues/messageattributes.h"
#include "text/quantities.h"

#include <QJsonDocument>
#include <QLoggingCategory>
#include <QUuid>

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace once {

Q_LOGGING_CATEGORY(lcKafka, "once.queues.kafka")

namespace {

// How long an idle lease waits for the cluster's next message: short, as the engine's
// turn waits with it, and SIGTERM too.
constexpr int IdleWaitMs = 250;
constexpr int CallTimeoutMs = 10000;
constexpr int ProduceTimeoutMs = 30000;
// A member whose worker stops polling (a store outage that holds its turns) leaves the
// group after this long (or its session, if longer), and rejoins at its next lease; a
// rebalance waits no longer than this for the members to rejoin. Longer than the
// longest wait between two probes of a failing partner (30 s): a worker whose partners
// are all down leases only to probe them, and at 15 s every outage cost its partitions a
// rebalance at each probe.
constexpr int MaxPollIntervalMs = 45000;
constexpr int MaxListedDeadLetters = 10000;
// Each partition holds up to this many windows taken and not settled: one handed out to
// the engine, the rest fetched and waiting (pauseOrResume).
constexpr int FetchedWindows = 2;
// How long a topic's partition count is trusted: partitions are added rarely, by hand.
constexpr qint64 PartitionCountLifeMs = 60000;
// A cluster that cannot make topics (no rights, no controller: librdkafka's mock) is not
// waited for long: init says so and goes on.
constexpr int CreateTopicsTimeoutMs = 2000;
// Topics once init makes: partitions, and how long each keeps its messages.
constexpr int TopicPartitions = 6;
const char *const RetryRetentionMs = "604800000"; // 7 days, beyond the longest backoff
const char *const DeadRetentionMs = "-1";         // dead letters stay until an operator acts

QList<QPair<QByteArray, QByteArray>> headersOf(rd_kafka_message_t *message)
{
    QList<QPair<QByteArray, QByteArray>> all;
    rd_kafka_headers_t *headers = nullptr;
    if (rd_kafka_message_headers(message, &headers) != RD_KAFKA_RESP_ERR_NO_ERROR)
        return all;
    const char *name = nullptr;
    const void *value = nullptr;
    size_t size = 0;
    for (size_t i = 0; rd_kafka_header_get_all(headers, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i)
        all.append({QByteArray(name), QByteArray(static_cast<const char *>(value), qsizetype(size))});
    return all;
}

QByteArray header(const QList<QPair<QByteArray, QByteArray>> &headers, const QString &name)
{
    const QByteArray wanted = name.toLatin1();
    for (auto it = headers.crbegin(); it != headers.crend(); ++it) {
        if (it->first == wanted)
            return it->second;
    }
    return {};
}

void setHeader(QList<QPair<QByteArray, QByteArray>> *headers, const QString &name, const QByteArray &value)
{
    const QByteArray wanted = name.toLatin1();
    headers->removeIf([&wanted](const auto &h) { return h.first == wanted; });
    headers->append({wanted, value});
}

// A commit the group refused because it is rebalancing, or because this member was
// fenced out of it: the partition's next owner resumes from the last commit, and the
// ledger answers what is delivered again. Not an error.
bool refusedByRebalance(rd_kafka_resp_err_t err)
{
    return err == RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS || err == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION
           || err == RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID || err == RD_KAFKA_RESP_ERR__STATE
           || err == RD_KAFKA_RESP_ERR__ASSIGNMENT_LOST || err == RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID;
}

QString text(rd_kafka_resp_err_t err)
{
    return QString::fromUtf8(rd_kafka_err2str(err));
}

void logFromLibrary(const rd_kafka_t *, int level, const char *facility, const char *line)
{
    // librdkafka's own lines never hold the SASL password.
    if (level <= 3)
        qCWarning(lcKafka, "%s: %s", facility, line);
    else
        qCDebug(lcKafka, "%s: %s", facility, line);
}

// A watch with a thread of its own: it wakes the worker when librdkafka says messages
// arrived (from librdkafka's thread) and when the earliest held retry falls due.
class KafkaWatch final : public BrokerQueue::MessageWatch
{
public:
    KafkaWatch(rd_kafka_t *consumer, std::shared_ptr<std::atomic<qint64>> nextDueMs, std::function<void()> wake)
        : m_queue(rd_kafka_queue_get_consumer(consumer)), m_nextDueMs(std::move(nextDueMs)), m_wake(std::move(wake))
    {
        if (m_queue)
            rd_kafka_queue_cb_event_enable(m_queue, &KafkaWatch::arrived, this);
        m_thread = std::thread([this] { run(); });
    }
    ~KafkaWatch() override
    {
        if (m_queue) {
            rd_kafka_queue_cb_event_enable(m_queue, nullptr, nullptr);
            rd_kafka_queue_destroy(m_queue);
        }
        m_stopping = true;
        m_thread.join();
    }

private:
    static void arrived(rd_kafka_t *, void *opaque) { static_cast<KafkaWatch *>(opaque)->m_wake(); }
    void run()
    {
        while (!m_stopping) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            qint64 due = m_nextDueMs->load();
            if (due > 0 && nowMs() >= due && m_nextDueMs->compare_exchange_strong(due, 0))
                m_wake();
        }
    }

    rd_kafka_queue_t *m_queue = nullptr;
    std::shared_ptr<std::atomic<qint64>> m_nextDueMs;
    std::function<void()> m_wake;
    std::atomic<bool> m_stopping{false};
    std::thread m_thread;
};

void onRebalance(rd_kafka_t *, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *partitions, void *opaque)
{
    static_cast<KafkaQueue *>(opaque)->rebalanced(err, partitions);
}

void onCommitted(rd_kafka_t *, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *offsets, void *opaque)
{
    static_cast<KafkaQueue *>(opaque)->committed(err, offsets, KafkaQueue::CommitWait::NoWait);
}

void onCommittedNow(rd_kafka_t *, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *offsets, void *opaque)
{
    static_cast<KafkaQueue *>(opaque)->committed(err, offsets, KafkaQueue::CommitWait::ForAnswer);
}

struct ProduceReport
{
    int pending = 0;
    int failed = 0;
    QString firstError;
};

void onDelivered(rd_kafka_t *, const rd_kafka_message_t *message, void *)
{
    auto *report = static_cast<ProduceReport *>(message->_private);
    if (!report)
        return;
    --report->pending;
    if (message->err) {
        ++report->failed;
        if (report->firstError.isEmpty())
            report->firstError = text(message->err);
    }
}

} // namespace

std::unique_ptr<KafkaQueue> KafkaQueue::connect(const QueueLocation &location, const QString &consumerName, int prefetch,
                                                QString *error)
{
    std::unique_ptr<KafkaQueue> queue(new KafkaQueue(location, consumerName, prefetch));
    // Connecting is lazy at librdkafka; the producer is made here, so that a bad setting
    // is said at once.
    if (!queue->ensureProducer(error))
        return nullptr;
    return queue;
}

KafkaQueue::KafkaQueue(QueueLocation location, QString consumerName, int prefetch)
    : BrokerQueue(std::move(location)), m_consumerName(std::move(consumerName)), m_window(std::max(1, prefetch))
{
}

KafkaQueue::~KafkaQueue()
{
    if (m_consumer) {
        // Leaves the group at once, committing what is settled, so that the partitions
        // move to the other members now rather than after the session times out.
        commit(CommitWait::ForAnswer);
        rd_kafka_consumer_close(m_consumer);
        rd_kafka_destroy(m_consumer);
    }
    for (rd_kafka_t *reader : {m_deadReader, m_groupReader}) {
        if (reader) {
            rd_kafka_consumer_close(reader);
            rd_kafka_destroy(reader);
        }
    }
    if (m_producer) {
        rd_kafka_flush(m_producer, ProduceTimeoutMs);
        rd_kafka_destroy(m_producer);
    }
}

rd_kafka_t *KafkaQueue::newClient(Client kind, const QString &group, QString *error)
{
    const bool consumer = kind != Client::Producer;
    const KafkaDetails &details = kafkaDetails(location());
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char reason[512];
    QString failed;
    const auto set = [&](const char *name, const QString &value) {
        if (failed.isEmpty()
            && rd_kafka_conf_set(conf, name, value.toUtf8().constData(), reason, sizeof reason) != RD_KAFKA_CONF_OK)
            failed = QStringLiteral("%1: %2").arg(QString::fromLatin1(name), QString::fromUtf8(reason));
    };
    set("bootstrap.servers", details.bootstrap.join(QLatin1Char(',')));
    set("client.id", QStringLiteral("once-") + (m_consumerName.isEmpty() ? QStringLiteral("client") : m_consumerName));
    rd_kafka_conf_set_log_cb(conf, &logFromLibrary);
    if (!details.security.isEmpty())
        set("security.protocol", details.security);
    if (details.security.startsWith(QLatin1String("sasl"))) {
        set("sasl.mechanism", details.mechanism);
        set("sasl.username", location().user);
        const QString password =
            location().password.isEmpty() ? qEnvironmentVariable("ONCE_KAFKA_PASSWORD") : location().password;
        set("sasl.password", password);
    }
    if (!details.caFile.isEmpty())
        set("ssl.ca.location", details.caFile);
    if (consumer) {
        set("group.id", group);
        set("enable.auto.commit", QStringLiteral("false"));
        set("enable.auto.offset.store", QStringLiteral("false"));
        set("auto.offset.reset", QStringLiteral("earliest"));
        set("session.timeout.ms", QString::number(details.sessionTimeoutMs));
        set("heartbeat.interval.ms", QString::number(details.sessionTimeoutMs / 4));
        set("max.poll.interval.ms", QString::number(std::max(MaxPollIntervalMs, details.sessionTimeoutMs)));
        set("allow.auto.create.topics", QStringLiteral("false"));
        if (kind == Client::Member) {
            rd_kafka_conf_set_opaque(conf, this);
            rd_kafka_conf_set_rebalance_cb(conf, &onRebalance);
            rd_kafka_conf_set_offset_commit_cb(conf, &onCommitted);
        }
    } else {
        set("acks", QStringLiteral("all"));
        set("enable.idempotence", QStringLiteral("true"));
        set("linger.ms", QStringLiteral("2"));
        set("message.timeout.ms", QString::number(ProduceTimeoutMs));
        rd_kafka_conf_set_dr_msg_cb(conf, &onDelivered);
    }
    if (!failed.isEmpty()) {
        rd_kafka_conf_destroy(conf);
        *error = QStringLiteral("Kafka: cannot set %1").arg(failed);
        return nullptr;
    }
    rd_kafka_t *client = rd_kafka_new(consumer ? RD_KAFKA_CONSUMER : RD_KAFKA_PRODUCER, conf, reason, sizeof reason);
    if (!client) {
        rd_kafka_conf_destroy(conf);
        *error = QStringLiteral("Kafka: %1").arg(QString::fromUtf8(reason));
        return nullptr;
    }
    if (consumer)
        rd_kafka_poll_set_consumer(client);
    return client;
}

bool KafkaQueue::ensureProducer(QString *error)
{
    if (!m_producer)
        m_producer = newClient(Client::Producer, {}, error);
    return m_producer != nullptr;
}

bool KafkaQueue::ensureConsumer(QString *error)
{
    if (m_consumer)
        return true;
    m_consumer = newClient(Client::Member, kafkaDetails(location()).group, error);
    if (!m_consumer)
        return false;
    rd_kafka_topic_partition_list_t *topics = rd_kafka_topic_partition_list_new(2);
    const QByteArray main = location().name.toUtf8();
    const QByteArray retry = kafkaRetryTopic(location().name).toUtf8();
    rd_kafka_topic_partition_list_add(topics, main.constData(), RD_KAFKA_PARTITION_UA);
    rd_kafka_topic_partition_list_add(topics, retry.constData(), RD_KAFKA_PARTITION_UA);
    const rd_kafka_resp_err_t err = rd_kafka_subscribe(m_consumer, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (err) {
        *error = QStringLiteral("Kafka: cannot subscribe to %1: %2").arg(location().name, text(err));
        rd_kafka_destroy(m_consumer);
        m_consumer = nullptr;
        return false;
    }
    return true;
}

void KafkaQueue::rebalanced(int err, rd_kafka_topic_partition_list_t *partitions)
{
    QStringList names;
    for (int i = 0; i < partitions->cnt; ++i)
        names << QStringLiteral("%1[%2]").arg(QString::fromUtf8(partitions->elems[i].topic)).arg(partitions->elems[i].partition);
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        qCInfo(lcKafka, "assigned %s", qPrintable(names.join(u", ")));
        rd_kafka_topic_partition_list_t *commits = rd_kafka_topic_partition_list_copy(partitions);
        if (rd_kafka_committed(m_consumer, commits, CallTimeoutMs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
            for (int i = 0; i < commits->cnt; ++i) {
                if (commits->elems[i].offset >= 0)
                    m_resumeAt.insert({QString::fromUtf8(commits->elems[i].topic), int(commits->elems[i].partition)},
                                      commits->elems[i].offset);
            }
        }
        rd_kafka_topic_partition_list_destroy(commits);
        rd_kafka_assign(m_consumer, partitions);
        return;
    }
    // Revoked (or lost): what is settled is committed, and what is still in flight on those
    // partitions is abandoned here. Its sends go on under their claims; the next owner
    // starts from the commit, and the ledger answers each redelivery (a duplicate, or a
    // claim still held: busy).
    qCInfo(lcKafka, "revoked %s", qPrintable(names.join(u", ")));
    if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS && !rd_kafka_assignment_lost(m_consumer))
        commit(CommitWait::ForAnswer);
    for (int i = 0; i < partitions->cnt; ++i)
        forget({QString::fromUtf8(partitions->elems[i].topic), int(partitions->elems[i].partition)});
    m_resumeAt.clear();
    rd_kafka_assign(m_consumer, nullptr);
}

void KafkaQueue::forget(const PartitionKey &partition)
{
    if (const auto state = m_partitions.constFind(partition); state != m_partitions.cend() && state->offsets.next() >= 0)
        m_revoked.insert(partition, state->offsets);
    m_partitions.remove(partition);
    m_held.removeIf([&partition](const auto &held) { return held.value().partition == partition; });
}

// A partition that resumes further on than the group's commit skipped offsets: messages
// the cluster deleted before the group read them (retention, with the workers down or far
// behind), and reminders lost before any worker saw them; or gaps that never held a
// reminder (compaction, transaction markers), which are not said. The oldest offset the
// cluster still has tells the two apart.
void KafkaQueue::noteDeletedUnread(const PartitionKey &partition, qint64 resumeAt, qint64 firstOffset)
{
    if (firstOffset <= resumeAt)
        return;
    int64_t low = 0;
    int64_t high = 0;
    const QByteArray topic = partition.first.toUtf8();
    if (rd_kafka_query_watermark_offsets(m_consumer, topic.constData(), partition.second, &low, &high, CallTimeoutMs)
        || low <= resumeAt)
        return;
    qCWarning(lcKafka,
              "%s[%d]: the cluster deleted offsets %lld to %lld (%lld messages) before this group read them "
              "(retention): those reminders were lost unread",
              topic.constData(), partition.second, static_cast<long long>(resumeAt), static_cast<long long>(low - 1),
              static_cast<long long>(low - resumeAt));
}

bool KafkaQueue::produce(const QList<Outgoing> &messages, QString *error)
{
    if (!ensureProducer(error))
        return false;
    ProduceReport report;
    for (const Outgoing &message : messages) {
        const QByteArray topic = message.topic.toUtf8();
        rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
        do {
            rd_kafka_headers_t *headers = rd_kafka_headers_new(size_t(message.headers.size()));
            for (const auto &[name, value] : message.headers)
                rd_kafka_header_add(headers, name.constData(), name.size(), value.constData(), value.size());
            err = rd_kafka_producev(
                m_producer, RD_KAFKA_V_TOPIC(topic.constData()),
                RD_KAFKA_V_KEY(message.key.isEmpty() ? nullptr : const_cast<char *>(message.key.constData()),
                               size_t(message.key.size())),
                RD_KAFKA_V_VALUE(const_cast<char *>(message.value.constData()), size_t(message.value.size())),
                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(headers), RD_KAFKA_V_OPAQUE(&report),
                RD_KAFKA_V_END);
            if (err)
                rd_kafka_headers_destroy(headers);
            if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL)
                rd_kafka_poll(m_producer, 100);
        } while (err == RD_KAFKA_RESP_ERR__QUEUE_FULL);
        if (err) {
            *error = QStringLiteral("Kafka: cannot publish to %1: %2").arg(message.topic, text(err));
            rd_kafka_flush(m_producer, ProduceTimeoutMs);
            return false;
        }
        ++report.pending;
    }
    rd_kafka_flush(m_producer, ProduceTimeoutMs);
    if (report.pending > 0) {
        // The reports still to come point at this frame: wait them out before it goes.
        while (report.pending > 0)
            rd_kafka_poll(m_producer, 1000);
    }
    if (report.failed > 0) {
        *error = QStringLiteral("Kafka: %1 of %2 messages were not taken by the cluster: %3")
                     .arg(report.failed)
                     .arg(messages.size())
                     .arg(report.firstError);
        return false;
    }
    return true;
}

bool KafkaQueue::enqueue(const QList<OutgoingMessage> &messages, QString *error)
{
    const qint64 now = nowMs();
    QList<Outgoing> out;
    out.reserve(messages.size());
    for (const OutgoingMessage &message : messages) {
        Outgoing one;
        one.topic = message.delayMs > 0 ? kafkaRetryTopic(location().name) : location().name;
        one.key = message.sendKey;
        one.value = message.payload;
        setHeader(&one.headers, attribute::Id, QUuid::createUuid().toString(QUuid::WithoutBraces).toLatin1());
        setHeader(&one.headers, attribute::EnqueuedAt, QByteArray::number(now));
        if (message.redriveCount > 0)
            setHeader(&one.headers, attribute::Redrives, QByteArray::number(message.redriveCount));
        if (message.delayMs > 0)
            setHeader(&one.headers, attribute::VisibleAt, QByteArray::number(now + message.delayMs));
        out.append(std::move(one));
    }
    return produce(out, error);
}

void KafkaQueue::take(rd_kafka_message_t *message)
{
    const QString topic = QString::fromUtf8(rd_kafka_topic_name(message->rkt));
    const PartitionKey key{topic, int(message->partition)};
    if (const auto resumeAt = m_resumeAt.constFind(key); resumeAt != m_resumeAt.cend()) {
        noteDeletedUnread(key, *resumeAt, message->offset);
        m_resumeAt.erase(resumeAt);
    }
    PartitionState &state = m_partitions[key];
    if (state.offsets.isOpen(message->offset))
        return; // fetched again while this process still has it
    if (const auto revoked = m_revoked.find(key); revoked != m_revoked.end()) {
        if (revoked->wasSettled(message->offset)) {
            // Settled here before the partition was lost, its commit refused or lost: taken
            // and settled at once, so that the next commit moves past it. A keyless message
            // would otherwise be dead-lettered again: no send key, nothing in the ledger.
            qCDebug(lcKafka, "%s[%d] offset %lld was settled here before a rebalance; skipped", qPrintable(topic),
                    int(message->partition), static_cast<long long>(message->offset));
            state.offsets.take(message->offset);
            state.offsets.settle(message->offset);
            return;
        }
        if (message->offset >= revoked->next())
            m_revoked.erase(revoked);
    }
    Fetched fetched;
    fetched.topic = topic;
    fetched.partition = int(message->partition);
    fetched.offset = message->offset;
    if (message->key_len > 0)
        fetched.key = QByteArray(static_cast<const char *>(message->key), qsizetype(message->key_len));
    fetched.headers = headersOf(message);
    QueueMessage &out = fetched.message;
    out.id = QString::fromUtf8(header(fetched.headers, attribute::Id));
    if (out.id.isEmpty())
        out.id = QStringLiteral("%1/%2/%3").arg(topic).arg(message->partition).arg(message->offset);
    out.payload = QByteArray(static_cast<const char *>(message->payload), qsizetype(message->len));
    out.redriveCount = header(fetched.headers, attribute::Redrives).toInt();
    rd_kafka_timestamp_type_t type;
    const qint64 timestamp = rd_kafka_message_timestamp(message, &type);
    out.enqueuedAtMs = header(fetched.headers, attribute::EnqueuedAt).toLongLong();
    if (out.enqueuedAtMs <= 0)
        out.enqueuedAtMs = timestamp > 0 ? timestamp : nowMs();
    fetched.visibleAtMs = header(fetched.headers, attribute::VisibleAt).toLongLong();
    state.offsets.take(message->offset);
    state.waiting.push_back(std::move(fetched));
}

void KafkaQueue::handOut(int max, qint64 leaseMs, QList<QueueMessage> *leased)
{
    const qint64 now = nowMs();
    QList<PartitionKey> keys = m_partitions.keys();
    std::sort(keys.begin(), keys.end());
    if (keys.isEmpty())
        return;
    // One from each partition in turn, starting where the last hand-out stopped.
    bool handed = true;
    while (handed && leased->size() < max) {
        handed = false;
        for (int i = 0; i < keys.size() && leased->size() < max; ++i) {
            const PartitionKey &key = keys.at((m_nextPartition + i) % keys.size());
            PartitionState &state = m_partitions[key];
            if (state.waiting.empty() || state.handedOut() >= m_window)
                continue;
            const Fetched &next = state.waiting.front();
            if (next.visibleAtMs > now || m_held.contains(next.message.id))
                continue; // not due yet; or its id is still in flight here (a copy of it)
            QueueMessage message = next.message;
            message.delivery = header(next.headers, attribute::Receives).toInt() + ++state.handings[next.offset];
            message.leaseUntilMs = now + leaseMs;
            m_held.insert(message.id, Held{message.delivery, key, next.offset, next.key, next.message.payload, next.headers});
            state.waiting.pop_front();
            leased->append(std::move(message));
            handed = true;
        }
        m_nextPartition = (m_nextPartition + 1) % std::max<qsizetype>(1, keys.size());
    }
}

void KafkaQueue::pauseOrResume()
{
    if (!m_consumer)
        return;
    const qint64 now = nowMs();
    rd_kafka_topic_partition_list_t *pause = rd_kafka_topic_partition_list_new(4);
    rd_kafka_topic_partition_list_t *resume = rd_kafka_topic_partition_list_new(4);
    QList<QByteArray> names; // the lists hold pointers into these
    for (auto it = m_partitions.begin(); it != m_partitions.end(); ++it) {
        PartitionState &state = it.value();
        // Full: a window handed out and a window fetched ahead of it, taken and not
        // settled. Fetching only up to the window, each settle had to wait for a fetch
        // (resume, request, answer) before the next hand-out: a worker whose claims do not
        // run ahead of its sends (--in-doubt hold) sent a tenth as fast. A retry partition
        // whose next message is not due fetches nothing more until it is.
        const bool full = state.offsets.open() >= FetchedWindows * m_window;
        const bool early = !state.waiting.empty() && state.waiting.front().visibleAtMs > now;
        const bool wanted = full || early;
        if (wanted == state.paused)
            continue;
        state.paused = wanted;
        names.append(it.key().first.toUtf8());
        rd_kafka_topic_partition_list_add(wanted ? pause : resume, names.constLast().constData(), it.key().second);
    }
    qint64 nextDue = 0;
    for (const PartitionState &state : std::as_const(m_partitions)) {
        if (!state.waiting.empty() && state.waiting.front().visibleAtMs > now)
            nextDue = nextDue ? std::min(nextDue, state.waiting.front().visibleAtMs) : state.waiting.front().visibleAtMs;
    }
    m_nextDueMs->store(nextDue);
    if (pause->cnt > 0)
        rd_kafka_pause_partitions(m_consumer, pause);
    if (resume->cnt > 0)
        rd_kafka_resume_partitions(m_consumer, resume);
    rd_kafka_topic_partition_list_destroy(pause);
    rd_kafka_topic_partition_list_destroy(resume);
}

QList<QueueMessage> KafkaQueue::lease(int max, qint64 leaseMs, const QString &, QString *error)
{
    QList<QueueMessage> leased;
    if (!ensureConsumer(error))
        return leased;
    commit(); // a commit refused by a rebalance, tried again
    if (max <= 0)
        return leased;
    handOut(max, leaseMs, &leased);
    const qint64 deadline = nowMs() + (leased.isEmpty() ? IdleWaitMs : 0);
    while (leased.size() < max) {
        const int wait = int(std::max<qint64>(0, deadline - nowMs()));
        rd_kafka_message_t *message = rd_kafka_consumer_poll(m_consumer, wait);
        if (!message)
            break;
        if (message->err) {
            // A topic not made yet (the retry topic before the first retry) is not a failure.
            if (message->err != RD_KAFKA_RESP_ERR__PARTITION_EOF && message->err != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
                qCWarning(lcKafka, "%s", rd_kafka_message_errstr(message));
        } else {
            take(message);
        }
        rd_kafka_message_destroy(message);
        handOut(max, leaseMs, &leased);
        pauseOrResume();
    }
    pauseOrResume();
    return leased;
}

std::unique_ptr<BrokerQueue::MessageWatch> KafkaQueue::watchMessages(std::function<void()> wake) const
{
    // The watch needs the consumer: joining the group as the worker starts, not at its
    // first lease, is what a worker does anyway.
    auto *self = const_cast<KafkaQueue *>(this);
    QString error;
    if (!self->ensureConsumer(&error)) {
        qCWarning(lcKafka, "%s", qPrintable(error));
        return nullptr;
    }
    return std::make_unique<KafkaWatch>(m_consumer, m_nextDueMs, std::move(wake));
}

bool KafkaQueue::settle(const QList<Settlement> &settlements, QString *error)
{
    const qint64 now = nowMs();
    QList<Outgoing> out;
    QList<QString> done;
    for (const Settlement &settlement : settlements) {
        const auto held = m_held.constFind(settlement.messageId);
        if (held == m_held.cend() || held->delivery != settlement.delivery) {
            qCInfo(lcKafka, "delivery %s.%d was no longer ours to settle (its partition moved to another member)",
                   qPrintable(settlement.messageId), settlement.delivery);
            continue;
        }
        if (settlement.kind != Settlement::Kind::Ack) {
            Outgoing copy;
            copy.key = held->key;
            copy.value = held->payload;
            copy.headers = held->headers;
            setHeader(&copy.headers, attribute::Id, settlement.messageId.toUtf8());
            setHeader(&copy.headers, attribute::Receives, QByteArray::number(settlement.delivery));
            if (settlement.kind == Settlement::Kind::Retry) {
                copy.topic = kafkaRetryTopic(location().name);
                setHeader(&copy.headers, attribute::VisibleAt, QByteArray::number(now + settlement.delayMs));
            } else {
                copy.topic = kafkaDeadTopic(location().name);
                copy.headers.removeIf([](const auto &h) { return h.first == attribute::VisibleAt.toLatin1(); });
                setHeader(&copy.headers, attribute::DeadLetter,
                          QJsonDocument(deadLetterAccount(settlement, now)).toJson(QJsonDocument::Compact));
            }
            out.append(std::move(copy));
        }
        done.append(settlement.messageId);
    }
    // Published before the offsets move: a crash between the two leaves a copy and the
    // original, and the ledger answers whichever comes second.
    if (!out.isEmpty() && !produce(out, error))
        return false;
    for (const QString &id : done) {
        const Held held = m_held.take(id);
        const auto state = m_partitions.find(held.partition);
        if (state == m_partitions.end())
            continue;
        state->offsets.settle(held.offset);
        state->handings.remove(held.offset);
    }
    commit();
    pauseOrResume();
    return true;
}

void KafkaQueue::commit(CommitWait wait)
{
    if (!m_consumer || (wait == CommitWait::NoWait && m_commitInFlight))
        return;
    rd_kafka_topic_partition_list_t *offsets = rd_kafka_topic_partition_list_new(4);
    QList<QByteArray> names;
    for (auto it = m_partitions.cbegin(); it != m_partitions.cend(); ++it) {
        const qint64 point = it->offsets.uncommitted();
        if (point < 0)
            continue;
        names.append(it.key().first.toUtf8());
        rd_kafka_topic_partition_list_add(offsets, names.constLast().constData(), it.key().second)->offset = point;
    }
    if (offsets->cnt > 0) {
        if (wait == CommitWait::ForAnswer) {
            // Answered here, through a queue of the call's own: rd_kafka_commit() would post
            // its answer to the poll's callback as well, a second answer that would also
            // clear the flag of a commit still in flight.
            rd_kafka_commit_queue(m_consumer, offsets, nullptr, &onCommittedNow, this);
        } else if (rd_kafka_commit(m_consumer, offsets, 1) == RD_KAFKA_RESP_ERR_NO_ERROR) {
            m_commitInFlight = true; // answered through onCommitted, at a later poll
        }
    }
    rd_kafka_topic_partition_list_destroy(offsets);
}

void KafkaQueue::committed(int err, const rd_kafka_topic_partition_list_t *offsets, CommitWait wait)
{
    if (wait == CommitWait::NoWait)
        m_commitInFlight = false;
    const auto result = rd_kafka_resp_err_t(err);
    if (result == RD_KAFKA_RESP_ERR__NO_OFFSET)
        return; // nothing was left to commit
    if (!result) {
        for (int i = 0; offsets && i < offsets->cnt; ++i) {
            const rd_kafka_topic_partition_t &one = offsets->elems[i];
            const auto state = m_partitions.find({QString::fromUtf8(one.topic), int(one.partition)});
            if (one.err == RD_KAFKA_RESP_ERR_NO_ERROR && state != m_partitions.end())
                state->offsets.committed(one.offset);
        }
        if (!m_commitFailure.isEmpty())
            qCInfo(lcKafka, "commits taken again after: %s", qPrintable(m_commitFailure));
        m_commitFailure.clear();
        return;
    }
    const QString why = text(result);
    if (why == m_commitFailure)
        return; // a coordinator away fails every commit: said once
    m_commitFailure = why;
    if (refusedByRebalance(result))
        qCInfo(lcKafka, "commit refused during a rebalance (%s): the next owner resumes from the last commit",
               qPrintable(why));
    else
        qCWarning(lcKafka, "commit failed: %s; tried again after the next settle", qPrintable(why));
}

int KafkaQueue::partitionCount(rd_kafka_t *client, const QString &topic, QString *error) const
{
    const qint64 now = nowMs();
    const auto known = m_partitionCounts.constFind(topic);
    if (known != m_partitionCounts.cend() && now - known->readAtMs < PartitionCountLifeMs)
        return known->count;
    // The metadata of every topic: asked about one by name, a cluster that auto-creates
    // topics would make it, with its own defaults.
    const QByteArray name = topic.toUtf8();
    const rd_kafka_metadata_t *metadata = nullptr;
    const rd_kafka_resp_err_t err = rd_kafka_metadata(client, 1, nullptr, &metadata, CallTimeoutMs);
    if (err) {
        *error = QStringLiteral("Kafka: cannot read the cluster's metadata at %1: %2")
                     .arg(kafkaDetails(location()).bootstrap.join(u','), text(err));
        return -2;
    }
    int count = -1;
    for (int i = 0; i < metadata->topic_cnt; ++i) {
        if (metadata->topics[i].err == RD_KAFKA_RESP_ERR_NO_ERROR && name == metadata->topics[i].topic)
            count = metadata->topics[i].partition_cnt;
    }
    rd_kafka_metadata_destroy(metadata);
    // A topic not there yet is looked for again next time: a producer may make it.
    if (count > 0)
        m_partitionCounts.insert(topic, {count, now});
    return count;
}

std::optional<QList<KafkaQueue::Span>> KafkaQueue::spans(rd_kafka_t *client, const QString &topic, QString *error) const
{
    const int partitions = partitionCount(client, topic, error);
    if (partitions == -2)
        return std::nullopt;
    QList<Span> result;
    if (partitions <= 0)
        return result;
    const QByteArray name = topic.toUtf8();
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; ++p)
        rd_kafka_topic_partition_list_add(list, name.constData(), p);
    const rd_kafka_resp_err_t err = rd_kafka_committed(client, list, CallTimeoutMs);
    if (err) {
        rd_kafka_topic_partition_list_destroy(list);
        *error = QStringLiteral("Kafka: cannot read the group's offsets on %1: %2").arg(topic, text(err));
        return std::nullopt;
    }
    for (int p = 0; p < partitions; ++p) {
        int64_t low = 0;
        int64_t high = 0;
        const rd_kafka_resp_err_t marks =
            rd_kafka_query_watermark_offsets(client, name.constData(), p, &low, &high, CallTimeoutMs);
        if (marks) {
            rd_kafka_topic_partition_list_destroy(list);
            *error = QStringLiteral("Kafka: cannot read the offsets of %1[%2]: %3").arg(topic).arg(p).arg(text(marks));
            return std::nullopt;
        }
        const qint64 committed = list->elems[p].offset;
        if (committed >= 0)
            result.append({p, std::max<qint64>(committed, low), high, true, std::max<qint64>(0, low - committed)});
        else
            result.append({p, low, high, false});
    }
    rd_kafka_topic_partition_list_destroy(list);
    return result;
}

std::optional<QueueCounts> KafkaQueue::counts(QString *error)
{
    // Read by a client of its own that does not join the group: a member that only counts
    // (once stats, the console) would take partitions from the workers at every look, and
    // the worker's own member, asked for offsets while the group rebalances, waited so long
    // that it missed its polls and was put out of the group.
    if (!m_groupReader)
        m_groupReader = newClient(Client::Reader, kafkaDetails(location()).group, error);
    rd_kafka_t *group = m_groupReader;
    if (!group)
        return std::nullopt;
    const auto main = spans(group, location().name, error);
    if (!main)
        return std::nullopt;
    const auto retries = spans(group, kafkaRetryTopic(location().name), error);
    if (!retries)
        return std::nullopt;
    rd_kafka_t *reader = deadReader(error);
    if (!reader)
        return std::nullopt;
    const auto dead = spans(reader, kafkaDeadTopic(location().name), error);
    if (!dead)
        return std::nullopt;
    const auto lag = [](const QList<Span> &spans) {
        qint64 sum = 0;
        for (const Span &span : spans)
            sum += std::max<qint64>(0, span.to - span.from);
        return sum;
    };
    QueueCounts counts;
    qint64 heldRetries = 0;
    for (const Held &held : std::as_const(m_held))
        heldRetries += held.partition.first != location().name;
    counts.inFlight = m_held.size();
    // The lag is what the group has not committed past: what waits, and what is in flight
    // at any member. Only this member's in flight is known here: the others' count as ready.
    counts.ready = std::max<qint64>(0, lag(*main) - (counts.inFlight - heldRetries));
    counts.delayed = std::max<qint64>(0, lag(*retries) - heldRetries);
    counts.dead = lag(*dead);
    for (const Span &span : *main)
        counts.partitions.append({span.partition, span.to,
                                  span.committed ? std::optional(span.from - span.deletedUnread) : std::nullopt,
                                  std::max<qint64>(0, span.to - span.from), span.deletedUnread});
    const qint64 now = nowMs();
    for (const PartitionState &state : std::as_const(m_partitions)) {
        for (const Fetched &fetched : state.waiting) {
            if (fetched.visibleAtMs > now) {
                const qint64 in = fetched.visibleAtMs - now;
                counts.nextDelayedInMs = counts.nextDelayedInMs ? std::min(*counts.nextDelayedInMs, in) : in;
            }
        }
    }
    return counts;
}

// Makes the three topics where the cluster lets this client (CreateTopics), and notes
// what it could not do: a cluster that refuses (no rights to create topics, or a cluster
// without the call, as librdkafka's mock) leaves it to an administrator, or to the
// cluster's auto-creation on first use. Neither is an error: the topics may well exist.
bool KafkaQueue::declareTopology(const QueueTopology &, QString *error)
{
    if (!ensureProducer(error))
        return false;
    struct Wanted
    {
        QString name;
        int partitions;
        const char *retentionMs;
    };
    const QList<Wanted> wanted{{location().name, TopicPartitions, nullptr},
                               {kafkaRetryTopic(location().name), TopicPartitions, RetryRetentionMs},
                               {kafkaDeadTopic(location().name), 1, DeadRetentionMs}};
    rd_kafka_t *reader = deadReader(error);
    if (!reader)
        return false;
    QList<rd_kafka_NewTopic_t *> topics;
    QStringList found;
    char reason[512];
    for (const Wanted &topic : wanted) {
        const int existing = partitionCount(reader, topic.name, error);
        if (existing == -2)
            return false;
        if (existing > 0) {
            found << QStringLiteral("%1 (%2)").arg(topic.name, formatQuantity(existing, QStringLiteral("partition"),
                                                                               QStringLiteral("partitions")));
            continue;
        }
        rd_kafka_NewTopic_t *newTopic =
            rd_kafka_NewTopic_new(topic.name.toUtf8().constData(), topic.partitions, -1, reason, sizeof reason);
        if (newTopic && topic.retentionMs)
            rd_kafka_NewTopic_set_config(newTopic, "retention.ms", topic.retentionMs);
        if (newTopic)
            topics.append(newTopic);
    }
    QStringList made;
    QStringList notMade;
    if (!topics.isEmpty()) {
        rd_kafka_queue_t *answers = rd_kafka_queue_new(m_producer);
        rd_kafka_AdminOptions_t *options = rd_kafka_AdminOptions_new(m_producer, RD_KAFKA_ADMIN_OP_CREATETOPICS);
        rd_kafka_AdminOptions_set_request_timeout(options, CreateTopicsTimeoutMs, reason, sizeof reason);
        rd_kafka_AdminOptions_set_operation_timeout(options, CreateTopicsTimeoutMs, reason, sizeof reason);
        rd_kafka_CreateTopics(m_producer, topics.data(), size_t(topics.size()), options, answers);
        rd_kafka_AdminOptions_destroy(options);
        rd_kafka_event_t *event = rd_kafka_queue_poll(answers, CreateTopicsTimeoutMs + 5000);
        if (!event) {
            notMade << QStringLiteral("the cluster did not answer CreateTopics");
        } else if (rd_kafka_event_error(event)) {
            notMade << QString::fromUtf8(rd_kafka_event_error_string(event));
        } else {
            size_t count = 0;
            const rd_kafka_topic_result_t **results =
                rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(event), &count);
            for (size_t i = 0; i < count; ++i) {
                const QString name = QString::fromUtf8(rd_kafka_topic_result_name(results[i]));
                const rd_kafka_resp_err_t err = rd_kafka_topic_result_error(results[i]);
                if (err == RD_KAFKA_RESP_ERR_NO_ERROR || err == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
                    made << name;
                else
                    notMade << QStringLiteral("%1: %2").arg(name, QString::fromUtf8(rd_kafka_topic_result_error_string(results[i])));
            }
        }
        if (event)
            rd_kafka_event_destroy(event);
        rd_kafka_queue_destroy(answers);
        rd_kafka_NewTopic_destroy_array(topics.data(), size_t(topics.size()));
    }
    QStringList note;
    if (!made.isEmpty())
        note << QStringLiteral("made the topics %1 (%2 partitions; retries kept 7 days, dead letters until an "
                               "operator acts)")
                    .arg(made.join(u", "))
                    .arg(TopicPartitions);
    if (!found.isEmpty())
        note << QStringLiteral("found the topics %1").arg(found.join(u", "));
    if (!notMade.isEmpty())
        note << QStringLiteral("could not make the topics (%1): the cluster makes them on first use where it "
                               "auto-creates topics, else an administrator must")
                    .arg(notMade.join(u"; "));
    m_topologyNote = note.join(u"; ");
    return true;
}

QString KafkaQueue::describeTopology(const QueueTopology &) const
{
    return m_topologyNote;
}

rd_kafka_t *KafkaQueue::deadReader(QString *error)
{
    if (!m_deadReader)
        m_deadReader = newClient(Client::Reader, kafkaDetails(location()).group + QStringLiteral("-dead"), error);
    return m_deadReader;
}

std::optional<KafkaQueue::DeadRead> KafkaQueue::readDeadLetters(int max, QString *error)
{
    rd_kafka_t *reader = deadReader(error);
    if (!reader)
        return std::nullopt;
    const QString topic = kafkaDeadTopic(location().name);
    const auto from = spans(reader, topic, error);
    if (!from)
        return std::nullopt;
    DeadRead read;
    read.read = *from;
    qint64 toRead = 0;
    const QByteArray name = topic.toUtf8();
    rd_kafka_topic_partition_list_t *assignment = rd_kafka_topic_partition_list_new(int(from->size()) + 1);
    for (const Span &span : *from) {
        if (span.to > span.from) {
            rd_kafka_topic_partition_list_add(assignment, name.constData(), span.partition)->offset = span.from;
            toRead += span.to - span.from;
        }
    }
    for (Span &span : read.read)
        span.to = span.from; // how far the reading went, so far nowhere
    if (assignment->cnt == 0 || max <= 0) {
        rd_kafka_topic_partition_list_destroy(assignment);
        return read;
    }
    rd_kafka_assign(reader, assignment);
    rd_kafka_topic_partition_list_destroy(assignment);
    const qint64 deadline = nowMs() + CallTimeoutMs;
    qint64 seen = 0;
    while (seen < toRead && read.letters.size() < max && nowMs() < deadline) {
        rd_kafka_message_t *message = rd_kafka_consumer_poll(reader, 500);
        if (!message)
            continue;
        if (message->err) {
            if (message->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                qCWarning(lcKafka, "reading dead letters: %s", rd_kafka_message_errstr(message));
            rd_kafka_message_destroy(message);
            continue;
        }
        const auto span = std::find_if(read.read.begin(), read.read.end(),
                                       [&](const Span &s) { return s.partition == message->partition; });
        if (span == read.read.end() || message->offset < span->to || message->offset >= (*from)[span - read.read.begin()].to) {
            rd_kafka_message_destroy(message);
            continue;
        }
        span->to = message->offset + 1;
        ++seen;
        Outgoing copy;
        copy.topic = topic;
        if (message->key_len > 0)
            copy.key = QByteArray(static_cast<const char *>(message->key), qsizetype(message->key_len));
        copy.value = QByteArray(static_cast<const char *>(message->payload), qsizetype(message->len));
        copy.headers = headersOf(message);
        DeadLetter letter;
        letter.id = QString::fromUtf8(header(copy.headers, attribute::Id));
        if (letter.id.isEmpty())
            letter.id = QStringLiteral("%1/%2/%3").arg(topic).arg(message->partition).arg(message->offset);
        letter.payload = copy.value;
        letter.redriveCount = header(copy.headers, attribute::Redrives).toInt();
        letter.enqueuedAtMs = header(copy.headers, attribute::EnqueuedAt).toLongLong();
        const QJsonObject account = QJsonDocument::fromJson(header(copy.headers, attribute::DeadLetter)).object();
        if (!account.isEmpty()) {
            readDeadLetterAccount(account, &letter);
        } else {
            // Put here by another tool: what the message itself says.
            letter.errorClass = QStringLiteral("unknown");
            letter.lastError = QStringLiteral("published to the dead-letter topic without once's account");
            rd_kafka_timestamp_type_t type;
            letter.deadAtMs = rd_kafka_message_timestamp(message, &type);
            if (const auto parsed = parseReminder(letter.payload); parsed.reminder) {
                letter.sendKey = parsed.reminder->sendKey;
                letter.eventId = parsed.reminder->eventId;
            }
        }
        rd_kafka_message_destroy(message);
        read.letters.append(std::move(letter));
        read.copies.append(std::move(copy));
    }
    rd_kafka_assign(reader, nullptr);
    if (seen < std::min<qint64>(toRead, max)) {
        *error = QStringLiteral("Kafka: read %1 of the %2 dead letters on %3 in %4 s").arg(seen).arg(toRead).arg(topic).arg(CallTimeoutMs / 1000);
        return std::nullopt;
    }
    return read;
}

std::optional<QList<DeadLetter>> KafkaQueue::deadLetters(int limit, QString *error)
{
    const auto read = readDeadLetters(std::min(limit, MaxListedDeadLetters), error);
    if (!read)
        return std::nullopt;
    QList<DeadLetter> letters = read->letters;
    std::stable_sort(letters.begin(), letters.end(),
                     [](const DeadLetter &a, const DeadLetter &b) { return a.deadAtMs < b.deadAtMs; });
    return letters;
}

// A log keeps its order: a letter cannot leave from the middle. So the letters up to the
// last one taken are read, the taken ones published to TOPIC (a redrive) or dropped (a
// discard), the others published again at the dead-letter topic's end, unchanged, and
// only then does the operators' group commit past all of them.
std::optional<QList<DeadLetter>> KafkaQueue::takeDeadLetters(int max, const std::function<bool(const DeadLetter &)> &select,
                                                             Take take, QString *error)
{
    const auto read = readDeadLetters(std::min(max, MaxListedDeadLetters), error);
    if (!read)
        return std::nullopt;
    QList<DeadLetter> taken;
    QList<Outgoing> out;
    for (qsizetype i = 0; i < read->letters.size(); ++i) {
        const DeadLetter &letter = read->letters.at(i);
        Outgoing copy = read->copies.at(i);
        if (!select(letter)) {
            out.append(std::move(copy)); // stays a dead letter
            continue;
        }
        taken.append(letter);
        if (take == Take::Discard)
            continue;
        copy.topic = location().name;
        copy.headers.removeIf([](const auto &h) { return h.first == attribute::DeadLetter.toLatin1(); });
        setHeader(&copy.headers, attribute::Id, letter.id.toUtf8());
        setHeader(&copy.headers, attribute::Redrives, QByteArray::number(letter.redriveCount + 1));
        out.append(std::move(copy));
    }
    if (!out.isEmpty() && !produce(out, error))
        return std::nullopt;
    const QByteArray name = kafkaDeadTopic(location().name).toUtf8();
    rd_kafka_topic_partition_list_t *offsets = rd_kafka_topic_partition_list_new(int(read->read.size()) + 1);
    for (const Span &span : read->read) {
        if (span.to > span.from)
            rd_kafka_topic_partition_list_add(offsets, name.constData(), span.partition)->offset = span.to;
    }
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    if (offsets->cnt > 0)
        err = rd_kafka_commit(m_deadReader, offsets, 0);
    rd_kafka_topic_partition_list_destroy(offsets);
    if (err) {
        // The copies are out: letters left uncommitted are read again, and a redriven one
        // reaches the ledger twice, which answers the second as a duplicate.
        *error = QStringLiteral("Kafka: the dead letters were moved but the dead-letter topic's offsets were not "
                                "committed: %1")
                     .arg(text(err));
        return std::nullopt;
    }
    return taken;
}

std::optional<QList<DeadLetter>> KafkaQueue::redrive(int max, const std::function<bool(const DeadLetter &)> &select,
                                                     QString *error)
{
    return takeDeadLetters(max, select, Take::Redrive, error);
}

std::optional<QList<DeadLetter>> KafkaQueue::discard(int max, const std::function<bool(const DeadLetter &)> &select,
                                                     QString *error)
{
    return takeDeadLetters(max, select, Take::Discard, error);
}

} // namespace once
