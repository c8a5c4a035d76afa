#pragma once

#include "model/deadletter.h"
#include "queues/messagequeue.h"

#include <QByteArray>
#include <QString>

#include <amqp.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

// The messages of once in AMQP 0-9-1 terms: rabbitmq-c's byte strings and field tables,
// the properties and headers every message of ours carries, and what a received message
// says about itself (see the top of rabbitmqqueue.cpp for the format).
namespace once::amqp {

// The main queue's x-delivery-limit (RabbitMqQueue::declareTopology()): a dead letter the
// broker made for it has seen this many deliveries.
constexpr int DeliveryLimit = 20;

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

amqp_bytes_t bytes(const QByteArray &data);
QByteArray toByteArray(amqp_bytes_t data);
bool sameKey(amqp_bytes_t key, const char *name);
const amqp_field_value_t *findField(const amqp_table_t &table, const char *key);
// Integers of any width; a foreign producer may also send a number as a string.
std::optional<qint64> fieldInt(const amqp_field_value_t *value);
QByteArray fieldBytes(const amqp_field_value_t *value);
const amqp_table_t *headersOf(const amqp_basic_properties_t &properties);
std::optional<qint64> headerInt(const amqp_basic_properties_t &properties, const char *key);
QByteArray headerBytes(const amqp_basic_properties_t &properties, const char *key);
QString replyText(amqp_bytes_t text);
QString statusText(int status);

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
Publication freshPublication(const QString &id, const QByteArray &payload, qint64 now);
// A copy of a received message: the same properties, headers and body, minus the
// broker's delivery count, persistent whatever the original was.
Publication copyOf(const amqp_envelope_t &envelope, const QString &id);

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

Received describe(const amqp_envelope_t &envelope, const QString &fallbackId, qint64 now);
DeadLetter toDeadLetter(const amqp_envelope_t &envelope, const QString &fallbackId);
// An id for a dead letter without message_id that stays the same from one look to the
// next, or an operator could never pick it; the redrive makes it the message's id.
QString contentId(const amqp_envelope_t &envelope);

} // namespace once::amqp
