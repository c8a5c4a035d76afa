/* A Kafka cluster for the tests: librdkafka's in-memory mock cluster (rdkafka_mock.h),
 * held open until SIGTERM or SIGINT. scripts/kafka-server builds and starts it.
 *
 *   kafka-mock-cluster DIR [BROKERS]
 *
 * Writes the cluster's bootstrap servers ("127.0.0.1:PORT,...") to DIR/bootstrap once it
 * listens. It speaks produce, fetch, consumer groups and offset commits; topics are made
 * on first use with 4 partitions. It keeps everything in memory: nothing survives it.
 *
 * What the mock has no protocol for, the tests ask through DIR/requests: a file NAME.req
 * of lines
 *   topic NAME PARTITIONS     make a topic (the mock answers no CreateTopics)
 *   broker down|up ID         cut a broker's connections and refuse new ones, or let
 *                             it accept them again (ID -1: every broker)
 *   leader TOPIC PARTITION ID make broker ID the partition's leader
 *   coordinator GROUP ID      make broker ID the consumer group's coordinator
 * is carried out line by line, then answered by NAME.done: "ok", or the first line that
 * failed and why. */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <dirent.h>
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

/* Carries out one request line; returns 0, or writes why not to answer. */
static int carry_out(rd_kafka_mock_cluster_t *cluster, const char *line, char *answer, size_t size)
{
    char name[256];
    char state[8];
    int number = 0;
    int partition = 0;
    rd_kafka_resp_err_t err;
    if (sscanf(line, "topic %255s %d", name, &number) == 2) {
        if (number < 1 || number > 64) {
            snprintf(answer, size, "%s: PARTITIONS must be 1 to 64", line);
            return -1;
        }
        err = rd_kafka_mock_topic_create(cluster, name, number, 1);
    } else if (sscanf(line, "broker %7s %d", state, &number) == 2 && (!strcmp(state, "down") || !strcmp(state, "up"))) {
        err = !strcmp(state, "down") ? rd_kafka_mock_broker_set_down(cluster, number)
                                     : rd_kafka_mock_broker_set_up(cluster, number);
    } else if (sscanf(line, "leader %255s %d %d", name, &partition, &number) == 3) {
        err = rd_kafka_mock_partition_set_leader(cluster, name, partition, number);
    } else if (sscanf(line, "coordinator %255s %d", name, &number) == 2) {
        err = rd_kafka_mock_coordinator_set(cluster, "group", name, number);
    } else {
        snprintf(answer, size, "%s: not \"topic NAME PARTITIONS\", \"broker down|up ID\", "
                               "\"leader TOPIC PARTITION ID\" or \"coordinator GROUP ID\"", line);
        return -1;
    }
    if (err) {
        snprintf(answer, size, "%s: %s", line, rd_kafka_err2str(err));
        return -1;
    }
    return 0;
}

/* Answers every NAME.req in requests with NAME.done. */
static void serve_requests(rd_kafka_mock_cluster_t *cluster, const char *requests)
{
    DIR *dir = opendir(requests);
    if (!dir)
        return;
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        const size_t length = strlen(entry->d_name);
        if (length < 5 || strcmp(entry->d_name + length - 4, ".req") != 0)
            continue;
        char path[4096];
        char done[4096];
        char partial[4096];
        snprintf(path, sizeof path, "%s/%s", requests, entry->d_name);
        snprintf(done, sizeof done, "%s/%.*s.done", requests, (int)(length - 4), entry->d_name);
        snprintf(partial, sizeof partial, "%s.partial", done);
        char answer[1024] = "ok";
        FILE *in = fopen(path, "r");
        char line[512];
        while (in && fgets(line, sizeof line, in)) {
            line[strcspn(line, "\r\n")] = 0;
            if (line[0] && carry_out(cluster, line, answer, sizeof answer) != 0)
                break;
        }
        if (in)
            fclose(in);
        unlink(path);
        FILE *out = fopen(partial, "w");
        if (out) {
            fprintf(out, "%s\n", answer);
            fclose(out);
            rename(partial, done);
        }
    }
    closedir(dir);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s DIR [BROKERS]\n", argv[0]);
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
    char bootstrap[4096];
    char partial[4096];
    char requests[4096];
    snprintf(bootstrap, sizeof bootstrap, "%s/bootstrap", argv[1]);
    snprintf(partial, sizeof partial, "%s/bootstrap.partial", argv[1]);
    snprintf(requests, sizeof requests, "%s/requests", argv[1]);
    FILE *out = fopen(partial, "w");
    if (!out || fprintf(out, "%s\n", rd_kafka_mock_cluster_bootstraps(cluster)) < 0 || fclose(out) != 0
        || rename(partial, bootstrap) != 0) {
        perror("kafka-mock-cluster: cannot write the bootstrap file");
        rd_kafka_mock_cluster_destroy(cluster);
        rd_kafka_destroy(rk);
        return 1;
    }
    signal(SIGTERM, stop);
    signal(SIGINT, stop);
    while (!stopping) {
        serve_requests(cluster, requests);
        usleep(20 * 1000);
    }
    rd_kafka_mock_cluster_destroy(cluster);
    rd_kafka_destroy(rk);
    return 0;
}
