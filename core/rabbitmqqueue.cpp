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
#include "rabbitmqqueue.h"

#include "database.h"

#include <QCryptographicHash>
#include <QDeadlineTimer>
#include <QEventLoop>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLoggingCategory>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QRandomGenerator>
#include <QThread>
#include <QUuid>

#include <amqp.h>
#include <amqp_tcp_socket.h>

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <set>
#include <vector>

namespace once {

namespace {

Q_LOGGING_CATEGORY(lcRabbitMq, "once.core.rabbitmq")

constexpr amqp_channel_t ConsumeChannel = 1;
constexpr amqp_channel_t PublishChannel = 2;
constexpr amqp_channel_t AdminChannel = 3;
constexpr int ChannelCount = 4; // 0 is the connection's

constexpr int DeliveryLimit = 20;
constexpr std::array<int, 6> RetryTierSeconds{1, 5, 30, 120, 600, 3600};
// rabbitmq-c answers heartbeats only while it is called; a worker calls lease() at
// least every few seconds, a console counts() every two.
constexpr int HeartbeatSeconds = 60;
constexpr int ConnectTimeoutMs = 5000;
constexpr int RpcTimeoutMs = 15000;
constexpr int ConfirmTimeoutMs = 15000;
// How long lease() waits for deliveries on their way: long enough to gather a burst,
// short enough never to hold up the engine's turn.
constexpr int LeaseWaitMs = 2;
// Peeking at dead letters ends when this long passes without one (others may hold some).
constexpr int DeadLetterIdleMs = 1000;
constexpr int ManagementTimeoutMs = 2000;
// Unconfirmed publishes in flight: enough to stream, few enough that the broker's
// confirms never pile up unread.
constexpr size_t MaxUnconfirmed = 2000;
// A delayed message this close to its time is due: another hop would only add a tier.
constexpr qint64 DueToleranceMs = 100;

const QByteArray ContentType = QByteArrayLiteral("application/json");

namespace header {
constexpr char EnqueuedAt[] = "x-once-enqueued-at";
constexpr char Redrives[] = "x-once-redrives";
constexpr char Receives[] = "x-once-receives";
constexpr char VisibleAt[] = "x-once-visible-at";
constexpr char SendKey[] = "x-once-send-key";
constexpr char EventId[] = "x-once-event-id";
constexpr char ErrorClass[] = "x-once-error-class";
constexpr char LastError[] = "x-once-last-error";
constexpr char Attempts[] = "x-once-attempts";
constexpr char FirstAttemptAt[] = "x-once-first-attempt-at";
constexpr char LastAttemptAt[] = "x-once-last-attempt-at";
constexpr char DeadAt[] = "x-once-dead-at";
// The broker's own: a copy must not carry the count of the message it copies.
constexpr char DeliveryCount[] = "x-delivery-count";
constexpr char Death[] = "x-death";
} // namespace header

amqp_bytes_t bytes(const QByteArray &data)
{
    return amqp_bytes_t{size_t(data.size()), const_cast<char *>(data.constData())};
}

QByteArray toByteArray(amqp_bytes_t data)
{
    return QByteArray(static_cast<const char *>(data.bytes), qsizetype(data.len));
}

bool sameKey(amqp_bytes_t key, const char *name)
{
    const size_t length = qstrlen(name);
    return key.len == length && memcmp(key.bytes, name, length) == 0;
}

const amqp_field_value_t *findField(const amqp_table_t &table, const char *key)
{
    for (int i = 0; i < table.num_entries; ++i) {
        if (sameKey(table.entries[i].key, key))
            return &table.entries[i].value;
    }
    return nullptr;
}

// Integers of any width; a foreign producer may also send a number as a string.
std::optional<qint64> fieldInt(const amqp_field_value_t *value)
{
    if (!value)
        return std::nullopt;
    switch (value->kind) {
    case AMQP_FIELD_KIND_I8:
        return value->value.i8;
    case AMQP_FIELD_KIND_U8:
        return value->value.u8;
    case AMQP_FIELD_KIND_I16:
        return value->value.i16;
    case AMQP_FIELD_KIND_U16:
        return value->value.u16;
    case AMQP_FIELD_KIND_I32:
        return value->value.i32;
    case AMQP_FIELD_KIND_U32:
        return value->value.u32;
    case AMQP_FIELD_KIND_I64:
        return value->value.i64;
    case AMQP_FIELD_KIND_U64:
    case AMQP_FIELD_KIND_TIMESTAMP:
        return qint64(value->value.u64);
    case AMQP_FIELD_KIND_UTF8:
    case AMQP_FIELD_KIND_BYTES: {
        bool ok = false;
        const qint64 number = toByteArray(value->value.bytes).toLongLong(&ok);
        return ok ? std::optional<qint64>(number) : std::nullopt;
    }
    default:
        return std::nullopt;
    }
}

QByteArray fieldBytes(const amqp_field_value_t *value)
{
    if (value && (value->kind == AMQP_FIELD_KIND_UTF8 || value->kind == AMQP_FIELD_KIND_BYTES))
        return toByteArray(value->value.bytes);
    return {};
}

const amqp_table_t *headersOf(const amqp_basic_properties_t &properties)
{
    return (properties._flags & AMQP_BASIC_HEADERS_FLAG) ? &properties.headers : nullptr;
}

std::optional<qint64> headerInt(const amqp_basic_properties_t &properties, const char *key)
{
    const amqp_table_t *headers = headersOf(properties);
    return headers ? fieldInt(findField(*headers, key)) : std::nullopt;
}

QByteArray headerBytes(const amqp_basic_properties_t &properties, const char *key)
{
    const amqp_table_t *headers = headersOf(properties);
    return headers ? fieldBytes(findField(*headers, key)) : QByteArray();
}

// An AMQP field table under construction; keeps the bytes its entries point to.
class FieldTable
{
public:
    FieldTable() = default;
    // Starts from another table, whose memory must outlive this one.
    explicit FieldTable(const amqp_table_t *base)
    {
        if (base)
            m_entries.assign(base->entries, base->entries + base->num_entries);
    }
    FieldTable(const FieldTable &) = delete;
    FieldTable &operator=(const FieldTable &) = delete;
    FieldTable(FieldTable &&) = default;
    FieldTable &operator=(FieldTable &&) = default;

