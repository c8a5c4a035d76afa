#include "queues/rabbitmq/rabbitmqsession.h"

#include "queues/rabbitmq/rabbitmqlocation.h"

#include <QDeadlineTimer>
#include <QRandomGenerator>

#include <amqp_tcp_socket.h>

#include <cerrno>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace once {

Q_LOGGING_CATEGORY(lcRabbitMq, "once.core.rabbitmq")

namespace amqp {

namespace {

// rabbitmq-c answers heartbeats only while it is called; a worker calls lease() at
// least every few seconds, a console counts() every two. Short, because heartbeats are
// what finds a connection cut off silently while it is idle: rabbitmq-c fails a call
// after two beats without a frame from the broker, and a beat of ours left unacknowledged
// for UserTimeoutMs ends the connection sooner.
constexpr int HeartbeatSeconds = 10;
// Data unacknowledged this long ends the connection: a silent cut (packets dropped, no
// reset) fails in seconds, and the reconnect runs, not after TCP's retransmissions.
constexpr int UserTimeoutMs = 5000;
constexpr int ConnectTimeoutMs = 5000;
constexpr int RpcTimeoutMs = 15000;
constexpr int ConfirmTimeoutMs = 15000;
// Unconfirmed publishes in flight: enough to stream, few enough that the broker's
// confirms never pile up unread.
constexpr size_t MaxUnconfirmed = 2000;

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

} // namespace

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
    const int userTimeout = UserTimeoutMs;
    if (::setsockopt(amqp_get_sockfd(m_connection), IPPROTO_TCP, TCP_USER_TIMEOUT, &userTimeout,
                     sizeof userTimeout) != 0)
        return fail(QStringLiteral("cannot set up the connection: %1").arg(qt_error_string(errno)), error);
    const timeval rpcTimeout{RpcTimeoutMs / 1000, 0};
    amqp_set_handshake_timeout(m_connection, &connectTimeout);
    amqp_set_rpc_timeout(m_connection, &rpcTimeout);

    // Named, so the broker's management UI tells the workers' connections apart.
    FieldTable properties;
    properties.setString("connection_name", connectionName);
    const amqp_table_t table = properties.table();
    const amqp_rpc_reply_t reply = amqp_login_with_properties(
        m_connection, rabbitMqDetails(m_location).vhost.toUtf8().constData(), 0, AMQP_DEFAULT_FRAME_SIZE, HeartbeatSeconds,
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
                .arg(rabbitMqDetails(m_location).vhost),
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

} // namespace amqp

} // namespace once
