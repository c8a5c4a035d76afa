// Queue URLs (--queue): what each part becomes, what is refused, and what is shown.
#include "queues/queuebackend.h"
#include "queues/queuelocation.h"
#include "queues/rabbitmq/rabbitmqlocation.h"
#include "queues/redis/redislocation.h"

#include <QTest>
#include <QUrl>

using namespace once;

namespace {

// What only one backend reads from its URL, empty for the others.
QString vhostOf(const QueueLocation &location)
{
    return location.backend->id == QLatin1String("rabbitmq") ? rabbitMqDetails(location).vhost : QString();
}

int databaseOf(const QueueLocation &location)
{
    return location.backend->id == QLatin1String("redis") ? redisDetails(location).database : 0;
}

} // namespace

class TestQueueLocation : public QObject
{
    Q_OBJECT

private slots:
    void everyBackendDescribesItself();
    void parsesBrokerUrls_data();
    void parsesBrokerUrls();
    void refusesBadUrls_data();
    void refusesBadUrls();
    void displayNameReadsBackAsTheSameQueue_data();
    void displayNameReadsBackAsTheSameQueue();
};

// The registry is what the CLI's help, the Open Queue dialog and the test matrix read: each
// backend names itself, and its example URL is one of its own.
void TestQueueLocation::everyBackendDescribesItself()
{
    QVERIFY(queueBackends().size() >= 2);
    QStringList schemes;
    for (const QueueBackend *backend : queueBackends()) {
        QVERIFY(!backend->id.isEmpty() && !backend->name.isEmpty() && !backend->queueWord.isEmpty());
        QVERIFY2(!schemes.contains(backend->scheme), qPrintable(QString(backend->scheme)));
        schemes.append(backend->scheme);
        QVERIFY(backend->parse && backend->displayUrl && backend->deadLetterName && backend->open);
        QCOMPARE(queueBackendForScheme(backend->scheme), backend);
        QCOMPARE(queueBackendForId(backend->id), backend);
        QVERIFY(backend->urlSyntax.startsWith(backend->scheme + QLatin1String("://")));
        QVERIFY2(queueUrlSyntaxes().contains(backend->urlSyntax), qPrintable(queueUrlSyntaxes()));
        QString error;
        const auto example = QueueLocation::parse(backend->exampleUrl, &error);
        QVERIFY2(example, qPrintable(backend->exampleUrl + QStringLiteral(": ") + error));
        QCOMPARE(example->backend, backend);
        QVERIFY(QueueLocation::isBrokerUrl(backend->exampleUrl));
        QCOMPARE(example->brokerName(), backend->name);
        QVERIFY(!example->deadLetterName().isEmpty() && example->deadLetterName() != example->name);
        // The queue is named by a query item, or else it ends the URL's path (SQS).
        if (backend->nameParameter.isEmpty())
            QVERIFY2(QUrl(backend->exampleUrl).path().endsWith(QLatin1Char('/') + example->name), qPrintable(backend->exampleUrl));
        else
            QVERIFY(backend->exampleUrl.contains(backend->nameParameter + QLatin1Char('=') + example->name));
    }
    QString error;
    QVERIFY(!QueueLocation::parse(QStringLiteral("nats://mq/?queue=r"), &error));
    for (const QString &scheme : schemes)
        QVERIFY2(error.contains(scheme + QLatin1String("://")), qPrintable(error));
    QVERIFY(!QueueLocation::isBrokerUrl(QStringLiteral("nats://mq/?queue=r")));
}

