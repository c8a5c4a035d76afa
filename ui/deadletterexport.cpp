#include "deadletterexport.h"

#include "csvtext.h"

#include <QJsonArray>
#include <QJsonDocument>

namespace once::ui {

QByteArray deadLettersToJson(const QList<DeadLetter> &letters)
{
    QJsonArray array;
    for (const DeadLetter &letter : letters)
        array.append(letter.toJson());
    return QJsonDocument(array).toJson(QJsonDocument::Indented);
}

QByteArray deadLettersToCsv(const QList<DeadLetter> &letters)
{
    // The JSON's field names, in its order, so that both files read alike.
    static const QStringList header{
        QStringLiteral("message_id"),       QStringLiteral("key"),          QStringLiteral("event_id"),
        QStringLiteral("error_class"),      QStringLiteral("last_error"),   QStringLiteral("attempts"),
        QStringLiteral("deliveries"),       QStringLiteral("redrives"),     QStringLiteral("first_attempt_at"),
        QStringLiteral("last_attempt_at"),  QStringLiteral("dead_at"),      QStringLiteral("enqueued_at"),
    };
    QString text = csvRecord(header);
    for (const DeadLetter &letter : letters) {
        text += csvRecord({
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
        });
    }
    return text.toUtf8();
}

bool writeDeadLetters(const QString &path, const QList<DeadLetter> &letters, QString *error)
{
    return writeWholeFile(path, isCsvPath(path) ? deadLettersToCsv(letters) : deadLettersToJson(letters), error);
}

} // namespace once::ui
