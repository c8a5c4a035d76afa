#include "queues/bullmq/bullmqmarkerwatch.h"

#include "model/clock.h"

#include <QLoggingCategory>

#include <algorithm>

namespace once {

using namespace redisreply;

namespace {

Q_LOGGING_CATEGORY(lcMarker, "once.core.bullmq.marker")

// How long one BZPOPMIN blocks: what bounds a lost wake-up, as the Node worker's
// drainDelay does (5 s there; the engine also polls every second while it listens).
constexpr qint64 BlockMs = 1000;
constexpr qint64 ReconnectMs = 1000;

} // namespace

BullMqMarkerWatch::BullMqMarkerWatch(RedisEndpoint endpoint, QByteArray markerKey, std::function<void()> wake)
    : m_endpoint(std::move(endpoint)), m_markerKey(std::move(markerKey)), m_wake(std::move(wake)),
      m_thread([this] { run(); })
{
}

// Stops at once rather than after the block: another connection unblocks the watch's.
BullMqMarkerWatch::~BullMqMarkerWatch()
{
    m_stopping = true;
    if (const qint64 id = m_clientId) {
        RedisConnection unblocking(m_endpoint, {});
        QString ignored;
        unblocking.pipeline({{"CLIENT", "UNBLOCK", QByteArray::number(id)}}, &ignored);
    }
    m_thread.join();
}

void BullMqMarkerWatch::run()
{
    RedisConnection connection(m_endpoint, {});
    qint64 dueAtMs = 0; // the earliest delayed job a marker announced, 0 for none
    QString lastError;
    while (!m_stopping) {
        const qint64 now = nowMs();
        if (dueAtMs && dueAtMs <= now) {
            dueAtMs = 0;
            m_wake();
        }
        const qint64 blockMs = dueAtMs ? std::clamp<qint64>(dueAtMs - now, 1, BlockMs) : BlockMs;
        QList<QByteArrayList> commands;
        if (!connection.isOpen())
            commands.append(QByteArrayList{"CLIENT", "ID"});
        commands.append(
            QByteArrayList{"BZPOPMIN", m_markerKey, QByteArray::number(double(blockMs) / 1000, 'f', 3)});
        QString error;
        const auto replies = connection.pipeline(commands, &error);
        if (replies && replies->size() == 2)
            m_clientId = integer(replies->front().get()).value_or(0);
        const redisReply *popped = replies ? replies->back().get() : nullptr;
        if (!replies || (popped && isError(popped))) {
            if (replies)
                error = connection.describe(QString::fromUtf8(errorText(popped)));
            if (error != lastError)
                qCWarning(lcMarker).noquote() << "cannot wait on the queue's marker, polling:" << error;
            lastError = error;
            connection.close();
            m_clientId = 0;
            m_wake(); // the worker's own poll finds what the marker would have announced
            for (qint64 slept = 0; slept < ReconnectMs && !m_stopping; slept += 50)
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
            continue;
        }
        lastError.clear();
        if (!popped || elementCount(popped) < 3)
            continue; // timed out, or unblocked to stop
        const qint64 score = bytes(element(popped, 2)).toLongLong();
        if (score <= nowMs())
            m_wake();
        else
            dueAtMs = dueAtMs ? std::min(dueAtMs, score) : score;
    }
}

} // namespace once
