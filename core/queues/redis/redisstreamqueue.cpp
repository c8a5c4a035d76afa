// The queue in Redis Streams (--queue redis://[:PASSWORD@]HOST[:PORT]/DB?stream=NAME).
//
// Keys, for stream NAME:
//   NAME          a stream of the messages that are ready or in flight, read by the
//                 consumer group "once". A delivered entry stays in the group's pending
//                 entries list (PEL) until it is settled, and then leaves the stream
//                 (XACK + XDEL): the stream holds only unfinished work.
//   NAME:delayed  a sorted set of the messages not visible yet (delayed enqueues and
//                 retries): score = due time in ms by the server's clock, member = the
//                 entry's fields as a compact JSON object of strings. lease() moves the due
//                 ones back to NAME.
//   NAME:dead     a stream of dead letters, oldest first.
//
// Entry fields (all strings; a producer needs only XADD NAME * body JSON):
//   id            the message id, kept through retries and redrives; when it is absent
//                 the entry id is the message id
//   body          the reminder JSON (an entry without one is leased with an empty
//                 payload, which the engine dead-letters as unparsable)
//   content_type  application/json
//   enqueued_at   ms since the epoch of the first enqueue (absent: the entry id's time)
//   receives      deliveries before this entry (absent: 0); a retry or a redrive adds the
//                 message again as a new entry that carries the deliveries so far
//   redrives      how often an operator redrove the message (absent: 0)
// Dead letters add error_class, last_error, attempts, first_attempt_at, last_attempt_at,
// dead_at (ms), send_key and event_id, and keep receives as the deliveries so far.
//
// Delivery numbers and leases: a delivery is receives + the group's delivery count of the
// entry, so it grows with every delivery of an id, including XAUTOCLAIM's takeover after a
// consumer crashed or stalled (its entries idle longer than the taker's lease). Only the
// consumer that holds an entry in the PEL, with the delivery count it leased it at, may
// settle it: each settlement is one Lua script that checks exactly that before it acts, so
// a settlement that arrives after another consumer took the entry over changes nothing.
#include "queues/redis/redisstreamqueue.h"

#include "model/clock.h"
#include "queues/redis/redislocation.h"

#include <QCryptographicHash>
#include <QLoggingCategory>
#include <QUuid>

#include <array>

