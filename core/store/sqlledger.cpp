#include "store/sqlledger.h"

#include "store/database.h"
#include "store/rowbatch.h"

#include <QSet>
#include <QVariant>

#include <algorithm>

namespace once {

namespace {

QVariant nullIfEmpty(const QString &text)
{
    return text.isEmpty() ? QVariant() : QVariant(text);
}

// "24 h", "90 s": a span as a held key's history names it.
QString roughDuration(qint64 ms)
{
    if (ms >= 2 * 3600 * 1000)
        return QStringLiteral("%1 h").arg(ms / (3600 * 1000));
    if (ms >= 2 * 60 * 1000)
        return QStringLiteral("%1 min").arg(ms / (60 * 1000));
    if (ms >= 2000)
        return QStringLiteral("%1 s").arg(ms / 1000);
    return QStringLiteral("%1 ms").arg(ms);
}

} // namespace

QList<ClaimResult> SqlLedger::claim(const QList<ClaimRequest> &requests, const QString &workerId,
                                    InDoubtPolicy policy, QString *error)
{
    Transaction transaction(m_db);
    if (!transaction.begin(error))
        return {};
    const qint64 now = nowMs();
    QSet<QByteArray> inserted;
    if (!insertClaims(requests, workerId, now, &inserted, error))
        return {};
    QList<ClaimResult> results(requests.size());
    // A key claimed twice in one batch: the first request won the insert, the second
    // meets the first one's live claim like any other duplicate.
    QList<qsizetype> taken;
    for (qsizetype i = 0; i < requests.size(); ++i) {
        if (!inserted.remove(requests.at(i).reminder.sendKey))
            taken.append(i);
    }
    // A plain claim gets no history row of its own: the send row that follows names the
    // same delivery, and one row a delivery is most of a turn's cost.
    if (taken.isEmpty())
        return transaction.commit(error) ? results : QList<ClaimResult>();

    QList<QByteArray> keys;
    for (const qsizetype i : std::as_const(taken))
        keys.append(requests.at(i).reminder.sendKey);
    auto rows = readTakenKeys(keys, error);
    if (!rows)
        return {};
    if (!noteSendsInDoubt(requests, taken, &*rows, error))
        return {};
    QList<Attempt> attempts;
    attempts.reserve(taken.size());
    for (const qsizetype i : std::as_const(taken)) {
        const ClaimRequest &request = requests.at(i);
        const auto row = rows->find(request.reminder.sendKey);
        if (row == rows->end()) {
            *error = QStringLiteral("ledger row for a taken key vanished");
            return {};
        }
        attempts.append(resolveTakenKey(request, workerId, request.policy.value_or(policy), now, &*row, &results[i]));
    }
    if (!writeTakenKeys(*rows, now, error) || !insertAttempts(attempts, error) || !transaction.commit(error))
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
                         QStringLiteral("BIGINT"), QStringLiteral("BIGINT"), QStringLiteral("BIGINT")});
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
            rows.add(request.expiresAtMs > 0 ? QVariant(request.expiresAtMs) : QVariant());
        }
        // "WHERE true" tells SQLite's parser that ON CONFLICT belongs to the INSERT.
        auto &insert = m_db.prepared(
            QStringLiteral("INSERT INTO ledger (send_key, event_id, user_id, reminder_id, scheduled_at, destination, "
                           "channel, payload, state, owner_message, owner_delivery, owner_worker, claim_expires_at, "
                           "created_at, updated_at, claimed_at, expires_at) SELECT v.column1, v.column2, v.column3, "
                           "v.column4, v.column5, v.column6, v.column7, v.column8, 'claimed', v.column9, v.column10, "
                           "v.column11, v.column12, v.column13, v.column14, v.column14, v.column15 FROM ")
            + rows.source() + QStringLiteral(" WHERE true ON CONFLICT (send_key) DO NOTHING RETURNING send_key"));
        QStringList keys;
        if (!m_db.execWith(insert, rows.parameters(), error, &keys))
            return false;
        for (const auto &key : std::as_const(keys))
            inserted->insert(key.toLatin1());
    }
    return true;
}

