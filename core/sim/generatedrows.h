#pragma once

#include "sim/ledgergenerator.h"

#include <QString>
#include <QStringList>

namespace once {

// The statements that make a generated store's rows (see LedgerGenerator), in the
// store's dialect. Events are made a chunk at a time: stage() computes each event of the
// chunk once into a temporary table, "staged", with everything its rows are made of (its
// draws, ids, state, sends and times); the other statements read it, so that no row of
// the ledger is ever read back to make the history, dead letters and messages.
//
// Every value follows from the event's number and the seed, through hashes computed in
// the database; so do the counts of each state, exactly (see stage()).
class GeneratedRows final
{
public:
    GeneratedRows(bool postgres, const LedgerShape &shape);

    // Stages events first..last (events past the ledger's last are messages that no
    // worker has claimed yet).
    QString stage(qint64 first, qint64 last) const;
    QString dropStaged() const { return QStringLiteral("DROP TABLE staged"); }

    // From the staged events: the ledger's rows, the history the engine would have
    // written for each, the dead letters, and the messages still in the queue.
    QString ledgerRows() const;
    QString sendRows() const;
    QString retryRows() const;
    QString duplicateRows() const;
    QString closingRows() const;
    QString deadLetters() const;
    QString messagesInFlight() const;
    QString messagesWaiting() const;

    // The queue samples the workers wrote every five seconds over the whole span.
    QString queueSamples() const;
    // The ids of the workers the rows name.
    static QStringList workers();

private:
    QString format(const QString &pattern, const QStringList &arguments) const;
    QString hex(const QString &value, int width) const;
    QString bytes(const QString &text) const;
    QString sendKey() const;
    QString payload() const;

    bool m_postgres = false;
    LedgerShape m_shape;
};

} // namespace once
