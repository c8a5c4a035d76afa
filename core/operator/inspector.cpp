#include "operator/inspector.h"

#include "store/database.h"
#include "store/rowbatch.h"
#include "store/sqlledger.h"
#include "model/reminder.h"
#include "partners/partnerprofile.h"
#include "store/workerregistry.h"
#include "text/quantities.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QDateTime>
#include <QHash>
#include <QTimeZone>
#include <QSqlRecord>
#include <QVariant>

#include <limits>

namespace once {

namespace {

// An event's columns; a list leaves the payload out (nobody reads it there, and one may
// be 256 KiB), the last column is the row's place in the list's order.
QString eventColumns(bool postgres, bool withPayload)
{
    return QStringLiteral(
               "send_key, event_id, user_id, reminder_id, destination, channel, state, scheduled_at, created_at, "
               "updated_at, first_sent_at, applied_at, sends, duplicates, redrives, last_http_status, last_error_class, "
               "last_error, provider_request_id, owner_worker, claimed_at, claim_expires_at, expires_at, ")
        + (postgres ? QStringLiteral("seq") : QStringLiteral("rowid")) + (withPayload ? QStringLiteral(", payload") : QString());
}

EventRow readEvent(const QSqlQuery &query, bool withPayload)
{
    EventRow row;
    row.sendKey = query.value(0).toString().toLatin1();
    row.eventId = query.value(1).toString();
    row.userId = query.value(2).toString();
    row.reminderId = query.value(3).toString();
    row.destination = query.value(4).toString();
    row.channel = query.value(5).toString();
    row.state = query.value(6).toString();
    row.scheduledAtMs = query.value(7).toLongLong();
    row.createdAtMs = query.value(8).toLongLong();
    row.updatedAtMs = query.value(9).toLongLong();
    row.firstSentAtMs = query.value(10).toLongLong();
    row.appliedAtMs = query.value(11).toLongLong();
    row.sends = query.value(12).toInt();
    row.duplicates = query.value(13).toInt();
    row.redrives = query.value(14).toInt();
    row.lastHttpStatus = query.value(15).toInt();
    row.lastErrorClass = query.value(16).toString();
    row.lastError = query.value(17).toString();
    row.providerRequestId = query.value(18).toString();
    row.claimedBy = query.value(19).toString();
    row.claimedAtMs = query.value(20).toLongLong();
    row.claimExpiresAtMs = query.value(21).toLongLong();
    row.expiresAtMs = query.value(22).toLongLong();
    row.listPosition = query.value(23).toLongLong();
    if (withPayload)
        row.payload = query.value(24).toByteArray();
    return row;
}

// LIKE's wildcards and its escape character, escaped, so that a prefix matches only itself.
QString likePrefix(const QString &prefix)
{
    QString escaped = prefix;
    escaped.replace(QLatin1Char('\\'), QLatin1String("\\\\"));
    escaped.replace(QLatin1Char('%'), QLatin1String("\\%"));
    escaped.replace(QLatin1Char('_'), QLatin1String("\\_"));
    return escaped + QLatin1Char('%');
}

// How a prefix search finds its rows on SQLite (see prefixPlanFor): the OR of the columns'
// conditions, planned as SQLite sees fit, or the union of what each column's index holds.
enum class PrefixPlan
{
    AsPlanned,
    ThroughIndexes
};

// GLOB's wildcards, each in a class of its own, so that a prefix matches only itself.
QString globPrefix(const QString &prefix)
{
    QString escaped;
    for (const QChar c : prefix) {
        if (c == QLatin1Char('*') || c == QLatin1Char('?') || c == QLatin1Char('['))
            escaped += QLatin1Char('[') + c + QLatin1Char(']');
        else
            escaped += c;
    }
    return escaped + QLatin1Char('*');
}

// A column starting with the bound prefix, in a form the column's index serves, and the
// pattern to bind. On SQLite that is GLOB: its LIKE ignores ASCII case, so no index of the
// exact bytes could serve it, and every prefix search read the whole ledger. Both stores
// match a prefix with its case, as an exact search does.
QString startsWith(const QString &column, bool postgres)
{
    return postgres ? column + QStringLiteral(" LIKE ? ESCAPE '\\'") : column + QStringLiteral(" GLOB ?");
}

QString prefixPattern(const QString &prefix, bool postgres)
{
    return postgres ? likePrefix(prefix) : globPrefix(prefix);
}

// The ledger's columns a search looks in.
const QStringList &searchedColumns()
{
    static const QStringList columns{QStringLiteral("user_id"), QStringLiteral("destination"),
                                     QStringLiteral("reminder_id"), QStringLiteral("send_key"),
                                     QStringLiteral("event_id")};
    return columns;
}

// The ledger's rows a prefix search matches, as one condition.
QString prefixMatches(const QString &prefix, PrefixPlan plan, bool postgres, QVariantList *values)
{
    QStringList matches;
    for (const QString &column : searchedColumns()) {
        matches << startsWith(column, postgres);
        values->append(prefixPattern(prefix, postgres));
    }
    if (plan == PrefixPlan::ThroughIndexes)
        return QStringLiteral("rowid IN (SELECT rowid FROM ledger WHERE ") +
               matches.join(QLatin1String(" UNION SELECT rowid FROM ledger WHERE ")) + QLatin1Char(')');
    return QLatin1Char('(') + matches.join(QLatin1String(" OR ")) + QLatin1Char(')');
}

// Whether a payload (bytes) contains the bound bytes.
QString payloadContains(bool postgres)
{
    return postgres ? QStringLiteral("position(? IN payload) > 0") : QStringLiteral("instr(payload, ?) > 0");
}

// A history row (alias a) of a call that may have acted at the partner, as eventVerdict
// counts them: an accepted send, a send written without an answer (the last try of an
// in-doubt send is recorded "transient" with its class), and a claim taken over or held
// after its holder died without recording what it did.
QString possibleEffectSql()
{
    return QStringLiteral(
        "((a.step = 'send' AND (a.outcome IN ('applied', 'in-doubt', 'held') OR a.error_class = 'in-doubt') "
        "AND COALESCE(a.error_class, '') <> 'connect-failed') OR (a.step = 'claim' AND a.outcome IN ('resend', 'held')))");
}

// The WHERE clause of an event filter on the ledger and its bound values, shared by the
// list and the count.
QString eventWhere(const EventFilter &filter, bool postgres, QVariantList *values,
                   PrefixPlan prefixPlan = PrefixPlan::AsPlanned)
{
    QStringList conditions;
    const EventSearch search = EventSearch::parse(filter.text);
    switch (search.kind) {
    case EventSearch::Kind::None:
        break;
    case EventSearch::Kind::Exact:
        // The last: an event id of any delivery, a duplicate's too (the history keeps each).
        // Each column through its own index, then the union: PostgreSQL plans an OR with a
        // subquery as a scan of the whole ledger (13 s at ten million events).
        conditions << QStringLiteral(
            "send_key IN (SELECT send_key FROM ledger WHERE user_id = ? "
            "UNION SELECT send_key FROM ledger WHERE destination = ? "
            "UNION SELECT send_key FROM ledger WHERE reminder_id = ? "
            "UNION SELECT send_key FROM ledger WHERE send_key = ? "
            "UNION SELECT send_key FROM ledger WHERE event_id = ? "
            "UNION SELECT send_key FROM attempts WHERE event_id = ?)");
        for (int i = 0; i < 6; ++i)
            values->append(search.text);
        break;
    case EventSearch::Kind::Prefix:
        conditions << prefixMatches(search.text, prefixPlan, postgres, values);
        break;
    case EventSearch::Kind::Body:
        conditions << payloadContains(postgres);
        values->append(search.text.toUtf8());
        break;
    }
    if (!filter.userId.isEmpty()) {
        conditions << QStringLiteral("user_id = ?");
        values->append(filter.userId);
    }
    if (!filter.state.isEmpty()) {
        conditions << QStringLiteral("state = ?");
        values->append(filter.state);
    }
    if (filter.auditId > 0) {
        conditions << QStringLiteral("send_key IN (SELECT send_key FROM attempts WHERE audit_id = ?)");
        values->append(filter.auditId);
    }
    if (filter.sinceMs > 0 || filter.untilMs > 0) {
        // Through attempts(at, ...): a day's history, not the whole ledger's.
        QStringList window;
        if (filter.sinceMs > 0) {
            window << QStringLiteral("at >= ?");
            values->append(filter.sinceMs);
        }
        if (filter.untilMs > 0) {
            window << QStringLiteral("at < ?");
            values->append(filter.untilMs);
        }
        conditions << QStringLiteral("send_key IN (SELECT send_key FROM attempts WHERE ")
                          + window.join(QLatin1String(" AND ")) + QLatin1Char(')');
    }
    // The key's own history through attempts(key_created_at, send_key, id), as
    // SqlLedger::attemptsOfKey finds it.
    const QString ofThisKey = QStringLiteral("a.key_created_at IN (ledger.created_at, 0) AND a.send_key = ledger.send_key");
    switch (filter.calls) {
    case EventFilter::Calls::Any:
        break;
    case EventFilter::Calls::SeveralEffects:
        conditions << QStringLiteral("(SELECT COUNT(*) FROM attempts a LEFT JOIN workers w ON w.id = a.worker_id "
                                     "LEFT JOIN partners p ON p.url = COALESCE(a.partner, w.partner) WHERE ")
                          + ofThisKey + QStringLiteral(" AND ") + possibleEffectSql()
                          + QStringLiteral(" AND COALESCE(p.honours_key, '') <> 'yes') > 1");
        break;
    case EventFilter::Calls::Unanswered:
        conditions << QStringLiteral("EXISTS (SELECT 1 FROM attempts a WHERE ") + ofThisKey
                          + QStringLiteral(" AND ") + possibleEffectSql() + QStringLiteral(" AND a.outcome <> 'applied')");
        break;
    }
    return conditions.isEmpty() ? QString() : QStringLiteral(" WHERE ") + conditions.join(QLatin1String(" AND "));
}

// A prefix most events share is found soonest by reading the ledger newest first until a
// page is full, which is the plan SQLite makes for any prefix (it knows no better without
// statistics). For a rarer one that read goes through the whole ledger: 0.5 s at a
// million events for a prefix no event has. So the matches are counted first, up to
// DenseMatches, through the columns' indexes, and a prefix with fewer is listed through
// them too, sorting at most that many rows. PostgreSQL estimates a prefix from its
// statistics and chooses between the two by itself.
std::optional<PrefixPlan> prefixPlanFor(Database &db, const EventFilter &filter, QString *error)
{
    constexpr int DenseMatches = 20000;
    const EventSearch search = EventSearch::parse(filter.text);
    if (db.isPostgres() || search.kind != EventSearch::Kind::Prefix)
        return PrefixPlan::AsPlanned;
    QVariantList values;
    QSqlQuery query(db.connection());
    query.setForwardOnly(true);
    query.prepare(QStringLiteral("SELECT COUNT(*) FROM (SELECT 1 FROM ledger WHERE ") +
                  prefixMatches(search.text, PrefixPlan::AsPlanned, false, &values) +
                  QStringLiteral(" LIMIT ?)"));
    for (const auto &value : std::as_const(values))
        query.addBindValue(value);
    query.addBindValue(DenseMatches);
    if (!db.exec(query, error) || !query.next())
        return std::nullopt;
    return query.value(0).toLongLong() < DenseMatches ? PrefixPlan::ThroughIndexes : PrefixPlan::AsPlanned;
}

// Whether a filter lists messages waiting in the queue: a search or the Queued state,
// never the whole ledger's list (a backlog would bury it) nor one user's (the queue has no
// user column).
bool listsQueued(const EventFilter &filter)
{
    if (!filter.userId.isEmpty() || filter.calls != EventFilter::Calls::Any
        || filter.order == EventFilter::Order::MostSends)
        return false;
    if (filter.state == EventState::Queued)
        return true;
    return filter.state.isEmpty() && EventSearch::parse(filter.text).kind != EventSearch::Kind::None;
}

// The WHERE clause for messages in the store's queue whose key no worker has claimed.
QString queuedWhere(const EventFilter &filter, bool postgres, QVariantList *values)
{
    QStringList conditions{
        QStringLiteral("(send_key IS NULL OR NOT EXISTS (SELECT 1 FROM ledger l WHERE l.send_key = queue.send_key))")};
    if (filter.sinceMs > 0) {
        conditions << QStringLiteral("enqueued_at >= ?");
        values->append(filter.sinceMs);
    }
    if (filter.untilMs > 0) {
        conditions << QStringLiteral("enqueued_at < ?");
        values->append(filter.untilMs);
    }
    const EventSearch search = EventSearch::parse(filter.text);
    switch (search.kind) {
    case EventSearch::Kind::None:
        break;
    case EventSearch::Kind::Exact:
        // The payload holds the ids and the destination as JSON strings.
        conditions << QStringLiteral("(send_key = ? OR event_id = ? OR %1)").arg(payloadContains(postgres));
        *values << search.text << search.text << jsonString(search.text, true);
        break;
    case EventSearch::Kind::Prefix:
        conditions << QStringLiteral("(%1 OR %2 OR %3)")
                          .arg(startsWith(QStringLiteral("send_key"), postgres),
                               startsWith(QStringLiteral("event_id"), postgres), payloadContains(postgres));
        *values << prefixPattern(search.text, postgres) << prefixPattern(search.text, postgres)
                << jsonString(search.text, false);
        break;
    case EventSearch::Kind::Body:
        conditions << payloadContains(postgres);
        values->append(search.text.toUtf8());
        break;
    }
    return QStringLiteral(" WHERE ") + conditions.join(QLatin1String(" AND "));
}

const QString QueuedColumns = QStringLiteral("payload, send_key, event_id, enqueued_at, visible_at, id");

EventRow readQueued(const QSqlQuery &query)
{
    EventRow row;
    row.payload = query.value(0).toByteArray();
    row.sendKey = query.value(1).toString().toLatin1();
    row.eventId = query.value(2).toString();
    row.createdAtMs = query.value(3).toLongLong();
    row.updatedAtMs = row.createdAtMs;
    row.dueAtMs = query.value(4).toLongLong();
    row.listPosition = EventRow::QueuedPositions + query.value(5).toLongLong();
    row.state = EventState::Queued;
    if (const auto reminder = parseReminder(row.payload).reminder) {
        row.userId = reminder->userId;
        row.reminderId = reminder->reminderId;
        row.destination = reminder->destination;
        row.channel = reminder->channel;
        row.scheduledAtMs = reminder->scheduledAt.toMSecsSinceEpoch();
    }
    return row;
}

} // namespace

QJsonObject DeliveryStats::toJson() const
{
    QJsonObject object{
        {QStringLiteral("ready"), queue.ready},
        {QStringLiteral("in_flight"), queue.inFlight},
        {QStringLiteral("delayed"), queue.delayed},
        {QStringLiteral("dead"), queue.dead},
        {QStringLiteral("acked"), acked},
        {QStringLiteral("in_doubt"), inDoubt},
        {QStringLiteral("claimed"), claimed},
        {QStringLiteral("retrying"), retrying},
        {QStringLiteral("dead_keys"), deadKeys},
        {QStringLiteral("expired"), expired},
        {QStringLiteral("duplicates_suppressed"), duplicatesSuppressed},
        {QStringLiteral("duplicate_deliveries"), duplicateDeliveries},
        {QStringLiteral("applied_last_5m"), appliedLast5Min},
        {QStringLiteral("sends_last_5m"), sendsLast5Min},
        {QStringLiteral("failed_sends_last_5m"), failedSendsLast5Min},
        {QStringLiteral("failed_in_a_row_last_5m"), failedInARowLast5Min},
        {QStringLiteral("failing_since"), failingSinceMs ? QJsonValue(formatTime(failingSinceMs)) : QJsonValue()},
    };
    object.insert(QStringLiteral("oldest_ready_age_s"),
                  queue.oldestReadyAgeMs ? QJsonValue(double(*queue.oldestReadyAgeMs) / 1000.0) : QJsonValue(0));
    object.insert(QStringLiteral("lateness_p50_s"),
                  latenessP50Ms ? QJsonValue(double(*latenessP50Ms) / 1000.0) : QJsonValue(QJsonValue::Null));
    object.insert(QStringLiteral("lateness_p95_s"),
                  latenessP95Ms ? QJsonValue(double(*latenessP95Ms) / 1000.0) : QJsonValue(QJsonValue::Null));
    QJsonArray paused;
    for (const auto &[pause, held] : pausedPartners)
        paused.append(QJsonObject{{QStringLiteral("partner"), pause.partner},
                                  {QStringLiteral("paused_by"), pause.by},
                                  {QStringLiteral("paused_at"), formatTime(pause.atMs)},
                                  {QStringLiteral("reason"), pause.reason.isEmpty() ? QJsonValue() : QJsonValue(pause.reason)},
                                  {QStringLiteral("held"), held}});
    object.insert(QStringLiteral("paused_partners"), paused);
    object.insert(QStringLiteral("oldest_in_doubt_since"), timeOrNull(oldestInDoubtSinceMs));
    object.insert(QStringLiteral("dead_lettered_last_15m"), deadLetteredLast15Min);
    if (!queue.partitions.isEmpty()) {
        QJsonArray partitions;
        for (const PartitionLag &partition : queue.partitions)
            partitions.append(QJsonObject{
                {QStringLiteral("partition"), partition.partition},
                {QStringLiteral("end_offset"), partition.endOffset},
                {QStringLiteral("committed_offset"),
                 partition.committedOffset ? QJsonValue(*partition.committedOffset) : QJsonValue(QJsonValue::Null)},
                {QStringLiteral("lag"), partition.lag},
                {QStringLiteral("deleted_unread"), partition.deletedUnread}});
        object.insert(QStringLiteral("partitions"), partitions);
    }
    // A queue that counts nothing (Pub/Sub): not measured, so not 0.
    if (queue.backlogUnknown)
        for (const QString &count : {QStringLiteral("ready"), QStringLiteral("in_flight"), QStringLiteral("delayed"),
                                     QStringLiteral("dead"), QStringLiteral("oldest_ready_age_s")})
            object.insert(count, QJsonValue::Null);
    return object;
}

QString describePartitionLags(const QList<PartitionLag> &partitions)
{
    QStringList parts;
    for (const PartitionLag &partition : partitions) {
        const QString behind =
            partition.lag > 0 ? QStringLiteral("%1 behind").arg(formatCount(partition.lag)) : QStringLiteral("none behind");
        const QString committed = partition.committedOffset
                                      ? QStringLiteral("committed %1").arg(*partition.committedOffset)
                                      : QStringLiteral("nothing committed");
        const QString deleted = partition.deletedUnread > 0
                                    ? QStringLiteral(", %1 deleted by retention unread").arg(formatCount(partition.deletedUnread))
                                    : QString();
        parts.append(QStringLiteral("%1: %2 (%3, end %4%5)")
                         .arg(partition.partition)
                         .arg(behind, committed)
                         .arg(partition.endOffset)
                         .arg(deleted));
    }
    return parts.join(QStringLiteral("; "));
}

QJsonObject EventRow::toJson() const
{
    return QJsonObject{
        {QStringLiteral("key"), QString::fromLatin1(sendKey)},
        {QStringLiteral("event_id"), textOrNull(eventId)},
        {QStringLiteral("user_id"), userId},
        {QStringLiteral("reminder_id"), reminderId},
        {QStringLiteral("scheduled_at"), timeOrNull(scheduledAtMs)},
        {QStringLiteral("destination"), destination},
        {QStringLiteral("channel"), textOrNull(channel)},
        {QStringLiteral("state"), state},
        {QStringLiteral("created_at"), timeOrNull(createdAtMs)},
        {QStringLiteral("updated_at"), timeOrNull(updatedAtMs)},
        {QStringLiteral("since"), timeOrNull(updatedAtMs)},
        {QStringLiteral("first_sent_at"), timeOrNull(firstSentAtMs)},
        {QStringLiteral("applied_at"), timeOrNull(appliedAtMs)},
        {QStringLiteral("sends"), sends},
        {QStringLiteral("duplicates_suppressed"), duplicates},
        {QStringLiteral("redrives"), redrives},
        {QStringLiteral("last_http_status"), lastHttpStatus ? QJsonValue(lastHttpStatus) : QJsonValue(QJsonValue::Null)},
        {QStringLiteral("last_error_class"), textOrNull(lastErrorClass)},
        {QStringLiteral("last_error"), textOrNull(lastError)},
        {QStringLiteral("provider_request_id"), textOrNull(providerRequestId)},
        {QStringLiteral("claimed_by"), textOrNull(claimedBy)},
        {QStringLiteral("claimed_at"), timeOrNull(claimedAtMs)},
        {QStringLiteral("expires_at"), timeOrNull(expiresAtMs)},
        {QStringLiteral("known"), state == LedgerState::InDoubt ? QJsonValue(whatIsKnown()) : QJsonValue(QJsonValue::Null)},
        {QStringLiteral("reconciliation"), textOrNull(reconciliation)},
        {QStringLiteral("partner"), textOrNull(partner)},
        {QStringLiteral("partner_honours_idempotency_key"), keyHonouringName(partnerHonoursKey)},
    };
}

QString EventRow::whatIsKnown(const std::function<QString(qint64)> &time) const
{
    const QString before = sends > 0 ? QStringLiteral("; %1 send%2 on record, the first at %3")
                                           .arg(QString::number(sends), sends == 1 ? QString() : QStringLiteral("s"),
                                                time(firstSentAtMs))
                                     : QString();
    const QString by = claimedBy.isEmpty() ? QStringLiteral("a worker") : claimedBy;
    if (claimExpiresAtMs > 0) {
        // The holder vanished (killed, or stopped past its lease) between its claim and
        // an outcome: its request may or may not have been written.
        const QString when = claimedAtMs > 0 ? QStringLiteral(" at ") + time(claimedAtMs) : QString();
        return QStringLiteral("claimed by %1%2, may have been sent (the claim ran out at %3 without a recorded "
                              "outcome)%4")
            .arg(by, when, time(claimExpiresAtMs), before);
    }
    // The worker itself gave up on an answer it had asked for.
    return QStringLiteral("sent %1 time%2, first at %3, by %4; no complete answer to the last send%5")
        .arg(QString::number(sends), sends == 1 ? QString() : QStringLiteral("s"), time(firstSentAtMs), by,
             lastError.isEmpty() ? QString() : QStringLiteral(": ") + lastError);
}

QJsonObject AuditEntry::toJson() const
{
    return QJsonObject{{QStringLiteral("id"), id},
                       {QStringLiteral("at"), formatTime(atMs)},
                       {QStringLiteral("actor"), actor},
                       {QStringLiteral("action"), action},
                       {QStringLiteral("detail"), detail},
                       {QStringLiteral("count"), count},
                       {QStringLiteral("rate_per_second"), ratePerSecond > 0 ? QJsonValue(ratePerSecond) : QJsonValue()},
                       {QStringLiteral("reason"), textOrNull(reason)},
                       {QStringLiteral("outcome"), outcome ? QJsonValue(QJsonObject{
                                                                 {QStringLiteral("delivered"), outcome->delivered},
                                                                 {QStringLiteral("died_again"), outcome->diedAgain},
                                                                 {QStringLiteral("not_settled_yet"),
                                                                  std::max<qint64>(0, count - outcome->delivered
                                                                                          - outcome->diedAgain)}})
                                                           : QJsonValue()}};
}

QJsonObject attemptToJson(const Attempt &attempt)
{
    return QJsonObject{
        {QStringLiteral("at"), formatTime(attempt.atMs)},
        {QStringLiteral("step"), attempt.step},
        {QStringLiteral("outcome"), attempt.outcome},
        {QStringLiteral("message_id"), textOrNull(attempt.messageId)},
        {QStringLiteral("event_id"), textOrNull(attempt.eventId)},
        {QStringLiteral("delivery"), attempt.delivery},
        {QStringLiteral("worker"), textOrNull(attempt.workerId)},
        {QStringLiteral("http_status"), attempt.httpStatus ? QJsonValue(attempt.httpStatus) : QJsonValue(QJsonValue::Null)},
        {QStringLiteral("latency_ms"), attempt.latencyMs >= 0 ? QJsonValue(attempt.latencyMs) : QJsonValue(QJsonValue::Null)},
        {QStringLiteral("error_class"), textOrNull(attempt.errorClass)},
        {QStringLiteral("error"), textOrNull(attempt.error)},
        {QStringLiteral("provider_request_id"), textOrNull(attempt.providerRequestId)},
        {QStringLiteral("audit_id"), attempt.auditId > 0 ? QJsonValue(attempt.auditId) : QJsonValue()},
        {QStringLiteral("partner"), textOrNull(attempt.partner)},
        {QStringLiteral("partner_profile"), textOrNull(attempt.partnerProfile)},
    };
}

std::optional<DeliveryStats> Inspector::stats(QString *error)
{
    DeliveryStats stats;
    const auto counts = m_queue.counts(error);
    if (!counts)
        return std::nullopt;
    stats.queue = *counts;
    const qint64 now = nowMs();
    // The ledger's counts are kept as rows change (ledger_totals, schema 10): counting
    // ten million rows at every refresh would take seconds.
    auto &totals = m_db.prepared(QStringLiteral("SELECT counter, SUM(n) FROM ledger_totals GROUP BY counter"));
    if (!m_db.exec(totals, error))
        return std::nullopt;
    const QHash<QString, qint64 *> counters{
        {QStringLiteral("state:") + LedgerState::Applied, &stats.acked},
        {QStringLiteral("state:") + LedgerState::InDoubt, &stats.inDoubt},
        {QStringLiteral("state:") + LedgerState::Claimed, &stats.claimed},
        {QStringLiteral("state:") + LedgerState::Retrying, &stats.retrying},
        {QStringLiteral("state:") + LedgerState::Dead, &stats.deadKeys},
        {QStringLiteral("state:") + LedgerState::Expired, &stats.expired},
        {QStringLiteral("duplicate_keys"), &stats.duplicatesSuppressed},
        {QStringLiteral("duplicate_deliveries"), &stats.duplicateDeliveries},
    };
    while (totals.next())
        if (qint64 *counter = counters.value(totals.value(0).toString()))
            *counter = totals.value(1).toLongLong();
    totals.finish();

    auto &query = m_db.prepared(QStringLiteral(
        "SELECT"
        " (SELECT COUNT(*) FROM attempts WHERE at >= ? AND step = 'send' AND outcome = 'applied'),"
        " (SELECT COUNT(*) FROM attempts WHERE at >= ? AND step = 'send'),"
        " (SELECT COUNT(*) FROM attempts WHERE at >= ? AND step = 'send' AND outcome <> 'applied'),"
        " (SELECT MAX(at) FROM attempts WHERE at >= ? AND step = 'send' AND outcome = 'applied')"));
    for (int i = 0; i < 4; ++i)
        query.addBindValue(now - 5 * 60 * 1000);
    if (!m_db.exec(query, error) || !query.next())
        return std::nullopt;
    stats.appliedLast5Min = query.value(0).toLongLong();
    stats.sendsLast5Min = query.value(1).toLongLong();
    stats.failedSendsLast5Min = query.value(2).toLongLong();
    const qint64 lastAppliedAt = query.value(3).isNull() ? now - 5 * 60 * 1000 - 1 : query.value(3).toLongLong();
    query.finish();
    if (stats.failedSendsLast5Min > 0) {
        auto &spell = m_db.prepared(QStringLiteral(
            "SELECT COUNT(*), MIN(at) FROM attempts WHERE at > ? AND step = 'send' AND outcome <> 'applied'"));
        spell.addBindValue(lastAppliedAt);
        if (!m_db.exec(spell, error) || !spell.next())
            return std::nullopt;
        stats.failedInARowLast5Min = spell.value(0).toLongLong();
        stats.failingSinceMs = stats.failedInARowLast5Min ? spell.value(1).toLongLong() : 0;
        spell.finish();
    }

    auto &lateness = m_db.prepared(QStringLiteral(
        "SELECT a.at + COALESCE(a.latency_ms, 0) - l.scheduled_at FROM attempts a JOIN ledger l "
        "ON l.send_key = a.send_key WHERE a.at >= ? AND a.step = 'send' AND a.outcome = 'applied' "
        "ORDER BY a.at DESC LIMIT ?"));
    // Each value is a look-up of its ledger row by send key, a random page of a large
    // index: on a store of ten million events with a busy last hour, 20,000 of them made
    // `once stats` 225 ms and 5,000 still 206 ms. The latest 1,000 give the percentiles
    // to the precision a person reads them at (the 95th is the 50th highest).
    constexpr int LatenessSample = 1000;
    lateness.addBindValue(now - 3600 * 1000);
    lateness.addBindValue(LatenessSample);
    if (!m_db.exec(lateness, error))
        return std::nullopt;
    std::vector<qint64> values;
    while (lateness.next())
        values.push_back(lateness.value(0).toLongLong());
    lateness.finish();
    if (!values.empty()) {
        std::sort(values.begin(), values.end());
        stats.latenessP50Ms = values[values.size() / 2];
        stats.latenessP95Ms = values[std::min(values.size() - 1, values.size() * 95 / 100)];
    }
    const auto paused = heldForPausedPartners(error);
    if (!paused)
        return std::nullopt;
    stats.pausedPartners = *paused;

    // Both through indexes: the in-doubt keys by state (few), the dead-letter steps by time.
    auto &alerting = m_db.prepared(QStringLiteral(
        "SELECT (SELECT MIN(updated_at) FROM ledger WHERE state = 'in_doubt'),"
        " (SELECT COUNT(*) FROM attempts WHERE at >= ? AND step = 'dead-letter')"));
    alerting.addBindValue(now - 15 * 60 * 1000);
    if (!m_db.exec(alerting, error) || !alerting.next())
        return std::nullopt;
    stats.oldestInDoubtSinceMs = stats.inDoubt > 0 ? alerting.value(0).toLongLong() : 0;
    stats.deadLetteredLast15Min = alerting.value(1).toLongLong();
    alerting.finish();
    return stats;
}

std::optional<EventRow> Inspector::event(const QString &keyOrEventId, QString *error)
{
    // The ledger row holds the first delivery's event id; a later delivery of the same
    // reminder (a duplicate) is found through its history row.
    auto &query = m_db.prepared(QStringLiteral("SELECT ") + eventColumns(m_db.isPostgres(), true)
                                + QStringLiteral(" FROM ledger WHERE send_key = ? OR event_id = ? OR send_key = "
                                                 "(SELECT send_key FROM attempts WHERE event_id = ? LIMIT 1) LIMIT 1"));
    for (int i = 0; i < 3; ++i)
        query.addBindValue(keyOrEventId);
    if (!m_db.exec(query, error))
        return std::nullopt;
    if (!query.next()) {
        query.finish();
        // Not claimed yet: it may still wait in the queue.
        auto &queued = m_db.prepared(QStringLiteral("SELECT ") + QueuedColumns
                                     + QStringLiteral(" FROM queue WHERE send_key = ? OR event_id = ? ORDER BY id LIMIT 1"));
        queued.addBindValue(keyOrEventId);
        queued.addBindValue(keyOrEventId);
        if (!m_db.exec(queued, error))
            return std::nullopt;
        if (queued.next()) {
            EventRow row = readQueued(queued);
            queued.finish();
            return row;
        }
        queued.finish();
        *error = QStringLiteral("no event with send key or event id \"%1\"").arg(keyOrEventId);
        return std::nullopt;
    }
    EventRow row = readEvent(query, true);
    query.finish();
    // Workers register the partner they send to; the latest send's worker names it. A key
    // held by the claim after its worker died may have no send recorded at all: the claim
    // that held it names the partner the send went to.
    auto &partner = m_db.prepared(QStringLiteral(
        "SELECT COALESCE(a.partner, w.partner), p.honours_key, a.partner_profile FROM attempts a "
        "LEFT JOIN workers w ON w.id = a.worker_id "
        "LEFT JOIN partners p ON p.url = COALESCE(a.partner, w.partner) WHERE ") + SqlLedger::attemptsOfKey(u"a")
        + QStringLiteral(" AND (a.step = 'send' OR (a.step = 'claim' AND a.outcome = 'held' AND a.partner IS NOT NULL)) "
                         "ORDER BY a.id DESC LIMIT 1"));
    SqlLedger::bindAttemptsOfKey(partner, row.sendKey);
    if (!m_db.exec(partner, error))
        return std::nullopt;
    if (partner.next()) {
        row.partner = partner.value(0).toString();
        row.partnerHonoursKey = keyHonouringFromName(partner.value(1).toString()).value_or(KeyHonouring::Unknown);
        // Without an operator's record, the provider's documented rule (no idempotency at
        // Postmark, Twilio, SMTP, ...).
        const PartnerProfile *profile = partnerProfile(partner.value(2).toString());
        if (row.partnerHonoursKey == KeyHonouring::Unknown && profile)
            row.partnerHonoursKey = profile->honoursKey();
    }
    partner.finish();
    return row;
}

std::optional<QList<Attempt>> Inspector::attempts(const QByteArray &sendKey, QString *error)
{
    auto &query = m_db.prepared(QStringLiteral(
        "SELECT send_key, event_id, message_id, delivery, worker_id, at, step, outcome, http_status, latency_ms, "
        "error_class, error, provider_request_id, audit_id, partner, partner_profile FROM attempts WHERE ")
        + SqlLedger::attemptsOfKey({}) + QStringLiteral(" "
        // In the order things happened, not the order they were written: a send's row is
        // written with its outcome, after rows of what went on meanwhile, but is dated when
        // the request left. At one millisecond, a claim comes before its send, and a send
        // before what followed from it, duplicates turned away by its outcome included.
        "ORDER BY at, CASE WHEN step = 'claim' AND COALESCE(outcome, '') <> 'duplicate' THEN 0 WHEN step = 'send' THEN 1 "
        "ELSE 2 END, id"));
    SqlLedger::bindAttemptsOfKey(query, sendKey);
    if (!m_db.exec(query, error))
        return std::nullopt;
    QList<Attempt> attempts;
    while (query.next()) {
        attempts.append(Attempt{query.value(0).toString().toLatin1(), query.value(1).toString(),
                                query.value(2).toString(), query.value(3).toInt(), query.value(4).toString(),
                                query.value(5).toLongLong(), query.value(6).toString(), query.value(7).toString(),
                                query.value(8).toInt(), query.value(9).isNull() ? -1 : query.value(9).toLongLong(),
                                query.value(10).toString(), query.value(11).toString(), query.value(12).toString(),
                                query.value(13).toLongLong(), query.value(14).toString(), query.value(15).toString()});
    }
    query.finish();
    return attempts;
}

std::optional<QList<EventRow>> Inspector::events(const EventFilter &filter, QString *error)
{
    // Keyset paging: each page starts below the last row of the one before (its
    // listPosition), found through an index, so that page 5,000 costs what page 1 does.
    // Messages waiting in the queue come first (newest first), then the ledger's rows in
    // the order they were written, newest first (or, asked for, the ledger's rows alone,
    // oldest first).
    const int limit = filter.limit < 0 ? std::numeric_limits<int>::max() : filter.limit;
    const bool pastQueue = filter.below > 0 && filter.below <= EventRow::QueuedPositions;
    QList<EventRow> rows;
    if (listsQueued(filter) && !pastQueue && !filter.oldestFirst) {
        QVariantList values;
        QString where = queuedWhere(filter, m_db.isPostgres(), &values);
        if (filter.below > EventRow::QueuedPositions) {
            where += QStringLiteral(" AND id < ?");
            values.append(filter.below - EventRow::QueuedPositions);
        }
        QSqlQuery query(m_db.connection());
        query.setForwardOnly(true);
        query.prepare(QStringLiteral("SELECT ") + QueuedColumns + QStringLiteral(" FROM queue") + where
                      + QStringLiteral(" ORDER BY id DESC LIMIT ?"));
        for (const auto &value : std::as_const(values))
            query.addBindValue(value);
        query.addBindValue(limit);
        if (!m_db.exec(query, error))
            return std::nullopt;
        while (query.next()) {
            rows.append(readQueued(query));
            rows.last().payload.clear();
        }
    }
    if (filter.state == EventState::Queued || rows.size() >= limit)
        return rows;

    const auto prefixPlan = prefixPlanFor(m_db, filter, error);
    if (!prefixPlan)
        return std::nullopt;
    QVariantList values;
    QString where = eventWhere(filter, m_db.isPostgres(), &values, *prefixPlan);
    const QString position = m_db.isPostgres() ? QStringLiteral("seq") : QStringLiteral("rowid");
    const QString and_ = where.isEmpty() ? QStringLiteral(" WHERE ") : QStringLiteral(" AND ");
    QString order;
    switch (filter.order) {
    case EventFilter::Order::Written:
        if (pastQueue) {
            where += and_ + position + (filter.oldestFirst ? QStringLiteral(" > ?") : QStringLiteral(" < ?"));
            values.append(filter.below);
        }
        order = QStringLiteral(" ORDER BY ") + position + (filter.oldestFirst ? QString() : QStringLiteral(" DESC"));
        break;
    case EventFilter::Order::MostSends:
        // Keyset paging on (sends, position), both taken back out of the list position.
        if (filter.below > 0) {
            where += and_ + QStringLiteral("(sends < ? OR (sends = ? AND %1 < ?))").arg(position);
            const qint64 sends = filter.below >> EventFilter::SendsShift;
            values << sends << sends << (filter.below & ((qint64(1) << EventFilter::SendsShift) - 1));
        }
        order = QStringLiteral(" ORDER BY sends DESC, ") + position + QStringLiteral(" DESC");
        break;
    }
    QSqlQuery query(m_db.connection());
    query.setForwardOnly(true);
    query.prepare(QStringLiteral("SELECT ") + eventColumns(m_db.isPostgres(), false) + QStringLiteral(" FROM ledger")
                  + where + order + QStringLiteral(" LIMIT ?"));
    for (const auto &value : std::as_const(values))
        query.addBindValue(value);
    query.addBindValue(limit - int(rows.size()));
    if (!m_db.exec(query, error))
        return std::nullopt;
    while (query.next()) {
        rows.append(readEvent(query, false));
        if (filter.order == EventFilter::Order::MostSends) {
            EventRow &row = rows.last();
            row.listPosition |= qint64(std::clamp(row.sends, 0, (1 << 21) - 1)) << EventFilter::SendsShift;
        }
    }
    return rows;
}

std::optional<qint64> Inspector::countQueued(const EventFilter &filter, QString *error)
{
    QVariantList values;
    const QString where = queuedWhere(filter, m_db.isPostgres(), &values);
    QSqlQuery query(m_db.connection());
    query.prepare(QStringLiteral("SELECT COUNT(*) FROM queue") + where);
    for (const auto &value : std::as_const(values))
        query.addBindValue(value);
    if (!m_db.exec(query, error) || !query.next())
        return std::nullopt;
    return query.value(0).toLongLong();
}

std::optional<qint64> Inspector::countEvents(const EventFilter &filter, QString *error)
{
    qint64 queued = 0;
    if (listsQueued(filter)) {
        const auto count = countQueued(filter, error);
        if (!count)
            return std::nullopt;
        queued = *count;
    }
    if (filter.state == EventState::Queued)
        return queued;
    if (!filter.countIsBounded()) {
        // The whole ledger, or one state of it: the counts the store keeps.
        auto &totals = m_db.prepared(QStringLiteral("SELECT COALESCE(SUM(n), 0) FROM ledger_totals WHERE counter ")
                                     + (filter.state.isEmpty() ? QStringLiteral("LIKE 'state:%'") : QStringLiteral("= ?")));
        if (!filter.state.isEmpty())
            totals.addBindValue(QString(QStringLiteral("state:") + filter.state));
        if (!m_db.exec(totals, error) || !totals.next())
            return std::nullopt;
        const qint64 count = totals.value(0).toLongLong();
        totals.finish();
        return queued + count;
    }
    // A search counts no further than the list would ever be scrolled, so that a search
    // matching millions does not keep the reader from the next page for seconds.
    const auto prefixPlan = prefixPlanFor(m_db, filter, error);
    if (!prefixPlan)
        return std::nullopt;
    QVariantList values;
    const QString where = eventWhere(filter, m_db.isPostgres(), &values, *prefixPlan);
    QSqlQuery query(m_db.connection());
    query.prepare(QStringLiteral("SELECT COUNT(*) FROM (SELECT 1 FROM ledger") + where
                  + QStringLiteral(" LIMIT ?) matches"));
    for (const auto &value : std::as_const(values))
        query.addBindValue(value);
    query.addBindValue(EventFilter::CountLimit + 1);
    if (!m_db.exec(query, error) || !query.next())
        return std::nullopt;
    return queued + query.value(0).toLongLong();
}

namespace {

// LIKE's pattern for text anywhere, its wildcards escaped.
QString likeContains(const QString &text)
{
    return QLatin1Char('%') + likePrefix(text);
}

// A dead letter's last error holding text, in any case (ASCII case on SQLite, whose lower()
// folds no more).
QString errorContains(const QString &text, QVariantList *values)
{
    values->append(likeContains(text.toLower()));
    return QStringLiteral("lower(last_error) LIKE ? ESCAPE '\\'");
}

// The search of a dead letter filter (DeadLetterFilter::text, deadLetterMatchesSearch in
// memory): the ids through their columns, the message's own ids and destination as JSON
// strings in its payload (an invalid message has no columns for them), and the error text.
// Dead letters are a few hundred thousand at most, so the payload is read rather than
// indexed, as it is for messages waiting in the queue.
QString deadLetterSearch(const EventSearch &search, bool postgres, QVariantList *values)
{
    switch (search.kind) {
    case EventSearch::Kind::None:
        return QString();
    case EventSearch::Kind::Exact:
        *values << search.text << search.text << search.text << jsonString(search.text, true);
        return QStringLiteral("(id = ? OR send_key = ? OR event_id = ? OR %1 OR %2)")
            .arg(payloadContains(postgres), errorContains(search.text, values));
    case EventSearch::Kind::Prefix: {
        const QString pattern = prefixPattern(search.text, postgres);
        *values << pattern << pattern << pattern << jsonString(search.text, false);
        return QStringLiteral("(%1 OR %2 OR %3 OR %4 OR %5)")
            .arg(startsWith(QStringLiteral("id"), postgres), startsWith(QStringLiteral("send_key"), postgres),
                 startsWith(QStringLiteral("event_id"), postgres), payloadContains(postgres),
                 errorContains(search.text, values));
    }
    case EventSearch::Kind::Body:
        values->append(search.text.toUtf8());
        return payloadContains(postgres);
    }
    return QString();
}

// The letters whose last error is the partner's answer with this status
// (lastErrorHasHttpStatus in memory, pattern for pattern).
QString httpStatusCondition(int httpStatus, QVariantList *values)
{
    const QString answer = QStringLiteral("HTTP %1").arg(httpStatus);
    const QString gaveUp = QStringLiteral("gave up after %: ") + answer;
    *values << answer << QString(answer + QStringLiteral(":%")) << QString(gaveUp + QStringLiteral(":%"))
            << gaveUp;
    return QStringLiteral("(last_error = ? OR last_error LIKE ? OR last_error LIKE ? OR last_error LIKE ?)");
}

// The conditions of a dead letter filter and their bound values, without the cursor:
// shared by the list and the counts.
QStringList deadLetterConditions(const DeadLetterFilter &filter, bool postgres, QVariantList *values)
{
    QStringList conditions;
    if (!filter.errorClass.isEmpty()) {
        conditions << QStringLiteral("error_class = ?");
        values->append(filter.errorClass);
    }
    if (filter.sinceMs > 0) {
        conditions << QStringLiteral("dead_at >= ?");
        values->append(filter.sinceMs);
    }
    if (filter.untilMs > 0) {
        conditions << QStringLiteral("dead_at <= ?");
        values->append(filter.untilMs);
    }
    const auto oneOf = [values](const QString &column, const auto &list, const auto &toValue) {
        QStringList marks;
        for (const auto &each : list) {
            marks << QStringLiteral("?");
            values->append(toValue(each));
        }
        return QStringLiteral("%1 IN (%2)").arg(column, marks.join(QLatin1Char(',')));
    };
    if (!filter.sendKeys.isEmpty())
        conditions << oneOf(QStringLiteral("send_key"), filter.sendKeys,
                            [](const QByteArray &key) { return QString::fromLatin1(key); });
    if (!filter.ids.isEmpty())
        conditions << oneOf(QStringLiteral("id"), filter.ids, [](const QString &id) { return id; });
    if (filter.httpStatus > 0)
        conditions << httpStatusCondition(filter.httpStatus, values);
    if (const EventSearch search = EventSearch::parse(filter.text); search.kind != EventSearch::Kind::None)
        conditions << deadLetterSearch(search, postgres, values);
    return conditions;
}

QString deadLetterColumns(bool withPayload)
{
    return QStringLiteral("id, send_key, event_id, error_class, last_error, attempts, receive_count, redrive_count, "
                          "first_attempt_at, last_attempt_at, dead_at, enqueued_at")
        + (withPayload ? QStringLiteral(", payload") : QString());
}

DeadLetter readDeadLetter(const QSqlQuery &query, bool withPayload)
{
    DeadLetter letter;
    letter.id = query.value(0).toString();
    letter.sendKey = query.value(1).toString().toLatin1();
    letter.eventId = query.value(2).toString();
    letter.errorClass = query.value(3).toString();
    letter.lastError = query.value(4).toString();
    letter.attempts = query.value(5).toInt();
    letter.receiveCount = query.value(6).toInt();
    letter.redriveCount = query.value(7).toInt();
    letter.firstAttemptAtMs = query.value(8).toLongLong();
    letter.lastAttemptAtMs = query.value(9).toLongLong();
    letter.deadAtMs = query.value(10).toLongLong();
    letter.enqueuedAtMs = query.value(11).toLongLong();
    if (withPayload)
        letter.payload = query.value(12).toByteArray();
    return letter;
}

} // namespace

QString deadLetterPageSql(const DeadLetterFilter &filter, bool postgres, QVariantList *values)
{
    QStringList conditions = deadLetterConditions(filter, postgres, values);
    if (!filter.afterId.isEmpty()) {
        // Keyset paging: after the last letter of the page before, in (dead_at, id) order.
        // The first condition is the index's range; the second settles
        // letters that died in the same millisecond.
        conditions << (filter.newestFirst ? QStringLiteral("dead_at <= ? AND (dead_at < ? OR id < ?)")
                                          : QStringLiteral("dead_at >= ? AND (dead_at > ? OR id > ?)"));
        *values << filter.afterDeadAtMs << filter.afterDeadAtMs << filter.afterId;
    }
    // PostgreSQL refuses a negative LIMIT, which SQLite reads as none.
    *values << (filter.limit < 0 ? std::numeric_limits<int>::max() : filter.limit);
    // The (dead_at, id) index, or (error_class, dead_at, id) for a class, gives the rows in
    // this order: a page reads its rows and stops.
    const QString direction = filter.newestFirst ? QStringLiteral(" DESC") : QString();
    return QStringLiteral("SELECT ") + deadLetterColumns(filter.withPayload) + QStringLiteral(" FROM dead_letters")
           + (conditions.isEmpty() ? QString() : QStringLiteral(" WHERE ") + conditions.join(QLatin1String(" AND ")))
           + QStringLiteral(" ORDER BY dead_at") + direction + QStringLiteral(", id") + direction
           + QStringLiteral(" LIMIT ?");
}

std::optional<QList<DeadLetter>> Inspector::deadLetters(const DeadLetterFilter &filter, QString *error)
{
    QVariantList values;
    QSqlQuery query(m_db.connection());
    query.setForwardOnly(true);
    query.prepare(deadLetterPageSql(filter, m_db.isPostgres(), &values));
    for (const auto &value : std::as_const(values))
        query.addBindValue(value);
    if (!m_db.exec(query, error))
        return std::nullopt;
    QList<DeadLetter> letters;
    while (query.next())
        letters.append(readDeadLetter(query, filter.withPayload));
    query.finish();
    if (!noteKeyStates(&letters, error))
        return std::nullopt;
    return letters;
}

bool Inspector::noteKeyStates(QList<DeadLetter> *letters, QString *error)
{
    QStringList keys;
    for (const DeadLetter &letter : std::as_const(*letters)) {
        if (!letter.sendKey.isEmpty())
            keys.append(QString::fromLatin1(letter.sendKey));
    }
    keys.removeDuplicates();
    QHash<QString, QPair<QString, qint64>> rows; // key -> state, expires_at
    RowBatch batch(m_db, {QStringLiteral("TEXT")});
    for (qsizetype start = 0, count = 0; start < keys.size(); start += count) {
        count = batch.rowsFrom(start, keys.size());
        batch.clear();
        for (qsizetype i = start; i < start + count; ++i)
            batch.add(keys.at(i));
        auto &select = m_db.prepared(QStringLiteral("SELECT send_key, state, expires_at FROM ledger WHERE send_key IN "
                                                    "(SELECT v.column1 FROM ")
                                     + batch.source() + QStringLiteral(")"));
        for (const auto &value : batch.parameters())
            select.addBindValue(value);
        if (!m_db.exec(select, error))
            return false;
        while (select.next())
            rows.insert(select.value(0).toString(), {select.value(1).toString(), select.value(2).toLongLong()});
        select.finish();
    }
    for (DeadLetter &letter : *letters) {
        const auto row = rows.constFind(QString::fromLatin1(letter.sendKey));
        if (row != rows.constEnd()) {
            letter.keyState = row->first;
            letter.expiresAtMs = row->second;
        }
        // A letter whose key no claim recorded an expiry for (dead before its claim, or
        // claimed before schema 23) still says what its producer asked for.
        if (!letter.expiresAtMs && !letter.payload.isEmpty()) {
            const auto parsed = parseReminder(letter.payload);
            if (parsed.reminder && parsed.reminder->expiresAt.isValid())
                letter.expiresAtMs = parsed.reminder->expiresAt.toMSecsSinceEpoch();
        }
    }
    return true;
}

std::optional<DeadLetter> Inspector::deadLetter(const QString &id, QString *error)
{
    auto &query = m_db.prepared(QStringLiteral("SELECT ") + deadLetterColumns(true)
                                + QStringLiteral(" FROM dead_letters WHERE id = ?"));
    query.addBindValue(id);
    if (!m_db.exec(query, error))
        return std::nullopt;
    if (!query.next()) {
        *error = QStringLiteral("no dead letter with message id \"%1\" now: it was redriven or discarded").arg(id);
        return std::nullopt;
    }
    QList<DeadLetter> letters{readDeadLetter(query, true)};
    query.finish();
    if (!noteKeyStates(&letters, error))
        return std::nullopt;
    return letters.constFirst();
}

std::optional<DeadLetterCounts> Inspector::countDeadLetters(const DeadLetterFilter &filter, qint64 firstSentBeforeMs,
                                                            QString *error)
{
    // One pass over the letters the filter takes, grouped by class: the class list, the
    // count and a redrive preview's numbers from one query, however many letters.
    QVariantList values{firstSentBeforeMs};
    // diedOfRefusedCredentials, in SQL
    const QString credentialsRefused = QStringLiteral("error_class = 'rejected' AND (%1 OR %2 OR %3)")
                                           .arg(httpStatusCondition(401, &values), httpStatusCondition(403, &values),
                                                httpStatusCondition(407, &values));
    const QStringList conditions = deadLetterConditions(filter, m_db.isPostgres(), &values);
    QSqlQuery query(m_db.connection());
    query.setForwardOnly(true);
    query.prepare(QStringLiteral("SELECT error_class, COUNT(*), SUM(CASE WHEN redrive_count > 0 THEN 1 ELSE 0 END), "
                                 "SUM(CASE WHEN first_attempt_at > 0 AND first_attempt_at < ? THEN 1 ELSE 0 END), "
                                 "SUM(CASE WHEN %1 THEN 1 ELSE 0 END) FROM dead_letters")
                      .arg(credentialsRefused)
                  + (conditions.isEmpty() ? QString() : QStringLiteral(" WHERE ") + conditions.join(QLatin1String(" AND ")))
                  + QStringLiteral(" GROUP BY error_class"));
    for (const auto &value : std::as_const(values))
        query.addBindValue(value);
    if (!m_db.exec(query, error))
        return std::nullopt;
    DeadLetterCounts counts;
    while (query.next())
        counts.byClass.insert(query.value(0).toString(),
                              DeadLetterTally{query.value(1).toLongLong(), query.value(2).toLongLong(),
                                              query.value(3).toLongLong(), query.value(4).toLongLong()});
    return counts;
}

std::optional<QList<EventRow>> Inspector::inDoubt(QString *error)
{
    EventFilter filter;
    filter.state = LedgerState::InDoubt;
    filter.limit = -1;
    auto rows = events(filter, error);
    if (!rows || !describeReconciliation(*rows, error))
        return std::nullopt;
    return rows;
}

bool Inspector::describeReconciliation(QList<EventRow> &rows, QString *error)
{
    QList<QByteArray> keys;
    keys.reserve(rows.size());
    for (const EventRow &row : std::as_const(rows))
        keys.append(row.sendKey);
    const auto states = reconciliation(keys, error);
    if (!states)
        return false;
    for (qsizetype i = 0; i < rows.size(); ++i)
        rows[i].reconciliation = states->at(i).summary();
    return true;
}

QString KeyReconciliation::summary() const
{
    if (lookups == 0)
        return QStringLiteral("not asked yet");
    const QString times = lookups == 1 ? QString() : QStringLiteral(" (asked %1 times)").arg(lookups);
    return lastText + times;
}

std::optional<QList<KeyReconciliation>> Inspector::reconciliation(const QList<QByteArray> &keys, QString *error)
{
    QList<KeyReconciliation> states;
    states.reserve(keys.size());
    for (const QByteArray &key : keys) {
        const auto history = attempts(key, error);
        if (!history)
            return std::nullopt;
        KeyReconciliation state;
        state.sendKey = key;
        for (const Attempt &attempt : *history) {
            if (attempt.step == QLatin1String("send")) {
                // A later send asks the question anew: what was said of the one before
                // says nothing of it.
                state.partner = attempt.partner;
                state.partnerProfile = attempt.partnerProfile;
                state.lastSentAtMs = attempt.atMs;
                state.lookups = 0;
                state.lastLookupAtMs = 0;
                state.lastOutcome.clear();
                state.lastText.clear();
            } else if (attempt.step == QLatin1String("claim") && attempt.outcome == QLatin1String("held")
                       && !attempt.partner.isEmpty() && state.lastSentAtMs == 0) {
                // Its worker died before recording a send: the claim that held the key
                // names the partner it was for.
                state.partner = attempt.partner;
                state.partnerProfile = attempt.partnerProfile;
            } else if (attempt.step == QLatin1String("reconcile")) {
                ++state.lookups;
                state.lastLookupAtMs = attempt.atMs;
                state.lastOutcome = attempt.outcome;
                state.lastText = attempt.error;
            }
        }
        states.append(state);
    }
    return states;
}

std::optional<QList<AuditEntry>> Inspector::auditLog(int limit, QString *error)
{
    QSqlQuery query(m_db.connection());
    query.prepare(QStringLiteral(
        "SELECT id, at, actor, action, detail, count, rate, reason FROM audit_log ORDER BY id DESC LIMIT ?"));
    query.addBindValue(limit);
    return readAudit(query, error);
}

std::optional<QList<AuditEntry>> Inspector::auditLogBetween(qint64 sinceMs, qint64 untilMs, int limit, QString *error)
{
    QSqlQuery query(m_db.connection());
    query.prepare(QStringLiteral("SELECT id, at, actor, action, detail, count, rate, reason FROM audit_log "
                                 "WHERE at >= ? AND at <= ? ORDER BY id LIMIT ?"));
    query.addBindValue(sinceMs);
    query.addBindValue(untilMs);
    query.addBindValue(limit);
    return readAudit(query, error);
}

std::optional<QList<AuditEntry>> Inspector::readAudit(QSqlQuery &query, QString *error)
{
    if (!m_db.exec(query, error))
        return std::nullopt;
    QList<AuditEntry> entries;
    QHash<qint64, qsizetype> redrives; // audit id -> its entry
    while (query.next()) {
        entries.append(AuditEntry{query.value(0).toLongLong(), query.value(1).toLongLong(), query.value(2).toString(),
                                  query.value(3).toString(), query.value(4).toString(), query.value(5).toLongLong(),
                                  query.value(6).toInt(), query.value(7).toString()});
        if (entries.constLast().action == QLatin1String("redrive")) {
            entries.last().outcome = AuditEntry::Outcome{};
            redrives.insert(entries.constLast().id, entries.size() - 1);
        }
    }
    query.finish();
    if (redrives.isEmpty())
        return entries;
    // Each redriven letter has a history row naming the audit entry (Operations::
    // recordOnLetters); what came of it is the first ending its key's history has after
    // that row: an accepted send, or a dead letter. A later redrive's ending is its own.
    QStringList marks;
    for (qsizetype i = 0; i < redrives.size(); ++i)
        marks << QStringLiteral("?");
    QSqlQuery outcomes(m_db.connection());
    outcomes.prepare(
        QStringLiteral("SELECT r.audit_id, (SELECT t.step FROM attempts t WHERE t.key_created_at = r.key_created_at "
                       "AND t.send_key = r.send_key AND t.id > r.id AND ((t.step = 'send' AND t.outcome = 'applied') "
                       "OR t.step = 'dead-letter') ORDER BY t.id LIMIT 1) FROM attempts r "
                       "WHERE r.audit_id IN (%1) AND r.step = 'operator' AND r.outcome = 'redriven'")
            .arg(marks.join(QLatin1Char(','))));
    for (auto it = redrives.cbegin(); it != redrives.cend(); ++it)
        outcomes.addBindValue(it.key());
    if (!m_db.exec(outcomes, error))
        return std::nullopt;
    while (outcomes.next()) {
        AuditEntry::Outcome &outcome = *entries[redrives.value(outcomes.value(0).toLongLong())].outcome;
        const QString ending = outcomes.value(1).toString();
        if (ending == QLatin1String("send"))
            ++outcome.delivered;
        else if (ending == QLatin1String("dead-letter"))
            ++outcome.diedAgain;
    }
    return entries;
}

// Each redriven row's key, followed through the rows after it: its first ending (an
// accepted send or a duplicate of one, a dead letter, an expiry) and its failed sends. A
// throttling answer ("rate-limited") is the partner's pace, not a failure of the letter.
std::optional<RedriveEndings> Inspector::redriveEndings(qint64 auditId, QString *error)
{
    const QString after = QStringLiteral(
        "FROM attempts t WHERE t.send_key = r.send_key AND t.key_created_at = r.key_created_at AND t.id > r.id");
    const QString failed = QStringLiteral(
        " AND t.step = 'send' AND t.outcome IN ('transient', 'permanent', 'in-doubt', 'held') "
        "AND COALESCE(t.error_class, '') <> 'rate-limited'");
    auto &query = m_db.prepared(
        QStringLiteral("SELECT COUNT(*), "
                       "SUM(CASE WHEN EXISTS (SELECT 1 %1 AND t.outcome IN ('applied', 'duplicate')) THEN 1 ELSE 0 END), "
                       "SUM(CASE WHEN EXISTS (SELECT 1 %1 AND t.step = 'dead-letter') THEN 1 ELSE 0 END), "
                       "SUM(CASE WHEN EXISTS (SELECT 1 %1 AND t.outcome = 'expired') THEN 1 ELSE 0 END), "
                       "SUM(CASE WHEN EXISTS (SELECT 1 %1%2) THEN 1 ELSE 0 END), "
                       "SUM((SELECT COUNT(*) %1%2)), "
                       "(SELECT t.error_class FROM attempts t WHERE t.send_key IN (SELECT send_key FROM attempts "
                       "WHERE audit_id = ? AND step = 'operator' AND outcome = 'redriven') AND t.id > (SELECT MIN(id) FROM attempts "
                       "WHERE audit_id = ?)%2 ORDER BY t.id DESC LIMIT 1) "
                       "FROM attempts r WHERE r.audit_id = ? AND r.step = 'operator' AND r.outcome = 'redriven'")
            .arg(after, failed));
    for (int i = 0; i < 3; ++i)
        query.addBindValue(auditId);
    if (!m_db.exec(query, error))
        return std::nullopt;
    RedriveEndings endings;
    if (query.next()) {
        endings.redriven = query.value(0).toLongLong();
        endings.applied = query.value(1).toLongLong();
        endings.diedAgain = query.value(2).toLongLong();
        endings.expired = query.value(3).toLongLong();
        endings.keysFailed = query.value(4).toLongLong();
        endings.failedSends = query.value(5).toLongLong();
        endings.lastErrorClass = query.value(6).toString();
    }
    query.finish();
    return endings;
}

std::optional<KeyHonouring> Inspector::recordedKeyHonouring(const QString &partner, QString *error)
{
    auto &query = m_db.prepared(QStringLiteral("SELECT honours_key FROM partners WHERE url = ?"));
    query.addBindValue(partner);
    if (!m_db.exec(query, error))
        return std::nullopt;
    const KeyHonouring honouring =
        query.next() ? keyHonouringFromName(query.value(0).toString()).value_or(KeyHonouring::Unknown)
                     : KeyHonouring::Unknown;
    query.finish();
    return honouring;
}

std::optional<QList<PartnerPause>> Inspector::pausedPartners(QString *error)
{
    auto &query = m_db.prepared(QStringLiteral(
        "SELECT url, paused_at, paused_by, pause_reason FROM partners WHERE paused_at IS NOT NULL ORDER BY url"));
    if (!m_db.exec(query, error))
        return std::nullopt;
    QList<PartnerPause> paused;
    while (query.next())
        paused.append({query.value(0).toString(), query.value(1).toLongLong(), query.value(2).toString(),
                       query.value(3).toString()});
    query.finish();
    return paused;
}

std::optional<QList<QPair<PartnerPause, qint64>>> Inspector::heldForPausedPartners(QString *error)
{
    const auto paused = pausedPartners(error);
    if (!paused)
        return std::nullopt;
    QList<QPair<PartnerPause, qint64>> held;
    if (paused->isEmpty())
        return held;
    // Through ledger_state: the retrying keys only, and each one's put-backs by its own
    // history's index. A key's put-back names the partner its channel is routed to.
    auto &count = m_db.prepared(QStringLiteral(
        "SELECT a.partner, COUNT(DISTINCT l.send_key) FROM ledger l JOIN attempts a "
        "ON a.key_created_at IN (l.created_at, 0) AND a.send_key = l.send_key AND a.error_class = 'partner-paused' "
        "WHERE l.state = 'retrying' AND l.last_error_class = 'partner-paused' GROUP BY a.partner"));
    if (!m_db.exec(count, error))
        return std::nullopt;
    QHash<QString, qint64> byPartner;
    while (count.next())
        byPartner.insert(count.value(0).toString(), count.value(1).toLongLong());
    count.finish();
    for (const PartnerPause &pause : *paused)
        held.append({pause, byPartner.value(pause.partner)});
    return held;
}

std::optional<QList<PartnerPolicy>> Inspector::partners(QString *error)
{
    QList<PartnerPolicy> partners;
    QHash<QString, qsizetype> byName;
    auto &recorded = m_db.prepared(QStringLiteral(
        "SELECT url, honours_key, set_by, set_at, (SELECT MAX(heartbeat_at) FROM workers w WHERE w.partner = p.url), "
        "paused_at, paused_by, pause_reason FROM partners p ORDER BY url"));
    if (!m_db.exec(recorded, error))
        return std::nullopt;
    while (recorded.next()) {
        PartnerPolicy policy;
        policy.partner = recorded.value(0).toString();
        policy.honoursKey = keyHonouringFromName(recorded.value(1).toString()).value_or(KeyHonouring::Unknown);
        if (policy.honoursKey != KeyHonouring::Unknown) {
            policy.setBy = recorded.value(2).toString();
            policy.setAtMs = recorded.value(3).toLongLong();
        }
        policy.lastSeenMs = recorded.value(4).toLongLong();
        if (!recorded.value(5).isNull())
            policy.pause = PartnerPause{policy.partner, recorded.value(5).toLongLong(), recorded.value(6).toString(),
                                        recorded.value(7).toString()};
        byName.insert(policy.partner, partners.size());
        partners.append(policy);
    }
    recorded.finish();
    // Each worker names its partners in its heartbeat (schema 19: each one's profile and
    // breaker too; before, the one URL it sent to).
    auto &seen = m_db.prepared(QStringLiteral(
        "SELECT partner, partners, heartbeat_at, state FROM workers WHERE partner IS NOT NULL AND partner <> ''"));
    if (!m_db.exec(seen, error))
        return std::nullopt;
    const qint64 now = nowMs();
    const auto note = [&](const QString &name, const QString &profile, const QString &breaker, int failingInARow,
                          qint64 heartbeatAt, bool live) {
        auto found = byName.constFind(name);
        if (found == byName.cend()) {
            PartnerPolicy policy;
            policy.partner = name;
            found = byName.insert(name, partners.size());
            partners.append(policy);
        }
        PartnerPolicy &policy = partners[*found];
        if (heartbeatAt >= policy.lastSeenMs) {
            policy.lastSeenMs = heartbeatAt;
            if (!profile.isEmpty())
                policy.profile = profile;
        }
        if (!live)
            return;
        const QString state = breaker != QLatin1String("closed") ? QStringLiteral("held back")
                              : failingInARow > 0                ? QStringLiteral("failing")
                                                                 : QStringLiteral("sending");
        // The gravest a live worker reports.
        static const QStringList order{QStringLiteral("sending"), QStringLiteral("failing"), QStringLiteral("held back")};
        if (order.indexOf(state) > order.indexOf(policy.state))
            policy.state = state;
    };
    while (seen.next()) {
        const qint64 heartbeatAt = seen.value(2).toLongLong();
        const bool live = seen.value(3).toString() != QLatin1String("stopped")
                          && now - heartbeatAt <= WorkerRegistry::GoneAfterMs;
        const QJsonArray each = QJsonDocument::fromJson(seen.value(1).toString().toUtf8()).array();
        if (each.isEmpty()) {
            note(seen.value(0).toString(), QString(), QStringLiteral("closed"), 0, heartbeatAt, live);
            continue;
        }
        for (const QJsonValue &value : each) {
            const QJsonObject partner = value.toObject();
            note(partner.value(QLatin1String("name")).toString(), partner.value(QLatin1String("profile")).toString(),
                 partner.value(QLatin1String("breaker")).toString(),
                 partner.value(QLatin1String("consecutive_failures")).toInt(), heartbeatAt, live);
        }
    }
    seen.finish();
    for (PartnerPolicy &policy : partners) {
        if (policy.pause)
            policy.state = policy.pause->describe(); // whatever its workers last reported
        else if (policy.state.isEmpty())
            policy.state = QStringLiteral("no worker");
    }
    std::sort(partners.begin(), partners.end(),
              [](const PartnerPolicy &a, const PartnerPolicy &b) { return a.partner < b.partner; });
    return partners;
}

std::optional<PartnerActivity> Inspector::partnerActivity(qint64 sinceMs, QString *error)
{
    // All on attempts_at_step_outcome, the index alone: the window's counts, and the latest send and accepted send of
    // the last day, each found walking the index down from its newest end (MAX() with a
    // condition would read every row).
    const qint64 dayAgo = nowMs() - 24 * 3600 * 1000;
    auto &query = m_db.prepared(QStringLiteral(
        "SELECT (SELECT COUNT(*) FROM attempts WHERE at >= ? AND step = 'send'),"
        " (SELECT COUNT(*) FROM attempts WHERE at >= ? AND step = 'send' AND outcome <> 'applied'),"
        " (SELECT at FROM attempts WHERE at >= ? AND step = 'send' AND outcome = 'applied' ORDER BY at DESC LIMIT 1),"
        " (SELECT at FROM attempts WHERE at >= ? AND step = 'send' ORDER BY at DESC LIMIT 1)"));
    query.addBindValue(sinceMs);
    query.addBindValue(sinceMs);
    query.addBindValue(dayAgo);
    query.addBindValue(dayAgo);
    if (!m_db.exec(query, error) || !query.next())
        return std::nullopt;
    PartnerActivity activity;
    activity.sinceMs = sinceMs;
    activity.sends = query.value(0).toLongLong();
    activity.failed = query.value(1).toLongLong();
    activity.lastAcceptedAtMs = query.value(2).toLongLong();
    activity.lastSendAtMs = query.value(3).toLongLong();
    query.finish();
    return activity;
}

} // namespace once
