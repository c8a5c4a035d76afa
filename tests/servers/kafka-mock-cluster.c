/* A Kafka cluster for the tests: librdkafka's in-memory mock cluster (rdkafka_mock.h),
 * held open until SIGTERM or SIGINT. scripts/kafka-server builds and starts it.
 *
 *   kafka-mock-cluster BOOTSTRAP_FILE [BROKERS]
 *
 * Writes the cluster's bootstrap servers ("127.0.0.1:PORT,...") to BOOTSTRAP_FILE once it
 * listens. It speaks produce, fetch, consumer groups and offset commits; topics are made
 * on first use with 4 partitions. It keeps everything in memory: nothing survives it. */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stopping = 0;

static void stop(int sig)
{
    (void)sig;
    stopping = 1;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s BOOTSTRAP_FILE [BROKERS]\n", argv[0]);
        return 2;
    }
    const int brokers = argc == 3 ? atoi(argv[2]) : 3;
    if (brokers < 1 || brokers > 9) {
        fprintf(stderr, "kafka-mock-cluster: BROKERS must be 1 to 9\n");
        return 2;
    }
    char error[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    /* Its handle has no bootstrap servers of its own, which it would warn of. */
    rd_kafka_conf_set(conf, "log_level", "3", error, sizeof error);
    /* The cluster needs a client handle for its own bookkeeping; nothing is produced. */
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof error);
    if (!rk) {
        fprintf(stderr, "kafka-mock-cluster: %s\n", error);
        return 1;
    }
    rd_kafka_mock_cluster_t *cluster = rd_kafka_mock_cluster_new(rk, brokers);
    if (!cluster) {
        fprintf(stderr, "kafka-mock-cluster: could not start the mock cluster\n");
        rd_kafka_destroy(rk);
        return 1;
    }
    /* Written whole, then renamed: the script waits for the file and reads it at once. */
    char partial[4096];
    snprintf(partial, sizeof partial, "%s.partial", argv[1]);
    FILE *out = fopen(partial, "w");
    if (!out || fprintf(out, "%s\n", rd_kafka_mock_cluster_bootstraps(cluster)) < 0 || fclose(out) != 0
        || rename(partial, argv[1]) != 0) {
        perror("kafka-mock-cluster: cannot write the bootstrap file");
        rd_kafka_mock_cluster_destroy(cluster);
        rd_kafka_destroy(rk);
        return 1;
    }
    signal(SIGTERM, stop);
    signal(SIGINT, stop);
    while (!stopping)
        pause();
    rd_kafka_mock_cluster_destroy(cluster);
    rd_kafka_destroy(rk);
    return 0;
}
