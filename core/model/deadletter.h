#pragma once

#include <QByteArray>
#include <QJsonObject>
#include <QList>
#include <QMap>
#include <QString>
#include <QStringList>

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
    // When its reminder stops being worth sending (its expires_at, or its scheduled time
    // plus its partner's expire_after, as the claim recorded it in the ledger); 0: never.
    qint64 expiresAtMs = 0;
    // Its key's state in the ledger now (LedgerState), empty when the ledger has no key:
    // "applied" means another delivery of the same reminder took effect, so a redrive of
    // this letter is suppressed as a duplicate.
    QString keyState;

    bool hasExpired(qint64 nowMs) const { return expiresAtMs > 0 && expiresAtMs <= nowMs; }
    QJsonObject toJson() const;
};

struct DeadLetterFilter
{
    QString errorClass;
    qint64 sinceMs = 0;           // dead at or after
    qint64 untilMs = 0;           // dead at or before (0: no end)
    QList<QByteArray> sendKeys;   // empty: any
    QStringList ids;              // message ids; empty: any
    // A search, read as EventSearch reads it: a message id, send key or event id whole (or
    // "prefix*"); a user id, reminder id or destination as the message holds it; "body:text"
    // anywhere in the message; and, besides, text anywhere in the last error, in any case
    // ("invalid phone", "401"). A message that never became an event (invalid, refused
    // before its claim) is found here by what support knows of it.
    QString text;
    // Only letters whose last error is the partner's answer with this status (0: any): a 401
    // (the partner refused our credentials, every letter alike) apart from a 400 (this
    // message). Read from the error text the worker wrote ("HTTP 401: …", or after
    // "gave up after N attempts: "), which is what a broker's letters carry too.
    int httpStatus = 0;
    int limit = -1;
    // The list's order is dead_at, then id: oldest first, or newest first.
    bool newestFirst = false;
    // Keyset paging: only letters after this one in the list's order (the last letter of
    // the page before; afterId empty: from the start). A page found through the dead_at
    // index, so that page 200 costs what page 1 does.
    qint64 afterDeadAtMs = 0;
    QString afterId;
    // A list shown to people leaves the payloads out (one may be 256 KiB); the one letter
    // an operator selects, a redrive and the API's list read them.
    bool withPayload = true;

    // Continues after this letter (the last of a page).
    void continueAfter(const DeadLetter &letter)
    {
        afterDeadAtMs = letter.deadAtMs;
        afterId = letter.id;
    }
    // The same letters walked from the start, oldest first, up to nowMs at the latest: a
    // walk (a redrive, an export) does not chase letters that die while it goes on.
    DeadLetterFilter walkUntil(qint64 nowMs) const;
    // For dead letters listed without SQL (at a broker); the cursor is not a condition.
    bool matches(const DeadLetter &letter) const;
    // Whether a comes before b in the list's order.
    bool listsBefore(const DeadLetter &a, const DeadLetter &b) const;
    // Whether a letter lies after the cursor (always, without one).
    bool isAfterCursor(const DeadLetter &letter) const;
};

// For a letter whose reminder has expired (hasExpired): "expired 2026-12-06T21:00:00.000Z
// (would be 3 h late)", how late a send now would be after its scheduled time; else empty.
// `once dlq` and the console's Dead letters page say it alike.
QString deadLetterExpiryText(const DeadLetter &letter, qint64 nowMs);

// Whether a letter's last error is the partner's answer with this HTTP status; the same
// test as the store's query makes (Inspector), for letters listed without SQL.
bool lastErrorHasHttpStatus(const QString &lastError, int httpStatus);
// A letter rejected with 401, 403 or 407: the partner refused our credentials, as it
// refused every reminder then. Such an answer is a partner-wide outage now (reminders
// wait it out); a letter that died of one before is no bad reminder, and goes through
// once the credential works.
bool diedOfRefusedCredentials(const DeadLetter &letter);
// Whether a letter matches a search (DeadLetterFilter::text), as the store's query finds
// it; the payload must be there (a broker's listing has it).
bool deadLetterMatchesSearch(const DeadLetter &letter, const QString &text);

// What is known about a set of dead letters without listing them: for a class combo, a
// count label and a redrive's preview.
struct DeadLetterTally
{
    qint64 letters = 0;
    qint64 redrivenBefore = 0;  // redriven before and died again
    qint64 firstSentBefore = 0; // first sent before the moment asked about (never sent: not counted)
    qint64 credentialsRefused = 0; // rejected for our credentials (diedOfRefusedCredentials)

    DeadLetterTally &operator+=(const DeadLetterTally &other)
    {
        letters += other.letters;
        redrivenBefore += other.redrivenBefore;
        firstSentBefore += other.firstSentBefore;
        credentialsRefused += other.credentialsRefused;
        return *this;
    }
};

struct DeadLetterCounts
{
    QMap<QString, DeadLetterTally> byClass;

    // Of one class, or of all (errorClass empty).
    DeadLetterTally tally(const QString &errorClass = QString()) const;
};

// The same questions answered over letters in memory (a broker's, which filters nothing
// itself), so that a broker's queue pages and counts like the store: the filter's page
// (its order, cursor and limit), and its counts by class.
QList<DeadLetter> deadLetterPage(const QList<DeadLetter> &letters, const DeadLetterFilter &filter);
DeadLetterCounts countDeadLetters(const QList<DeadLetter> &letters, const DeadLetterFilter &filter,
                                  qint64 firstSentBeforeMs);

} // namespace once
