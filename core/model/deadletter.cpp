#include "model/deadletter.h"

#include "text/jsonvalues.h"

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
    };
}

bool DeadLetterFilter::matches(const DeadLetter &letter) const
{
    return (errorClass.isEmpty() || letter.errorClass == errorClass) && letter.deadAtMs >= sinceMs
           && (untilMs <= 0 || letter.deadAtMs <= untilMs) && (sendKeys.isEmpty() || sendKeys.contains(letter.sendKey));
}

} // namespace once
