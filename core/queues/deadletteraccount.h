#pragma once

#include "model/deadletter.h"
#include "queues/messagequeue.h"

#include <QJsonObject>

namespace once {

// A dead letter's account as a cloud queue carries it beside the message (an SQS message
// attribute, a Pub/Sub attribute): JSON with the error class, the last error, the
// attempts and their times, the receives, when it died, the send key and event id.
QJsonObject deadLetterAccount(const Settlement &settlement, qint64 deadAtMs);
// Fills what the account says into the letter.
void readDeadLetterAccount(const QJsonObject &account, DeadLetter *letter);

} // namespace once
