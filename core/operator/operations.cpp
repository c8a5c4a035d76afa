#include "operator/operations.h"

#include "partners/partnerprofile.h"
#include "queues/brokerqueue.h"
#include "store/database.h"
#include "store/sqlledger.h"
#include "store/sqlqueue.h"
#include "text/jsonvalues.h"

#include <QSet>
#include <QVariant>

#include <algorithm>

#include <limits>

#include <pwd.h>
#include <unistd.h>

namespace once {

QString currentUserName()
{
    if (const passwd *entry = getpwuid(geteuid()))
        return QString::fromLocal8Bit(entry->pw_name);
    return qEnvironmentVariable("USER", QStringLiteral("unknown"));
}

QString describeLetters(const QList<DeadLetter> &letters)
{
    constexpr qsizetype Named = 5;
    QStringList names;
    for (const auto &letter : letters.mid(0, Named))
        names << (letter.sendKey.isEmpty() ? QStringLiteral("message ") + letter.id : QString::fromLatin1(letter.sendKey));
    if (letters.isEmpty())
        return QStringLiteral("no keys");
    QString text = (letters.size() == 1 ? QStringLiteral("key ") : QStringLiteral("keys ")) + names.join(QLatin1String(", "));
    if (letters.size() > Named)
        text += QStringLiteral(" and %1 more").arg(letters.size() - Named);
    return text;
}

QString describeFilter(const DeadLetterFilter &filter)
{
    QString text = QStringLiteral("all");
    if (!filter.errorClass.isEmpty())
        text += QStringLiteral(" error-class=") + filter.errorClass;
    if (filter.sinceMs > 0)
        text += QStringLiteral(" since=") + formatTime(filter.sinceMs);
    if (filter.untilMs > 0)
        text += QStringLiteral(" until=") + formatTime(filter.untilMs);
    if (filter.httpStatus > 0)
        text += QStringLiteral(" http-status=%1").arg(filter.httpStatus);
    // Quoted: a search may hold spaces, and the audit row must say where it ends.
    if (!filter.text.trimmed().isEmpty())
        text += QStringLiteral(" search=") + QString::fromUtf8(jsonString(filter.text.trimmed()));
    return text;
}

QString describeRedrive(const DeadLetterFilter &filter, const QList<DeadLetter> &letters)
{
    DeadLetterFilter shown = filter;
    shown.sendKeys.clear();
    QString detail = filter.sendKeys.isEmpty() ? describeFilter(shown) : describeLetters(letters);
    if (!filter.sendKeys.isEmpty() && describeFilter(shown) != QLatin1String("all"))
        detail += describeFilter(shown).mid(3);
    return detail;
}

std::optional<qint64> Operations::beginAudit(const AuditAction &action, QString *error, qint64 count)
{
    auto &insert = m_db.prepared(QStringLiteral("INSERT INTO audit_log (at, actor, action, detail, count, rate, reason) "
                                                "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id"));
    insert.addBindValue(nowMs());
    insert.addBindValue(m_actor);
    insert.addBindValue(action.action);
    insert.addBindValue(action.detail);
    insert.addBindValue(count);
    insert.addBindValue(action.ratePerSecond > 0 ? QVariant(action.ratePerSecond) : QVariant());
    insert.addBindValue(action.reason.trimmed().isEmpty() ? QVariant() : QVariant(action.reason.trimmed()));
    if (!m_db.exec(insert, error))
        return std::nullopt;
    if (!insert.next()) {
        *error = QStringLiteral("the audit log gave no id for its new row");
        return std::nullopt;
    }
    const qint64 id = insert.value(0).toLongLong();
    insert.finish();
    return id;
}

bool Operations::noteInAudit(qint64 auditId, const QString &note, QString *error)
{
    auto &update = m_db.prepared(QStringLiteral("UPDATE audit_log SET detail = COALESCE(detail, '') || ? WHERE id = ?"));
    update.addBindValue(QString(QLatin1Char(' ') + note));
    update.addBindValue(auditId);
    return m_db.exec(update, error);
}

std::optional<QString> Operations::auditReason(qint64 auditId, QString *error)
{
    auto &select = m_db.prepared(QStringLiteral("SELECT reason FROM audit_log WHERE id = ?"));
    select.addBindValue(auditId);
    if (!m_db.exec(select, error))
        return std::nullopt;
    const QString reason = select.next() ? select.value(0).toString() : QString();
    select.finish();
    return reason;
}

bool Operations::recordOnLetters(const QList<DeadLetter> &letters, const QString &outcome, qint64 auditId,
                                 QString *error)
{
    if (letters.isEmpty())
        return true;
    const auto reason = auditId > 0 ? auditReason(auditId, error) : std::optional<QString>(QString());
    if (!reason)
        return false;
    const qint64 now = nowMs();
    QList<Attempt> notes;
    for (const auto &letter : letters) {
        // A message that never parsed has no key, so no event to tell.
        if (!letter.sendKey.isEmpty())
            notes.append(Attempt{letter.sendKey, letter.eventId, letter.id, 0, m_actor, now, QStringLiteral("operator"),
                                 outcome, 0, -1, {}, *reason, {}, auditId});
    }
    if (!m_ledger.insertAttempts(notes, error))
        return false;
    if (auditId <= 0)
        return true;
    auto &update = m_db.prepared(QStringLiteral("UPDATE audit_log SET count = count + ? WHERE id = ?"));
    update.addBindValue(qint64(letters.size()));
    update.addBindValue(auditId);
    return m_db.exec(update, error);
}

std::optional<int> Operations::redrive(const QList<DeadLetter> &letters, qint64 auditId, QString *error)
{
    Transaction transaction(m_db);
    if (!transaction.begin(error))
        return std::nullopt;
    auto &remove = m_db.prepared(QStringLiteral("DELETE FROM dead_letters WHERE id = ?"));
    QList<OutgoingMessage> messages;
    QList<QByteArray> keys;
    QList<DeadLetter> moved;
    for (const auto &letter : letters) {
        remove.addBindValue(letter.id);
        if (!m_db.exec(remove, error))
            return std::nullopt;
        if (remove.numRowsAffected() != 1)
            continue;
        moved.append(letter);
        messages.append(OutgoingMessage{letter.payload, letter.sendKey, letter.eventId, 0, letter.redriveCount + 1});
        if (!letter.sendKey.isEmpty())
            keys.append(letter.sendKey);
    }
    if (!m_queue.insert(messages, error))
        return std::nullopt;
    if (!m_ledger.reopen(keys, error) || !recordOnLetters(moved, QStringLiteral("redriven"), auditId, error)
        || !transaction.commit(error))
        return std::nullopt;
    return int(messages.size());
}

namespace {

// A broker takes dead letters from the head of its dead-letter queue: scan as far as
// the last of the wanted ones, which may have moved up since they were listed.
std::optional<QList<DeadLetter>> takeFromBroker(BrokerQueue &queue, const QList<DeadLetter> &letters, bool redrive,
                                                QString *error)
{
    QSet<QString> wanted;
    for (const auto &letter : letters)
        wanted.insert(letter.id);
    const auto current = queue.deadLetters(std::numeric_limits<int>::max(), error);
    if (!current)
        return std::nullopt;
    int scan = 0;
    for (int i = 0; i < current->size(); ++i) {
        if (wanted.contains(current->at(i).id))
            scan = i + 1;
    }
    if (scan == 0)
        return QList<DeadLetter>();
    const auto select = [&wanted](const DeadLetter &letter) { return wanted.contains(letter.id); };
    return redrive ? queue.redrive(scan, select, error) : queue.discard(scan, select, error);
}

} // namespace

std::optional<int> Operations::redrive(BrokerQueue &queue, const QList<DeadLetter> &letters, qint64 auditId,
                                       QString *error)
{
    QList<QByteArray> keys;
    for (const auto &letter : letters) {
        if (!letter.sendKey.isEmpty())
            keys.append(letter.sendKey);
    }
    Transaction transaction(m_db);
    if (!transaction.begin(error) || !m_ledger.reopen(keys, error) || !transaction.commit(error))
        return std::nullopt;
    const auto taken = takeFromBroker(queue, letters, true, error);
    if (!taken)
        return std::nullopt;
    Transaction record(m_db);
    if (!record.begin(error) || !recordOnLetters(*taken, QStringLiteral("redriven"), auditId, error)
        || !record.commit(error))
        return std::nullopt;
    return int(taken->size());
}

std::optional<int> Operations::discard(BrokerQueue &queue, const QList<DeadLetter> &letters, qint64 auditId,
                                       QString *error)
{
    const auto taken = takeFromBroker(queue, letters, false, error);
    if (!taken)
        return std::nullopt;
    Transaction record(m_db);
    if (!record.begin(error) || !recordOnLetters(*taken, QStringLiteral("discarded"), auditId, error)
        || !record.commit(error))
        return std::nullopt;
    return int(taken->size());
}

std::optional<int> Operations::discard(const QList<DeadLetter> &letters, qint64 auditId, QString *error)
{
    Transaction transaction(m_db);
    if (!transaction.begin(error))
        return std::nullopt;
    auto &remove = m_db.prepared(QStringLiteral("DELETE FROM dead_letters WHERE id = ?"));
    QList<DeadLetter> removed;
    for (const auto &letter : letters) {
        remove.addBindValue(letter.id);
        if (!m_db.exec(remove, error))
            return std::nullopt;
        if (remove.numRowsAffected() == 1)
            removed.append(letter);
    }
    if (!recordOnLetters(removed, QStringLiteral("discarded"), auditId, error) || !transaction.commit(error))
        return std::nullopt;
    return int(removed.size());
}

std::optional<QByteArray> Operations::inDoubtPayload(const QByteArray &sendKey, QString *error)
{
    // FOR UPDATE: two deciding at once (two workers reconciling, an operator and a
    // worker) take turns, and the second finds the key no longer in doubt instead of
    // putting it on the queue a second time. SQLite's BEGIN IMMEDIATE does the same.
    auto &select = m_db.prepared(m_db.isPostgres()
                                     ? QStringLiteral("SELECT state, payload FROM ledger WHERE send_key = ? FOR UPDATE")
                                     : QStringLiteral("SELECT state, payload FROM ledger WHERE send_key = ?"));
    select.addBindValue(QString::fromLatin1(sendKey));
    if (!m_db.exec(select, error))
        return std::nullopt;
    if (!select.next()) {
        *error = QStringLiteral("no event with send key \"%1\"").arg(QString::fromLatin1(sendKey));
        return std::nullopt;
    }
    const QString state = select.value(0).toString();
    const QByteArray payload = select.value(1).toByteArray();
    select.finish();
    if (state != LedgerState::InDoubt) {
        *error = QStringLiteral("event \"%1\" is %2, not in doubt").arg(QString::fromLatin1(sendKey), state);
        return std::nullopt;
    }
    return payload;
}

bool Operations::resend(const QByteArray &sendKey, const QString &reason, QString *error)
{
    return resendThrough(sendKey, reason, [this](const OutgoingMessage &message, QString *error) {
        return m_queue.insert({message}, error);
    }, error);
}

// The message goes to the broker while the key's reopening is still uncommitted: a
// worker that takes it at once waits for the commit and then finds the key open. Were
// the commit to fail, that worker would find the key still in doubt and drop the message
// as a duplicate, and the event would stay in doubt for the operator to decide again.
bool Operations::resend(BrokerQueue &queue, const QByteArray &sendKey, const QString &reason, QString *error)
{
    return resendThrough(sendKey, reason, [&queue](const OutgoingMessage &message, QString *error) {
        return queue.enqueue({message}, error);
    }, error);
}

// A 2xx in the history means the partner acted, whatever the ledger says (a store
// written before late answers settled their keys, or a ledger row edited by hand):
// resending would act twice at a partner that does not dedupe.
bool Operations::refuseIfAnswered2xx(const QByteArray &sendKey, QString *error)
{
    auto &select = m_db.prepared(QStringLiteral(
        "SELECT at, http_status, provider_request_id FROM attempts WHERE ") + SqlLedger::attemptsOfKey({})
        + QStringLiteral(" AND step = 'send' AND http_status >= 200 AND http_status < 300 "
                         "ORDER BY id LIMIT 1"));
    SqlLedger::bindAttemptsOfKey(select, sendKey);
    if (!m_db.exec(select, error))
        return false;
    if (!select.next())
        return true;
    const QString request = select.value(2).toString();
    *error = QStringLiteral("refusing to resend %1: the partner answered HTTP %2 to a send at %3%4, so it has "
                            "delivered it; resending could deliver it twice. Mark it delivered instead.")
                 .arg(QString::fromLatin1(sendKey), QString::number(select.value(1).toInt()),
                      formatTime(select.value(0).toLongLong()),
                      request.isEmpty() ? QString() : QStringLiteral(" (request %1)").arg(request));
    select.finish();
    return false;
}

bool Operations::resendThrough(const QByteArray &sendKey, const QString &reason,
                               const std::function<bool(const OutgoingMessage &, QString *)> &put, QString *error)
{
    Transaction transaction(m_db);
    if (!transaction.begin(error))
        return false;
    const auto payload = inDoubtPayload(sendKey, error);
    if (!payload || !refuseIfAnswered2xx(sendKey, error))
        return false;
    const auto reminder = parseReminder(*payload).reminder;
    const qint64 now = nowMs();
    const OutgoingMessage message{*payload, sendKey, reminder ? reminder->eventId : QString(), 0, 0};
    if (!m_ledger.reopen({sendKey}, error))
        return false;
    const auto auditId =
        beginAudit({QStringLiteral("resolve-resend"), QString::fromLatin1(sendKey), 0, reason}, error, 1);
    if (!auditId)
        return false;
    const Attempt note{sendKey, reminder ? reminder->eventId : QString(), {}, 0, m_actor, now, QStringLiteral("operator"),
                       QStringLiteral("resend"), 0, -1, {}, reason.trimmed(), {}, *auditId};
    if (!m_ledger.insertAttempts({note}, error) || !put(message, error))
        return false;
    return transaction.commit(error);
}

// An in-doubt key settled as taken effect, by an operator's word or the partner's; the
// provider's id, when it gave one, replaces what the last send kept.
bool Operations::settleApplied(const QByteArray &sendKey, qint64 atMs, const QString &providerId, QString *error)
{
    auto &update = m_db.prepared(QStringLiteral(
        "UPDATE ledger SET state = 'applied', applied_at = ?, updated_at = ?, "
        "provider_request_id = COALESCE(?, provider_request_id) WHERE send_key = ?"));
    update.addBindValue(atMs);
    update.addBindValue(atMs);
    update.addBindValue(providerId.isEmpty() ? QVariant() : QVariant(providerId));
    update.addBindValue(QString::fromLatin1(sendKey));
    return m_db.exec(update, error);
}

bool Operations::markDelivered(const QByteArray &sendKey, const QString &reason, QString *error)
{
    Transaction transaction(m_db);
    if (!transaction.begin(error))
        return false;
    const auto payload = inDoubtPayload(sendKey, error);
    if (!payload)
        return false;
    const qint64 now = nowMs();
    if (!settleApplied(sendKey, now, {}, error))
        return false;
    const auto reminder = parseReminder(*payload).reminder;
    const auto auditId =
        beginAudit({QStringLiteral("resolve-mark-delivered"), QString::fromLatin1(sendKey), 0, reason}, error, 1);
    if (!auditId)
        return false;
    const Attempt note{sendKey, reminder ? reminder->eventId : QString(), {}, 0, m_actor, now, QStringLiteral("operator"),
                       QStringLiteral("marked-delivered"), 0, -1, {}, reason.trimmed(), {}, *auditId};
    if (!m_ledger.insertAttempts({note}, error))
        return false;
    return transaction.commit(error);
}

bool Operations::recordLookup(const QByteArray &sendKey, const QString &partner, const QString &profile,
                              const LookupResult &lookup, QString *error)
{
    Transaction transaction(m_db);
    if (!transaction.begin(error))
        return false;
    const auto payload = inDoubtPayload(sendKey, error);
    if (!payload)
        return false;
    const qint64 now = nowMs();
    const QString at = formatTime(now);
    QString outcome;
    QString text;
    switch (lookup.kind) {
    case LookupResult::Kind::Found:
        outcome = QStringLiteral("found");
        text = lookup.providerMessageId.isEmpty()
                   ? QStringLiteral("Reconciled: found at %1 at %2").arg(partner, at)
                   : QStringLiteral("Reconciled: found at %1 as %2 at %3").arg(partner, lookup.providerMessageId, at);
        break;
    case LookupResult::Kind::NotFound:
        outcome = QStringLiteral("not-found");
        text = QStringLiteral("not found at %1 at %2").arg(partner, at);
        break;
    case LookupResult::Kind::Failed:
        outcome = QStringLiteral("lookup-failed");
        text = QStringLiteral("asking %1 failed at %2: %3").arg(partner, at, lookup.error);
        break;
    }
    if (lookup.kind == LookupResult::Kind::Found && !settleApplied(sendKey, now, lookup.providerMessageId, error))
        return false;
    const auto reminder = parseReminder(*payload).reminder;
    const auto auditId = beginAudit({QStringLiteral("reconcile"), QString::fromLatin1(sendKey), 0, text}, error, 1);
    if (!auditId)
        return false;
    Attempt note{sendKey, reminder ? reminder->eventId : QString(), {}, 0, m_actor, now, QStringLiteral("reconcile"),
                 outcome, lookup.httpStatus, -1, {}, text, lookup.providerMessageId, *auditId};
    note.partner = partner;
    note.partnerProfile = profile;
    if (!m_ledger.insertAttempts({note}, error))
        return false;
    return transaction.commit(error);
}

std::optional<QByteArray> Operations::keyOfEvent(const PartnerEvent &event, QString *error)
{
    const QByteArray &carried = event.carriedKey;
    if (!carried.isEmpty() && !carried.startsWith("once-sha256-")) {
        auto &select = m_db.prepared(QStringLiteral("SELECT 1 FROM ledger WHERE send_key = ?"));
        select.addBindValue(QString::fromLatin1(carried));
        if (!m_db.exec(select, error))
            return std::nullopt;
        const bool found = select.next();
        select.finish();
        if (found)
            return carried;
    }
    if (!event.providerMessageId.isEmpty()) {
        auto &select = m_db.prepared(QStringLiteral("SELECT send_key FROM ledger WHERE provider_request_id = ? LIMIT 1"));
        select.addBindValue(event.providerMessageId);
        if (!m_db.exec(select, error))
            return std::nullopt;
        const QByteArray key = select.next() ? select.value(0).toString().toLatin1() : QByteArray();
        select.finish();
        if (!key.isEmpty())
            return key;
    }
    if (carried.startsWith("once-sha256-")) {
        // A digest names a key too long (or, for Resend, of characters a tag cannot hold)
        // for the provider's field. A key settled applied carries the provider's id, found
        // above; one without an answer yet is among the few not applied.
        auto &select = m_db.prepared(QStringLiteral("SELECT send_key FROM ledger WHERE state IN ('claimed', 'retrying', 'in_doubt', 'dead')"));
        if (!m_db.exec(select, error))
            return std::nullopt;
        QByteArray found;
        while (found.isEmpty() && select.next()) {
            const QByteArray key = select.value(0).toString().toLatin1();
            if (keyWithin(key, 0) == carried)
                found = key;
        }
        select.finish();
        return found;
    }
    return QByteArray();
}

std::optional<PartnerEventRecord> Operations::recordPartnerEvent(const PartnerEvent &event, const QString &partner,
                                                                 const QString &profile, const QString &providerName,
                                                                 QString *error)
{
    Transaction transaction(m_db);
    if (!transaction.begin(error))
        return std::nullopt;
    PartnerEventRecord record;
    const auto key = keyOfEvent(event, error);
    if (!key)
        return std::nullopt;
    if (key->isEmpty())
        return record; // unknown: rolled back, nothing written
    record.sendKey = *key;
    const QString kind = partnerEventKindName(event.kind);
    const qint64 now = nowMs();
    auto &remember = m_db.prepared(QStringLiteral(
        "INSERT INTO partner_events (partner, event_id, send_key, kind, received_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (partner, event_id) DO NOTHING"));
    remember.addBindValue(partner);
    remember.addBindValue(event.eventId);
    remember.addBindValue(QString::fromLatin1(*key));
    remember.addBindValue(kind);
    remember.addBindValue(now);
    if (!m_db.exec(remember, error))
        return std::nullopt;
    bool seen = remember.numRowsAffected() != 1;
    if (!seen && !event.signatureId.isEmpty()) {
        // Rolled back with the event's own row when the signature was used before.
        remember.addBindValue(partner);
        remember.addBindValue(QString(QStringLiteral("signature:") + event.signatureId));
        remember.addBindValue(QString::fromLatin1(*key));
        remember.addBindValue(kind);
        remember.addBindValue(now);
        if (!m_db.exec(remember, error))
            return std::nullopt;
        seen = remember.numRowsAffected() != 1;
    }
    if (seen) {
        record.outcome = PartnerEventRecord::Outcome::Duplicate;
        return record;
    }
    // Locked on PostgreSQL until the commit, so that the state read is the one settled.
    auto &select = m_db.prepared(m_db.isPostgres()
                                     ? QStringLiteral("SELECT state, event_id FROM ledger WHERE send_key = ? FOR UPDATE")
                                     : QStringLiteral("SELECT state, event_id FROM ledger WHERE send_key = ?"));
    select.addBindValue(QString::fromLatin1(*key));
    if (!m_db.exec(select, error))
        return std::nullopt;
    const bool exists = select.next();
    const QString state = exists ? select.value(0).toString() : QString();
    const QString eventId = exists ? select.value(1).toString() : QString();
    select.finish();
    const qint64 at = event.atMs > 0 ? event.atMs : now;
    QString text = QStringLiteral("%1 at %2 (%3) at %4").arg(kind, providerName, partner, formatTime(at));
    if (!event.providerKind.isEmpty() && event.providerKind != kind)
        text += QStringLiteral(": %1").arg(event.providerKind);
    if (!event.detail.isEmpty())
        text += QStringLiteral(" (%1)").arg(event.detail);
    // The provider has the message: as a late 2xx, whatever became of the key since.
    if (event.kind == PartnerEvent::Kind::Delivered && state != LedgerState::Applied) {
        if (!settleApplied(*key, now, event.providerMessageId, error))
            return std::nullopt;
        record.settled = true;
        text += QStringLiteral("; settled applied (it was %1)").arg(state == LedgerState::InDoubt ? QStringLiteral("in doubt") : state);
    }
    Attempt note{*key, eventId, {}, 0, QStringLiteral("once serve"), now, QStringLiteral("partner-event"), kind, 0, -1,
                 event.providerKind, text, event.providerMessageId, 0};
    note.partner = partner;
    note.partnerProfile = profile;
    if (!m_ledger.insertAttempts({note}, error) || !transaction.commit(error))
        return std::nullopt;
    record.outcome = PartnerEventRecord::Outcome::Recorded;
    return record;
}

bool Operations::setPartnerPolicy(const QString &partner, KeyHonouring honoursKey, QString *error)
{
    if (partner.trimmed().isEmpty()) {
        *error = QStringLiteral("no partner URL given");
        return false;
    }
    Transaction transaction(m_db);
    if (!transaction.begin(error))
        return false;
    if (honoursKey == KeyHonouring::Unknown) {
        // A paused partner keeps its row (and its pause); any other row is only the answer.
        auto &forget = m_db.prepared(QStringLiteral("DELETE FROM partners WHERE url = ? AND paused_at IS NULL"));
        forget.addBindValue(partner);
        auto &unknown = m_db.prepared(QStringLiteral("UPDATE partners SET honours_key = 'unknown' WHERE url = ?"));
        unknown.addBindValue(partner);
        if (!m_db.exec(forget, error) || !m_db.exec(unknown, error))
            return false;
    } else {
        auto &upsert = m_db.prepared(QStringLiteral(
            "INSERT INTO partners (url, honours_key, set_by, set_at) VALUES (?, ?, ?, ?) ON CONFLICT (url) DO UPDATE "
            "SET honours_key = excluded.honours_key, set_by = excluded.set_by, set_at = excluded.set_at"));
        upsert.addBindValue(partner);
        upsert.addBindValue(keyHonouringName(honoursKey));
        upsert.addBindValue(m_actor);
        upsert.addBindValue(nowMs());
        if (!m_db.exec(upsert, error))
            return false;
    }
    if (!audit(QStringLiteral("partner-policy"),
               QStringLiteral("%1 honours Idempotency-Key: %2").arg(partner, keyHonouringName(honoursKey)), 0, error))
        return false;
    return transaction.commit(error);
}

bool Operations::setPartnerPaused(const QString &partner, bool paused, const QString &reason, QString *error)
{
    if (partner.trimmed().isEmpty()) {
        *error = QStringLiteral("no partner given");
        return false;
    }
    if (reason.size() > MaxReasonLength) {
        *error = QStringLiteral("the reason is %1 characters long; at most %2").arg(reason.size()).arg(MaxReasonLength);
        return false;
    }
    Transaction transaction(m_db);
    if (!transaction.begin(error))
        return false;
    const qint64 now = nowMs();
    if (paused) {
        // A row without an answer on the key says 'unknown', as no row does.
        auto &pause = m_db.prepared(QStringLiteral(
            "INSERT INTO partners (url, honours_key, set_by, set_at, paused_at, paused_by, pause_reason) "
            "VALUES (?, 'unknown', '', 0, ?, ?, ?) ON CONFLICT (url) DO UPDATE SET paused_at = excluded.paused_at, "
            "paused_by = excluded.paused_by, pause_reason = excluded.pause_reason WHERE partners.paused_at IS NULL"));
        pause.addBindValue(partner);
        pause.addBindValue(now);
        pause.addBindValue(m_actor);
        pause.addBindValue(reason.trimmed().isEmpty() ? QVariant() : QVariant(reason.trimmed()));
        if (!m_db.exec(pause, error))
            return false;
    } else {
        auto &resume = m_db.prepared(QStringLiteral(
            "UPDATE partners SET paused_at = NULL, paused_by = NULL, pause_reason = NULL WHERE url = ?"));
        resume.addBindValue(partner);
        auto &forget = m_db.prepared(
            QStringLiteral("DELETE FROM partners WHERE url = ? AND honours_key = 'unknown' AND paused_at IS NULL"));
        forget.addBindValue(partner);
        if (!m_db.exec(resume, error) || !m_db.exec(forget, error))
            return false;
    }
    AuditAction action{paused ? QStringLiteral("partner-pause") : QStringLiteral("partner-resume"),
                       paused ? QStringLiteral("%1 paused: workers send it nothing until it is resumed").arg(partner)
                              : QStringLiteral("%1 resumed").arg(partner),
                       0, reason};
    // The consoles hear of it at the commit (PostgreSQL); workers read the pause anyway.
    if (!beginAudit(action, error) || !m_db.notify(Channel::Activity, error))
        return false;
    return transaction.commit(error);
}

bool Operations::audit(const QString &action, const QString &detail, qint64 count, QString *error)
{
    auto &insert = m_db.prepared(
        QStringLiteral("INSERT INTO audit_log (at, actor, action, detail, count) VALUES (?, ?, ?, ?, ?)"));
    insert.addBindValue(nowMs());
    insert.addBindValue(m_actor);
    insert.addBindValue(action);
    insert.addBindValue(detail);
    insert.addBindValue(count);
    return m_db.exec(insert, error);
}

bool Operations::setAlertThreshold(AlertRule rule, const QString &partner, std::optional<qint64> value,
                                   QString *error)
{
    const AlertRuleInfo &info = alertRuleInfo(rule);
    if (!partner.isEmpty() && !info.perPartner) {
        *error = QStringLiteral("%1 is set for the whole store, not per partner").arg(QLatin1String(info.name));
        return false;
    }
    Transaction transaction(m_db);
    if (!transaction.begin(error))
        return false;
    const qint64 now = nowMs();
    if (value) {
        auto &upsert = m_db.prepared(QStringLiteral(
            "INSERT INTO alert_thresholds (rule, partner, value, set_by, set_at) VALUES (?, COALESCE(?, ''), ?, ?, ?) "
            "ON CONFLICT (rule, partner) DO UPDATE SET value = excluded.value, set_by = excluded.set_by, "
            "set_at = excluded.set_at"));
        if (!m_db.execWith(upsert, {QString::fromLatin1(info.name), partner, *value, m_actor, now}, error))
            return false;
    } else {
        auto &remove = m_db.prepared(QStringLiteral("DELETE FROM alert_thresholds WHERE rule = ? AND partner = COALESCE(?, '')"));
        if (!m_db.execWith(remove, {QString::fromLatin1(info.name), partner}, error))
            return false;
    }
    const QString scope = partner.isEmpty() ? QString() : QStringLiteral(" for %1").arg(partner);
    const QString detail = value ? QStringLiteral("%1%2 set to %3")
                                       .arg(QLatin1String(info.name), scope, formatAlertThreshold(rule, *value))
                                 : QStringLiteral("%1%2 back to its default (%3)")
                                       .arg(QLatin1String(info.name), scope,
                                            formatAlertThreshold(rule, info.defaultValue));
    if (!beginAudit(AuditAction{QStringLiteral("alert-threshold"), detail, 0, {}}, error) ||
        !m_db.notify(Channel::Activity, error))
        return false;
    return transaction.commit(error);
}

bool Operations::actOnIncident(qint64 id, Incidents::Action action, const QString &note, QString *error)
{
    if (note.size() > MaxReasonLength) {
        *error = QStringLiteral("the note is %1 characters long; at most %2").arg(note.size()).arg(MaxReasonLength);
        return false;
    }
    Transaction transaction(m_db);
    if (!transaction.begin(error))
        return false;
    if (!Incidents(m_db).act(id, action, m_actor, note, nowMs(), error))
        return false;
    const QString name = Incidents::actionName(action);
    AuditAction audit{QStringLiteral("incident-") + name, QStringLiteral("incident %1").arg(id), 0, note};
    if (!beginAudit(audit, error) || !m_db.notify(Channel::Activity, error))
        return false;
    return transaction.commit(error);
}

} // namespace once