    void remove(const char *key)
    {
        m_entries.erase(
            std::remove_if(m_entries.begin(), m_entries.end(),
                           [key](const amqp_table_entry_t &entry) { return sameKey(entry.key, key); }),
            m_entries.end());
    }
    void setInt(const char *key, qint64 number)
    {
        amqp_field_value_t value{};
        value.kind = AMQP_FIELD_KIND_I64;
        value.value.i64 = number;
        set(key, value);
    }
    void setString(const char *key, const QByteArray &text)
    {
        m_strings.push_back(text);
        amqp_field_value_t value{};
        value.kind = AMQP_FIELD_KIND_UTF8;
        value.value.bytes = bytes(m_strings.back());
        set(key, value);
    }
    void setString(const char *key, const QString &text) { setString(key, text.toUtf8()); }
    amqp_table_t table()
    {
        return amqp_table_t{int(m_entries.size()), m_entries.empty() ? nullptr : m_entries.data()};
    }

private:
    void set(const char *key, const amqp_field_value_t &value)
    {
        remove(key);
        m_entries.push_back(amqp_table_entry_t{amqp_cstring_bytes(key), value});
    }

    std::vector<amqp_table_entry_t> m_entries;
    std::deque<QByteArray> m_strings; // a deque never moves what it holds
};

struct EnvelopeDeleter
{
    void operator()(amqp_envelope_t *envelope) const
    {
        amqp_destroy_envelope(envelope);
        delete envelope;
    }
};
using Envelope = std::unique_ptr<amqp_envelope_t, EnvelopeDeleter>;

// One message to publish. A copy of a received message points into its envelope, which
// must outlive the publish.
struct Publication
{
    QByteArray exchange;
    QByteArray routingKey;
    amqp_basic_properties_t properties{};
    FieldTable headers;
    QByteArray messageId;
    QByteArray body;

