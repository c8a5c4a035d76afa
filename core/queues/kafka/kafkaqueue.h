#pragma once

#include "queues/brokerqueue.h"
#include "queues/kafka/kafkaoffsets.h"

#include <QHash>
#include <QList>
#include <QPair>

#include <atomic>
#include <deque>
#include <memory>

struct rd_kafka_s;
struct rd_kafka_message_s;
struct rd_kafka_topic_partition_list_s;

namespace once {

// A topic at Apache Kafka, through librdkafka, consumed by a consumer group.
//
// Offsets never run ahead of what is settled: auto-commit is off, and after each settle
// the consumer commits, per partition, the lowest offset still open (KafkaOffsets), so a
// crash redelivers only what was not acked, dead-lettered or deferred, and the ledger
// answers those. More sends are in flight than there are partitions: each partition
// has a window of `prefetch` messages taken and not settled; a full one is paused and
// resumed as its messages settle.
//
// Topics (declareTopology, once init --queue):
//   TOPIC        the reminders, keyed by the producer (a user, a send key)
//   TOPIC-retry  a message that must wait (a backoff, Retry-After, a delay) is published
//                here with its due time, and its offset on TOPIC counts as settled: a
//                retry never blocks its partition. A retry partition whose next message
//                is not due is paused until it is (as Spring Kafka's retry topics do).
//   TOPIC-dead   dead letters, with their account in a header; the consumer group
//                GROUP-dead marks how far an operator has redriven or discarded them.
//
// Headers:
//   once-id          the id the ledger knows, kept through retries and redrives (a message
//                    from another producer has none: TOPIC/PARTITION/OFFSET is its id)
//   once-receives    the deliveries of the copies before this one
//   once-redrives    how often an operator redrove it
//   once-enqueued-at when it was first enqueued (ms since the epoch)
//   once-visible-at  on a retry copy: not to be leased before (ms since the epoch)
//   once-dead-letter on a dead letter: its account (deadletteraccount.h)
// The delivery number is once-receives + 1, plus one for each time this process was
// handed the same offset again. A member that takes over a partition starts from the
// last commit with the same numbers as the member that died: the ledger's claims, not
// the numbers, tell the takeover apart (a dead member's claim has run out).
class KafkaQueue final : public BrokerQueue
{
public:
    static std::unique_ptr<KafkaQueue> connect(const QueueLocation &location, const QString &consumerName, int prefetch,
                                               QString *error);
    ~KafkaQueue() override;

    bool enqueue(const QList<OutgoingMessage> &messages, QString *error) override;
    QList<QueueMessage> lease(int max, qint64 leaseMs, const QString &workerId, QString *error) override;
    bool settle(const QList<Settlement> &settlements, QString *error) override;
    std::optional<QueueCounts> counts(QString *error) override;

    bool declareTopology(const QueueTopology &topology, QString *error) override;
    QString describeTopology(const QueueTopology &topology) const override;
    std::optional<QList<DeadLetter>> deadLetters(int limit, QString *error) override;
    std::optional<QList<DeadLetter>> redrive(int max, const std::function<bool(const DeadLetter &)> &select,
                                             QString *error) override;
    std::optional<QList<DeadLetter>> discard(int max, const std::function<bool(const DeadLetter &)> &select,
                                             QString *error) override;

    // Wakes the worker when the cluster's next messages arrive (librdkafka's consumer
    // queue turning non-empty) and when a held retry falls due, rather than at its next poll.
    std::unique_ptr<MessageWatch> watchMessages(std::function<void()> wake) const override;

    // Commits what is settled. Waiting for the answer only where the partitions are about
    // to go (a revoke, the end): elsewhere a commit must not hold the turn, as a
    // coordinator away held each for seconds while fetching and publishing went on.
    enum class CommitWait { ForAnswer, NoWait };
    // The group's answer to a commit, by way of librdkafka's opaque pointer: served by a
    // later poll (NoWait), or by the commit's own call (ForAnswer).
    void committed(int err, const rd_kafka_topic_partition_list_s *offsets, CommitWait wait);
    // librdkafka's rebalance callback, by way of its opaque pointer.
    void rebalanced(int err, rd_kafka_topic_partition_list_s *partitions);

private:
    using Headers = QList<QPair<QByteArray, QByteArray>>;
    using PartitionKey = QPair<QString, int>; // topic, partition
    // A message as fetched, with what settling it needs.
    struct Fetched
    {
        QueueMessage message;
        QString topic;
        int partition = 0;
        qint64 offset = 0;
        QByteArray key;
        Headers headers;
        qint64 visibleAtMs = 0; // a retry copy's due time
    };
    struct PartitionState
    {
        KafkaOffsets offsets;
        std::deque<Fetched> waiting; // fetched, not handed out yet: the window is full, or not due
        bool paused = false;
        // Every offset taken and not settled is either waiting here or handed out.
        int handedOut() const { return offsets.open() - int(waiting.size()); }
        QHash<qint64, int> handings; // offset -> how often this process handed it out
    };
    // A produce: where, and the message.
    struct Outgoing
    {
        QString topic;
        QByteArray key;
        QByteArray value;
        Headers headers;
    };

