#pragma once

#include "queues/queuelocation.h"
#include "queues/rabbitmq/amqpmessages.h"

#include <QLoggingCategory>

#include <array>
#include <deque>
#include <map>
#include <set>
#include <vector>

namespace once {

Q_DECLARE_LOGGING_CATEGORY(lcRabbitMq)

namespace amqp {

constexpr amqp_channel_t ConsumeChannel = 1;
constexpr amqp_channel_t PublishChannel = 2;
constexpr amqp_channel_t AdminChannel = 3;
constexpr int ChannelCount = 4; // 0 is the connection's

// A delivery leased to the engine.
struct Lease
{
    uint64_t tag = 0;
    Envelope envelope;
    Received received;
};


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

} // namespace amqp

} // namespace once