    const amqp_basic_properties_t *finish()
    {
        properties.headers = headers.table();
        properties._flags |= AMQP_BASIC_HEADERS_FLAG;
        if (!messageId.isNull()) {
            properties.message_id = bytes(messageId);
            properties._flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
        }
        return &properties;
    }
};

// A new message: the properties every message of ours carries.
Publication freshPublication(const QString &id, const QByteArray &payload, qint64 now)
{
    Publication publication;
    publication.messageId = id.toUtf8();
    publication.body = payload;
    auto &properties = publication.properties;
    properties._flags =
        AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_TIMESTAMP_FLAG;
    properties.content_type = bytes(ContentType);
    properties.delivery_mode = AMQP_DELIVERY_PERSISTENT;
    properties.timestamp = uint64_t(now / 1000);
    publication.headers.setInt(header::EnqueuedAt, now);
    return publication;
}

// A copy of a received message: the same properties, headers and body, minus the
// broker's delivery count, persistent whatever the original was.
Publication copyOf(const amqp_envelope_t &envelope, const QString &id)
{
    Publication publication;
    publication.properties = envelope.message.properties;
    publication.properties._flags |= AMQP_BASIC_DELIVERY_MODE_FLAG;
    publication.properties.delivery_mode = AMQP_DELIVERY_PERSISTENT;
    publication.headers = FieldTable(headersOf(envelope.message.properties));
    publication.headers.remove(header::DeliveryCount);
    publication.messageId = id.toUtf8();
    publication.body = QByteArray::fromRawData(static_cast<const char *>(envelope.message.body.bytes),
                                               qsizetype(envelope.message.body.len));
    return publication;
}

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
void route(Publication *publication, const QString &name, qint64 delayMs, qint64 now)
{
    if (delayMs > 0) {
        publication->exchange = QByteArray(); // the default exchange: routing key = queue
        publication->routingKey = retryQueueName(name, tierFor(delayMs));
        publication->headers.setInt(header::VisibleAt, now + delayMs);
    } else {
        publication->exchange = name.toUtf8();
        publication->routingKey = name.toUtf8();
        publication->headers.remove(header::VisibleAt);
    }
}

QString replyText(amqp_bytes_t text)
{
    return QString::fromUtf8(toByteArray(text));
}

QString statusText(int status)
{
    return QString::fromUtf8(amqp_error_string2(status));
}

// rabbitmq-c's words for a failed connect, with what they mean here: it keeps no errno.
QString connectProblem(int status)
{
    switch (status) {
    case AMQP_STATUS_SOCKET_ERROR:
        return QStringLiteral("refused, or the host is unreachable");
    case AMQP_STATUS_TIMEOUT:
        return QStringLiteral("no answer within %1 s").arg(ConnectTimeoutMs / 1000);
    case AMQP_STATUS_HOSTNAME_RESOLUTION_FAILED:
        return QStringLiteral("unknown host");
    default:
        return statusText(status);
    }
}

// What a received message says about itself.
struct Received
{
    QString id;
    int receives = 0;
    int delivery = 0;
    qint64 enqueuedAtMs = 0;
    int redrives = 0;
    std::optional<qint64> visibleAtMs;
};

Received describe(const amqp_envelope_t &envelope, const QString &fallbackId, qint64 now)
{
    const amqp_basic_properties_t &properties = envelope.message.properties;
    Received received;
    if ((properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG) && properties.message_id.len > 0)
        received.id = replyText(properties.message_id);
    else
        received.id = fallbackId;
    received.receives = int(headerInt(properties, header::Receives).value_or(0));
    // The quorum queue counts the deliveries that ended without a settlement; a classic
    // queue only says whether there was one.
    const qint64 returned =
        headerInt(properties, header::DeliveryCount).value_or(envelope.redelivered ? 1 : 0);
    received.delivery = received.receives + int(returned) + 1;
    if (const auto enqueued = headerInt(properties, header::EnqueuedAt))
        received.enqueuedAtMs = *enqueued;
    else if (properties._flags & AMQP_BASIC_TIMESTAMP_FLAG)
        received.enqueuedAtMs = qint64(properties.timestamp) * 1000;
    else
        received.enqueuedAtMs = now;
    received.redrives = int(headerInt(properties, header::Redrives).value_or(0));
    received.visibleAtMs = headerInt(properties, header::VisibleAt);
    return received;
}

// The most recent death the broker recorded (x-death is newest first), for dead letters
// the broker made itself: the reason and the time (s).
std::optional<std::pair<QString, qint64>> lastBrokerDeath(const amqp_basic_properties_t &properties)
{
    const amqp_table_t *headers = headersOf(properties);
    const amqp_field_value_t *deaths = headers ? findField(*headers, header::Death) : nullptr;
    if (!deaths || deaths->kind != AMQP_FIELD_KIND_ARRAY || deaths->value.array.num_entries == 0)
        return std::nullopt;
    const amqp_field_value_t &last = deaths->value.array.entries[0];
    if (last.kind != AMQP_FIELD_KIND_TABLE)
        return std::nullopt;
    const QString reason = QString::fromUtf8(fieldBytes(findField(last.value.table, "reason")));
    return std::pair{reason, fieldInt(findField(last.value.table, "time")).value_or(0)};
}

DeadLetter toDeadLetter(const amqp_envelope_t &envelope, const QString &fallbackId)
{
    const amqp_basic_properties_t &properties = envelope.message.properties;
    const Received received = describe(envelope, fallbackId, nowMs());
    DeadLetter letter;
    letter.id = received.id;
    letter.payload = toByteArray(envelope.message.body);
    letter.sendKey = headerBytes(properties, header::SendKey);
    letter.eventId = QString::fromUtf8(headerBytes(properties, header::EventId));
    letter.errorClass = QString::fromUtf8(headerBytes(properties, header::ErrorClass));
    letter.lastError = QString::fromUtf8(headerBytes(properties, header::LastError));
    letter.attempts = int(headerInt(properties, header::Attempts).value_or(0));
    letter.receiveCount = received.receives + int(headerInt(properties, header::DeliveryCount).value_or(0));
    letter.redriveCount = received.redrives;
    letter.firstAttemptAtMs = headerInt(properties, header::FirstAttemptAt).value_or(0);
    letter.lastAttemptAtMs = headerInt(properties, header::LastAttemptAt).value_or(0);
    letter.deadAtMs = headerInt(properties, header::DeadAt).value_or(0);
    letter.enqueuedAtMs = received.enqueuedAtMs;
    // Dead-lettered by the broker (the delivery limit, a policy) after our last word on
    // it, if any: what our headers say is from an earlier life of the message.
    const auto death = lastBrokerDeath(properties);
    if (death && death->first != QLatin1String("expired") && death->second * 1000 >= letter.deadAtMs) {
        // Its x-delivery-count stays behind; the limit is the one declareTopology() sets.
        if (death->first == QLatin1String("delivery_limit") && !headerInt(properties, header::DeliveryCount))
            letter.receiveCount = received.receives + DeliveryLimit + 1;
        letter.errorClass = QStringLiteral("broker-") + death->first;
        letter.lastError =
            death->first == QLatin1String("delivery_limit")
                ? QStringLiteral("RabbitMQ dead-lettered it after %1 deliveries without a settlement "
                                 "(workers crashing on it?)")
                      .arg(letter.receiveCount)
                : QStringLiteral("RabbitMQ dead-lettered it (%1)").arg(death->first);
        letter.deadAtMs = death->second * 1000;
    }
    return letter;
}

// An id for a dead letter without message_id that stays the same from one look to the
// next, or an operator could never pick it; the redrive makes it the message's id.
QString contentId(const amqp_envelope_t &envelope)
{
    const amqp_basic_properties_t &properties = envelope.message.properties;
    QCryptographicHash hash(QCryptographicHash::Sha256);
    hash.addData(toByteArray(envelope.message.body));
    if (properties._flags & AMQP_BASIC_TIMESTAMP_FLAG)
        hash.addData(QByteArray::number(qulonglong(properties.timestamp)));
    hash.addData(QByteArray::number(headerInt(properties, header::DeadAt).value_or(0)));
    if (const auto death = lastBrokerDeath(properties))
        hash.addData(QByteArray::number(death->second));
    return QStringLiteral("amqp-dead-") + QString::fromLatin1(hash.result().toHex().left(16));
}

// A delivery leased to the engine.
struct Lease
{
    uint64_t tag = 0;
    Envelope envelope;
    Received received;
};

} // namespace

// The connection and its three channels: frames in, publishes with confirms, acks out.
// The error of a channel the broker closed waits here until a caller asks for it; a
// broken connection stays broken until the session is dropped.
class RabbitMqSession
{
public:
    explicit RabbitMqSession(const QueueLocation &location) : m_location(location) {}
    ~RabbitMqSession()
    {
        if (!m_connection)
            return;
        // A clean close lets the broker requeue what this consumer held at once.
        if (!m_broken)
            amqp_connection_close(m_connection, AMQP_REPLY_SUCCESS);
        amqp_destroy_connection(m_connection);
    }
    RabbitMqSession(const RabbitMqSession &) = delete;
    RabbitMqSession &operator=(const RabbitMqSession &) = delete;