// The rows of keys whose claim insert found them taken, in one read.
std::optional<QHash<QByteArray, SqlLedger::TakenKey>> SqlLedger::readTakenKeys(const QList<QByteArray> &keys,
                                                                               QString *error)
{
    QHash<QByteArray, TakenKey> rows;
    RowBatch batch(m_db, {QStringLiteral("TEXT")});
    for (qsizetype start = 0, count = 0; start < keys.size(); start += count) {
        count = batch.rowsFrom(start, keys.size());
        batch.clear();
        for (qsizetype i = start; i < start + count; ++i)
            batch.add(QString::fromLatin1(keys.at(i)));
        auto &select = m_db.prepared(
            QStringLiteral("SELECT send_key, state, owner_message, claim_expires_at, round_sends, first_sent_at, "
                           "owner_delivery, owner_worker, claimed_at, created_at FROM ledger WHERE send_key IN "
                           "(SELECT v.column1 FROM ")
            + batch.source()
            // PostgreSQL runs workers' transactions side by side: lock the rows, in key
            // order like the inserts, so that two deliveries that find the same expired
            // claim cannot both take it over. (SQLite has one writer at a time.)
            + (m_db.isPostgres() ? QStringLiteral(") ORDER BY send_key FOR UPDATE") : QStringLiteral(")")));
        for (const auto &value : batch.parameters())
            select.addBindValue(value);
        if (!m_db.exec(select, error))
            return std::nullopt;
        while (select.next()) {
            TakenKey row;
            row.state = select.value(1).toString();
            row.stateAsRead = row.state;
            row.ownerMessage = select.value(2);
            row.claimExpiresAtMs = select.value(3).toLongLong();
            row.roundSends = select.value(4).toInt();
            row.firstSentAtMs = select.value(5).toLongLong();
            row.ownerDelivery = select.value(6);
            row.ownerWorker = select.value(7).toString();
            row.claimedAtMs = select.value(8).toLongLong();
            row.createdAtMs = select.value(9).toLongLong();
            rows.insert(select.value(0).toString().toLatin1(), std::move(row));
        }
        select.finish();
    }
    return rows;
}

// A partner keeps a key for a while only (Resend: 24 hours): a resend that reaches it
// after the window may act again. The key's first request may be the very one that went
// unrecorded (first_sent_at then names a later one), so it is known only to have left
// after the key's first claim. A resend leaves before the new claim runs out.
qint64 SqlLedger::firstSendAfterMs(const TakenKey &row)
{
    qint64 after = row.createdAtMs;
    if (row.firstSentAtMs > 0 && row.firstSentAtMs < after)
        after = row.firstSentAtMs;
    return after;
}

bool SqlLedger::mayHaveForgotten(const ClaimRequest &request, const TakenKey &row)
{
    const qint64 after = firstSendAfterMs(row);
    return request.keyWindowMs > 0 && after > 0 && request.leaseUntilMs - after > request.keyWindowMs;
}

QString SqlLedger::forgottenWhy(const ClaimRequest &request, const TakenKey &row)
{
    return QStringLiteral("; the partner keeps a key %1 and its first send may be %2 old by the time a resend "
                          "arrives: a resend could act again")
        .arg(roughDuration(request.keyWindowMs), roughDuration(request.leaseUntilMs - firstSendAfterMs(row)));
}

// Which retrying keys a claim may resend to a partner that has forgotten them had a send
// in doubt: one read of their history, only for those (rare: older than the window).
bool SqlLedger::noteSendsInDoubt(const QList<ClaimRequest> &requests, const QList<qsizetype> &taken,
                                 QHash<QByteArray, TakenKey> *rows, QString *error)
{
    for (const qsizetype i : taken) {
        const ClaimRequest &request = requests.at(i);
        const auto row = rows->find(request.reminder.sendKey);
        if (row == rows->end() || row->state != LedgerState::Retrying || !mayHaveForgotten(request, *row))
            continue;
        auto &select = m_db.prepared(QStringLiteral("SELECT COUNT(*) FROM attempts WHERE ") + attemptsOfKey({})
                                     + QStringLiteral(" AND step = 'send' AND outcome = 'in-doubt'"));
        bindAttemptsOfKey(select, request.reminder.sendKey);
        if (!m_db.exec(select, error))
            return false;
        row->sentInDoubt = select.next() && select.value(0).toLongLong() > 0;
        select.finish();
    }
    return true;
}

