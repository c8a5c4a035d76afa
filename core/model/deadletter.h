#pragma once

#include <QByteArray>
#include <QJsonObject>
#include <QList>
#include <QString>

namespace once {

// A message that left the queue without taking effect (its attempts ran out, it was
// refused as invalid, or a queue's receive limit was reached), kept for an operator to
// redrive or discard; wherever its queue keeps it (the store, a broker's DLQ, a REST
// queue).
struct DeadLetter
{
    QString id;
    QByteArray payload;
    QByteArray sendKey;
    QString eventId;
    QString errorClass;
    QString lastError;
    int attempts = 0;
    int receiveCount = 0;
    int redriveCount = 0;
    qint64 firstAttemptAtMs = 0;
    qint64 lastAttemptAtMs = 0;
    qint64 deadAtMs = 0;
    qint64 enqueuedAtMs = 0;

    QJsonObject toJson() const;
};

struct DeadLetterFilter
{
    QString errorClass;
    qint64 sinceMs = 0;           // dead at or after
    qint64 untilMs = 0;           // dead at or before (0: no end)
    QList<QByteArray> sendKeys;   // empty: any
    int limit = -1;

    // For dead letters listed without SQL (at a broker).
    bool matches(const DeadLetter &letter) const;
};

} // namespace once