    bool open(const QString &connectionName, QString *error);
    bool broken() const { return m_broken; }
    amqp_connection_state_t connection() const { return m_connection; }
    // Called before each operation: drops what earlier ones left behind.
    void begin();

    // Channels open on demand; the publish channel in confirm mode.
    bool channel(amqp_channel_t channel, QString *error);
    bool isOpen(amqp_channel_t channel) const { return m_open[channel]; }
    // Closes a channel; the broker has requeued what it held by the time this returns.
    bool closeChannel(amqp_channel_t channel, QString *error);
    // The error of a channel the broker closed, once.
    QString takeChannelError(amqp_channel_t channel)
    {
        return std::exchange(m_channelError[channel], QString());
    }
    // Checks an RPC's reply; a channel or connection the broker closed is noted.
    bool check(amqp_channel_t channel, const amqp_rpc_reply_t &reply, const QString &what, QString *error);
    // For the rabbitmq-c calls that return the decoded reply, NULL on failure.
    bool checkLast(amqp_channel_t channel, const void *decoded, const QString &what, QString *error)
    {
        return decoded || check(channel, amqp_get_rpc_reply(m_connection), what, error);
    }

    // Reads one thing the broker sent, waiting up to timeoutMs for it; *idle when
    // nothing came.
    bool pump(int timeoutMs, bool *idle, QString *error);
    // Pumps until done() or the deadline; a timeout breaks the connection, whose state
    // is unknown then.
    template <typename Done> bool pumpUntil(Done done, int timeoutMs, const QString &what, QString *error);

    // Publishes with publisher confirms: true once the broker has taken every message.
    bool publish(std::vector<Publication> &batch, QString *error);

    std::deque<Envelope> &deliveries(amqp_channel_t channel) { return m_deliveries[channel]; }
    // Acks, or requeues, deliveries of a channel.
    bool acknowledge(amqp_channel_t channel, std::vector<uint64_t> tags, bool requeue, QString *error);
    bool consuming() const { return m_consuming && m_open[ConsumeChannel]; }
    // Deliveries this consumer holds: leased, or fetched ahead of a lease.
    qint64 held() const { return qint64(leases.size() + m_deliveries[ConsumeChannel].size()); }
    void setConsuming() { m_consuming = true; }

    QString prefix() const { return QStringLiteral("RabbitMQ at %1: ").arg(m_location.displayName()); }
    bool fail(const QString &message, QString *error);

    // The consumer's leases by (message id, delivery).
    std::map<std::pair<QString, int>, Lease> leases;
    QString connectionToken; // tells this connection's delivery tags from another's

private:
    bool handleMethod(amqp_channel_t channel, const amqp_method_t &method, QString *error);
    bool connectionClosed(const amqp_method_t &method, const QString &what, QString *error);
    void channelClosed(amqp_channel_t channel, const QString &reason);
    bool lost(const QString &what, const QString &reason, QString *error);