namespace once {

using namespace redisreply;

namespace {

Q_LOGGING_CATEGORY(lcRedis, "once.core.redis")

const QByteArray Group = QByteArrayLiteral("once");
const QByteArray ContentType = QByteArrayLiteral("application/json");
// How many due delayed messages one lease() moves to the stream; the rest follow on the
// next turns, so one lease never holds the server long.
constexpr int PromoteBatch = 100;
// A lease that ended this long ago without a settlement was abandoned by its engine; it
// is forgotten so the map stays bounded (the entry itself is reclaimed by XAUTOCLAIM).
constexpr qint64 AbandonedLeaseMs = 60 * 60 * 1000;

// Helpers shared by the scripts. Entries are Lua tables of the known string fields only,
// so a foreign producer's extra fields do not travel into retries and dead letters.
const char LuaPrelude[] = R"lua(
local Group = 'once'
local Fields = {'id', 'body', 'content_type', 'enqueued_at', 'receives', 'redrives'}
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function known(all)
  local e = {}
  for _, name in ipairs(Fields) do
    local v = all[name]
    if type(v) == 'number' then v = tostring(v) end
    if type(v) == 'string' then e[name] = v end
  end
  return e
end
local function entryFrom(list)
  local all = {}
  for i = 1, #list - 1, 2 do all[list[i]] = list[i + 1] end
  return known(all)
end
-- A plain producer's entry takes its id and enqueue time from the entry id, for good
-- once it leaves the stream (a retry, a dead letter).
local function adopt(e, entryId)
  e.id = e.id or entryId
  e.enqueued_at = e.enqueued_at or string.match(entryId, '^%d+')
  return e
end
-- XADD's field list, in the order of Fields; always with a body, so XADD never gets an
-- empty list.
local function fieldsOf(e)
  local list = {}
  for _, name in ipairs(Fields) do
    local v = e[name]
    if name == 'body' then v = v or '' end
    if v then
      list[#list + 1] = name
      list[#list + 1] = v
    end
  end
  return list
end
)lua";

// KEYS: delayed, stream. ARGV: how many. Moves the due delayed messages to the stream, in
// one step, so a message is never in both or in neither.
const char PromoteLua[] = R"lua(
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', nowMs(), 'LIMIT', 0, ARGV[1])
for _, member in ipairs(due) do
  local ok, decoded = pcall(cjson.decode, member)
  -- A member that is not our JSON goes out as a body the engine dead-letters, rather
  -- than staying at the head of the set for ever.
  local e = {body = member}
  if ok and type(decoded) == 'table' then e = known(decoded) end
  redis.call('XADD', KEYS[2], '*', unpack(fieldsOf(e)))
end
if #due > 0 then redis.call('ZREM', KEYS[1], unpack(due)) end
return #due
)lua";

// KEYS: delayed. ARGV: delay in ms, then the entry's field/value pairs. The JSON is made
// here rather than by the client because cjson passes any bytes through unchanged.
const char DelayLua[] = R"lua(
local e = entryFrom({unpack(ARGV, 2)})
redis.call('ZADD', KEYS[1], nowMs() + tonumber(ARGV[1]), cjson.encode(e))
return 1
)lua";

// KEYS: stream, delayed, dead. ARGV: entry id, consumer, the group's delivery count at the
// lease, ack|retry|dead, deliveries so far, retry delay in ms, then for dead the dead
// letter's field/value pairs. Returns 0 when the lease was lost (nothing changes).
const char SettleLua[] = R"lua(
local pending = redis.call('XPENDING', KEYS[1], Group, ARGV[1], ARGV[1], 1)[1]
if pending == nil or pending[2] ~= ARGV[2] or pending[4] ~= tonumber(ARGV[3]) then return 0 end
local entry = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])[1]
redis.call('XACK', KEYS[1], Group, ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
if ARGV[4] == 'ack' or entry == nil then return 1 end
local e = adopt(entryFrom(entry[2]), ARGV[1])
e.receives = ARGV[5]
if ARGV[4] == 'retry' then
  redis.call('ZADD', KEYS[2], nowMs() + tonumber(ARGV[6]), cjson.encode(e))
else
  local list = fieldsOf(e)
  for i = 7, #ARGV do list[#list + 1] = ARGV[i] end
  redis.call('XADD', KEYS[3], '*', unpack(list))
end
return 1
)lua";

// KEYS: dead, stream. ARGV: the dead letter's entry id. Puts it back on the stream (same
// id, body and enqueued_at; redrives + 1) and only then removes the dead letter, in one
// step, so two operators redriving at once cannot both re-add it.
const char RedriveLua[] = R"lua(
local entry = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])[1]
if entry == nil then return 0 end
local e = adopt(entryFrom(entry[2]), ARGV[1])
e.redrives = tostring((tonumber(e.redrives) or 0) + 1)
redis.call('XADD', KEYS[2], '*', unpack(fieldsOf(e)))
redis.call('XDEL', KEYS[1], ARGV[1])
return 1
)lua";

struct Script
{
    QByteArray source;
    QByteArray sha;
};

enum class Lua
{
    Promote,
    Delay,
    Settle,
    Redrive,
    Count
};