// Decides what a delivery whose key is taken does, from the key's row as this batch has
// left it so far (an earlier request of the batch may have taken the key over), and
// changes that row to match. Returns the delivery's history row.
Attempt SqlLedger::resolveTakenKey(const ClaimRequest &request, const QString &workerId, InDoubtPolicy policy,
                                   qint64 now, TakenKey *row, ClaimResult *result)
{
    Attempt attempt{request.reminder.sendKey, request.reminder.eventId, request.messageId, request.delivery,
                    workerId, now, QStringLiteral("claim"), QString(), 0, -1, {}, {}, {}};
    attempt.partner = request.partner;
    attempt.partnerProfile = request.partnerProfile;
    result->sendsThisRound = row->roundSends;
    result->firstSentAtMs = row->firstSentAtMs;
    const bool ownedByThisMessage = row->ownerMessage.isNull() || row->ownerMessage.toString() == request.messageId;

    const auto takeOver = [&] {
        row->state = QString(LedgerState::Claimed);
        row->ownerMessage = request.messageId;
        row->ownerDelivery = request.delivery;
        row->ownerWorker = workerId;
        row->claimExpiresAtMs = request.leaseUntilMs;
        row->claimedAtMs = now;
        row->takenOver = true;
    };
    // Held for an operator, the row keeps the claim that ran out (who held it, since
    // when): that is what the operator needs to know, and a late answer to that claim's
    // send can still settle the key (SqlLedger::record).
    const auto hold = [&] {
        row->state = QString(LedgerState::InDoubt);
        row->takenOver = true;
    };
    const auto countDuplicate = [&](const QString &why) {
        result->outcome = ClaimResult::Outcome::Duplicate;
        attempt.outcome = QStringLiteral("duplicate");
        attempt.error = why;
        ++row->duplicates;
    };

    const QString &state = row->state;
    if (state == LedgerState::Applied) {
        countDuplicate(QStringLiteral("already applied"));
    } else if (state == LedgerState::InDoubt) {
        countDuplicate(QStringLiteral("held in doubt for an operator"));
        result->notApplied =
            QStringLiteral("not sent: its send key is held in doubt for an operator's decision "
                           "(once in-doubt, or the console's In doubt page)");
    } else if (state == LedgerState::Dead) {
        countDuplicate(QStringLiteral("dead-lettered; an operator may redrive it"));
        result->notApplied =
            QStringLiteral("not sent: its send key is dead-lettered; an operator's redrive "
                           "(once redrive, or the console's Dead letters page) sends it again");
    } else if (state == LedgerState::Expired) {
        // Final like applied: its time passed before it could be sent, and a later
        // delivery (a redrive, a producer's retry) must not send it late.
        countDuplicate(QStringLiteral("expired before it could be sent"));
        result->notApplied = QStringLiteral("not sent: its reminder expired before it could be sent");
    } else if (state == LedgerState::Retrying) {
        if (!ownedByThisMessage) {
            countDuplicate(QStringLiteral("another message carries this key"));
        } else if (row->sentInDoubt && mayHaveForgotten(request, *row)) {
            // Its retry would be the resend of a send in doubt, to a partner that may have
            // forgotten the key since (workers stopped for a day, a long outage).
            attempt.errorClass = QStringLiteral("in-doubt");
            attempt.error = QStringLiteral("a send of this key was in doubt") + forgottenWhy(request, *row);
            result->outcome = ClaimResult::Outcome::Held;
            result->notApplied = heldForOperator(attempt.error);
            attempt.outcome = QStringLiteral("held");
            hold();
        } else {
            result->outcome = ClaimResult::Outcome::Claimed;
            attempt.outcome = QStringLiteral("claimed");
            takeOver();
        }
    } else if (row->claimExpiresAtMs > now) {
        // Claimed: a live claim belongs to a worker that is still sending.
        if (!ownedByThisMessage) {
            countDuplicate(QStringLiteral("another message holds a live claim"));
        } else {
            result->outcome = ClaimResult::Outcome::Busy;
            result->busyForMs = row->claimExpiresAtMs - now;
            attempt.outcome = QStringLiteral("busy");
        }
    } else {
        // The holder's claim expired without an outcome: it died between claim and
        // record, perhaps after the partner accepted. That is the in-doubt window.
        attempt.errorClass = QStringLiteral("in-doubt");
        attempt.error = QStringLiteral("the claim of message %1 delivery %2 on %3 ended without a recorded outcome")
                            .arg(row->ownerMessage.toString(), row->ownerDelivery.toString(), row->ownerWorker);
        const bool keyMayBeForgotten = mayHaveForgotten(request, *row);
        if (policy == InDoubtPolicy::Resend && keyMayBeForgotten)
            attempt.error += forgottenWhy(request, *row);
        if (policy == InDoubtPolicy::Hold || keyMayBeForgotten) {
            result->outcome = ClaimResult::Outcome::Held;
            result->notApplied = heldForOperator(attempt.error);
            attempt.outcome = QStringLiteral("held");
            hold();
        } else {
            result->outcome = ClaimResult::Outcome::Resend;
            attempt.outcome = QStringLiteral("resend");
            takeOver();
        }
    }
    return attempt;
}