    const QueueLocation &m_location;
    amqp_connection_state_t m_connection = nullptr;
    bool m_broken = false;
    std::array<bool, ChannelCount> m_open{};
    std::array<QString, ChannelCount> m_channelError;
    std::array<std::deque<Envelope>, ChannelCount> m_deliveries;
    std::array<std::set<uint64_t>, ChannelCount> m_unacked;
    // Messages of leases a closed channel ended, kept until the operation that may
    // still be publishing copies of them is over.
    std::vector<Envelope> m_retired;
    bool m_consuming = false;
    // Publisher confirms on the publish channel.
    uint64_t m_nextPublishTag = 1;
    std::set<uint64_t> m_unconfirmed;
    int m_nacked = 0;
    int m_returned = 0;
    QString m_returnReason;
};

bool RabbitMqSession::fail(const QString &message, QString *error)
{
    *error = prefix() + message;
    return false;
}

bool RabbitMqSession::lost(const QString &what, const QString &reason, QString *error)
{
    m_broken = true;
    std::fill(m_open.begin(), m_open.end(), false);
    qCDebug(lcRabbitMq).noquote() << "connection lost while" << what << ":" << reason;
    return fail(QStringLiteral("lost the connection while %1: %2").arg(what, reason), error);
}

bool RabbitMqSession::open(const QString &connectionName, QString *error)
{
    m_broken = true; // until logged in
    m_connection = amqp_new_connection();
    amqp_socket_t *socket = m_connection ? amqp_tcp_socket_new(m_connection) : nullptr;
    if (!socket)
        return fail(QStringLiteral("out of memory"), error);
    const timeval connectTimeout{ConnectTimeoutMs / 1000, 0};
    const int status = amqp_socket_open_noblock(socket, m_location.host.toUtf8().constData(), m_location.port,
                                                &connectTimeout);
    if (status != AMQP_STATUS_OK)
        return fail(QStringLiteral("cannot connect: %1").arg(connectProblem(status)), error);
    const timeval rpcTimeout{RpcTimeoutMs / 1000, 0};
    amqp_set_handshake_timeout(m_connection, &connectTimeout);
    amqp_set_rpc_timeout(m_connection, &rpcTimeout);

    // Named, so the broker's management UI tells the workers' connections apart.
    FieldTable properties;
    properties.setString("connection_name", connectionName);
    const amqp_table_t table = properties.table();
    const amqp_rpc_reply_t reply = amqp_login_with_properties(
        m_connection, m_location.vhost.toUtf8().constData(), 0, AMQP_DEFAULT_FRAME_SIZE, HeartbeatSeconds,
        &table, AMQP_SASL_METHOD_PLAIN, m_location.user.toUtf8().constData(),
        m_location.password.toUtf8().constData());
    if (reply.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
        reply.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        const auto *close = static_cast<const amqp_connection_close_t *>(reply.reply.decoded);
        return fail(QStringLiteral("cannot log in: %1").arg(replyText(close->reply_text)), error);
    }
    if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
        (reply.library_error == AMQP_STATUS_CONNECTION_CLOSED ||
         reply.library_error == AMQP_STATUS_SOCKET_ERROR))
        return fail(
            QStringLiteral("cannot log in: the broker closed the connection (wrong user or password, or no "
                           "access to vhost '%1'?)")
                .arg(m_location.vhost),
            error);
    if (reply.reply_type != AMQP_RESPONSE_NORMAL)
        return fail(QStringLiteral("cannot log in: %1")
                        .arg(reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION
                                 ? statusText(reply.library_error)
                                 : QStringLiteral("no answer")),
                    error);
    m_broken = false;
    connectionToken = QString::number(QRandomGenerator::global()->generate(), 36);
    qCDebug(lcRabbitMq).noquote() << "connected to" << m_location.displayName();
    return true;
}

void RabbitMqSession::begin()
{
    m_retired.clear();
    // Decoded frames live in per-channel pools until released; everything kept from
    // them has been copied by now.
    for (amqp_channel_t channel = 0; channel < ChannelCount; ++channel)
        amqp_maybe_release_buffers_on_channel(m_connection, channel);
}

bool RabbitMqSession::check(amqp_channel_t channel, const amqp_rpc_reply_t &reply, const QString &what,
                            QString *error)
{
    switch (reply.reply_type) {
    case AMQP_RESPONSE_NORMAL:
        return true;
    case AMQP_RESPONSE_SERVER_EXCEPTION:
        if (reply.reply.id == AMQP_CONNECTION_CLOSE_METHOD)
            return connectionClosed(reply.reply, what, error);
        handleMethod(channel, reply.reply, error);
        return fail(QStringLiteral("%1: %2").arg(what, takeChannelError(channel)), error);
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
        return lost(what, statusText(reply.library_error), error);
    case AMQP_RESPONSE_NONE:
        break;
    }
    return lost(what, QStringLiteral("no reply"), error);
}

bool RabbitMqSession::channel(amqp_channel_t channel, QString *error)
{
    if (m_broken)
        return fail(QStringLiteral("the connection is closed"), error);
    if (m_open[channel])
        return true;
    if (!checkLast(channel, amqp_channel_open(m_connection, channel), QStringLiteral("opening a channel"),
                   error))
        return false;
    m_open[channel] = true;
    m_channelError[channel].clear();
    if (channel == PublishChannel) {
        m_nextPublishTag = 1;
        m_unconfirmed.clear();
        return checkLast(channel, amqp_confirm_select(m_connection, channel),
                         QStringLiteral("enabling publisher confirms"), error);
    }
    return true;
}