const std::array<Script, size_t(Lua::Count)> &scripts()
{
    static const std::array<Script, size_t(Lua::Count)> all = [] {
        std::array<Script, size_t(Lua::Count)> made;
        const char *bodies[] = {PromoteLua, DelayLua, SettleLua, RedriveLua};
        for (size_t i = 0; i < made.size(); ++i) {
            made[i].source = QByteArray(LuaPrelude) + bodies[i];
            made[i].sha = QCryptographicHash::hash(made[i].source, QCryptographicHash::Sha1).toHex();
        }
        return made;
    }();
    return all;
}

QByteArray number(qint64 value)
{
    return QByteArray::number(value);
}

// EVALSHA: open() loaded every script.
QByteArrayList script(Lua which, const QByteArrayList &keys, const QByteArrayList &arguments)
{
    return QByteArrayList{"EVALSHA", scripts().at(size_t(which)).sha, number(keys.size())} + keys + arguments;
}

// "once:" and the consumer, for CLIENT LIST: operators see which worker holds which
// connection ("once" alone: a producer's or an operator's). Redis refuses spaces and
// control characters in a client name.
QByteArray clientName(const QByteArray &consumer)
{
    QByteArray name = consumer.isEmpty() ? QByteArray("once") : "once:" + consumer;
    for (char &c : name) {
        if (c < '!' || c > '~')
            c = '_';
    }
    return name;
}

// The connection's setup: its name, and every script loaded.
QList<QByteArrayList> connectionSetup(const QByteArray &consumer)
{
    QList<QByteArrayList> setup{{"CLIENT", "SETNAME", clientName(consumer)}};
    for (const Script &script : scripts())
        setup.append({"SCRIPT", "LOAD", script.source});
    return setup;
}

// The time part of a stream entry id ("1700000000000-0"): when Redis added it.
qint64 entryTimeMs(const QByteArray &entryId)
{
    return entryId.left(entryId.indexOf('-')).toLongLong();
}

} // namespace

// An entry as XREADGROUP, XAUTOCLAIM and XRANGE return it.
struct RedisStreamQueue::StreamEntry
{
    QByteArray entryId;
    QHash<QByteArray, QByteArray> fields;
    qint64 groupDeliveries = 1;

    static std::optional<StreamEntry> from(const redisReply *reply)
    {
        if (elementCount(reply) != 2)
            return std::nullopt; // a deleted entry
        return StreamEntry{bytes(element(reply, 0)), fieldMap(element(reply, 1))};
    }
    static QList<StreamEntry> listFrom(const redisReply *list)
    {
        QList<StreamEntry> entries;
        for (size_t i = 0; i < elementCount(list); ++i) {
            if (auto entry = from(element(list, i)))
                entries.append(std::move(*entry));
        }
        return entries;
    }
    QString messageId() const { return QString::fromUtf8(fields.value("id", entryId)); }
    int field(const char *name) const { return fields.value(name).toInt(); }
    qint64 timeField(const char *name) const { return fields.value(name).toLongLong(); }
    qint64 enqueuedAtMs() const
    {
        const qint64 enqueuedAt = timeField("enqueued_at");
        return enqueuedAt > 0 ? enqueuedAt : entryTimeMs(entryId);
    }
};

RedisStreamQueue::RedisStreamQueue(QueueLocation location, const QString &consumerName)
    : BrokerQueue(std::move(location)), m_consumer(consumerName.toUtf8()),
      m_stream(this->location().name.toUtf8()), m_delayed(m_stream + ":delayed"),
      m_dead(this->location().deadLetterName().toUtf8()),
      m_connection(RedisEndpoint::of(this->location(), redisDetails(this->location()).database),
                   connectionSetup(m_consumer))
{
}

RedisStreamQueue::~RedisStreamQueue() = default;

std::unique_ptr<RedisStreamQueue> RedisStreamQueue::connect(const QueueLocation &location,
                                                            const QString &consumerName, QString *error)
{
    std::unique_ptr<RedisStreamQueue> queue(new RedisStreamQueue(location, consumerName));
    if (!queue->open(error))
        return nullptr;
    return queue;
}

