#include "operator/deadletterfile.h"

#include "text/csvtext.h"
#include "text/jsonvalues.h"

#include <QJsonDocument>

namespace once {

namespace {

QByteArray header(DeadLetterFile::Format format)
{
    switch (format) {
    case DeadLetterFile::Format::Csv: {
        // The JSON's field names, in its order, so that both files read alike.
        static const QStringList names{
            QStringLiteral("message_id"),      QStringLiteral("key"),        QStringLiteral("event_id"),
            QStringLiteral("error_class"),     QStringLiteral("last_error"), QStringLiteral("attempts"),
            QStringLiteral("deliveries"),      QStringLiteral("redrives"),   QStringLiteral("first_attempt_at"),
            QStringLiteral("last_attempt_at"), QStringLiteral("dead_at"),    QStringLiteral("enqueued_at"),
            QStringLiteral("expires_at"),      QStringLiteral("key_state"),
        };
        return csvRecord(names).toUtf8();
    }
    case DeadLetterFile::Format::Json:
        return QByteArrayLiteral("[\n");
    }
    Q_UNREACHABLE();
}

// The letters after `before` others, as the whole document would hold them: JSON in
// QJsonDocument's indented layout (each object a level in, commas between), so that the
// file reads as the one QJsonDocument wrote before it came in batches.
QByteArray records(const QList<DeadLetter> &letters, int before, DeadLetterFile::Format format)
{
    QByteArray bytes;
    for (const DeadLetter &letter : letters) {
        switch (format) {
        case DeadLetterFile::Format::Csv:
            bytes += csvRecord({
                                   letter.id,
                                   QString::fromLatin1(letter.sendKey),
                                   letter.eventId,
                                   letter.errorClass,
                                   letter.lastError,
                                   QString::number(letter.attempts),
                                   QString::number(letter.receiveCount),
                                   QString::number(letter.redriveCount),
                                   formatTime(letter.firstAttemptAtMs),
                                   formatTime(letter.lastAttemptAtMs),
                                   formatTime(letter.deadAtMs),
                                   formatTime(letter.enqueuedAtMs),
                                   formatTime(letter.expiresAtMs),
                                   letter.keyState,
                               })
                         .toUtf8();
            break;
        case DeadLetterFile::Format::Json: {
            if (before > 0)
                bytes += ",\n";
            // "{\n    \"key\": …\n}\n", each line a level in. Strings are escaped onto one
            // line each, so indenting by line is safe.
            const QByteArray object = QJsonDocument(letter.toJson()).toJson(QJsonDocument::Indented);
            const QList<QByteArray> lines = object.chopped(1).split('\n');
            for (qsizetype i = 0; i < lines.size(); ++i)
                bytes += (i > 0 ? QByteArrayLiteral("\n    ") : QByteArrayLiteral("    ")) + lines.at(i);
            break;
        }
        }
        ++before;
    }
    return bytes;
}

QByteArray footer(DeadLetterFile::Format format, int written)
{
    switch (format) {
    case DeadLetterFile::Format::Csv:
        return {};
    case DeadLetterFile::Format::Json:
        return written > 0 ? QByteArrayLiteral("\n]\n") : QByteArrayLiteral("]\n");
    }
    Q_UNREACHABLE();
}

} // namespace

DeadLetterFile::Format DeadLetterFile::formatFor(const QString &path)
{
    return isCsvPath(path) ? Format::Csv : Format::Json;
}

QByteArray DeadLetterFile::render(const QList<DeadLetter> &letters, Format format)
{
    return header(format) + records(letters, 0, format) + footer(format, int(letters.size()));
}

DeadLetterFile::DeadLetterFile(const QString &path) : m_file(path), m_format(formatFor(path)) {}

DeadLetterFile::~DeadLetterFile()
{
    cancel();
}

bool DeadLetterFile::open(QString *error)
{
    if (!m_file.open(QIODevice::WriteOnly)) {
        *error = m_file.errorString();
        return false;
    }
    return put(header(m_format), error);
}

bool DeadLetterFile::write(const QList<DeadLetter> &letters, QString *error)
{
    if (!put(records(letters, m_written, m_format), error))
        return false;
    m_written += int(letters.size());
    return true;
}

bool DeadLetterFile::commit(QString *error)
{
    if (!put(footer(m_format, m_written), error))
        return false;
    // QSaveFile flushes and syncs here: a full disk may show only now.
    if (!m_file.commit()) {
        *error = m_file.errorString();
        return false;
    }
    return true;
}

void DeadLetterFile::cancel()
{
    if (!m_file.isOpen())
        return;
    m_file.cancelWriting();
    m_file.commit(); // after cancelWriting: removes the temporary file, leaves the name alone
}

bool DeadLetterFile::put(const QByteArray &bytes, QString *error)
{
    // A write that falls short says nothing of why (a disk fills mid-write); the write of
    // the rest fails at once with the reason ("No space left on device").
    for (qint64 done = 0; done < bytes.size();) {
        const qint64 wrote = m_file.write(bytes.constData() + done, bytes.size() - done);
        if (wrote <= 0)
            break;
        done += wrote;
        if (done == bytes.size())
            return true;
    }
    if (bytes.isEmpty())
        return true;
    *error = m_file.errorString();
    // Nothing more goes in: the temporary file is dropped now rather than left to fill a disk.
    cancel();
    return false;
}

} // namespace once
