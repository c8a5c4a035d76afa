// A producer's message: parseReminder either refuses it in one line, or accepts it with a
// send key that decodes back into exactly the parsed ids and the canonical time, is short
// ASCII, and that no other accepted triple has had (injectivity across the whole run).
// Inputs starting with 0xFF instead feed makeSendKey arbitrary UTF-16 (unpaired
// surrogates included), which the parser never hands it.
#include "fuzzcheck.h"
#include "model/reminder.h"
#include "text/strictjson.h"

#include <QHash>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <cstring>

using namespace once;

namespace {

// Every key seen in this run and the triple it was made from, up to a bound.
QHash<QByteArray, QString> &keysSeen()
{
    static QHash<QByteArray, QString> seen;
    return seen;
}

void rememberKey(const QByteArray &key, const QString &userId, const QString &reminderId, const QString &canonicalTime)
{
    // The lengths first, so that no two different triples join into the same text.
    const QString triple = QString::number(userId.size()) + QLatin1Char('/') + QString::number(reminderId.size())
                           + QLatin1Char('/') + userId + reminderId + canonicalTime;
    auto &seen = keysSeen();
    const auto it = seen.constFind(key);
    FUZZ_CHECK(it == seen.cend() || *it == triple, QStringLiteral("two triples share the key ") + QString::fromLatin1(key));
    if (seen.size() < 200000)
        seen.insert(key, triple);
}

void checkKey(const QByteArray &key, const QString &userId, const QString &reminderId, const QDateTime &utc)
{
    FUZZ_CHECK(!key.isEmpty(), QStringLiteral("an accepted message has no key"));
    for (const char c : key)
        FUZZ_CHECK(uchar(c) > 0x20 && uchar(c) < 0x7f, QString::fromLatin1(key.toPercentEncoding()));
    const auto parts = parseSendKey(key);
    FUZZ_CHECK(parts, QStringLiteral("the key does not decode: ") + QString::fromLatin1(key));
    FUZZ_CHECK(parts->userId == userId, QString::fromLatin1(key));
    FUZZ_CHECK(parts->reminderId == reminderId, QString::fromLatin1(key));
    const auto time = parseRfc3339(parts->canonicalTime);
    FUZZ_CHECK(time && time->canonical == parts->canonicalTime, parts->canonicalTime);
    FUZZ_CHECK(!utc.isValid() || time->utc == utc, parts->canonicalTime);
    // And the other way round: the decoded parts make the same key.
    FUZZ_CHECK(makeSendKey(parts->userId, parts->reminderId, parts->canonicalTime) == key, QString::fromLatin1(key));
    rememberKey(key, userId, reminderId, parts->canonicalTime);
}

void fuzzMessage(const QByteArray &line)
{
    const auto result = parseReminder(line);
    if (!result.reminder) {
        FUZZ_CHECK(oncefuzz::isOneLine(result.error), result.error);
        return;
    }
    const Reminder &reminder = *result.reminder;
    FUZZ_CHECK(result.error.isEmpty(), result.error);
    FUZZ_CHECK(reminder.userId.toUtf8().size() <= MaxIdBytes && reminder.reminderId.toUtf8().size() <= MaxIdBytes,
               reminder.userId);
    FUZZ_CHECK(reminder.sendKey.size() <= 2 * 3 * MaxIdBytes + 2 + MaxScheduledAtChars, QString::fromLatin1(reminder.sendKey));
    checkKey(reminder.sendKey, reminder.userId, reminder.reminderId, reminder.scheduledAt);
    // What is forwarded is what was judged: strict JSON whose ids are the ledger's.
    FUZZ_CHECK(strictJsonProblem(reminder.payload).isEmpty(), strictJsonProblem(reminder.payload));
    const QJsonObject forwarded = QJsonDocument::fromJson(reminder.payload).object();
    FUZZ_CHECK(forwarded.value(QLatin1String("user_id")).toString() == reminder.userId, reminder.userId);
    FUZZ_CHECK(forwarded.value(QLatin1String("reminder_id")).toString() == reminder.reminderId, reminder.reminderId);
}

// 0xFF, one byte splitting the rest into a user id and a reminder id (read as UTF-16),
// then a time.
void fuzzKey(const QByteArray &input)
{
    if (input.size() < 2)
        return;
    const int split = uchar(input.at(1));
    const QByteArray rest = input.mid(2);
    const qsizetype idBytes = std::min<qsizetype>(rest.size(), qsizetype(split) * 4) & ~qsizetype(1);
    QString ids(idBytes / 2, Qt::Uninitialized);
    std::memcpy(ids.data(), rest.constData(), size_t(idBytes)); // the input need not be aligned for QChar
    const QString userId = ids.left(split);
    const QString reminderId = ids.mid(split);
    const QString time = QString::fromUtf8(rest.mid(idBytes));
    const QByteArray key = makeSendKey(userId, reminderId, time);
    const bool valid = userId.isValidUtf16() && reminderId.isValidUtf16() && parseRfc3339(time).has_value();
    FUZZ_CHECK(key.isEmpty() != valid, QString::fromLatin1(key));
    if (valid)
        checkKey(key, userId, reminderId, parseRfc3339(time)->utc);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const QByteArray input = oncefuzz::bytes(data, size);
    if (!input.isEmpty() && uchar(input.at(0)) == 0xff)
        fuzzKey(input);
    else
        fuzzMessage(input);
    return 0;
}