// Writes what resolveTakenKey() decided: duplicate counts, and the keys taken over,
// guarded by the state they were read in.
bool SqlLedger::writeTakenKeys(const QHash<QByteArray, TakenKey> &rows, qint64 now, QString *error)
{
    QList<QPair<QByteArray, const TakenKey *>> sorted; // the lock order of the inserts
    for (auto it = rows.cbegin(); it != rows.cend(); ++it)
        sorted.append({it.key(), &it.value()});
    std::sort(sorted.begin(), sorted.end(), [](const auto &a, const auto &b) { return a.first < b.first; });

    RowBatch counts(m_db, {QStringLiteral("TEXT"), QStringLiteral("INTEGER")});
    RowBatch takeovers(m_db, {QStringLiteral("TEXT"), QStringLiteral("TEXT"), QStringLiteral("TEXT"),
                              QStringLiteral("INTEGER"), QStringLiteral("TEXT"), QStringLiteral("BIGINT"),
                              QStringLiteral("TEXT"), QStringLiteral("BIGINT"), QStringLiteral("BIGINT")});
    QList<const QPair<QByteArray, const TakenKey *> *> counted;
    QList<const QPair<QByteArray, const TakenKey *> *> takenOver;
    for (const auto &entry : std::as_const(sorted)) {
        if (entry.second->duplicates > 0)
            counted.append(&entry);
        if (entry.second->takenOver)
            takenOver.append(&entry);
    }
    for (qsizetype start = 0, count = 0; start < counted.size(); start += count) {
        count = counts.rowsFrom(start, counted.size());
        counts.clear();
        for (qsizetype i = start; i < start + count; ++i) {
            counts.add(QString::fromLatin1(counted.at(i)->first));
            counts.add(counted.at(i)->second->duplicates);
        }
        auto &update = m_db.prepared(QStringLiteral("UPDATE ledger SET duplicates = ledger.duplicates + v.column2 FROM ")
                                     + counts.source() + QStringLiteral(" WHERE ledger.send_key = v.column1"));
        if (!m_db.execWith(update, counts.parameters(), error))
            return false;
    }
    for (qsizetype start = 0, count = 0; start < takenOver.size(); start += count) {
        count = takeovers.rowsFrom(start, takenOver.size());
        takeovers.clear();
        for (qsizetype i = start; i < start + count; ++i) {
            const TakenKey &row = *takenOver.at(i)->second;
            takeovers.add(QString::fromLatin1(takenOver.at(i)->first));
            takeovers.add(row.state);
            takeovers.add(row.ownerMessage);
            takeovers.add(row.ownerDelivery);
            takeovers.add(row.ownerWorker);
            takeovers.add(row.claimExpiresAtMs);
            takeovers.add(row.stateAsRead);
            takeovers.add(now);
            takeovers.add(row.claimedAtMs ? QVariant(row.claimedAtMs) : QVariant());
        }
        auto &update = m_db.prepared(
            QStringLiteral("UPDATE ledger SET state = v.column2, owner_message = v.column3, owner_delivery = v.column4, "
                           "owner_worker = v.column5, claim_expires_at = v.column6, updated_at = v.column8, "
                           "claimed_at = v.column9 FROM ")
            + takeovers.source() + QStringLiteral(" WHERE ledger.send_key = v.column1 AND ledger.state = v.column7"));
        if (!m_db.execWith(update, takeovers.parameters(), error))
            return false;
    }
    return true;
}

namespace {

// When the key's ledger row was created, or 0 if it has none: what a history row is
// indexed under (attempts_key_created, schema 15), so that the rows of keys claimed
// moments ago go at the index's end instead of at their key's random place in it.
QString keyCreatedAt(const QString &sendKey)
{
    return QStringLiteral("COALESCE((SELECT l.created_at FROM ledger l WHERE l.send_key = %1), 0)")
        .arg(sendKey);
}

} // namespace

QString SqlLedger::attemptsOfKey(QStringView alias)
{
    const QString prefix = alias.isEmpty() ? QString() : alias.toString() + QLatin1Char('.');
    return QStringLiteral("%1key_created_at IN (%2, 0) AND %1send_key = ?")
        .arg(prefix, keyCreatedAt(QStringLiteral("?")));
}