// Connects, logs in, selects the database, names the connection and loads the scripts (so
// that every later call can use EVALSHA). On failure there is no connection, and the next
// call tries again.
bool RedisStreamQueue::open(QString *error)
{
    if (!m_connection.open(error))
        return false;
    qCDebug(lcRedis).noquote() << "connected to" << location().displayName() << "as" << m_consumer;
    return true;
}

QString RedisStreamQueue::describe(const QString &what) const
{
    return m_connection.describe(what);
}

QString RedisStreamQueue::noGroupError() const
{
    return describe(
        QStringLiteral("the stream %1 has no consumer group \"%2\" yet (once init --queue declares it)")
            .arg(location().name, QString::fromLatin1(Group)));
}

bool RedisStreamQueue::failed(const redisReply *reply, QString *error)
{
    if (!isError(reply))
        return false;
    const QByteArray text = errorText(reply);
    *error = text.startsWith("NOGROUP") || text == "ERR no such key" ? noGroupError()
                                                                     : describe(QString::fromUtf8(text));
    // The server lost our scripts (SCRIPT FLUSH): reconnecting loads them again.
    if (text.startsWith("NOSCRIPT"))
        m_connection.close();
    return true;
}

std::optional<std::vector<RedisStreamQueue::Reply>>
RedisStreamQueue::pipeline(const QList<QByteArrayList> &commands, QString *error)
{
    return m_connection.pipeline(commands, error);
}

std::optional<std::vector<RedisStreamQueue::Reply>>
RedisStreamQueue::checkedPipeline(const QList<QByteArrayList> &commands, QString *error)
{
    auto replies = pipeline(commands, error);
    if (!replies)
        return std::nullopt;
    bool ok = true;
    for (const Reply &reply : *replies)
        ok = !failed(reply.get(), error) && ok;
    return ok ? std::move(replies) : std::nullopt;
}

bool RedisStreamQueue::declareTopology(const QueueTopology &, QString *error)
{
    const auto reply = pipeline({{"XGROUP", "CREATE", m_stream, Group, "0", "MKSTREAM"}}, error);
    if (!reply)
        return false;
    // BUSYGROUP: declared before, which is fine.
    const redisReply *created = reply->front().get();
    return errorText(created).startsWith("BUSYGROUP") || !failed(created, error);
}

bool RedisStreamQueue::enqueue(const QList<OutgoingMessage> &messages, QString *error)
{
    if (messages.isEmpty())
        return true;
    const QByteArray enqueuedAt = number(nowMs());
    QList<QByteArrayList> commands;
    commands.reserve(messages.size());
    for (const OutgoingMessage &message : messages) {
        const QByteArrayList fields{"id",           QUuid::createUuid().toByteArray(QUuid::WithoutBraces),
                                    "body",         message.payload,
                                    "content_type", ContentType,
                                    "enqueued_at",  enqueuedAt,
                                    "receives",     "0",
                                    "redrives",     number(message.redriveCount)};
        commands.append(message.delayMs > 0 ? script(Lua::Delay, {m_delayed},
                                                     QByteArrayList{number(message.delayMs)} + fields)
                                            : QByteArrayList{"XADD", m_stream, "*"} + fields);
    }
    return checkedPipeline(commands, error).has_value();
}

