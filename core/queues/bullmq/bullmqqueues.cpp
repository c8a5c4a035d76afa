#include "queues/bullmq/bullmqqueues.h"

#include <algorithm>
#include <tuple>

namespace once {

using namespace redisreply;

namespace {

// Printable ASCII but '%': what an encoded id keeps as it is.
const QByteArray &keptAsIs()
{
    static const QByteArray kept = [] {
        QByteArray bytes;
        for (char c = '!'; c <= '~'; ++c) {
            if (c != '%')
                bytes.append(c);
        }
        return bytes;
    }();
    return kept;
}

} // namespace

QString bullMqJobIdText(const QByteArray &id)
{
    const QString text = QString::fromUtf8(id);
    const bool control =
        std::any_of(id.cbegin(), id.cend(), [](char c) { return uchar(c) < 0x20 || c == 0x7f; });
    if (!control && !id.contains('%') && text.toUtf8() == id)
        return text;
    return QString::fromLatin1(id.toPercentEncoding(keptAsIs()));
}

QByteArray bullMqJobId(const QString &text)
{
    return text.contains(u'%') ? QByteArray::fromPercentEncoding(text.toLatin1()) : text.toUtf8();
}

BullMqQueues::BullMqQueues(RedisEndpoint endpoint)
    : m_connection(std::move(endpoint), {{"CLIENT", "SETNAME", "once:console"}})
{
}

std::optional<QList<BullMqQueueName>> BullMqQueues::discover(QString *error)
{
    QList<BullMqQueueName> queues;
    QByteArray cursor = "0";
    do {
        const auto replies =
            m_connection.pipeline({{"SCAN", cursor, "MATCH", "*:meta", "COUNT", "1000"}}, error);
        if (!replies)
            return std::nullopt;
        const redisReply *reply = replies->front().get();
        if (isError(reply) || elementCount(reply) != 2) {
            *error =
                m_connection.describe(QStringLiteral("SCAN failed: %1").arg(QString::fromUtf8(bytes(reply))));
            return std::nullopt;
        }
        cursor = bytes(element(reply, 0));
        const redisReply *keys = element(reply, 1);
        for (size_t i = 0; i < elementCount(keys); ++i) {
            // "<prefix>:<name>:meta"; a queue name may hold ":" itself, a prefix does not
            // in BullMQ's default and in what its documentation shows.
            // Anything else that ends so (":meta", "x:meta") is no queue.
            const QString key = QString::fromUtf8(bytes(element(keys, i)));
            const qsizetype prefixEnd = key.indexOf(u':');
            const qsizetype nameLength = key.size() - prefixEnd - 1 - qsizetype(qstrlen(":meta"));
            if (prefixEnd > 0 && nameLength > 0)
                queues.append({key.left(prefixEnd), key.mid(prefixEnd + 1, nameLength)});
        }
    } while (cursor != "0");
    std::sort(queues.begin(), queues.end(), [](const BullMqQueueName &a, const BullMqQueueName &b) {
        return std::tie(a.prefix, a.name) < std::tie(b.prefix, b.name);
    });
    queues.erase(std::unique(queues.begin(), queues.end()), queues.end()); // SCAN may repeat a key
    return queues;
}

std::optional<BullMqCounts> BullMqQueues::counts(const BullMqQueueName &queue, QString *error)
{
    const auto replies = m_connection.pipeline({{"LLEN", queue.key("wait")},
                                                {"LINDEX", queue.key("wait"), "-1"},
                                                {"LLEN", queue.key("active")},
                                                {"ZCARD", queue.key("delayed")},
                                                {"ZCARD", queue.key("prioritized")},
                                                {"ZCARD", queue.key("completed")},
                                                {"ZCARD", queue.key("failed")},
                                                {"ZCARD", queue.key("waiting-children")},
                                                {"HMGET", queue.key("meta"), "paused", "version"}},
                                               error);
    if (!replies)
        return std::nullopt;
    for (const auto &reply : *replies) {
        if (isError(reply.get())) {
            *error = m_connection.describe(
                QStringLiteral("cannot count the BullMQ queue %1:%2: %3")
                    .arg(queue.prefix, queue.name, QString::fromUtf8(errorText(reply.get()))));
            return std::nullopt;
        }
    }
    const auto count = [&](size_t i) { return integer(replies->at(i).get()).value_or(0); };
    BullMqCounts counts;
    counts.waiting = count(0);
    // A wait list of BullMQ before 5 may end in a marker ("0:..."), which is no job.
    if (counts.waiting > 0 && bytes(replies->at(1).get()).startsWith("0:"))
        --counts.waiting;
    counts.active = count(2);
    counts.delayed = count(3);
    counts.prioritized = count(4);
    counts.completed = count(5);
    counts.failed = count(6);
    counts.waitingChildren = count(7);
    const redisReply *meta = replies->at(8).get();
    counts.paused = !bytes(element(meta, 0)).isEmpty();
    counts.version = QString::fromUtf8(bytes(element(meta, 1)));
    return counts;
}

} // namespace once