void SqlLedger::bindAttemptsOfKey(QSqlQuery &query, const QByteArray &sendKey)
{
    const QString key = QString::fromLatin1(sendKey);
    query.addBindValue(key);
    query.addBindValue(key);
}

bool SqlLedger::insertAttempts(const QList<Attempt> &attempts, QString *error)
{
    RowBatch rows(m_db, {QStringLiteral("TEXT"), QStringLiteral("TEXT"), QStringLiteral("TEXT"), QStringLiteral("INTEGER"),
                         QStringLiteral("TEXT"), QStringLiteral("BIGINT"), QStringLiteral("TEXT"), QStringLiteral("TEXT"),
                         QStringLiteral("INTEGER"), QStringLiteral("BIGINT"), QStringLiteral("TEXT"), QStringLiteral("TEXT"),
                         QStringLiteral("TEXT"), QStringLiteral("BIGINT"), QStringLiteral("TEXT"), QStringLiteral("TEXT")});
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
            rows.add(attempt.auditId > 0 ? QVariant(attempt.auditId) : QVariant());
            rows.add(nullIfEmpty(attempt.partner));
            rows.add(nullIfEmpty(attempt.partnerProfile));
        }
        auto &insert = m_db.prepared(
            QStringLiteral("INSERT INTO attempts (send_key, event_id, message_id, delivery, worker_id, at, step, "
                           "outcome, http_status, latency_ms, error_class, error, provider_request_id, "
                           "audit_id, partner, partner_profile, key_created_at) SELECT v.*, ")
            + keyCreatedAt(QStringLiteral("v.column1")) + QStringLiteral(" FROM ") + rows.source());
        if (!m_db.execWith(insert, rows.parameters(), error))
            return false;
    }
    return true;
}