// Three steps, two round trips: due delayed messages join the stream and entries idle
// longer than a lease (their consumer crashed or stalled) are taken over, then new
// entries fill the rest. XAUTOCLAIM's cursor is kept between calls, so each call looks
// at the next part of a long PEL instead of the same head again. The consumer is the one
// named at connect(), which the engine's worker id names too.
QList<QueueMessage> RedisStreamQueue::lease(int max, qint64 leaseMs, const QString &, QString *error)
{
    if (max <= 0)
        return {};
    if (m_consumer.isEmpty()) {
        *error = describe(QStringLiteral("a connection opened without a consumer name cannot lease"));
        return {};
    }
    const auto first = checkedPipeline(
        {script(Lua::Promote, {m_delayed, m_stream}, {number(PromoteBatch)}),
         {"XAUTOCLAIM", m_stream, Group, m_consumer, number(leaseMs), m_claimCursor, "COUNT", number(max)}},
        error);
    if (!first)
        return {};
    const redisReply *claimed = first->at(1).get();
    m_claimCursor = bytes(element(claimed, 0));
    if (m_claimCursor.isEmpty())
        m_claimCursor = "0-0";
    QList<StreamEntry> entries = StreamEntry::listFrom(element(claimed, 1));

    // A taken-over entry's delivery count is only in the PEL.
    QList<QByteArrayList> second;
    for (const StreamEntry &entry : std::as_const(entries))
        second.append({"XPENDING", m_stream, Group, entry.entryId, entry.entryId, "1"});
    const qsizetype reclaimed = entries.size();
    const qsizetype fresh = max - reclaimed;
    if (fresh > 0)
        second.append(
            {"XREADGROUP", "GROUP", Group, m_consumer, "COUNT", number(fresh), "STREAMS", m_stream, ">"});
    const auto replies = checkedPipeline(second, error);
    if (!replies)
        return {};
    for (qsizetype i = 0; i < entries.size(); ++i)
        entries[i].groupDeliveries =
            integer(element(element(replies->at(size_t(i)).get(), 0), 3)).value_or(1);
    if (fresh > 0)
        entries += StreamEntry::listFrom(element(element(replies->back().get(), 0), 1));
    if (!entries.isEmpty())
        qCDebug(lcRedis) << "leased" << entries.size() << "entries," << reclaimed << "of them taken over";
    return remember(entries, leaseMs);
}

// Turns the entries into deliveries and keeps what settle() needs to find them again.
QList<QueueMessage> RedisStreamQueue::remember(const QList<StreamEntry> &entries, qint64 leaseMs)
{
    const qint64 now = nowMs();
    for (auto it = m_leases.begin(); it != m_leases.end();) {
        if (it->leaseUntilMs < now - AbandonedLeaseMs)
            it = m_leases.erase(it);
        else
            ++it;
    }
    QList<QueueMessage> messages;
    messages.reserve(entries.size());
    for (const StreamEntry &entry : entries) {
        QueueMessage message;
        message.id = entry.messageId();
        message.payload = entry.fields.value("body");
        message.delivery = entry.field("receives") + int(entry.groupDeliveries);
        message.enqueuedAtMs = entry.enqueuedAtMs();
        message.leaseUntilMs = now + leaseMs;
        message.redriveCount = entry.field("redrives");
        m_leases.insert({message.id, message.delivery},
                        Lease{entry.entryId, entry.groupDeliveries, message.leaseUntilMs});
        messages.append(std::move(message));
    }
    return messages;
}

bool RedisStreamQueue::settle(const QList<Settlement> &settlements, QString *error)
{
    QList<QByteArrayList> commands;
    QList<QPair<QString, int>> keys;
    for (const Settlement &settlement : settlements) {
        const QPair<QString, int> key{settlement.messageId, settlement.delivery};
        const auto lease = m_leases.constFind(key);
        if (lease == m_leases.cend()) {
            qCDebug(lcRedis) << "no lease for message" << key.first << "delivery" << key.second
                             << "to settle";
            continue;
        }
        commands.append(settlementScript(settlement, *lease));
        keys.append(key);
    }
    if (commands.isEmpty())
        return true;
    const auto replies = pipeline(commands, error);
    if (!replies)
        return false;
    bool ok = true;
    for (qsizetype i = 0; i < keys.size(); ++i) {
        const redisReply *reply = replies->at(size_t(i)).get();
        if (failed(reply, error)) {
            ok = false; // kept, so that the same settlement can be tried again
            continue;
        }
        if (integer(reply) == 0)
            qCDebug(lcRedis) << "message" << keys.at(i).first << "delivery" << keys.at(i).second
                             << "was taken over by another consumer; its settlement changes nothing";
        m_leases.remove(keys.at(i));
    }
    return ok;
}

