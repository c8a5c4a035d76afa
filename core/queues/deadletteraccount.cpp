#include "queues/deadletteraccount.h"

namespace once {

QJsonObject deadLetterAccount(const Settlement &settlement, qint64 deadAtMs)
{
    const DeadLetterInfo &info = settlement.deadLetter;
    return {{QStringLiteral("error_class"), info.errorClass},
            {QStringLiteral("last_error"), info.lastError.left(2000)},
            {QStringLiteral("attempts"), info.attempts},
            {QStringLiteral("receives"), settlement.delivery},
            {QStringLiteral("first_attempt_at"), qint64(info.firstAttemptAtMs)},
            {QStringLiteral("last_attempt_at"), qint64(info.lastAttemptAtMs)},
            {QStringLiteral("dead_at"), deadAtMs},
            {QStringLiteral("send_key"), QString::fromLatin1(info.sendKey)},
            {QStringLiteral("event_id"), info.eventId}};
}

void readDeadLetterAccount(const QJsonObject &account, DeadLetter *letter)
{
    letter->errorClass = account.value(QLatin1String("error_class")).toString();
    letter->lastError = account.value(QLatin1String("last_error")).toString();
    letter->attempts = account.value(QLatin1String("attempts")).toInt();
    letter->receiveCount = account.value(QLatin1String("receives")).toInt();
    letter->firstAttemptAtMs = account.value(QLatin1String("first_attempt_at")).toInteger();
    letter->lastAttemptAtMs = account.value(QLatin1String("last_attempt_at")).toInteger();
    letter->deadAtMs = account.value(QLatin1String("dead_at")).toInteger();
    letter->sendKey = account.value(QLatin1String("send_key")).toString().toLatin1();
    letter->eventId = account.value(QLatin1String("event_id")).toString();
}

} // namespace once