// A send's outcome settles its key when the delivery still holds the claim. A delivery
// whose claim ran out (its worker was stopped or stalled past the lease) and was taken
// over can only add knowledge: its request counts as a send, and a 2xx settles the key
// as applied whatever became of it since (in doubt, retrying, dead, or claimed again),
// because the partner has acted; anything else it learnt is left to the key's holder.
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
    // One statement joins a row of the ledger to at most one of its outcomes: a key with
    // two outcomes in one turn (its holder's and a late one) takes them in two rounds.
    QList<QList<const LedgerUpdate *>> rounds;
    for (qsizetype i = 0, occurrence = 0; i < sorted.size(); ++i) {
        occurrence = i > 0 && sorted.at(i)->sendKey == sorted.at(i - 1)->sendKey ? occurrence + 1 : 0;
        if (rounds.size() <= occurrence)
            rounds.append(QList<const LedgerUpdate *>());
        rounds[occurrence].append(sorted.at(i));
    }
    // Many outcomes per statement, joined to the ledger by key: a statement per key was
    // a round trip per key on PostgreSQL, most of a turn's time.
    RowBatch rows(m_db, {QStringLiteral("TEXT"), QStringLiteral("TEXT"), QStringLiteral("BIGINT"), QStringLiteral("INTEGER"),
                         QStringLiteral("BIGINT"), QStringLiteral("INTEGER"), QStringLiteral("TEXT"), QStringLiteral("TEXT"),
                         QStringLiteral("TEXT"), QStringLiteral("TEXT"), QStringLiteral("INTEGER"),
                         QStringLiteral("INTEGER")});
    // The claim holder, as the row was before this statement (SET reads the old row).
    static const QString holder = QStringLiteral(
        "(ledger.state = 'claimed' AND ledger.owner_message = v.column10 AND ledger.owner_delivery = v.column11)");
    static const QString learnt = QStringLiteral("(%1 OR (v.column2 = 'applied' AND ledger.state <> 'applied'))").arg(holder);
    static const QString sql =
        QStringLiteral("UPDATE ledger SET "
                       "state = CASE WHEN %1 THEN v.column2 WHEN v.column2 = 'applied' THEN 'applied' ELSE ledger.state END, "
                       "updated_at = CASE WHEN %2 THEN v.column3 ELSE ledger.updated_at END, "
                       "sends = ledger.sends + v.column4, "
                       "round_sends = CASE WHEN %1 THEN ledger.round_sends + v.column4 * v.column12 ELSE ledger.round_sends END, "
                       "first_sent_at = COALESCE(ledger.first_sent_at, v.column5), "
                       "applied_at = CASE WHEN v.column2 = 'applied' AND ledger.state <> 'applied' THEN v.column3 "
                       "ELSE ledger.applied_at END, "
                       "claim_expires_at = CASE WHEN %1 OR v.column2 = 'applied' THEN NULL ELSE ledger.claim_expires_at END, "
                       "last_http_status = CASE WHEN %2 THEN COALESCE(v.column6, ledger.last_http_status) "
                       "ELSE ledger.last_http_status END, "
                       "last_error_class = CASE WHEN %2 THEN v.column7 ELSE ledger.last_error_class END, "
                       "last_error = CASE WHEN %2 THEN v.column8 ELSE ledger.last_error END, "
                       "provider_request_id = CASE WHEN %2 THEN COALESCE(v.column9, ledger.provider_request_id) "
                       "ELSE ledger.provider_request_id END FROM ")
            .arg(holder, learnt);
    for (const auto &round : std::as_const(rounds)) {
        for (qsizetype start = 0, count = 0; start < round.size(); start += count) {
            count = rows.rowsFrom(start, round.size());
            rows.clear();
            for (qsizetype i = start; i < start + count; ++i) {
                const LedgerUpdate &change = *round.at(i);
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
                rows.add(change.spendsBudget ? 1 : 0);
            }
            static const QString where = QStringLiteral(" WHERE ledger.send_key = v.column1 AND (%1 OR v.column4 = 1)").arg(holder);
            auto &update = m_db.prepared(sql + rows.source() + where);
            if (!m_db.execWith(update, rows.parameters(), error))
                return false;
        }
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
    // The providers' delivery events seen (kept to record each once, however often the
    // provider retries it) go with the same retention: no provider retries for weeks.
    auto &forgetEvents = m_db.prepared(QStringLiteral("DELETE FROM partner_events WHERE received_at < ?"));
    forgetEvents.addBindValue(beforeMs);
    if (!m_db.exec(forgetEvents, error))
        return false;
    for (;;) {
        Transaction transaction(m_db);
        if (!transaction.begin(error))
            return false;
        auto &select = m_db.prepared(QStringLiteral(
            "SELECT send_key FROM ledger WHERE state IN ('applied', 'expired') AND updated_at < ? LIMIT ?"));
        select.addBindValue(beforeMs);
        select.addBindValue(BatchSize);
        if (!m_db.exec(select, error))
            return false;
        QStringList keys;
        while (select.next())
            keys.append(select.value(0).toString());
        select.finish();
        if (keys.isEmpty())
            return transaction.commit(error) && foldEndedCounterShards(error);
        // The history first: its rows are found through their key's ledger row.
        auto &removeAttempts =
            m_db.prepared(QStringLiteral("DELETE FROM attempts WHERE ") + attemptsOfKey({}));
        auto &removeKey = m_db.prepared(QStringLiteral("DELETE FROM ledger WHERE send_key = ?"));
        for (const auto &key : std::as_const(keys)) {
            bindAttemptsOfKey(removeAttempts, key.toLatin1());
            removeKey.addBindValue(key);
            if (!m_db.exec(removeAttempts, error) || !m_db.exec(removeKey, error))
                return false;
        }
        if (!transaction.commit(error))
            return false;
        if (keys.size() < BatchSize)
            return foldEndedCounterShards(error);
    }
}

// On PostgreSQL each connection counts into a shard of its own (ledger_totals, keyed by
// its backend pid), so every worker start and every reconnection adds rows that nothing
// writes once the connection has ended. Those are folded into shard 0 here, in one
// statement: a live connection's shard is left alone, even one whose pid an ended
// connection had, and the sums stay what they were.
bool SqlLedger::foldEndedCounterShards(QString *error)
{
    if (!m_db.isPostgres())
        return true;
    auto &fold = m_db.prepared(QStringLiteral(
        "WITH ended AS (DELETE FROM ledger_totals WHERE shard <> 0 AND shard NOT IN "
        "(SELECT pid FROM pg_stat_activity WHERE pid IS NOT NULL) RETURNING counter, n) "
        "INSERT INTO ledger_totals (counter, shard, n) SELECT counter, 0, SUM(n) FROM ended GROUP BY counter "
        "ON CONFLICT (counter, shard) DO UPDATE SET n = ledger_totals.n + excluded.n"));
    return m_db.exec(fold, error);
}

} // namespace once