QByteArrayList RedisStreamQueue::settlementScript(const Settlement &settlement, const Lease &lease) const
{
    static const QByteArray kinds[] = {"ack", "retry", "dead"};
    QByteArrayList arguments{lease.entryId,
                             m_consumer,
                             number(lease.groupDeliveries),
                             kinds[int(settlement.kind)],
                             number(settlement.delivery),
                             number(settlement.delayMs)};
    if (settlement.kind == Settlement::Kind::DeadLetter) {
        const DeadLetterInfo &info = settlement.deadLetter;
        arguments += QByteArrayList{"error_class",      info.errorClass.toUtf8(),
                                    "last_error",       info.lastError.toUtf8(),
                                    "attempts",         number(info.attempts),
                                    "first_attempt_at", number(info.firstAttemptAtMs),
                                    "last_attempt_at",  number(info.lastAttemptAtMs),
                                    "dead_at",          number(nowMs()),
                                    "send_key",         info.sendKey,
                                    "event_id",         info.eventId.toUtf8()};
    }
    return script(Lua::Settle, {m_stream, m_delayed, m_dead}, arguments);
}

// Ready is the group's lag (entries not delivered yet); when Redis cannot tell it, the
// stream's length less the pending entries is the same thing here, because settled
// entries leave the stream. The oldest message counts a pending entry too: its consumer
// may have died, and the reminder is as late as an undelivered one.
std::optional<QueueCounts> RedisStreamQueue::counts(QString *error)
{
    const auto first = checkedPipeline({{"XINFO", "GROUPS", m_stream},
                                        {"XPENDING", m_stream, Group},
                                        {"ZCARD", m_delayed},
                                        {"XLEN", m_dead},
                                        {"ZRANGE", m_delayed, "0", "0", "WITHSCORES"},
                                        {"TIME"},
                                        {"XLEN", m_stream}},
                                       error);
    if (!first)
        return std::nullopt;
    std::optional<QHash<QByteArray, QByteArray>> group;
    for (size_t i = 0; i < elementCount(first->at(0).get()); ++i) {
        auto fields = fieldMap(element(first->at(0).get(), i));
        if (fields.value("name") == Group)
            group = std::move(fields);
    }
    if (!group) {
        *error = noGroupError();
        return std::nullopt;
    }
    const redisReply *pending = first->at(1).get();
    QueueCounts counts;
    counts.inFlight = integer(element(pending, 0)).value_or(0);
    const QByteArray lag = group->value("lag"); // empty when Redis cannot tell
    counts.ready =
        lag.isEmpty() ? integer(first->at(6).get()).value_or(0) - counts.inFlight : lag.toLongLong();
    counts.delayed = integer(first->at(2).get()).value_or(0);
    counts.dead = integer(first->at(3).get()).value_or(0);
    const redisReply *time = first->at(5).get();
    const qint64 serverNow =
        bytes(element(time, 0)).toLongLong() * 1000 + bytes(element(time, 1)).toLongLong() / 1000;
    const redisReply *nextDelayed = first->at(4).get();
    if (elementCount(nextDelayed) == 2)
        counts.nextVisibleInMs =
            std::max<qint64>(0, qint64(bytes(element(nextDelayed, 1)).toDouble()) - serverNow);

    QList<QByteArrayList> oldest{
        {"XRANGE", m_stream, "(" + group->value("last-delivered-id"), "+", "COUNT", "1"}};
    const QByteArray oldestPending = bytes(element(pending, 1));
    if (!oldestPending.isEmpty())
        oldest.append({"XRANGE", m_stream, oldestPending, oldestPending});
    const auto second = checkedPipeline(oldest, error);
    if (!second)
        return std::nullopt;
    for (const Reply &reply : *second) {
        if (const auto entry = StreamEntry::from(element(reply.get(), 0))) {
            const qint64 age = std::max<qint64>(0, nowMs() - entry->enqueuedAtMs());
            counts.oldestReadyAgeMs = std::max(age, counts.oldestReadyAgeMs.value_or(0));
        }
    }
    return counts;
}