bool RabbitMqSession::closeChannel(amqp_channel_t channel, QString *error)
{
    if (m_broken)
        return fail(QStringLiteral("the connection is closed"), error);
    if (!m_open[channel])
        return true;
    const amqp_rpc_reply_t reply = amqp_channel_close(m_connection, channel, AMQP_REPLY_SUCCESS);
    m_open[channel] = false;
    m_deliveries[channel].clear();
    m_unacked[channel].clear();
    if (!check(channel, reply, QStringLiteral("closing a channel"), error))
        return false;
    // Deliveries on their way before the close-ok wait in the library's queue; read them
    // now, while the closed channel drops them, so none passes for a delivery on the
    // channel's next life.
    for (bool idle = false; !idle && amqp_frames_enqueued(m_connection);) {
        if (!pump(0, &idle, error))
            return false;
    }
    return true;
}

void RabbitMqSession::channelClosed(amqp_channel_t channel, const QString &reason)
{
    qCDebug(lcRabbitMq).noquote() << "the broker closed channel" << channel << ":" << reason;
    m_open[channel] = false;
    m_channelError[channel] = reason;
    if (reason.startsWith(QLatin1String("NOT_FOUND")))
        m_channelError[channel] += QStringLiteral(" (declare the queues: once init --queue URL)");
    // The broker requeued whatever the channel held; its tags mean nothing any more.
    m_deliveries[channel].clear();
    m_unacked[channel].clear();
    if (channel == ConsumeChannel) {
        m_consuming = false;
        for (auto &[key, lease] : leases)
            m_retired.push_back(std::move(lease.envelope));
        leases.clear();
    } else if (channel == PublishChannel) {
        m_unconfirmed.clear();
    }
}

bool RabbitMqSession::pump(int timeoutMs, bool *idle, QString *error)
{
    *idle = false;
    if (m_broken)
        return fail(QStringLiteral("the connection is closed"), error);
    const timeval timeout{timeoutMs / 1000, (timeoutMs % 1000) * 1000};
    Envelope envelope(new amqp_envelope_t{});
    const amqp_rpc_reply_t reply = amqp_consume_message(m_connection, envelope.get(), &timeout, 0);
    const amqp_channel_t channel = envelope->channel;
    if (reply.reply_type == AMQP_RESPONSE_NORMAL) {
        if (channel < ChannelCount && m_open[channel]) {
            m_unacked[channel].insert(envelope->delivery_tag);
            m_deliveries[channel].push_back(std::move(envelope));
        }
        amqp_maybe_release_buffers_on_channel(m_connection, channel);
        return true;
    }
    // amqp_consume_message frees what it took when it fails: nothing to destroy.
    delete envelope.release();
    if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && reply.library_error == AMQP_STATUS_TIMEOUT) {
        *idle = true;
        return true;
    }
    if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
        reply.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
        amqp_frame_t frame;
        const int status = amqp_simple_wait_frame(m_connection, &frame);
        if (status != AMQP_STATUS_OK)
            return lost(QStringLiteral("reading"), statusText(status), error);
        // Content frames here belong to something already given up on.
        if (frame.frame_type != AMQP_FRAME_METHOD || frame.channel >= ChannelCount)
            return true;
        const bool ok = handleMethod(frame.channel, frame.payload.method, error);
        if (ok && !m_broken)
            amqp_maybe_release_buffers_on_channel(m_connection, frame.channel);
        return ok;
    }
    // A delivery cut short by a closing channel or connection.
    if (reply.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION)
        return handleMethod(channel, reply.reply, error);
    return lost(QStringLiteral("reading"), statusText(reply.library_error), error);
}

