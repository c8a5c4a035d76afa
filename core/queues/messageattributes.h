#pragma once

#include <QString>

// The message attributes once sets where a queue carries them (SQS, Pub/Sub): the same
// names at every such broker, so a message reads the same wherever it is listed.
namespace once::attribute {

inline const QString Id = QStringLiteral("once-id");                 // the id the ledger knows, kept through retries and redrives
inline const QString Redrives = QStringLiteral("once-redrives");     // how often an operator redrove it
inline const QString EnqueuedAt = QStringLiteral("once-enqueued-at"); // first enqueued, ms since the epoch
inline const QString VisibleAt = QStringLiteral("once-visible-at");  // not to be leased before, ms since the epoch
inline const QString Hold = QStringLiteral("once-hold");             // a delayed copy: held, not leased, when early
inline const QString Receives = QStringLiteral("once-receives");     // the deliveries of the copies before this one
inline const QString DeadLetter = QStringLiteral("once-dead-letter"); // on a dead letter: its account (deadletteraccount.h)

} // namespace once::attribute