void TestQueueLocation::parsesBrokerUrls_data()
{
    QTest::addColumn<QString>("url");
    QTest::addColumn<QString>("host");
    QTest::addColumn<int>("port");
    QTest::addColumn<QString>("user");
    QTest::addColumn<QString>("vhost");
    QTest::addColumn<int>("database");
    QTest::addColumn<QString>("name");
    QTest::newRow("RabbitMQ") << QStringLiteral("amqp://once:pw@mq.example:5673/prod?queue=reminders")
                              << QStringLiteral("mq.example") << 5673 << QStringLiteral("once") << QStringLiteral("prod") << 0
                              << QStringLiteral("reminders");
    QTest::newRow("RabbitMQ default vhost and port") << QStringLiteral("amqp://once:pw@mq/?queue=r.1")
                                                     << QStringLiteral("mq") << 5672 << QStringLiteral("once")
                                                     << QStringLiteral("/") << 0 << QStringLiteral("r.1");
    QTest::newRow("RabbitMQ encoded vhost") << QStringLiteral("amqp://once@mq/%2F?queue=r") << QStringLiteral("mq") << 5672
                                            << QStringLiteral("once") << QStringLiteral("/") << 0 << QStringLiteral("r");
    QTest::newRow("Redis") << QStringLiteral("redis://:pw@127.0.0.1:6380/3?stream=s-1") << QStringLiteral("127.0.0.1")
                           << 6380 << QString() << QString() << 3 << QStringLiteral("s-1");
    QTest::newRow("Redis IPv6") << QStringLiteral("redis://[::1]/0?stream=s") << QStringLiteral("::1") << 6379 << QString()
                                << QString() << 0 << QStringLiteral("s");
    QTest::newRow("REST over TLS, default port") << QStringLiteral("rest+https://queue.example/v1?queue=reminders")
                                                 << QStringLiteral("queue.example") << 443 << QString() << QString() << 0
                                                 << QStringLiteral("reminders");
    QTest::newRow("REST with a token") << QStringLiteral("rest+http://:tok@127.0.0.1:8080/v1/?queue=r")
                                       << QStringLiteral("127.0.0.1") << 8080 << QString() << QString() << 0
                                       << QStringLiteral("r");
    // SQS's "host" is the region: the endpoint is AWS's for it, or the one given.
    QTest::newRow("SQS") << QStringLiteral("sqs://eu-west-1/123456789012/reminders") << QStringLiteral("eu-west-1") << 0
                         << QString() << QString() << 0 << QStringLiteral("reminders");
    QTest::newRow("SQS at an emulator") << QStringLiteral("sqs://us-east-1/000000000000/r_1-2?endpoint=http://127.0.0.1:4566")
                                        << QStringLiteral("us-east-1") << 0 << QString() << QString() << 0 << QStringLiteral("r_1-2");
    QTest::newRow("Kafka") << QStringLiteral("kafka://k1:9093/reminders.v1?group=once&brokers=k2:9093,k3:9093")
                           << QStringLiteral("k1") << 9093 << QString() << QString() << 0 << QStringLiteral("reminders.v1");
    QTest::newRow("Kafka default port and group") << QStringLiteral("kafka://k1/r") << QStringLiteral("k1") << 9092
                                                  << QString() << QString() << 0 << QStringLiteral("r");
    QTest::newRow("Kafka with SASL") << QStringLiteral("kafka://svc@k1:9094/r?security=sasl_ssl&mechanism=scram-sha-256")
                                     << QStringLiteral("k1") << 9094 << QStringLiteral("svc") << QString() << 0
                                     << QStringLiteral("r");
}

void TestQueueLocation::parsesBrokerUrls()
{
    QFETCH(QString, url);
    QString error;
    const auto location = QueueLocation::parse(url, &error);
    QVERIFY2(location, qPrintable(error));
    QTEST(location->host, "host");
    QTEST(location->port, "port");
    QTEST(location->user, "user");
    QTEST(vhostOf(*location), "vhost");
    QTEST(databaseOf(*location), "database");
    QTEST(location->name, "name");
}

