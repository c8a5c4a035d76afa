#include "queues/rabbitmq/amqpmessages.h"

#include "model/clock.h"

#include <QCryptographicHash>

#include <cstring>

namespace once::amqp {

namespace {

const QByteArray ContentType = QByteArrayLiteral("application/json");

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

} // namespace

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

QString replyText(amqp_bytes_t text)
{
    return QString::fromUtf8(toByteArray(text));
}

QString statusText(int status)
{
    return QString::fromUtf8(amqp_error_string2(status));
}

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

} // namespace once::amqp
