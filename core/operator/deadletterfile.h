#pragma once

#include "model/deadletter.h"

#include <QByteArray>
#include <QList>
#include <QSaveFile>
#include <QString>

namespace once {

// The dead letters as a file for a spreadsheet or a ticket: JSON (an array of what
// DeadLetter::toJson() says, as `once dlq --json` words them) or CSV (one record each,
// the same fields in the same order, formula-safe as csvtext.h quotes them). Payloads
// stay out: they may be large, and they hold what the users wrote.
//
// Written a batch at a time, so that a file of a hundred thousand letters never has them
// all in memory, and into a temporary file (QSaveFile) that takes the name only at
// commit(): an export cancelled or failed half way leaves nothing under the name, and a
// file already there stays as it was.
class DeadLetterFile final
{
    Q_DISABLE_COPY_MOVE(DeadLetterFile)

public:
    enum class Format { Csv, Json };
    // CSV for a .csv name (any case), JSON otherwise.
    static Format formatFor(const QString &path);
    // The whole file for these letters at once, byte for byte what the batches add up to.
    static QByteArray render(const QList<DeadLetter> &letters, Format format);

    explicit DeadLetterFile(const QString &path);
    ~DeadLetterFile(); // a file not committed goes

    // Opens the temporary file and writes what comes before the letters.
    bool open(QString *error);
    bool write(const QList<DeadLetter> &letters, QString *error);
    // Ends the file and gives it its name.
    bool commit(QString *error);
    // Drops the temporary file.
    void cancel();

    QString path() const { return m_file.fileName(); }
    Format format() const { return m_format; }
    int written() const { return m_written; }

private:
    bool put(const QByteArray &bytes, QString *error);

    QSaveFile m_file;
    Format m_format;
    int m_written = 0;
};

} // namespace once
