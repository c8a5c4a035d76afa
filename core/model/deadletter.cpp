#include "model/deadletter.h"

#include "model/reminder.h"
#include "model/searchtext.h"
#include "text/jsonvalues.h"
#include "text/quantities.h"

#include <algorithm>
#include <vector>

namespace once {

QJsonObject DeadLetter::toJson() const
{
    return QJsonObject{
        {QStringLiteral("message_id"), id},
        {QStringLiteral("key"), sendKey.isEmpty() ? QJsonValue(QJsonValue::Null) : QJsonValue(QString::fromLatin1(sendKey))},
        {QStringLiteral("event_id"), textOrNull(eventId)},
        {QStringLiteral("error_class"), errorClass},
        {QStringLiteral("last_error"), textOrNull(lastError)},
        {QStringLiteral("attempts"), attempts},
        {QStringLiteral("deliveries"), receiveCount},
        {QStringLiteral("redrives"), redriveCount},
        {QStringLiteral("first_attempt_at"), timeOrNull(firstAttemptAtMs)},
        {QStringLiteral("last_attempt_at"), timeOrNull(lastAttemptAtMs)},
        {QStringLiteral("dead_at"), timeOrNull(deadAtMs)},
        {QStringLiteral("enqueued_at"), timeOrNull(enqueuedAtMs)},
        {QStringLiteral("expires_at"), timeOrNull(expiresAtMs)},
        {QStringLiteral("key_state"), textOrNull(keyState)},
    };
}

QString deadLetterExpiryText(const DeadLetter &letter, qint64 nowMs)
{
    if (!letter.hasExpired(nowMs))
        return {};
    QString text = QStringLiteral("expired %1").arg(formatTime(letter.expiresAtMs));
    const auto parts = parseSendKey(letter.sendKey);
    const auto scheduled = parts ? parseRfc3339(parts->canonicalTime) : std::nullopt;
    if (scheduled)
        text += QStringLiteral(" (would be %1 late)")
                    .arg(formatDuration(std::max<qint64>(0, nowMs - scheduled->utc.toMSecsSinceEpoch())));
    return text;
}

bool DeadLetterFilter::matches(const DeadLetter &letter) const
{
    return (errorClass.isEmpty() || letter.errorClass == errorClass) && letter.deadAtMs >= sinceMs &&
           (untilMs <= 0 || letter.deadAtMs <= untilMs) &&
           (sendKeys.isEmpty() || sendKeys.contains(letter.sendKey)) &&
           (ids.isEmpty() || ids.contains(letter.id)) &&
           (httpStatus <= 0 || lastErrorHasHttpStatus(letter.lastError, httpStatus)) &&
           deadLetterMatchesSearch(letter, text);
}

DeadLetterFilter DeadLetterFilter::walkUntil(qint64 nowMs) const
{
    DeadLetterFilter walk = *this;
    walk.untilMs = walk.untilMs > 0 ? std::min(walk.untilMs, nowMs) : nowMs;
    walk.afterId.clear();
    walk.afterDeadAtMs = 0;
    walk.newestFirst = false;
    walk.limit = -1;
    return walk;
}

bool lastErrorHasHttpStatus(const QString &lastError, int httpStatus)
{
    // The patterns the store's query uses (LIKE), word for word.
    const QString answer = QStringLiteral("HTTP %1").arg(httpStatus);
    if (lastError == answer || lastError.startsWith(answer + QLatin1Char(':')))
        return true;
    const QLatin1String gaveUp("gave up after ");
    if (!lastError.startsWith(gaveUp))
        return false;
    const QString after = QStringLiteral(": ") + answer;
    return lastError.indexOf(after + QLatin1Char(':'), gaveUp.size()) >= 0 ||
           (lastError.endsWith(after) && lastError.size() >= gaveUp.size() + after.size());
}

bool deadLetterMatchesSearch(const DeadLetter &letter, const QString &text)
{
    const EventSearch search = EventSearch::parse(text);
    const QString sendKey = QString::fromLatin1(letter.sendKey);
    switch (search.kind) {
    case EventSearch::Kind::None:
        return true;
    case EventSearch::Kind::Exact:
        return letter.id == search.text || sendKey == search.text || letter.eventId == search.text ||
               letter.payload.contains(jsonString(search.text, true)) ||
               letter.lastError.contains(search.text, Qt::CaseInsensitive);
    case EventSearch::Kind::Prefix:
        return letter.id.startsWith(search.text) || sendKey.startsWith(search.text) ||
               letter.eventId.startsWith(search.text) ||
               letter.payload.contains(jsonString(search.text, false)) ||
               letter.lastError.contains(search.text, Qt::CaseInsensitive);
    case EventSearch::Kind::Body:
        return letter.payload.contains(search.text.toUtf8());
    }
    return false;
}

bool DeadLetterFilter::listsBefore(const DeadLetter &a, const DeadLetter &b) const
{
    const bool earlier = a.deadAtMs != b.deadAtMs ? a.deadAtMs < b.deadAtMs : a.id < b.id;
    const bool same = a.deadAtMs == b.deadAtMs && a.id == b.id;
    return newestFirst ? !earlier && !same : earlier;
}

bool DeadLetterFilter::isAfterCursor(const DeadLetter &letter) const
{
    if (afterId.isEmpty())
        return true;
    DeadLetter cursor;
    cursor.deadAtMs = afterDeadAtMs;
    cursor.id = afterId;
    return listsBefore(cursor, letter);
}

DeadLetterTally DeadLetterCounts::tally(const QString &errorClass) const
{
    if (!errorClass.isEmpty())
        return byClass.value(errorClass);
    DeadLetterTally all;
    for (const DeadLetterTally &each : byClass)
        all += each;
    return all;
}

QList<DeadLetter> deadLetterPage(const QList<DeadLetter> &letters, const DeadLetterFilter &filter)
{
    // The page's letters found and ordered through pointers: a page of 500 out of a
    // hundred thousand copies 500 letters and sorts no more than it needs.
    std::vector<const DeadLetter *> taken;
    for (const DeadLetter &letter : letters) {
        if (filter.matches(letter) && filter.isAfterCursor(letter))
            taken.push_back(&letter);
    }
    const size_t count = filter.limit >= 0 ? std::min(taken.size(), size_t(filter.limit)) : taken.size();
    std::partial_sort(taken.begin(), taken.begin() + qsizetype(count), taken.end(),
                      [&filter](const DeadLetter *a, const DeadLetter *b) { return filter.listsBefore(*a, *b); });
    QList<DeadLetter> page;
    page.reserve(qsizetype(count));
    for (size_t i = 0; i < count; ++i) {
        page.append(*taken[i]);
        if (!filter.withPayload)
            page.last().payload = QByteArray();
    }
    return page;
}

DeadLetterCounts countDeadLetters(const QList<DeadLetter> &letters, const DeadLetterFilter &filter,
                                  qint64 firstSentBeforeMs)
{
    DeadLetterCounts counts;
    for (const DeadLetter &letter : letters) {
        if (!filter.matches(letter))
            continue;
        DeadLetterTally &tally = counts.byClass[letter.errorClass];
        ++tally.letters;
        if (letter.redriveCount > 0)
            ++tally.redrivenBefore;
        if (letter.firstAttemptAtMs > 0 && letter.firstAttemptAtMs < firstSentBeforeMs)
            ++tally.firstSentBefore;
        if (diedOfRefusedCredentials(letter))
            ++tally.credentialsRefused;
    }
    return counts;
}

bool diedOfRefusedCredentials(const DeadLetter &letter)
{
    return letter.errorClass == QLatin1String("rejected")
           && (lastErrorHasHttpStatus(letter.lastError, 401) || lastErrorHasHttpStatus(letter.lastError, 403)
               || lastErrorHasHttpStatus(letter.lastError, 407));
}

} // namespace once