bool RabbitMqSession::connectionClosed(const amqp_method_t &method, const QString &what, QString *error)
{
    const QString reason =
        replyText(static_cast<const amqp_connection_close_t *>(method.decoded)->reply_text);
    amqp_connection_close_ok_t ok{};
    amqp_send_method(m_connection, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
    return lost(what, reason, error);
}

bool RabbitMqSession::handleMethod(amqp_channel_t channel, const amqp_method_t &method, QString *error)
{
    const void *decoded = method.decoded;
    switch (method.id) {
    case AMQP_BASIC_ACK_METHOD:
    case AMQP_BASIC_NACK_METHOD: {
        if (channel != PublishChannel)
            break;
        const bool ack = method.id == AMQP_BASIC_ACK_METHOD;
        const uint64_t tag = ack ? static_cast<const amqp_basic_ack_t *>(decoded)->delivery_tag
                                 : static_cast<const amqp_basic_nack_t *>(decoded)->delivery_tag;
        const bool multiple = ack ? static_cast<const amqp_basic_ack_t *>(decoded)->multiple
                                  : static_cast<const amqp_basic_nack_t *>(decoded)->multiple;
        auto first = multiple ? m_unconfirmed.begin() : m_unconfirmed.find(tag);
        auto last = multiple ? m_unconfirmed.upper_bound(tag) : first;
        if (!multiple && first != m_unconfirmed.end())
            ++last;
        if (!ack)
            m_nacked += int(std::distance(first, last));
        m_unconfirmed.erase(first, last);
        break;
    }
    case AMQP_BASIC_RETURN_METHOD: {
        const auto *returned = static_cast<const amqp_basic_return_t *>(decoded);
        m_returnReason = QStringLiteral("%1 (exchange '%2', routing key '%3')")
                             .arg(replyText(returned->reply_text), replyText(returned->exchange),
                                  replyText(returned->routing_key));
        ++m_returned;
        // The returned message's content follows: read it, so that nothing takes it for
        // a delivery's.
        amqp_message_t message;
        const amqp_rpc_reply_t reply = amqp_read_message(m_connection, channel, &message, 0);
        if (reply.reply_type == AMQP_RESPONSE_NORMAL) {
            amqp_destroy_message(&message);
            break;
        }
        if (reply.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION)
            return handleMethod(channel, reply.reply, error);
        return lost(QStringLiteral("reading a returned message"), statusText(reply.library_error), error);
    }
    case AMQP_CHANNEL_CLOSE_METHOD: {
        const QString reason = replyText(static_cast<const amqp_channel_close_t *>(decoded)->reply_text);
        amqp_channel_close_ok_t ok{};
        amqp_send_method(m_connection, channel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
        channelClosed(channel, reason);
        break;
    }
    case AMQP_CONNECTION_CLOSE_METHOD:
        return connectionClosed(method, QStringLiteral("talking to the broker"), error);
    case AMQP_BASIC_CANCEL_METHOD:
        // The broker ended the consumer (its queue was deleted); its deliveries stay
        // valid, and the next lease consumes again.
        if (channel == ConsumeChannel)
            m_consuming = false;
        break;
    default:
        break;
    }
    return true;
}

template <typename Done>
bool RabbitMqSession::pumpUntil(Done done, int timeoutMs, const QString &what, QString *error)
{
    const QDeadlineTimer deadline(timeoutMs);
    while (!done()) {
        bool idle = false;
        if (!pump(int(std::max<qint64>(deadline.remainingTime(), 0)), &idle, error))
            return false;
        if (idle && deadline.hasExpired())
            return lost(what, QStringLiteral("no answer within %1 s").arg(timeoutMs / 1000), error);
    }
    return true;
}

bool RabbitMqSession::publish(std::vector<Publication> &batch, QString *error)
{
    if (batch.empty())
        return true;
    if (!channel(PublishChannel, error))
        return false;
    m_nacked = 0;
    m_returned = 0;
    const auto closed = [this] { return !m_open[PublishChannel]; };
    const QString waiting =
        QStringLiteral("waiting for the broker to confirm %1 message(s)").arg(batch.size());
    for (auto &publication : batch) {
        // Mandatory: a message no queue takes comes back instead of vanishing.
        const int status = amqp_basic_publish(m_connection, PublishChannel, bytes(publication.exchange),
                                              bytes(publication.routingKey), 1, 0, publication.finish(),
                                              bytes(publication.body));
        if (status != AMQP_STATUS_OK)
            return lost(QStringLiteral("publishing"), statusText(status), error);
        m_unconfirmed.insert(m_nextPublishTag++);
        if (m_unconfirmed.size() >= MaxUnconfirmed &&
            !pumpUntil([&] { return closed() || m_unconfirmed.size() < MaxUnconfirmed / 2; },
                       ConfirmTimeoutMs, waiting, error))
            return false;
        if (closed())
            break;
    }
    if (!pumpUntil([&] { return closed() || m_unconfirmed.empty(); }, ConfirmTimeoutMs, waiting, error))
        return false;
    if (closed())
        return fail(QStringLiteral("publishing: %1").arg(takeChannelError(PublishChannel)), error);
    if (m_returned > 0)
        return fail(
            QStringLiteral("%1 of %2 message(s) reached no queue: %3 (declare the queues: once init --queue "
                           "URL)")
                .arg(m_returned)
                .arg(batch.size())
                .arg(m_returnReason),
            error);
    if (m_nacked > 0)
        return fail(QStringLiteral("the broker refused %1 of %2 message(s)").arg(m_nacked).arg(batch.size()),
                    error);
    return true;
}

bool RabbitMqSession::acknowledge(amqp_channel_t channel, std::vector<uint64_t> tags, bool requeue,
                                  QString *error)
{
    if (tags.empty())
        return true;
    if (m_broken || !m_open[channel])
        return fail(
            QStringLiteral("the channel of these deliveries closed: %1").arg(takeChannelError(channel)),
            error);
    std::sort(tags.begin(), tags.end());
    std::set<uint64_t> &unacked = m_unacked[channel];
    // When the tags are the lowest the channel holds, one frame settles them all.
    size_t lowest = 0;
    for (auto it = unacked.begin(); lowest < tags.size() && it != unacked.end() && *it == tags[lowest]; ++it)
        ++lowest;
    for (size_t i = lowest > 1 ? lowest - 1 : 0; i < tags.size(); ++i) {
        const bool multiple = lowest > 1 && i == lowest - 1;
        const int status = requeue ? amqp_basic_nack(m_connection, channel, tags[i], multiple, 1)
                                   : amqp_basic_ack(m_connection, channel, tags[i], multiple);
        if (status != AMQP_STATUS_OK)
            return lost(requeue ? QStringLiteral("requeueing") : QStringLiteral("acknowledging"),
                        statusText(status), error);
    }
    for (const uint64_t tag : tags)
        unacked.erase(tag);
    return true;
}

namespace {

// Sends messages that arrived before their time (a delay beyond the longest tier) on to
// their next tier, as they were.
bool forward(RabbitMqSession &session, const QString &name, const std::vector<Envelope> &early, qint64 now,
             QString *error)
{
    if (early.empty())
        return true;
    std::vector<Publication> hops;
    std::vector<uint64_t> tags;
    for (const auto &envelope : early) {
        const Received received = describe(*envelope, QString(), now);
        Publication hop = copyOf(*envelope, received.id);
        hop.headers.setInt(header::Receives, received.delivery - 1);
        route(&hop, name, *received.visibleAtMs - now, now);
        hops.push_back(std::move(hop));
        tags.push_back(envelope->delivery_tag);
    }
    if (session.publish(hops, error) && session.acknowledge(ConsumeChannel, tags, false, error))
        return true;
    QString ignored;
    session.acknowledge(ConsumeChannel, tags, true, &ignored);
    return false;
}

Publication retryCopy(const Lease &lease, const QString &name, qint64 delayMs, qint64 now)
{
    Publication copy = copyOf(*lease.envelope, lease.received.id);
    copy.headers.setInt(header::Receives, lease.received.delivery);
    copy.headers.setInt(header::EnqueuedAt, lease.received.enqueuedAtMs);
    route(&copy, name, delayMs, now);
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

bool RabbitMqQueue::declareTopology(QString *error)
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
        route(&publication, location().name, message.delayMs, now);
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
        !forward(*session, location().name, early, now, error)) {
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
        copies.push_back(settlement.kind == Settlement::Kind::Retry
                             ? retryCopy(lease, location().name, settlement.delayMs, now)
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
    const auto ready = depth(*session, location().name.toUtf8(), error);
    const auto dead = ready ? depth(*session, location().deadLetterName().toUtf8(), error) : std::nullopt;
    if (!dead)
        return std::nullopt;
    counts.ready = *ready;
    counts.dead = *dead;
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
    counts.unavailable = managementProblem(&counts);
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

// Fills in what only the management API knows (in flight, the oldest message's age);
// says why not when it cannot, else returns nothing.
namespace {

struct HttpAnswer
{
    int status = 0;
    QNetworkReply::NetworkError error = QNetworkReply::NoError;
    QString errorString;
    QByteArray body;
};

// Runs the request on a thread of its own while this one waits without an event loop: a
// nested loop here would run whatever else is queued for the calling thread (the engine's
// next turn, the console's next request) in the middle of the caller's call.
HttpAnswer getWithoutEventLoop(const QNetworkRequest &request)
{
    HttpAnswer answer;
    const std::unique_ptr<QThread> thread(QThread::create([&request, &answer] {
        QNetworkAccessManager manager;
        const std::unique_ptr<QNetworkReply> reply(manager.get(request));
        if (!reply->isFinished()) {
            QEventLoop loop;
            QObject::connect(reply.get(), &QNetworkReply::finished, &loop, &QEventLoop::quit);
            loop.exec();
        }
        answer.status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
        answer.error = reply->error();
        answer.errorString = reply->errorString();
        if (reply->error() == QNetworkReply::NoError)
            answer.body = reply->readAll();
    }));
    thread->start();
    thread->wait();
    return answer;
}

} // namespace

QString RabbitMqQueue::managementProblem(QueueCounts *counts) const
{
    const QueueLocation &where = location();
    const QString base = where.managementUrl.toString(QUrl::StripTrailingSlash);
    // The default vhost "/" must travel as %2F.
    const QUrl url(QStringLiteral("%1/api/queues/%2/%3")
                       .arg(base, QString::fromLatin1(QUrl::toPercentEncoding(where.vhost)),
                            QString::fromLatin1(QUrl::toPercentEncoding(where.name))));
    const auto problem = [&base](const QString &reason) {
        return QStringLiteral("RabbitMQ management API not reachable at %1: %2").arg(base, reason);
    };
    QNetworkRequest request(url);
    const QByteArray credentials = where.user.toUtf8() + ':' + where.password.toUtf8();
    request.setRawHeader("Authorization", "Basic " + credentials.toBase64());
    request.setTransferTimeout(ManagementTimeoutMs);
    // The credentials go to this address, never to one it redirects to.
    request.setAttribute(QNetworkRequest::RedirectPolicyAttribute, QNetworkRequest::ManualRedirectPolicy);
    const HttpAnswer answer = getWithoutEventLoop(request);
    if (answer.error == QNetworkReply::OperationCanceledError)
        return problem(QStringLiteral("no answer within %1 s").arg(ManagementTimeoutMs / 1000));
    if (answer.status == 401)
        return problem(QStringLiteral("HTTP 401 (the user needs the monitoring or management tag)"));
    if (answer.status != 200)
        return problem(answer.status ? QStringLiteral("HTTP %1").arg(answer.status) : answer.errorString);
    const QJsonObject queue = QJsonDocument::fromJson(answer.body).object();
    // A queue's statistics appear some seconds after it was declared.
    if (!queue.contains(QLatin1String("messages_unacknowledged")))
        return QStringLiteral("RabbitMQ management API at %1 has no statistics for queue %2 yet")
            .arg(base, where.name);
    counts->inFlight = queue.value(QLatin1String("messages_unacknowledged")).toInteger();
    const qint64 headSeconds = queue.value(QLatin1String("head_message_timestamp")).toInteger(-1);
    if (headSeconds >= 0 && counts->ready > 0)
        counts->oldestReadyAgeMs = std::max<qint64>(nowMs() - headSeconds * 1000, 0);
    return {};
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