void TestQueueLocation::refusesBadUrls_data()
{
    QTest::addColumn<QString>("url");
    QTest::addColumn<QString>("errorMentions");
    QTest::newRow("other scheme") << QStringLiteral("http://mq/?queue=r") << QStringLiteral("amqp:// or redis://");
    QTest::newRow("no host") << QStringLiteral("amqp://once:hunter2@/?queue=r") << QStringLiteral("not a RabbitMQ URL");
    QTest::newRow("no user") << QStringLiteral("amqp://mq/?queue=r") << QStringLiteral("names no user");
    QTest::newRow("no queue") << QStringLiteral("amqp://once:hunter2@mq/") << QStringLiteral("?queue=NAME");
    QTest::newRow("queue name with a colon") << QStringLiteral("amqp://once:hunter2@mq/?queue=a:b") << QStringLiteral("?queue=NAME");
    QTest::newRow("management with credentials") << QStringLiteral("amqp://once:hunter2@mq/?queue=r&management=http://a:hunter2@mq:15672")
                                                 << QStringLiteral("without credentials");
    QTest::newRow("Redis database not a number") << QStringLiteral("redis://:hunter2@r/x?stream=s") << QStringLiteral("database number");
    QTest::newRow("Redis negative database") << QStringLiteral("redis://:hunter2@r/-1?stream=s") << QStringLiteral("database number");
    QTest::newRow("Redis no stream") << QStringLiteral("redis://:hunter2@r/0") << QStringLiteral("?stream=NAME");
    QTest::newRow("REST no queue") << QStringLiteral("rest+http://q:8080/v1") << QStringLiteral("?queue=NAME");
    QTest::newRow("REST with a user") << QStringLiteral("rest+https://me:hunter2@q/v1?queue=r")
                                      << QStringLiteral("ONCE_QUEUE_TOKEN");
    QTest::newRow("SQS without an account") << QStringLiteral("sqs://eu-west-1/reminders") << QStringLiteral("sqs://REGION/ACCOUNT/QUEUE");
    QTest::newRow("SQS account not 12 digits") << QStringLiteral("sqs://eu-west-1/1234/reminders") << QStringLiteral("12-digit");
    QTest::newRow("SQS region that is a host") << QStringLiteral("sqs://sqs.amazonaws.com/123456789012/r") << QStringLiteral("sqs://REGION/ACCOUNT/QUEUE");
    QTest::newRow("SQS queue with a dot") << QStringLiteral("sqs://eu-west-1/123456789012/a.b") << QStringLiteral("letters, digits");
    QTest::newRow("SQS with credentials") << QStringLiteral("sqs://AKID:hunter2@eu-west-1/123456789012/r") << QStringLiteral("AWS_ACCESS_KEY_ID");
    QTest::newRow("SQS endpoint not http") << QStringLiteral("sqs://eu-west-1/123456789012/r?endpoint=ftp://x") << QStringLiteral("endpoint");
    QTest::newRow("SQS endpoint with a password") << QStringLiteral("sqs://eu-west-1/123456789012/r?endpoint=http://a:hunter2@x")
                                                  << QStringLiteral("endpoint");
    QTest::newRow("Kafka without a topic") << QStringLiteral("kafka://k1:9092/?group=g") << QStringLiteral("kafka://HOST:PORT/TOPIC");
    QTest::newRow("Kafka topic with a slash") << QStringLiteral("kafka://k1:9092/a/b") << QStringLiteral("kafka://HOST:PORT/TOPIC");
    QTest::newRow("Kafka topic with a space") << QStringLiteral("kafka://k1:9092/a%20b") << QStringLiteral("letters, digits");
    QTest::newRow("Kafka unknown setting") << QStringLiteral("kafka://k1:9092/r?grup=g") << QStringLiteral("\"grup\"");
    QTest::newRow("Kafka broker without a port") << QStringLiteral("kafka://k1:9092/r?brokers=k2") << QStringLiteral("HOST:PORT");
    QTest::newRow("Kafka SASL without a user") << QStringLiteral("kafka://k1:9092/r?security=sasl_ssl") << QStringLiteral("names its user");
    QTest::newRow("Kafka password without SASL") << QStringLiteral("kafka://svc:hunter2@k1:9092/r") << QStringLiteral("security=sasl_ssl");
    QTest::newRow("Kafka session below a second") << QStringLiteral("kafka://k1:9092/r?session=0s") << QStringLiteral("from 1s to 30m");
    QTest::newRow("Kafka session in words") << QStringLiteral("kafka://k1:9092/r?session=ten") << QStringLiteral("from 1s to 30m");
    QTest::newRow("Kafka session past half an hour") << QStringLiteral("kafka://k1:9092/r?session=31m") << QStringLiteral("from 1s to 30m");
    QTest::newRow("Kafka unknown mechanism") << QStringLiteral("kafka://svc:hunter2@k1/r?security=sasl_ssl&mechanism=GSSAPI")
                                             << QStringLiteral("mechanism");
}