    KafkaQueue(QueueLocation location, QString consumerName, int prefetch);

    // A producer; the group's member, which consumes TOPIC and TOPIC-retry; or a reader
    // that reads with a group's offsets without joining it (the dead letters, counts).
    enum class Client { Producer, Member, Reader };
    rd_kafka_s *newClient(Client kind, const QString &group, QString *error);
    bool ensureConsumer(QString *error);
    bool ensureProducer(QString *error);
    // Publishes all, waits for the cluster to take each; false when any was refused.
    bool produce(const QList<Outgoing> &messages, QString *error);
    void take(rd_kafka_message_s *message);
    void handOut(int max, qint64 leaseMs, QList<QueueMessage> *leased);
    void pauseOrResume();
    void commit(CommitWait wait = CommitWait::NoWait);
    void forget(const PartitionKey &partition);
    // The partitions of a topic, from the cluster's metadata; -1 when it has no such topic.
    // A count read within the last minute is not read again: it is the metadata of every
    // topic in the cluster, too heavy for each look at the counts.
    int partitionCount(rd_kafka_s *client, const QString &topic, QString *error) const;
    // What the group has consumed of a topic, and what the topic holds: per partition, the
    // committed offset (or the low watermark) and the high watermark.
    struct Span
    {
        int partition = 0;
        qint64 from = 0;
        qint64 to = 0;
        bool committed = false; // from is the group's commit, not the low watermark
        // The cluster deleted these (retention) past the group's commit, unread by the
        // group: from is then the oldest message left, the commit that much lower.
        qint64 deletedUnread = 0;
    };
    std::optional<QList<Span>> spans(rd_kafka_s *client, const QString &topic, QString *error) const;
    // Reads the dead letters from where the operators' group stands, at most max.
    struct DeadRead
    {
        QList<DeadLetter> letters;
        QList<Outgoing> copies; // each letter as it would be published again
        QList<Span> read;       // per partition, how far the reading went
    };
    std::optional<DeadRead> readDeadLetters(int max, QString *error);
    enum class Take { Redrive, Discard };
    std::optional<QList<DeadLetter>> takeDeadLetters(int max, const std::function<bool(const DeadLetter &)> &select,
                                                     Take take, QString *error);
    rd_kafka_s *deadReader(QString *error);

    QString m_consumerName;
    int m_window = 1;
    rd_kafka_s *m_consumer = nullptr;
    rd_kafka_s *m_producer = nullptr;
    rd_kafka_s *m_deadReader = nullptr;  // the operators' group on the dead letters
    rd_kafka_s *m_groupReader = nullptr; // the workers' group's offsets, for counts without consuming
    QHash<PartitionKey, PartitionState> m_partitions;
    // What this process had taken of each partition it lost, kept until the partition is
    // fetched past it: a commit refused or lost in the rebalance brings settled messages
    // back, and those are skipped (take), not dead-lettered or deferred a second time.
    QHash<PartitionKey, KafkaOffsets> m_revoked;
    // Where each partition given to this member resumes (the group's commit), until its
    // first message: one further on, past messages the cluster no longer has, is said.
    QHash<PartitionKey, qint64> m_resumeAt;
    void noteDeletedUnread(const PartitionKey &partition, qint64 resumeAt, qint64 firstOffset);
    bool m_commitInFlight = false; // one commit without an answer at a time
    QString m_commitFailure;       // said once until a commit is taken again
    // Every delivery handed out and not yet settled, by message id.
    struct Held
    {
        int delivery = 0;
        PartitionKey partition;
        qint64 offset = 0;
        QByteArray key;
        QByteArray payload;
        Headers headers;
    };
    QHash<QString, Held> m_held;
    struct KnownPartitionCount
    {
        int count = 0;
        qint64 readAtMs = 0;
    };
    mutable QHash<QString, KnownPartitionCount> m_partitionCounts;
    int m_nextPartition = 0; // where the next hand-out starts, for fairness
    QString m_topologyNote;  // what declareTopology made and could not make
    // When the earliest retry held here falls due (0: none), for the watch.
    std::shared_ptr<std::atomic<qint64>> m_nextDueMs = std::make_shared<std::atomic<qint64>>(0);
};

} // namespace once