std::optional<QList<RedisStreamQueue::DeadEntry>> RedisStreamQueue::headOfDeadLetters(int limit,
                                                                                      QString *error)
{
    QByteArrayList command{"XRANGE", m_dead, "-", "+"};
    if (limit >= 0)
        command += QByteArrayList{"COUNT", number(limit)};
    const auto replies = checkedPipeline({command}, error);
    if (!replies)
        return std::nullopt;
    QList<DeadEntry> letters;
    for (const StreamEntry &entry : StreamEntry::listFrom(replies->front().get())) {
        DeadLetter letter;
        letter.id = entry.messageId();
        letter.payload = entry.fields.value("body");
        letter.sendKey = entry.fields.value("send_key");
        letter.eventId = QString::fromUtf8(entry.fields.value("event_id"));
        letter.errorClass = QString::fromUtf8(entry.fields.value("error_class"));
        letter.lastError = QString::fromUtf8(entry.fields.value("last_error"));
        letter.attempts = entry.field("attempts");
        letter.receiveCount = entry.field("receives");
        letter.redriveCount = entry.field("redrives");
        letter.firstAttemptAtMs = entry.timeField("first_attempt_at");
        letter.lastAttemptAtMs = entry.timeField("last_attempt_at");
        letter.deadAtMs = entry.timeField("dead_at");
        letter.enqueuedAtMs = entry.enqueuedAtMs();
        letters.append(DeadEntry{entry.entryId, std::move(letter)});
    }
    return letters;
}

std::optional<QList<DeadLetter>> RedisStreamQueue::deadLetters(int limit, QString *error)
{
    const auto head = headOfDeadLetters(limit, error);
    if (!head)
        return std::nullopt;
    QList<DeadLetter> letters;
    letters.reserve(head->size());
    for (const DeadEntry &dead : *head)
        letters.append(dead.letter);
    return letters;
}

std::optional<QList<DeadLetter>>
RedisStreamQueue::redrive(int max, const std::function<bool(const DeadLetter &)> &select, QString *error)
{
    return takeDeadLetters(max, select, true, error);
}

std::optional<QList<DeadLetter>>
RedisStreamQueue::discard(int max, const std::function<bool(const DeadLetter &)> &select, QString *error)
{
    return takeDeadLetters(max, select, false, error);
}

// Returns the selected letters this call took: one that another operator took meanwhile
// is not returned.
std::optional<QList<DeadLetter>>
RedisStreamQueue::takeDeadLetters(int max, const std::function<bool(const DeadLetter &)> &select,
                                  bool redrive, QString *error)
{
    const auto head = headOfDeadLetters(std::max(0, max), error);
    if (!head)
        return std::nullopt;
    QList<DeadLetter> chosen;
    QList<QByteArrayList> commands;
    for (const DeadEntry &dead : *head) {
        if (!select(dead.letter))
            continue;
        chosen.append(dead.letter);
        commands.append(redrive ? script(Lua::Redrive, {m_dead, m_stream}, {dead.entryId})
                                : QByteArrayList{"XDEL", m_dead, dead.entryId});
    }
    if (commands.isEmpty())
        return chosen;
    const auto replies = checkedPipeline(commands, error);
    if (!replies)
        return std::nullopt;
    QList<DeadLetter> taken;
    for (qsizetype i = 0; i < chosen.size(); ++i) {
        if (integer(replies->at(size_t(i)).get()) == 1)
            taken.append(chosen.at(i));
    }
    return taken;
}

} // namespace once
