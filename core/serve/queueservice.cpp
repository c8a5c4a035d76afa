#include "serve/queueservice.h"

#include "operator/redriverun.h"

#include "monitoring/storemetrics.h"

#include "store/migrations.h"
#include "operator/operations.h"
#include "store/store.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QLoggingCategory>
#include <QTimer>
#include <QUrl>
#include <QVariant>

#include <QCryptographicHash>
#include <QElapsedTimer>
#include <QRandomGenerator>
#include <QSet>

#include <algorithm>
#include <array>
#include <tuple>

namespace once {

Q_LOGGING_CATEGORY(lcQueueService, "once.serve.store")

namespace {

// How long a client should wait before trying a store that did not answer.
constexpr int StoreRetryAfterSeconds = 5;

// The unguessable part of a delivery id: 128 bits.
constexpr qsizetype LeaseSecretBytes = 16;

// What a publish under an idempotency key is compared by when the key comes again: the
// message as it would be stored, and its delay.
QString requestDigest(const PublishEntry &entry)
{
    QCryptographicHash hash(QCryptographicHash::Sha256);
    hash.addData(QByteArray::number(entry.message.delayMs));
    hash.addData(QByteArrayView("\n"));
    hash.addData(entry.message.payload);
    return QString::fromLatin1(hash.result().toHex());
}

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
    const QStringList parts = text.split(QLatin1Char('.'));
    if (parts.size() != 3 || parts[2].size() != LeaseSecretBytes * 2)
        return std::nullopt;
    bool idOk = false, countOk = false;
    DeliveryId id{parts[0].toLongLong(&idOk), parts[1].toInt(&countOk), parts[2]};
    if (!idOk || !countOk || id.messageId <= 0 || id.receiveCount <= 0
        || !std::all_of(id.leaseSecret.cbegin(), id.leaseSecret.cend(), [](QChar c) {
               return (c >= QLatin1Char('0') && c <= QLatin1Char('9')) || (c >= QLatin1Char('a') && c <= QLatin1Char('f'));
           }))
        return std::nullopt;
    return id;
}

QString DeliveryId::newLeaseSecret()
{
    std::array<quint32, LeaseSecretBytes / 4> words;
    QRandomGenerator::system()->fillRange(words.data(), words.size());
    return QString::fromLatin1(QByteArray(reinterpret_cast<const char *>(words.data()), LeaseSecretBytes).toHex());
}


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

// The store's own words (its SQL, its driver's message) stay in the server's log: a
// client learns what happened and what to do, not the statement that failed.
ApiError QueueService::storeError(const QString &error) const
{
    switch (m_store->database().lastFailure()) {
    case StoreFailure::Contention:
    case StoreFailure::ConnectionLost:
    case StoreFailure::Permanent:
        qCWarning(lcQueueService, "the store is unavailable: %s", qPrintable(error));
        return apiError(ApiFailure::StoreUnavailable, QStringLiteral("the store is unavailable; try again later"));
    case StoreFailure::None:
        break;
    }
    qCWarning(lcQueueService, "a store call failed: %s", qPrintable(error));
    return apiError(ApiFailure::Internal, QStringLiteral("the store refused the request (the server's log says why)"));
}

// A SQLite store deleted or replaced under the server would take writes into a file
// nobody reads: answer 503 until it is back. A PostgreSQL session that was lost is
// replaced here, before each request, whether or not the request begins a transaction
// (which would reconnect by itself): /readyz and stats would otherwise fail for ever.
std::optional<ApiError> QueueService::storeMoved()
{
    QString error;
    if (!m_store->database().ensureConnected(&error))
        return storeError(error);
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

// Each key is claimed before its message is written: an insert that only the first
// publisher under the key wins, atomically in the store, so that two servers on one
// PostgreSQL store (or two commits of one server) never both enqueue under it. A key whose
// claim is lost is answered from the row that won: the first message's id, or a refusal
// when the producer sent something else under it.
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
    QList<QString> digests(entries.size());
    // Keys in a fixed order, so that two servers claiming the same keys in one commit each
    // wait for the other in the same order instead of deadlocking.
    QList<qsizetype> keyed;
    for (qsizetype i = 0; i < entries.size(); ++i) {
        if (entries.at(i)->idempotencyKey.isEmpty())
            continue;
        digests[i] = requestDigest(*entries.at(i));
        keyed.append(i);
    }
    std::stable_sort(keyed.begin(), keyed.end(), [&entries](qsizetype a, qsizetype b) {
        return std::tie(entries.at(a)->producer, entries.at(a)->idempotencyKey)
               < std::tie(entries.at(b)->producer, entries.at(b)->idempotencyKey);
    });
    // An expired key (not purged yet) is claimed anew by overwriting it.
    auto &claim = db.prepared(QStringLiteral(
        "INSERT INTO publish_keys (queue_name, producer, idempotency_key, request_digest, message_id, created_at) "
        "VALUES (?, ?, ?, ?, '', ?) ON CONFLICT (queue_name, producer, idempotency_key) DO UPDATE SET "
        "request_digest = excluded.request_digest, message_id = '', created_at = excluded.created_at "
        "WHERE publish_keys.created_at < ? RETURNING created_at"));
    auto &winner = db.prepared(QStringLiteral("SELECT message_id, request_digest FROM publish_keys "
                                              "WHERE queue_name = ? AND producer = ? AND idempotency_key = ?"));
    QSet<qsizetype> claimed;
    QHash<std::pair<QString, QString>, qsizetype> firstWithKey; // in this commit
    for (const qsizetype i : std::as_const(keyed)) {
        const PublishEntry &entry = *entries.at(i);
        const std::pair owned{entry.producer, entry.idempotencyKey};
        if (const auto first = firstWithKey.constFind(owned); first != firstWithKey.cend()) {
            // Its id is filled in below, once the first is inserted.
            (digests.at(*first) == digests.at(i) ? results[i]->duplicate : results[i]->keyReused) = true;
            continue;
        }
        firstWithKey.insert(owned, i);
        claim.addBindValue(m_queueName);
        claim.addBindValue(entry.producer);
        claim.addBindValue(entry.idempotencyKey);
        claim.addBindValue(digests.at(i));
        claim.addBindValue(now);
        claim.addBindValue(now - IdempotencyWindowMs);
        if (!db.exec(claim, error))
            return false;
        const bool won = claim.next();
        claim.finish();
        if (won) {
            claimed.insert(i);
            continue;
        }
        winner.addBindValue(m_queueName);
        winner.addBindValue(entry.producer);
        winner.addBindValue(entry.idempotencyKey);
        if (!db.exec(winner, error))
            return false;
        if (!winner.next()) {
            *error = QStringLiteral("an idempotency key was neither claimed nor found");
            return false;
        }
        const QString messageId = winner.value(0).toString();
        const QVariant digest = winner.value(1);
        winner.finish();
        // A key kept from before digests were (schema 16) is taken as the same message.
        if (!digest.isNull() && digest.toString() != digests.at(i))
            results[i]->keyReused = true;
        else
            results[i]->messageId = messageId;
        results[i]->duplicate = !results[i]->keyReused;
    }
    QList<OutgoingMessage> messages;
    QList<qsizetype> inserted; // entry index of each message
    for (qsizetype i = 0; i < entries.size(); ++i) {
        if (entries.at(i)->idempotencyKey.isEmpty() || claimed.contains(i)) {
            messages.append(entries.at(i)->message);
            inserted.append(i);
        }
    }
    QStringList ids;
    if (!m_store->queue().insert(messages, error, &ids))
        return false;
    if (ids.size() != messages.size()) {
        *error = QStringLiteral("the queue returned %1 ids for %2 messages").arg(ids.size()).arg(messages.size());
        return false;
    }
    auto &remember = db.prepared(QStringLiteral(
        "UPDATE publish_keys SET message_id = ? WHERE queue_name = ? AND producer = ? AND idempotency_key = ?"));
    for (qsizetype m = 0; m < inserted.size(); ++m) {
        const qsizetype i = inserted.at(m);
        results[i]->messageId = ids.at(m);
        if (!claimed.contains(i))
            continue;
        remember.addBindValue(ids.at(m));
        remember.addBindValue(m_queueName);
        remember.addBindValue(entries.at(i)->producer);
        remember.addBindValue(entries.at(i)->idempotencyKey);
        if (!db.exec(remember, error))
            return false;
    }
    for (qsizetype i = 0; i < entries.size(); ++i) {
        if (results[i]->duplicate && results[i]->messageId.isEmpty()) {
            const qsizetype first = firstWithKey.value({entries.at(i)->producer, entries.at(i)->idempotencyKey});
            results[i]->messageId = results[first]->messageId;
            // The first under the key in this commit may itself have lost to a stored key.
            results[i]->keyReused = results[first]->keyReused;
            results[i]->duplicate = !results[i]->keyReused;
            if (results[i]->keyReused)
                results[i]->messageId.clear();
        }
    }
    return true;
}

ApiReply QueueService::consume(int maxMessages, qint64 visibilityMs, const QString &consumer)
{
    if (const auto moved = storeMoved())
        return ApiReply::failed(*moved);
    QString error;
    const QString secret = DeliveryId::newLeaseSecret();
    QList<QueueMessage> leased =
        m_store->queue().lease(maxMessages, visibilityMs, DeliveryId::leaseOwner(consumer, secret), &error);
    if (!error.isEmpty())
        return ApiReply::failed(storeError(error));
    if (m_maxReceives > 0 && !buryOverReceived(leased, &error))
        return ApiReply::failed(storeError(error));
    QJsonArray messages;
    for (const auto &message : leased)
        messages.append(QJsonObject{
            {QStringLiteral("id"), DeliveryId{message.id.toLongLong(), message.delivery, secret}.toString()},
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

ApiReply QueueService::ack(const DeliveryId &delivery, const QString &consumer)
{
    Settlement settlement;
    settlement.kind = Settlement::Kind::Ack;
    return settleHeld(delivery, consumer, settlement, {{QStringLiteral("acked"), true}});
}

ApiReply QueueService::nack(const DeliveryId &delivery, const QString &consumer, qint64 delayMs)
{
    Settlement settlement;
    settlement.kind = Settlement::Kind::Retry;
    settlement.delayMs = std::max<qint64>(0, delayMs);
    return settleHeld(delivery, consumer, settlement, {{QStringLiteral("nacked"), true}});
}

ApiReply QueueService::deadLetter(const DeliveryId &delivery, const QString &consumer, const DeadLetterInfo &info)
{
    Settlement settlement;
    settlement.kind = Settlement::Kind::DeadLetter;
    settlement.deadLetter = info;
    return settleHeld(delivery, consumer, settlement, {{QStringLiteral("dead_lettered"), true}});
}

// The settlement of a lost lease changes nothing by itself (SqlQueue::settle); this
// checks first, in the same transaction, so it can say so. The delivery is held while its
// receive count and its lease's owner (the consumer and the lease's secret) are the ones
// consume handed out: a nack or an ack ends the lease (the owner is cleared, or the row
// gone), so a second settlement of one delivery finds nothing to settle. On PostgreSQL the
// row is locked until the settlement commits, so no other server's consume takes it between.
ApiReply QueueService::settleHeld(const DeliveryId &delivery, const QString &consumer, const Settlement &how,
                                  const QJsonObject &answer)
{
    if (const auto moved = storeMoved())
        return ApiReply::failed(*moved);
    Database &db = m_store->database();
    QString error;
    Transaction transaction(db);
    if (!transaction.begin(&error))
        return ApiReply::failed(storeError(error));
    auto &current = db.prepared(QStringLiteral("SELECT receive_count, lease_owner FROM queue WHERE id = ?%1")
                                    .arg(db.isPostgres() ? QStringLiteral(" FOR UPDATE") : QString()));
    current.addBindValue(delivery.messageId);
    if (!db.exec(current, &error))
        return ApiReply::failed(storeError(error));
    const bool held = current.next() && current.value(0).toInt() == delivery.receiveCount
                      && current.value(1).toString() == delivery.leaseOwner(consumer);
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

ApiReply QueueService::extend(const DeliveryId &delivery, const QString &consumer, qint64 visibilityMs)
{
    if (const auto moved = storeMoved())
        return ApiReply::failed(*moved);
    Database &db = m_store->database();
    QString error;
    const qint64 until = nowMs() + visibilityMs;
    auto &update = db.prepared(QStringLiteral(
        "UPDATE queue SET visible_at = ? WHERE id = ? AND receive_count = ? AND lease_owner = ?"));
    update.addBindValue(until);
    update.addBindValue(delivery.messageId);
    update.addBindValue(delivery.receiveCount);
    update.addBindValue(delivery.leaseOwner(consumer));
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
    // One letter more than the page, to know whether another page follows.
    DeadLetterFilter page = filter;
    page.limit = filter.limit + 1;
    const auto letters = m_store->inspector().deadLetters(page, &error);
    if (!letters)
        return ApiReply::failed(storeError(error));
    QJsonArray rows;
    qsizetype bytes = 0;
    QJsonValue nextAfter = QJsonValue::Null;
    for (qsizetype i = 0; i < letters->size(); ++i) {
        const DeadLetter &letter = letters->at(i);
        // A page ends at its limit, or at about MaxDeadLetterPageBytes (a letter may carry
        // 256 KiB), whichever comes first; at least one letter goes in.
        if (i == filter.limit || (!rows.isEmpty() && bytes + letter.payload.size() > MaxDeadLetterPageBytes)) {
            nextAfter = deadLetterCursor(letters->at(i - 1));
            break;
        }
        QJsonObject row = letter.toJson();
        row.insert(QStringLiteral("payload"), QString::fromUtf8(letter.payload));
        bytes += letter.payload.size() + 512;
        rows.append(row);
    }
    return ApiReply::ok({{QStringLiteral("dead_letters"), rows}, {QStringLiteral("next_after"), nextAfter}});
}

QString deadLetterCursor(const DeadLetter &letter)
{
    return QString::number(letter.deadAtMs) + QLatin1Char(':') + letter.id;
}

bool continueAfterCursor(const QString &cursor, DeadLetterFilter &filter)
{
    const qsizetype colon = cursor.indexOf(QLatin1Char(':'));
    bool ok = false;
    const qint64 deadAt = colon > 0 ? cursor.left(colon).toLongLong(&ok) : 0;
    if (!ok || deadAt < 0 || colon + 1 >= cursor.size())
        return false;
    filter.afterDeadAtMs = deadAt;
    filter.afterId = cursor.mid(colon + 1);
    return true;
}

void QueueService::redrive(const RedriveRequest &request, std::function<void(const ApiReply &)> done)
{
    if (const auto moved = storeMoved())
        return done(ApiReply::failed(*moved));
    QString error;
    RedriveOptions options;
    options.ceilingPerSecond = request.ratePerSecond;
    options.canary = request.canary;
    options.stopAfterFailures = request.stopAfterFailures;
    options.includeExpired = request.includeExpired;
    options.reason = request.reason;
    std::optional<QList<DeadLetter>> letters;
    if (request.ids.isEmpty() && !request.discard) {
        options.matching = request.filter;
    } else {
        letters = m_store->inspector().deadLetters(request.filter, &error);
        if (!letters)
            return done(ApiReply::failed(storeError(error)));
        if (!request.ids.isEmpty()) {
            const QSet<QString> wanted(request.ids.cbegin(), request.ids.cend());
            letters->removeIf([&wanted](const DeadLetter &letter) { return !wanted.contains(letter.id); });
        }
        options.picked = *letters;
    }
    if (request.dryRun) {
        const auto preview = RedriveRun::preview(*m_store, nullptr, nullptr, options, true, &error);
        if (!preview)
            return done(ApiReply::failed(storeError(error)));
        QJsonArray rows;
        for (const auto &letter : preview->letters)
            rows.append(letter.toJson());
        QJsonArray expired;
        for (const auto &letter : preview->expiredLetters)
            expired.append(QJsonObject{{QStringLiteral("message_id"), letter.id},
                                       {QStringLiteral("key"), QString::fromLatin1(letter.sendKey)},
                                       {QStringLiteral("expires_at"), formatTime(letter.expiresAtMs)},
                                       {QStringLiteral("late_by_ms"), letter.lateByMs}});
        return done(ApiReply::ok({{QStringLiteral("dry_run"), true},
                                  {request.discard ? QStringLiteral("would_discard") : QStringLiteral("would_redrive"), rows},
                                  {QStringLiteral("count"), rows.size()},
                                  {QStringLiteral("would_send"), preview->wouldSend},
                                  {QStringLiteral("already_applied"), preview->alreadyApplied},
                                  {QStringLiteral("expired"), preview->expired},
                                  {QStringLiteral("expired_letters"), expired}}));
    }
    // The audit row first, under the token's name: each batch counts itself into it.
    Operations operations(m_store->database(), m_store->queue(), m_store->ledger(), request.actor);
    if (request.discard) {
        const auto auditId =
            operations.beginAudit({QStringLiteral("discard"),
                                   request.ids.isEmpty() ? describeRedrive(request.filter, *letters) : describeLetters(*letters),
                                   0, request.reason},
                                  &error);
        const auto discarded = auditId ? operations.discard(*letters, *auditId, &error) : std::nullopt;
        if (!discarded)
            return done(ApiReply::failed(storeError(error)));
        return done(ApiReply::ok({{QStringLiteral("discarded"), *discarded}, {QStringLiteral("audit_id"), *auditId}}));
    }
    options.detail = letters ? describeLetters(*letters) : describeRedrive(request.filter, {});
    if (!request.filter.sendKeys.isEmpty() && !letters) {
        // The keys when they were named, as `once redrive` words it.
        const auto named = m_store->inspector().deadLetters(request.filter, &error);
        if (!named)
            return done(ApiReply::failed(storeError(error)));
        options.detail = describeRedrive(request.filter, *named);
    }
    auto *run = new RedriveRun(*m_store, nullptr, nullptr, request.actor, options, this);
    auto storeGone = std::make_shared<std::optional<ApiError>>();
    connect(run, &RedriveRun::progressed, this, [this, run, storeGone, moved = qint64(0)](const RedriveProgress &progress) mutable {
        if (progress.moved > moved)
            Q_EMIT published();
        moved = progress.moved;
        // The store's file replaced under the server: stop rather than write to the old one.
        if (!*storeGone && (*storeGone = storeMoved()))
            run->cancel();
    });
    connect(run, &RedriveRun::finished, this, [this, run, storeGone, done](const RedriveResult &result) {
        run->deleteLater();
        if (*storeGone || !result.ok()) {
            ApiError failure = *storeGone ? **storeGone : storeError(result.error);
            failure.message = QStringLiteral("redrive stopped after %1 messages: %2").arg(result.moved).arg(failure.message);
            return done(ApiReply::failed(failure));
        }
        QJsonObject answer{{QStringLiteral("redriven"), result.moved},
                           {QStringLiteral("audit_id"), result.auditId},
                           {QStringLiteral("skipped_expired"), result.skippedExpired}};
        if (!result.stoppedBecause.isEmpty())
            answer.insert(QStringLiteral("stopped"), result.stoppedBecause);
        done(ApiReply::ok(answer));
    });
    if (!run->start(&error)) {
        delete run;
        return done(ApiReply::failed(storeError(error)));
    }
}

ApiReply QueueService::partnerEvents(const QList<PartnerEvent> &events, const QString &partner,
                                     const QString &profile, const QString &providerName)
{
    if (const auto moved = storeMoved())
        return ApiReply::failed(*moved);
    Operations operations(m_store->database(), m_store->queue(), m_store->ledger(), QStringLiteral("once serve"));
    int recorded = 0;
    int duplicates = 0;
    int unknown = 0;
    int settled = 0;
    for (const PartnerEvent &event : events) {
        QString error;
        const auto record = operations.recordPartnerEvent(event, partner, profile, providerName, &error);
        if (!record)
            return ApiReply::failed(storeError(error));
        switch (record->outcome) {
        case PartnerEventRecord::Outcome::Recorded:
            ++recorded;
            settled += record->settled ? 1 : 0;
            break;
        case PartnerEventRecord::Outcome::Duplicate:
            ++duplicates;
            break;
        case PartnerEventRecord::Outcome::UnknownKey:
            ++unknown;
            // Percent-encoded: the key and ids are the provider's text, never a raw control byte in the log.
            qCInfo(lcQueueService, "partner %s: a %s event %s for no key of this ledger (key %s, message %s); "
                                   "acknowledged, nothing changed",
                   qPrintable(partner), qPrintable(partnerEventKindName(event.kind)),
                   QUrl::toPercentEncoding(event.eventId.left(100)).constData(),
                   event.carriedKey.isEmpty() ? "-" : QUrl::toPercentEncoding(QString::fromUtf8(event.carriedKey.left(100))).constData(),
                   event.providerMessageId.isEmpty() ? "-" : QUrl::toPercentEncoding(event.providerMessageId.left(100)).constData());
            break;
        }
    }
    return ApiReply::ok({{QStringLiteral("recorded"), recorded},
                         {QStringLiteral("duplicates"), duplicates},
                         {QStringLiteral("unknown"), unknown},
                         {QStringLiteral("settled"), settled}});
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
