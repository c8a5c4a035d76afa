#include "serve/queueservice.h"

#include "monitoring/storemetrics.h"

#include "store/migrations.h"
#include "operator/operations.h"
#include "store/store.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QLoggingCategory>
#include <QTimer>
#include <QVariant>

#include <QElapsedTimer>
#include <QSet>

namespace once {

Q_LOGGING_CATEGORY(lcQueueService, "once.serve.store")

namespace {

// How long a client should wait before trying a store that did not answer.
constexpr int StoreRetryAfterSeconds = 5;

QJsonValue bodyJson(const QByteArray &payload)
{
    // Every reminder is a JSON object; a message enqueued unchecked may be anything.
    const QJsonDocument document = QJsonDocument::fromJson(payload);
    if (document.isObject())
        return document.object();
    return QString::fromUtf8(payload);
}

} // namespace

ApiReply ApiReply::failed(const ApiError &error)
{
    return {error.status, error.toJson(), error.retryAfter ? (error.status == 503 ? StoreRetryAfterSeconds : 1) : 0, {}, {}};
}

std::optional<DeliveryId> DeliveryId::parse(const QString &text)
{
    const qsizetype dot = text.indexOf(QLatin1Char('.'));
    if (dot <= 0)
        return std::nullopt;
    bool idOk = false, countOk = false;
    DeliveryId id{text.left(dot).toLongLong(&idOk), text.mid(dot + 1).toInt(&countOk)};
    if (!idOk || !countOk || id.messageId <= 0 || id.receiveCount <= 0)
        return std::nullopt;
    return id;
}

// A redrive in progress: its letters, where it is, and when it started, for the pace.
struct RedriveRun
{
    RedriveRequest request;
    QList<DeadLetter> letters;
    qint64 auditId = 0;
    qsizetype next = 0;
    qint64 moved = 0;
    QElapsedTimer clock;
    std::function<void(const ApiReply &)> done;
};

QueueService::QueueService(const QString &storeUrl, const QString &queueName, QObject *parent)
    : QObject(parent), m_storeUrl(storeUrl), m_queueName(queueName)
{
}

QueueService::~QueueService() = default;

bool QueueService::open(QString *error)
{
    m_store = Store::open(m_storeUrl, error);
    return bool(m_store);
}

ApiError QueueService::storeError(const QString &error) const
{
    switch (m_store->database().lastFailure()) {
    case StoreFailure::Contention:
    case StoreFailure::ConnectionLost:
    case StoreFailure::Permanent:
        return apiError(ApiFailure::StoreUnavailable, QStringLiteral("the store is unavailable: ") + error);
    case StoreFailure::None:
        break;
    }
    return apiError(ApiFailure::Internal, error);
}

// A SQLite store deleted or replaced under the server would take writes into a file
// nobody reads: answer 503 until it is back.
std::optional<ApiError> QueueService::storeMoved()
{
    QString error;
    if (m_store->database().isStillAtPath(&error))
        return std::nullopt;
    return apiError(ApiFailure::StoreUnavailable,
                    QStringLiteral("the store file %1 is gone or was replaced; nothing is read or written until it is back")
                        .arg(m_store->database().location().path));
}

void QueueService::publish(const QList<QList<PublishEntry>> &requests, PublishDone done)
{
    QMutexLocker locker(&m_inboxMutex);
    m_inbox.append({requests, std::move(done)});
    // The store thread is told once per filling of the inbox; the flush empties all of it.
    if (m_inbox.size() == 1)
        QMetaObject::invokeMethod(this, &QueueService::flushPublishes, Qt::QueuedConnection);
}

void QueueService::flushPublishes()
{
    {
        QMutexLocker locker(&m_inboxMutex);
        if (m_inbox.isEmpty())
            return;
    }
    std::optional<ApiError> failure = storeMoved();
    QString error;
    Transaction transaction(m_store->database());
    // Taking the write lock may wait for a worker's commit: whatever is published
    // meanwhile joins this commit instead of waiting for the next.
    if (!failure && !transaction.begin(&error))
        failure = storeError(error);
    QList<PendingPublish> pending;
    {
        QMutexLocker locker(&m_inboxMutex);
        pending.swap(m_inbox);
    }
    QList<PublishEntry *> entries;
    QList<QList<QList<PublishResult>>> results(pending.size());
    QList<PublishResult *> resultSlots;
    for (qsizetype i = 0; i < pending.size(); ++i) {
        results[i].resize(pending[i].requests.size());
        for (qsizetype r = 0; r < pending[i].requests.size(); ++r) {
            auto &request = pending[i].requests[r];
            results[i][r].resize(request.size());
            for (qsizetype j = 0; j < request.size(); ++j) {
                entries.append(&request[j]);
                resultSlots.append(&results[i][r][j]);
            }
        }
    }
    if (!failure && !(commitPublishes(entries, resultSlots, &error) && transaction.commit(&error)))
        failure = storeError(error);
    if (failure)
        qCWarning(lcQueueService, "publish of %lld messages failed: %s", qint64(entries.size()),
                  qPrintable(failure->message));
    for (qsizetype i = 0; i < pending.size(); ++i)
        pending[i].done(results[i], failure);
    if (!failure)
        Q_EMIT published();
}

bool QueueService::commitPublishes(const QList<PublishEntry *> &entries, QList<PublishResult *> &results, QString *error)
{
    Database &db = m_store->database();
    const qint64 now = nowMs();
    if (now - m_lastPurgeMs > 60 * 1000) {
        auto &purge = db.prepared(QStringLiteral("DELETE FROM publish_keys WHERE created_at < ?"));
        purge.addBindValue(now - IdempotencyWindowMs);
        if (!db.exec(purge, error))
            return false;
        m_lastPurgeMs = now;
    }
    // A key seen in this commit, or within the window: the first message's id, nothing new.
    QHash<QString, qsizetype> firstWithKey;
    QList<OutgoingMessage> messages;
    QList<qsizetype> inserted; // entry index of each message
    auto &lookup = db.prepared(QStringLiteral(
        "SELECT message_id FROM publish_keys WHERE queue_name = ? AND idempotency_key = ? AND created_at >= ?"));
    for (qsizetype i = 0; i < entries.size(); ++i) {
        const PublishEntry &entry = *entries.at(i);
        if (!entry.idempotencyKey.isEmpty()) {
            if (firstWithKey.contains(entry.idempotencyKey)) {
                results[i]->duplicate = true;
                continue; // its id is filled in below, after the insert
            }
            lookup.addBindValue(m_queueName);
            lookup.addBindValue(entry.idempotencyKey);
            lookup.addBindValue(now - IdempotencyWindowMs);
            if (!db.exec(lookup, error))
                return false;
            const bool seen = lookup.next();
            if (seen) {
                results[i]->messageId = lookup.value(0).toString();
                results[i]->duplicate = true;
            }
            lookup.finish();
            if (seen)
                continue;
            firstWithKey.insert(entry.idempotencyKey, i);
        }
        messages.append(entry.message);
        inserted.append(i);
    }
    QStringList ids;
    if (!m_store->queue().insert(messages, error, &ids))
        return false;
    if (ids.size() != messages.size()) {
        *error = QStringLiteral("the queue returned %1 ids for %2 messages").arg(ids.size()).arg(messages.size());
        return false;
    }
    auto &remember = db.prepared(QStringLiteral(
        "INSERT INTO publish_keys (queue_name, idempotency_key, message_id, created_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (queue_name, idempotency_key) DO UPDATE SET message_id = excluded.message_id, "
        "created_at = excluded.created_at"));
    for (qsizetype m = 0; m < inserted.size(); ++m) {
        const qsizetype i = inserted.at(m);
        results[i]->messageId = ids.at(m);
        const QString &key = entries.at(i)->idempotencyKey;
        if (key.isEmpty())
            continue;
        remember.addBindValue(m_queueName);
        remember.addBindValue(key);
        remember.addBindValue(ids.at(m));
        remember.addBindValue(now);
        if (!db.exec(remember, error))
            return false;
    }
    for (qsizetype i = 0; i < entries.size(); ++i)
        if (results[i]->messageId.isEmpty())
            results[i]->messageId = results[firstWithKey.value(entries.at(i)->idempotencyKey)]->messageId;
    return true;
}

ApiReply QueueService::consume(int maxMessages, qint64 visibilityMs, const QString &consumer)
{
    if (const auto moved = storeMoved())
        return ApiReply::failed(*moved);
    QString error;
    QList<QueueMessage> leased = m_store->queue().lease(maxMessages, visibilityMs, consumer, &error);
    if (!error.isEmpty())
        return ApiReply::failed(storeError(error));
    if (m_maxReceives > 0 && !buryOverReceived(leased, &error))
        return ApiReply::failed(storeError(error));
    QJsonArray messages;
    for (const auto &message : leased)
        messages.append(QJsonObject{
            {QStringLiteral("id"), DeliveryId{message.id.toLongLong(), message.delivery}.toString()},
            {QStringLiteral("message_id"), message.id},
            {QStringLiteral("body"), bodyJson(message.payload)},
            // The bytes as published: a client that hashes or stores them sees the same.
            {QStringLiteral("payload"), QString::fromUtf8(message.payload)},
            {QStringLiteral("receive_count"), message.delivery},
            {QStringLiteral("redrive_count"), message.redriveCount},
            {QStringLiteral("enqueued_at"), formatTime(message.enqueuedAtMs)},
            {QStringLiteral("lease_until"), formatTime(message.leaseUntilMs)},
        });
    return ApiReply::ok({{QStringLiteral("messages"), messages},
                         {QStringLiteral("message"), messages.isEmpty() ? QJsonValue(QJsonValue::Null) : messages.first()}});
}

// Moves the messages leased for more than the allowed number of receives to the dead
// letters, under this lease, and leaves the others in the list. A consumer that asked
// for one message and got only such a message gets none this time, as after a lost race.
bool QueueService::buryOverReceived(QList<QueueMessage> &leased, QString *error)
{
    QList<Settlement> burials;
    const qint64 now = nowMs();
    for (const QueueMessage &message : std::as_const(leased)) {
        if (message.delivery <= m_maxReceives)
            continue;
        Settlement settlement;
        settlement.kind = Settlement::Kind::DeadLetter;
        settlement.messageId = message.id;
        settlement.delivery = message.delivery;
        settlement.deadLetter.errorClass = QStringLiteral("max-receives");
        settlement.deadLetter.lastError =
            QStringLiteral("consumed %1 times without an ack (once serve --max-receives %1)").arg(m_maxReceives);
        settlement.deadLetter.attempts = message.delivery - 1;
        settlement.deadLetter.lastAttemptAtMs = now;
        burials.append(settlement);
        qCInfo(lcQueueService, "message %s went to the dead letters: consumed %d times without an ack",
               qPrintable(message.id), m_maxReceives);
    }
    if (burials.isEmpty())
        return true;
    Transaction transaction(m_store->database());
    if (!transaction.begin(error) || !m_store->queue().settle(burials, error) || !transaction.commit(error))
        return false;
    leased.removeIf([this](const QueueMessage &message) { return message.delivery > m_maxReceives; });
    return true;
}

ApiReply QueueService::ack(const DeliveryId &delivery)
{
    Settlement settlement;
    settlement.kind = Settlement::Kind::Ack;
    return settleHeld(delivery, settlement, {{QStringLiteral("acked"), true}});
}

ApiReply QueueService::nack(const DeliveryId &delivery, qint64 delayMs)
{
    Settlement settlement;
    settlement.kind = Settlement::Kind::Retry;
    settlement.delayMs = std::max<qint64>(0, delayMs);
    return settleHeld(delivery, settlement, {{QStringLiteral("nacked"), true}});
}

ApiReply QueueService::deadLetter(const DeliveryId &delivery, const DeadLetterInfo &info)
{
    Settlement settlement;
    settlement.kind = Settlement::Kind::DeadLetter;
    settlement.deadLetter = info;
    return settleHeld(delivery, settlement, {{QStringLiteral("dead_lettered"), true}});
}

// The settlement of a lost lease changes nothing by itself (SqlQueue::settle); this
// checks first, in the same transaction, so it can say so.
ApiReply QueueService::settleHeld(const DeliveryId &delivery, const Settlement &how, const QJsonObject &answer)
{
    if (const auto moved = storeMoved())
        return ApiReply::failed(*moved);
    Database &db = m_store->database();
    QString error;
    Transaction transaction(db);
    if (!transaction.begin(&error))
        return ApiReply::failed(storeError(error));
    auto &current = db.prepared(QStringLiteral("SELECT receive_count FROM queue WHERE id = ?"));
    current.addBindValue(delivery.messageId);
    if (!db.exec(current, &error))
        return ApiReply::failed(storeError(error));
    const bool held = current.next() && current.value(0).toInt() == delivery.receiveCount;
    current.finish();
    if (!held)
        return ApiReply::failed(apiError(ApiFailure::LeaseLost,
                                         QStringLiteral("delivery %1 is no longer leased to you: its lease passed to "
                                                        "another consumer, or it was settled already")
                                             .arg(delivery.toString())));
    Settlement settlement = how;
    settlement.messageId = QString::number(delivery.messageId);
    settlement.delivery = delivery.receiveCount;
    if (!m_store->queue().settle({settlement}, &error) || !transaction.commit(&error))
        return ApiReply::failed(storeError(error));
    QJsonObject body = answer;
    body.insert(QStringLiteral("message_id"), delivery.toString());
    return ApiReply::ok(body);
}

ApiReply QueueService::extend(const DeliveryId &delivery, qint64 visibilityMs)
{
    if (const auto moved = storeMoved())
        return ApiReply::failed(*moved);
    Database &db = m_store->database();
    QString error;
    const qint64 until = nowMs() + visibilityMs;
    auto &update = db.prepared(QStringLiteral(
        "UPDATE queue SET visible_at = ? WHERE id = ? AND receive_count = ? AND lease_owner IS NOT NULL"));
    update.addBindValue(until);
    update.addBindValue(delivery.messageId);
    update.addBindValue(delivery.receiveCount);
    if (!db.exec(update, &error))
        return ApiReply::failed(storeError(error));
    if (update.numRowsAffected() < 1)
        return ApiReply::failed(apiError(ApiFailure::LeaseLost,
                                         QStringLiteral("delivery %1 is no longer leased to you").arg(delivery.toString())));
    return ApiReply::ok({{QStringLiteral("message_id"), delivery.toString()},
                         {QStringLiteral("lease_until"), formatTime(until)}});
}

ApiReply QueueService::stats()
{
    if (const auto moved = storeMoved())
        return ApiReply::failed(*moved);
    QString error;
    const auto stats = m_store->inspector().stats(&error);
    if (!stats)
        return ApiReply::failed(storeError(error));
    // What a worker at this queue needs to tell "idle" from "a retry is due soon".
    const auto seconds = [](const std::optional<qint64> &ms) {
        return ms ? QJsonValue(double(*ms) / 1000.0) : QJsonValue(QJsonValue::Null);
    };
    QJsonObject body = stats->toJson();
    body.insert(QStringLiteral("next_visible_in_s"), seconds(stats->queue.nextVisibleInMs));
    body.insert(QStringLiteral("next_delayed_in_s"), seconds(stats->queue.nextDelayedInMs));
    body.insert(QStringLiteral("delayed_retries"), stats->queue.delayedRetries.value_or(0));
    return ApiReply::ok(body);
}

ApiReply QueueService::deadLetters(const DeadLetterFilter &filter)
{
    if (const auto moved = storeMoved())
        return ApiReply::failed(*moved);
    QString error;
    const auto letters = m_store->inspector().deadLetters(filter, &error);
    if (!letters)
        return ApiReply::failed(storeError(error));
    QJsonArray rows;
    for (const auto &letter : *letters) {
        QJsonObject row = letter.toJson();
        row.insert(QStringLiteral("payload"), QString::fromUtf8(letter.payload));
        rows.append(row);
    }
    return ApiReply::ok({{QStringLiteral("dead_letters"), rows}});
}

void QueueService::redrive(const RedriveRequest &request, std::function<void(const ApiReply &)> done)
{
    if (const auto moved = storeMoved())
        return done(ApiReply::failed(*moved));
    QString error;
    auto letters = m_store->inspector().deadLetters(request.filter, &error);
    if (!letters)
        return done(ApiReply::failed(storeError(error)));
    if (!request.ids.isEmpty()) {
        const QSet<QString> wanted(request.ids.cbegin(), request.ids.cend());
        letters->removeIf([&wanted](const DeadLetter &letter) { return !wanted.contains(letter.id); });
    }
    if (request.dryRun) {
        QJsonArray rows;
        for (const auto &letter : *letters)
            rows.append(letter.toJson());
        return done(ApiReply::ok({{QStringLiteral("dry_run"), true},
                                  {request.discard ? QStringLiteral("would_discard") : QStringLiteral("would_redrive"), rows},
                                  {QStringLiteral("count"), rows.size()}}));
    }
    // The audit row first, under the token's name: each batch counts itself into it.
    Operations operations(m_store->database(), m_store->queue(), m_store->ledger(), request.actor);
    const QString detail = request.ids.isEmpty() ? describeRedrive(request.filter, *letters) : describeLetters(*letters);
    if (request.discard) {
        const auto auditId = operations.beginAudit({QStringLiteral("discard"), detail, 0, request.reason}, &error);
        const auto discarded = auditId ? operations.discard(*letters, *auditId, &error) : std::nullopt;
        if (!discarded)
            return done(ApiReply::failed(storeError(error)));
        return done(ApiReply::ok({{QStringLiteral("discarded"), *discarded}, {QStringLiteral("audit_id"), *auditId}}));
    }
    const auto auditId = operations.beginAudit(
        {QStringLiteral("redrive"), detail, request.ratePerSecond, request.reason}, &error);
    if (!auditId)
        return done(ApiReply::failed(storeError(error)));
    auto run = std::make_shared<RedriveRun>();
    run->request = request;
    run->letters = *letters;
    run->auditId = *auditId;
    run->done = std::move(done);
    run->clock.start();
    redriveBatch(run);
}

void QueueService::redriveBatch(std::shared_ptr<RedriveRun> run)
{
    const qsizetype batchSize = redriveBatchSize(run->request.ratePerSecond);
    Operations operations(m_store->database(), m_store->queue(), m_store->ledger(), run->request.actor);
    QString error;
    const auto batch = run->letters.mid(run->next, batchSize);
    const auto moved = storeMoved() ? std::nullopt : operations.redrive(batch, run->auditId, &error);
    if (!moved) {
        QString noteError;
        operations.noteInAudit(run->auditId, QStringLiteral("(stopped by an error)"), &noteError);
        ApiError failure = storeError(error.isEmpty() ? QStringLiteral("the store file is gone") : error);
        failure.message = QStringLiteral("redrive stopped after %1 messages: %2").arg(run->moved).arg(failure.message);
        return run->done(ApiReply::failed(failure));
    }
    run->moved += *moved;
    run->next += batchSize;
    if (*moved > 0)
        Q_EMIT published();
    if (run->next >= run->letters.size())
        return run->done(ApiReply::ok({{QStringLiteral("redriven"), run->moved}, {QStringLiteral("audit_id"), run->auditId}}));
    qint64 wait = 0;
    if (run->request.ratePerSecond > 0)
        wait = std::max<qint64>(0, run->next * 1000 / run->request.ratePerSecond - run->clock.elapsed());
    QTimer::singleShot(wait, this, [this, run] { redriveBatch(run); });
}

ApiReply QueueService::readiness()
{
    if (const auto moved = storeMoved())
        return ApiReply::failed(*moved);
    if (const QString why = storeUnreadiness(*m_store); !why.isEmpty())
        return ApiReply::failed(apiError(ApiFailure::StoreUnavailable, why));
    return ApiReply::ok({{QStringLiteral("ready"), true}, {QStringLiteral("schema_version"), latestSchemaVersion()}});
}

ApiReply QueueService::metrics()
{
    if (const auto moved = storeMoved())
        return ApiReply::failed(*moved);
    QString error;
    const auto metrics = StoreMetrics::read(*m_store, std::nullopt, &error);
    if (!metrics)
        return ApiReply::failed(storeError(error));
    return ApiReply::okText(storeExposition(*metrics), QByteArrayLiteral("text/plain; version=0.0.4; charset=utf-8"));
}

} // namespace once