void TestQueueLocation::refusesBadUrls()
{
    QFETCH(QString, url);
    QFETCH(QString, errorMentions);
    QString error;
    QVERIFY(!QueueLocation::parse(url, &error));
    QVERIFY2(error.contains(errorMentions), qPrintable(error));
    QVERIFY2(!error.contains(QLatin1String("hunter2")), qPrintable(error));
    QVERIFY2(!error.contains(QLatin1Char('\n')), qPrintable(error));
}

// What is shown names the same queue, without the password, whatever the parts hold: a
// user with "%1" in it (QString::arg would read it as a placeholder), '@' or ':'.
void TestQueueLocation::displayNameReadsBackAsTheSameQueue_data()
{
    QTest::addColumn<QString>("url");
    QTest::newRow("plain RabbitMQ") << QStringLiteral("amqp://once:hunter2@mq:5672/%2F?queue=reminders");
    QTest::newRow("user with %1") << QStringLiteral("amqp://%251x:hunter2@mq/v?queue=r");
    QTest::newRow("user with %1 and %2") << QStringLiteral("amqp://%252%251:hunter2@mq/v%252?queue=r");
    QTest::newRow("user with @ and :") << QStringLiteral("amqp://a%40b%3Ac:hunter2@mq/v?queue=r");
    QTest::newRow("vhost with spaces") << QStringLiteral("amqp://once:hunter2@mq/my%20vhost?queue=r");
    QTest::newRow("plain Redis") << QStringLiteral("redis://:hunter2@127.0.0.1:6379/0?stream=s");
    QTest::newRow("Redis IPv6") << QStringLiteral("redis://:hunter2@[::1]:6380/2?stream=s");
    // Redis authenticates as the user (AUTH user password): it is part of where the queue is.
    QTest::newRow("Redis with a user") << QStringLiteral("redis://reader:hunter2@127.0.0.1:6379/0?stream=s");
    QTest::newRow("Redis with an odd user") << QStringLiteral("redis://%EF%BF%BD%40:hunter2@127.0.0.1/0?stream=s");
    QTest::newRow("RabbitMQ IPv6") << QStringLiteral("amqp://once:hunter2@[fe80::1]:5673/v?queue=r");
    QTest::newRow("REST with a token") << QStringLiteral("rest+http://:hunter2@127.0.0.1:8080/v1?queue=r");
    QTest::newRow("REST over TLS under a path") << QStringLiteral("rest+https://[::1]/queues/v1?queue=r");
    QTest::newRow("SQS") << QStringLiteral("sqs://eu-west-1/123456789012/reminders");
    QTest::newRow("SQS at an emulator") << QStringLiteral("sqs://us-east-1/000000000000/r?endpoint=http://127.0.0.1:4566");
    QTest::newRow("Kafka with brokers") << QStringLiteral("kafka://127.0.0.1:9092/r?group=g&brokers=127.0.0.1:9093,127.0.0.1:9094");
    QTest::newRow("Kafka with a session") << QStringLiteral("kafka://127.0.0.1:9092/r?group=g&session=2s");
    QTest::newRow("Kafka with SASL and a CA") << QStringLiteral("kafka://svc:hunter2@k1:9094/r?security=sasl_ssl&ca=/etc/ssl/ca%20x.pem");
}

void TestQueueLocation::displayNameReadsBackAsTheSameQueue()
{
    QFETCH(QString, url);
    QString error;
    const auto location = QueueLocation::parse(url, &error);
    QVERIFY2(location, qPrintable(error));
    const QString shown = location->displayName();
    QVERIFY2(!shown.contains(QLatin1String("hunter2")), qPrintable(shown));
    const auto again = QueueLocation::parse(shown, &error);
    QVERIFY2(again, qPrintable(shown + QStringLiteral(": ") + error));
    QCOMPARE(again->backend, location->backend);
    QCOMPARE(again->host, location->host);
    QCOMPARE(again->port, location->port);
    QCOMPARE(again->user, location->user);
    QCOMPARE(vhostOf(*again), vhostOf(*location));
    QCOMPARE(databaseOf(*again), databaseOf(*location));
    QCOMPARE(again->name, location->name);
    QVERIFY(again->password.isEmpty());
}

QTEST_GUILESS_MAIN(TestQueueLocation)
#include "tst_queuelocation.moc"
