#pragma once

#include "queues/queuebackend.h"
#include "queues/queuelocation.h"

#include <QStringList>

namespace once {

// kafka://[USER[:PASSWORD]@]HOST:PORT/TOPIC?group=GROUP[&brokers=HOST:PORT,...]
//        [&security=plaintext|ssl|sasl_plaintext|sasl_ssl][&mechanism=SCRAM-SHA-256|
//        SCRAM-SHA-512|PLAIN][&ca=PATH][&session=DURATION]
// The topic TOPIC, consumed by the consumer group GROUP (default "once"), through the
// bootstrap servers HOST:PORT and brokers. Retries wait in TOPIC-retry, dead letters in
// TOPIC-dead. A SASL password comes from the URL's user part or ONCE_KAFKA_PASSWORD, and
// is never printed.
constexpr int DefaultKafkaSessionMs = 6000;

struct KafkaDetails
{
    QString group;
    QStringList bootstrap; // HOST:PORT, the URL's own first
    QString security;      // librdkafka's security.protocol; empty: plaintext
    QString mechanism;     // sasl.mechanism, where SASL is used
    QString caFile;        // ssl.ca.location; empty: the system's
    // A member that stops heartbeating (killed, paused) loses its partitions after this
    // long. A broker refuses less than its group.min.session.timeout.ms (6 s by default).
    int sessionTimeoutMs = DefaultKafkaSessionMs;
};
const KafkaDetails &kafkaDetails(const QueueLocation &location);

QString kafkaRetryTopic(const QString &topic);
QString kafkaDeadTopic(const QString &topic);

// Apache Kafka's registration without its opener: what reads and writes its URLs.
QueueBackend kafkaUrlSyntax();

} // namespace once
