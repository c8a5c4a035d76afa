#include "sqlledger.h"

#include "database.h"
#include "rowbatch.h"

#include <QSet>
#include <QVariant>

#include <algorithm>

namespace once {

namespace {

QVariant nullIfEmpty(const QString &text)
{
    return text.isEmpty() ? QVariant() : QVariant(text);
}

} // namespace

QList<ClaimResult> SqlLedger::claim(const QList<ClaimRequest> &requests, const QString &workerId,
                                    InDoubtPolicy policy, QString *error)
{
    QList<ClaimResult> results;
    QList<Attempt> attempts;
    Transaction transaction(m_db);
    if (!transaction.begin(error))
        return {};
    const qint64 now = nowMs();
    QSet<QByteArray> inserted;
    if (!insertClaims(requests, workerId, now, &inserted, error))
        return {};
    results.reserve(requests.size());
    attempts.reserve(requests.size());
    for (const auto &request : requests) {
        ClaimResult result;
        Attempt attempt{request.reminder.sendKey, request.reminder.eventId, request.messageId, request.delivery,
                        workerId, now, QStringLiteral("claim"), QString(), 0, -1, {}, {}, {}};
        // A key claimed twice in one batch: the first request won the insert, the
        // second meets the first one's live claim like any other duplicate.
        if (inserted.remove(request.reminder.sendKey)) {
            // A plain claim gets no history row of its own: the send row that follows
            // names the same delivery, and one row a delivery is most of a turn's cost.
            results.append(result);
            continue;
        }
        if (!resolveTakenKey(request, workerId, policy, now, &result, &attempt, error))
            return {};
        results.append(result);
        attempts.append(std::move(attempt));
    }
    if (!insertAttempts(attempts, error) || !transaction.commit(error))
        return {};
    return results;
}

// The claim is the INSERT: the unique key decides the winner, never a prior read.
bool SqlLedger::insertClaims(const QList<ClaimRequest> &requests, const QString &workerId, qint64 now,
                             QSet<QByteArray> *inserted, QString *error)
{
    // Every worker inserts its keys in the same (sorted) order, so two workers whose
    // batches share keys wait for each other in turn instead of deadlocking. The sort is
    // stable: of two requests for one key, the first in the batch must win the insert,
    // as claim() assumes.
    QList<const ClaimRequest *> sorted;
    sorted.reserve(requests.size());
    for (const auto &request : requests)
        sorted.append(&request);
    std::stable_sort(sorted.begin(), sorted.end(), [](const ClaimRequest *a, const ClaimRequest *b) {
        return a->reminder.sendKey < b->reminder.sendKey;
    });
    RowBatch rows(m_db, {QStringLiteral("TEXT"), QStringLiteral("TEXT"), QStringLiteral("TEXT"), QStringLiteral("TEXT"),
                         QStringLiteral("BIGINT"), QStringLiteral("TEXT"), QStringLiteral("TEXT"), QStringLiteral("BYTEA"),
                         QStringLiteral("TEXT"), QStringLiteral("INTEGER"), QStringLiteral("TEXT"), QStringLiteral("BIGINT"),
                         QStringLiteral("BIGINT"), QStringLiteral("BIGINT")});
    for (qsizetype start = 0, count = 0; start < sorted.size(); start += count) {
        count = rows.rowsFrom(start, sorted.size());
        rows.clear();
        for (qsizetype i = start; i < start + count; ++i) {
            const ClaimRequest &request = *sorted.at(i);
            const Reminder &reminder = request.reminder;
            rows.add(QString::fromLatin1(reminder.sendKey));
            rows.add(nullIfEmpty(reminder.eventId));
            rows.add(reminder.userId);
            rows.add(reminder.reminderId);
            rows.add(reminder.scheduledAt.toMSecsSinceEpoch());
            rows.add(reminder.destination);
            rows.add(nullIfEmpty(reminder.channel));
            rows.add(reminder.payload);
            rows.add(request.messageId);
            rows.add(request.delivery);
            rows.add(workerId);
            rows.add(request.leaseUntilMs);
            rows.add(now);
            rows.add(now);
        }
        // "WHERE true" tells SQLite's parser that ON CONFLICT belongs to the INSERT.
        auto &insert = m_db.prepared(
            QStringLiteral("INSERT INTO ledger (send_key, event_id, user_id, reminder_id, scheduled_at, destination, "
                           "channel, payload, state, owner_message, owner_delivery, owner_worker, claim_expires_at, "
                           "created_at, updated_at) SELECT v.column1, v.column2, v.column3, v.column4, v.column5, "
                           "v.column6, v.column7, v.column8, 'claimed', v.column9, v.column10, v.column11, v.column12, "
                           "v.column13, v.column14 FROM ")
            + rows.source() + QStringLiteral(" WHERE true ON CONFLICT (send_key) DO NOTHING RETURNING send_key"));
        rows.bind(insert);
        if (!m_db.exec(insert, error))
            return false;
        while (insert.next())
            inserted->insert(insert.value(0).toString().toLatin1());
        insert.finish();
    }
    return true;
}

// Only when the insert finds the key taken does the existing row say which path to take.
bool SqlLedger::resolveTakenKey(const ClaimRequest &request, const QString &workerId, InDoubtPolicy policy,
                                qint64 now, ClaimResult *result, Attempt *attempt, QString *error)
{
    const QString key = QString::fromLatin1(request.reminder.sendKey);
    auto &select = m_db.prepared(QStringLiteral(
        "SELECT state, owner_message, claim_expires_at, round_sends, first_sent_at, owner_delivery, owner_worker "
        "FROM ledger WHERE send_key = ?%1")
        // PostgreSQL runs workers' transactions side by side: lock the row, so that two
        // deliveries that find the same expired claim cannot both take it over. (SQLite
        // has one writer at a time.)
        .arg(m_db.isPostgres() ? QStringLiteral(" FOR UPDATE") : QString()));
    select.addBindValue(key);
    if (!m_db.exec(select, error))
        return false;
    if (!select.next()) {
        *error = QStringLiteral("ledger row for a taken key vanished");
        return false;
    }
    const QString state = select.value(0).toString();
    const QVariant owner = select.value(1);
    const qint64 expiresAt = select.value(2).toLongLong();
    result->sendsThisRound = select.value(3).toInt();
    result->firstSentAtMs = select.value(4).toLongLong();
    const QString holder = QStringLiteral("message %1 delivery %2 on %3")
                               .arg(owner.toString(), select.value(5).toString(), select.value(6).toString());
    select.finish();
    const bool ownedByThisMessage = owner.isNull() || owner.toString() == request.messageId;

    // Takes the key over for this delivery, guarded by the state it was read in.
    const auto takeOver = [&](QLatin1String newState) {
        auto &update = m_db.prepared(QStringLiteral(
            "UPDATE ledger SET state = ?, owner_message = ?, owner_delivery = ?, owner_worker = ?, "
            "claim_expires_at = ?, updated_at = ? WHERE send_key = ? AND state = ?"));
        update.addBindValue(QString(newState));
        update.addBindValue(request.messageId);
        update.addBindValue(request.delivery);
        update.addBindValue(workerId);
        update.addBindValue(request.leaseUntilMs);
        update.addBindValue(now);
        update.addBindValue(key);
        update.addBindValue(state);
        return m_db.exec(update, error);
    };
    const auto countDuplicate = [&](const QString &why) {
        result->outcome = ClaimResult::Outcome::Duplicate;
        attempt->outcome = QStringLiteral("duplicate");
        attempt->error = why;
        auto &update = m_db.prepared(QStringLiteral("UPDATE ledger SET duplicates = duplicates + 1 WHERE send_key = ?"));
        update.addBindValue(key);
        return m_db.exec(update, error);
    };

    if (state == LedgerState::Applied)
        return countDuplicate(QStringLiteral("already applied"));
    if (state == LedgerState::InDoubt)
        return countDuplicate(QStringLiteral("held in doubt for an operator"));
    if (state == LedgerState::Dead)
        return countDuplicate(QStringLiteral("dead-lettered; an operator may redrive it"));
    if (state == LedgerState::Retrying) {
        if (!ownedByThisMessage)
            return countDuplicate(QStringLiteral("another message carries this key"));
        result->outcome = ClaimResult::Outcome::Claimed;
        attempt->outcome = QStringLiteral("claimed");
        return takeOver(LedgerState::Claimed);
    }
    // Claimed: a live claim belongs to a worker that is still sending.
    if (expiresAt > now) {
        if (!ownedByThisMessage)
            return countDuplicate(QStringLiteral("another message holds a live claim"));
        result->outcome = ClaimResult::Outcome::Busy;
        result->busyForMs = expiresAt - now;
        attempt->outcome = QStringLiteral("busy");
        return true;
    }
    // The holder's claim expired without an outcome: it died between claim and record,
    // perhaps after the partner accepted. That is the in-doubt window.
    attempt->errorClass = QStringLiteral("in-doubt");
    attempt->error = QStringLiteral("the claim of %1 ended without a recorded outcome").arg(holder);
    if (policy == InDoubtPolicy::Hold) {
        result->outcome = ClaimResult::Outcome::Held;
        attempt->outcome = QStringLiteral("held");
        return takeOver(LedgerState::InDoubt);
    }
    result->outcome = ClaimResult::Outcome::Resend;
    attempt->outcome = QStringLiteral("resend");
    return takeOver(LedgerState::Claimed);
}

bool SqlLedger::insertAttempts(const QList<Attempt> &attempts, QString *error)
{
    RowBatch rows(m_db, {QStringLiteral("TEXT"), QStringLiteral("TEXT"), QStringLiteral("TEXT"), QStringLiteral("INTEGER"),
                         QStringLiteral("TEXT"), QStringLiteral("BIGINT"), QStringLiteral("TEXT"), QStringLiteral("TEXT"),
                         QStringLiteral("INTEGER"), QStringLiteral("BIGINT"), QStringLiteral("TEXT"), QStringLiteral("TEXT"),
                         QStringLiteral("TEXT")});
    for (qsizetype start = 0, count = 0; start < attempts.size(); start += count) {
        count = rows.rowsFrom(start, attempts.size());
        rows.clear();
        for (qsizetype i = start; i < start + count; ++i) {
            const Attempt &attempt = attempts.at(i);
            rows.add(attempt.sendKey.isEmpty() ? QVariant() : QVariant(QString::fromLatin1(attempt.sendKey)));
            rows.add(nullIfEmpty(attempt.eventId));
            rows.add(nullIfEmpty(attempt.messageId));
            rows.add(attempt.delivery);
            rows.add(nullIfEmpty(attempt.workerId));
            rows.add(attempt.atMs);
            rows.add(attempt.step);
            rows.add(attempt.outcome);
            rows.add(attempt.httpStatus ? QVariant(attempt.httpStatus) : QVariant());
            rows.add(attempt.latencyMs >= 0 ? QVariant(attempt.latencyMs) : QVariant());
            rows.add(nullIfEmpty(attempt.errorClass));
            rows.add(nullIfEmpty(attempt.error));
            rows.add(nullIfEmpty(attempt.providerRequestId));
        }
        auto &insert = m_db.prepared(
            QStringLiteral("INSERT INTO attempts (send_key, event_id, message_id, delivery, worker_id, at, step, "
                           "outcome, http_status, latency_ms, error_class, error, provider_request_id) SELECT * FROM ")
            + rows.source());
        rows.bind(insert);
        if (!m_db.exec(insert, error))
            return false;
    }
    return true;
}

bool SqlLedger::record(const QList<LedgerUpdate> &updates, const QList<Attempt> &attempts, QString *error)
{
    Transaction transaction(m_db);
    if (!transaction.begin(error))
        return false;
    const qint64 now = nowMs();
    // The same lock order as the claims' (see insertClaims).
    QList<const LedgerUpdate *> sorted;
    sorted.reserve(updates.size());
    for (const auto &change : updates)
        sorted.append(&change);
    std::stable_sort(sorted.begin(), sorted.end(),
              [](const LedgerUpdate *a, const LedgerUpdate *b) { return a->sendKey < b->sendKey; });
    // Many outcomes per statement, joined to the ledger by key: a statement per key was
    // a round trip per key on PostgreSQL, most of a turn's time.
    RowBatch rows(m_db, {QStringLiteral("TEXT"), QStringLiteral("TEXT"), QStringLiteral("BIGINT"), QStringLiteral("INTEGER"),
                         QStringLiteral("BIGINT"), QStringLiteral("INTEGER"), QStringLiteral("TEXT"), QStringLiteral("TEXT"),
                         QStringLiteral("TEXT"), QStringLiteral("TEXT"), QStringLiteral("INTEGER")});
    for (qsizetype start = 0, count = 0; start < sorted.size(); start += count) {
        count = rows.rowsFrom(start, sorted.size());
        rows.clear();
        for (qsizetype i = start; i < start + count; ++i) {
            const LedgerUpdate &change = *sorted.at(i);
            rows.add(QString::fromLatin1(change.sendKey));
            rows.add(QString(change.state));
            rows.add(now);
            rows.add(change.countsAsSend ? 1 : 0);
            rows.add(change.sentAtMs ? QVariant(change.sentAtMs) : QVariant());
            rows.add(change.httpStatus ? QVariant(change.httpStatus) : QVariant());
            rows.add(nullIfEmpty(change.errorClass));
            rows.add(nullIfEmpty(change.error));
            rows.add(nullIfEmpty(change.providerRequestId));
            rows.add(change.messageId);
            rows.add(change.delivery);
        }
        auto &update = m_db.prepared(
            QStringLiteral(
                "UPDATE ledger SET state = v.column2, updated_at = v.column3, sends = ledger.sends + v.column4, "
                "round_sends = ledger.round_sends + v.column4, first_sent_at = COALESCE(ledger.first_sent_at, v.column5), "
                "applied_at = CASE WHEN v.column2 = 'applied' THEN v.column3 ELSE ledger.applied_at END, "
                "claim_expires_at = NULL, last_http_status = COALESCE(v.column6, ledger.last_http_status), "
                "last_error_class = v.column7, last_error = v.column8, "
                "provider_request_id = COALESCE(v.column9, ledger.provider_request_id) FROM ")
            + rows.source()
            + QStringLiteral(" WHERE ledger.send_key = v.column1 AND ledger.state = 'claimed' "
                             "AND ledger.owner_message = v.column10 AND ledger.owner_delivery = v.column11"));
        rows.bind(update);
        if (!m_db.exec(update, error))
            return false;
    }
    if (!insertAttempts(attempts, error))
        return false;
    return transaction.commit(error);
}

bool SqlLedger::reopen(const QList<QByteArray> &keys, QString *error)
{
    auto &update = m_db.prepared(QStringLiteral(
        "UPDATE ledger SET state = 'retrying', owner_message = NULL, round_sends = 0, redrives = redrives + 1, "
        "updated_at = ? WHERE send_key = ? AND state IN ('dead', 'in_doubt')"));
    const qint64 now = nowMs();
    for (const auto &key : keys) {
        update.addBindValue(now);
        update.addBindValue(QString::fromLatin1(key));
        if (!m_db.exec(update, error))
            return false;
    }
    return true;
}

bool SqlLedger::purgeFinished(qint64 beforeMs, QString *error)
{
    constexpr int BatchSize = 500;
    for (;;) {
        Transaction transaction(m_db);
        if (!transaction.begin(error))
            return false;
        auto &select = m_db.prepared(QStringLiteral(
            "SELECT send_key FROM ledger WHERE state = 'applied' AND updated_at < ? LIMIT ?"));
        select.addBindValue(beforeMs);
        select.addBindValue(BatchSize);
        if (!m_db.exec(select, error))
            return false;
        QStringList keys;
        while (select.next())
            keys.append(select.value(0).toString());
        select.finish();
        if (keys.isEmpty())
            return transaction.commit(error);
        auto &removeAttempts = m_db.prepared(QStringLiteral("DELETE FROM attempts WHERE send_key = ?"));
        auto &removeKey = m_db.prepared(QStringLiteral("DELETE FROM ledger WHERE send_key = ?"));
        for (const auto &key : std::as_const(keys)) {
            removeAttempts.addBindValue(key);
            removeKey.addBindValue(key);
            if (!m_db.exec(removeAttempts, error) || !m_db.exec(removeKey, error))
                return false;
        }
        if (!transaction.commit(error))
            return false;
        if (keys.size() < BatchSize)
            return true;
    }
}

} // namespace once
