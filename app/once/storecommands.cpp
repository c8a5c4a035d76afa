// The subcommands that read or change a store without running a worker.
#include "cli.h"

#include "queues/brokerqueue.h"
#include "operator/eventverdict.h"
#include "operator/operations.h"
#include "operator/redriverun.h"
#include "store/ledger.h"
#include "model/clock.h"
#include "model/reminder.h"
#include "store/store.h"
#include "text/quantities.h"

#include <QDateTime>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFile>
#include <QJsonArray>
#include <QThread>

#include <algorithm>
#include <cstdio>
#include <limits>

namespace once::cli {

namespace {

QString or_(const QString &text, const QString &fallback)
{
    return text.isEmpty() ? fallback : text;
}

QString describe(const EventRow &row)
{
    // One multi-argument arg(): a value substituted first must never be read as a
    // placeholder by the next call (a key holds "%2B", "%3A", "%20").
    return QStringLiteral("%1  %2  user=%3 reminder=%4 sends=%5%6")
        .arg(row.state.leftJustified(9), QString::fromLatin1(row.sendKey), row.userId, row.reminderId,
             QString::number(row.sends),
             row.duplicates ? QStringLiteral(" duplicates_suppressed=%1").arg(row.duplicates) : QString());
}

// A broker filters nothing itself: list its dead letters and filter here.
std::optional<QList<DeadLetter>> brokerDeadLetters(BrokerQueue &broker, const DeadLetterFilter &filter, QString *error)
{
    auto letters = broker.deadLetters(std::numeric_limits<int>::max(), error);
    if (letters)
        letters->removeIf([&filter](const DeadLetter &letter) { return !filter.matches(letter); });
    return letters;
}

// "400 dead letters: 360 would be sent, 20 already applied (suppressed as duplicates), 20
// expired (skipped: --include-expired puts them back)".
QString redrivePreviewLine(const RedrivePreview &preview, bool includeExpired)
{
    QString line = QStringLiteral("%1 dead letters: %2 would be sent, %3 already applied (suppressed as duplicates), "
                                  "%4 expired")
                       .arg(preview.total)
                       .arg(preview.wouldSend)
                       .arg(preview.alreadyApplied)
                       .arg(preview.expired);
    if (preview.expired > 0)
        line += includeExpired ? QStringLiteral(" (put back: workers settle them expired, unsent)")
                               : QStringLiteral(" (skipped: --include-expired puts them back)");
    return line;
}

// A message that never became an event (invalid, refused before its claim) is only a dead
// letter: where a search finds no event, "not found" must not read as "never received".
// ", but 1 dead letter matches: once dlq --search \"T\"", or nothing.
QString deadLetterHint(Store &store, const QString &text)
{
    DeadLetterFilter filter;
    filter.text = text;
    QString error;
    const auto counts = store.inspector().countDeadLetters(filter, 0, &error);
    const qint64 letters = counts ? counts->tally().letters : 0;
    if (letters == 0)
        return QString();
    return QStringLiteral(", but %1 dead letter%2: once dlq --search %3")
        .arg(letters)
        .arg(letters == 1 ? QStringLiteral(" matches") : QStringLiteral("s match"),
             QString::fromUtf8(jsonString(text.trimmed())));
}

void addReasonOption(QCommandLineParser &parser)
{
    parser.addOption({QStringLiteral("reason"),
                      QStringLiteral("Why, in a few words, for the audit log and each event's history."),
                      QStringLiteral("TEXT")});
}

// The operator's reason, one line of at most MaxReasonLength characters; nullopt after a
// usage error.
std::optional<QString> reasonOption(Command &command)
{
    const QString reason = command.parser().value(QStringLiteral("reason")).trimmed();
    const bool control = std::any_of(reason.cbegin(), reason.cend(), [](QChar c) { return c.category() == QChar::Other_Control; });
    if (control) {
        command.usageError(QStringLiteral("--reason must be one line of text, without control characters"));
        return std::nullopt;
    }
    if (reason.size() > MaxReasonLength) {
        command.usageError(QStringLiteral("--reason is longer than %1 characters").arg(MaxReasonLength));
        return std::nullopt;
    }
    return reason;
}

} // namespace

int runInit(const QStringList &arguments)
{
    Command command(QStringLiteral("init"),
                    QStringLiteral("Creates the store, or upgrades its schema. With --queue, also declares the "
                                   "broker's queues (RabbitMQ: exchange, main, retry and dead-letter queues; Redis: "
                                   "stream and consumer group; SQS: the queue and its dead-letter queue; Pub/Sub: "
                                   "topics and subscriptions); safe to run again."),
                    {});
    auto &parser = command.parser();
    parser.addOption({QStringLiteral("max-attempts"),
                      QStringLiteral("With --queue: the workers' --max-attempts, from which SQS's and Pub/Sub's own "
                                     "delivery limit is set."),
                      QStringLiteral("N"), QString::number(QueueTopology().maxAttempts)});
    parser.addOption({QStringLiteral("lease"),
                      QStringLiteral("With --queue: the workers' --lease in seconds, Pub/Sub's ack deadline."),
                      QStringLiteral("S"), QString::number(QueueTopology().leaseMs / 1000)});
    command.addQueueOption();
    if (const int exit = command.parse(arguments); exit >= 0)
        return exit;
    const auto maxAttempts = command.integer(QStringLiteral("max-attempts"), 1, 100);
    const auto lease = command.integer(QStringLiteral("lease"), 1, 12 * 3600);
    if (!maxAttempts || !lease)
        return Usage;
    const auto store = command.openStore();
    if (!store)
        return Failure;
    // An open reads little of the file: a store corrupt further in would be called ready.
    QString integrityError;
    if (!store->database().checkIntegrity(&integrityError))
        return failure(integrityError);
    printLine(QStringLiteral("store %1 ready (schema version %2)")
                  .arg(store->database().location().displayName(), QString::number(store->database().schemaVersion())));
    if (command.queueUrl().isEmpty())
        return Ok;
    const auto broker = command.openBrokerQueue();
    if (!broker)
        return Failure;
    QueueTopology topology;
    topology.maxAttempts = int(*maxAttempts);
    topology.leaseMs = *lease * 1000;
    QString error;
    if (!broker->declareTopology(topology, &error))
        return failure(error);
    printLine(QStringLiteral("queue %1 ready at %2").arg(broker->location().displayName(), broker->location().brokerName()));
    if (const QString described = broker->describeTopology(topology); !described.isEmpty())
        printLine(described);
    return Ok;
}

int runEnqueue(const QStringList &arguments)
{
    Command command(QStringLiteral("enqueue"),
                    QStringLiteral("Puts reminders on the queue: one JSON object per line, from FILE or standard "
                                   "input. Every rejected line is reported with its number and reason; the valid "
                                   "ones are enqueued, and the exit status is 1 if any line was rejected."),
                    QStringLiteral("[FILE|-]"));
    auto &parser = command.parser();
    parser.addOption({QStringLiteral("delay"), QStringLiteral("Deliver no earlier than S seconds from now (at most 7 days)."),
                      QStringLiteral("S"), QStringLiteral("0")});
    parser.addOption({QStringLiteral("unchecked"),
                      QStringLiteral("Enqueue lines as they are, without validation (rehearsing bad producers).")});
    command.addQueueOption();
    if (const int exit = command.parse(arguments); exit >= 0)
        return exit;
    const auto delay = command.integer(QStringLiteral("delay"), 0, MaxDelaySeconds);
    if (!delay)
        return Usage;
    const QStringList files = parser.positionalArguments();
    if (files.size() > 1)
        return command.usageError(QStringLiteral("give one FILE, or - for standard input"));
    QFile input;
    const QString name = files.value(0, QStringLiteral("-"));
    if (name == QLatin1String("-") ? !input.open(stdin, QIODevice::ReadOnly) : (input.setFileName(name), !input.open(QIODevice::ReadOnly)))
        return failure(QStringLiteral("cannot read %1: %2").arg(name, input.errorString()));
    // A broker's queue needs no store: producers publish without touching the ledger.
    std::unique_ptr<Store> store;
    std::unique_ptr<BrokerQueue> broker;
    if (command.queueUrl().isEmpty())
        store = command.openStore();
    else
        broker = command.openBrokerQueue();
    if (!store && !broker)
        return Failure;
    MessageQueue &queue = broker ? static_cast<MessageQueue &>(*broker) : store->queue();

    const bool unchecked = parser.isSet(QStringLiteral("unchecked"));
    QList<OutgoingMessage> batch;
    qint64 lineNumber = 0, accepted = 0, rejected = 0;
    const auto flushBatch = [&]() {
        QString error;
        if (!batch.isEmpty() && !queue.enqueue(batch, &error)) {
            failure(QStringLiteral("enqueue failed after %1 reminders: %2").arg(accepted).arg(error));
            return false;
        }
        accepted += batch.size();
        batch.clear();
        return true;
    };
    while (!input.atEnd()) {
        // Read a bounded line so that one huge line cannot exhaust memory: the largest
        // message and a CRLF after it (readLine's limit counts a terminating NUL too).
        QByteArray line = input.readLine(MaxMessageBytes + 3);
        ++lineNumber;
        // The limit is the message's, without its line ending.
        const bool ended = line.endsWith('\n');
        if (ended)
            line.chop(line.endsWith("\r\n") ? 2 : 1);
        const bool overLong = line.size() > MaxMessageBytes;
        while (overLong && !ended && !input.atEnd()) {
            const QByteArray rest = input.readLine(1 << 20);
            if (rest.endsWith('\n'))
                break;
        }
        if (overLong) {
            std::fprintf(stderr, "line %lld: message is over the 256 KiB limit (%lld bytes)\n", lineNumber,
                         qint64(MaxMessageBytes));
            ++rejected;
            continue;
        }
        line = line.trimmed();
        if (line.isEmpty())
            continue;
        if (unchecked) {
            batch.append(OutgoingMessage{line, {}, {}, *delay * 1000, 0});
        } else {
            const auto parsed = parseReminder(line);
            if (!parsed.reminder) {
                std::fprintf(stderr, "line %lld: %s\n", lineNumber, qPrintable(parsed.error));
                ++rejected;
                continue;
            }
            batch.append(OutgoingMessage{line, parsed.reminder->sendKey, parsed.reminder->eventId, *delay * 1000, 0});
        }
        if (batch.size() >= 2000 && !flushBatch())
            return Failure;
    }
    if (!flushBatch())
        return Failure;
    std::fprintf(stderr, "enqueued %lld, rejected %lld\n", accepted, rejected);
    return rejected ? Failure : Ok;
}

int runStats(const QStringList &arguments)
{
    Command command(QStringLiteral("stats"), QStringLiteral("Queue and ledger counts."), {});
    command.parser().addOption({QStringLiteral("json"), QStringLiteral("Print JSON.")});
    command.addQueueOption();
    if (const int exit = command.parse(arguments); exit >= 0)
        return exit;
    const auto store = command.openStore(Command::Access::ReadOnly);
    if (!store)
        return Failure;
    QString error;
    auto stats = store->inspector().stats(&error);
    if (!stats)
        return failure(error);
    std::unique_ptr<BrokerQueue> broker;
    if (!command.queueUrl().isEmpty()) {
        broker = command.openBrokerQueue();
        if (!broker)
            return Failure;
        const auto counts = broker->counts(&error);
        if (!counts)
            return failure(error);
        stats->queue = *counts;
    }
    QJsonObject json = stats->toJson();
    if (broker) {
        json.insert(QStringLiteral("queue_at"), broker->location().displayName());
        if (!stats->queue.unavailable.isEmpty())
            json.insert(QStringLiteral("queue_unavailable"), stats->queue.unavailable);
    }
    if (command.parser().isSet(QStringLiteral("json"))) {
        printJson(QJsonDocument(json));
        return Ok;
    }
    for (auto it = json.begin(); it != json.end(); ++it) {
        const QString value = it.key() == QLatin1String("partitions") ? describePartitionLags(stats->queue.partitions)
                                                                       : it.value().toVariant().toString();
        printLine(QString(it.key() + QLatin1Char(':')).leftJustified(24) + QLatin1Char(' ') + value);
    }
    return Ok;
}

int runHistory(const QStringList &arguments)
{
    Command command(QStringLiteral("history"),
                    QStringLiteral("The whole story of one event: every delivery, claim, send and ack."),
                    QStringLiteral("KEY|EVENT_ID"));
    command.parser().addOption({QStringLiteral("json"), QStringLiteral("Print JSON.")});
    if (const int exit = command.parse(arguments); exit >= 0)
        return exit;
    if (command.parser().positionalArguments().size() != 1)
        return command.usageError(QStringLiteral("give one send key or event id"));
    const auto store = command.openStore(Command::Access::ReadOnly);
    if (!store)
        return Failure;
    QString error;
    const QString keyOrEventId = command.parser().positionalArguments().constFirst();
    const auto event = store->inspector().event(keyOrEventId, &error);
    if (!event)
        return failure(error + deadLetterHint(*store, keyOrEventId));
    const auto attempts = store->inspector().attempts(event->sendKey, &error);
    if (!attempts)
        return failure(error);
    const Verdict verdict = eventVerdict(*event, *attempts);
    if (command.parser().isSet(QStringLiteral("json"))) {
        QJsonObject json = event->toJson();
        json.insert(QStringLiteral("verdict"), verdict.text);
        json.insert(QStringLiteral("verdict_kind"), verdictKindName(verdict.kind));
        json.insert(QStringLiteral("customer_text"), verdict.customerText);
        json.insert(QStringLiteral("possible_effects"), verdict.possibleEffects);
        QJsonArray rows;
        for (const auto &attempt : *attempts)
            rows.append(attemptToJson(attempt));
        json.insert(QStringLiteral("attempts"), rows);
        printJson(QJsonDocument(json));
        return Ok;
    }
    printLine(describe(*event));
    printLine(QStringLiteral("  verdict: ") + verdict.text);
    printLine(QStringLiteral("  for the customer: ") + verdict.customerText);
    for (const auto &attempt : *attempts) {
        QString line = QStringLiteral("  %1  %2 %3").arg(formatTime(attempt.atMs), attempt.step, attempt.outcome);
        if (attempt.step == QLatin1String("operator"))
            line += QStringLiteral("  by=%1%2").arg(or_(attempt.workerId, QStringLiteral("-")),
                                                   attempt.auditId ? QStringLiteral(" audit=%1").arg(attempt.auditId) : QString());
        else if (!attempt.messageId.isEmpty())
            line += QStringLiteral("  message=%1 event=%2 delivery=%3 worker=%4")
                        .arg(attempt.messageId, or_(attempt.eventId, QStringLiteral("-")),
                             QString::number(attempt.delivery), attempt.workerId);
        if (attempt.httpStatus)
            line += QStringLiteral("  http=%1").arg(attempt.httpStatus);
        if (attempt.latencyMs >= 0)
            line += QStringLiteral("  %1ms").arg(attempt.latencyMs);
        if (!attempt.providerRequestId.isEmpty())
            line += QStringLiteral("  request=%1").arg(attempt.providerRequestId);
        if (!attempt.error.isEmpty())
            line += QStringLiteral("  (%1)").arg(attempt.error);
        printLine(line);
    }
    return Ok;
}

int runEvents(const QStringList &arguments)
{
    Command command(QStringLiteral("events"), QStringLiteral("Lists events, newest first."), {});
    auto &parser = command.parser();
    parser.addOption({QStringLiteral("user"), QStringLiteral("Only this user's events."), QStringLiteral("U")});
    parser.addOption(
        {QStringLiteral("search"),
         QStringLiteral("Events with this user id, destination, reminder id, send key or event id "
                        "(\"prefix*\" for a start, \"body:text\" for text in the message); "
                        "dead letters that match are counted too."),
         QStringLiteral("T")});
    parser.addOption({QStringLiteral("state"),
                      QStringLiteral("Only events in state S: claimed, retrying, applied, in_doubt, dead, expired; or "
                                     "several-effects (two or more partner calls that may each have acted, at a "
                                     "partner not recorded as honouring Idempotency-Key), or unanswered (a call "
                                     "left without an answer)."),
                      QStringLiteral("S")});
    parser.addOption({QStringLiteral("since"),
                      QStringLiteral("Only events with something in their history at or after T (RFC 3339)."),
                      QStringLiteral("T")});
    parser.addOption({QStringLiteral("until"),
                      QStringLiteral("Only events with something in their history before T (RFC 3339)."),
                      QStringLiteral("T")});
    parser.addOption({QStringLiteral("day"),
                      QStringLiteral("Only events with something in their history on day D (YYYY-MM-DD, this "
                                     "computer's zone)."),
                      QStringLiteral("D")});
    parser.addOption({QStringLiteral("most-sends"), QStringLiteral("The events with the most partner calls first.")});
    parser.addOption({QStringLiteral("limit"), QStringLiteral("At most N events."), QStringLiteral("N"), QStringLiteral("100")});
    parser.addOption({QStringLiteral("json"), QStringLiteral("Print JSON.")});
    if (const int exit = command.parse(arguments); exit >= 0)
        return exit;
    const auto limit = command.integer(QStringLiteral("limit"), 1, 1000000);
    if (!limit)
        return Usage;
    EventFilter filter;
    const QString state = parser.value(QStringLiteral("state"));
    const QStringList states{LedgerState::Claimed, LedgerState::Retrying, LedgerState::Applied, LedgerState::InDoubt,
                             LedgerState::Dead, LedgerState::Expired, QStringLiteral("several-effects"),
                             QStringLiteral("unanswered")};
    if (!state.isEmpty() && !states.contains(state))
        return command.usageError(QStringLiteral("unknown state \"%1\" (one of %2)").arg(state, states.join(QLatin1String(", "))));
    if (state == QLatin1String("several-effects"))
        filter.calls = EventFilter::Calls::SeveralEffects;
    else if (state == QLatin1String("unanswered"))
        filter.calls = EventFilter::Calls::Unanswered;
    else
        filter.state = state;
    for (const QString &name : {QStringLiteral("since"), QStringLiteral("until")}) {
        if (!parser.isSet(name))
            continue;
        const auto time = parseRfc3339(parser.value(name));
        if (!time)
            return command.usageError(QStringLiteral("--%1 needs an RFC 3339 time with an offset").arg(name));
        (name == QLatin1String("since") ? filter.sinceMs : filter.untilMs) = time->utc.toMSecsSinceEpoch();
    }
    if (parser.isSet(QStringLiteral("day"))) {
        if (parser.isSet(QStringLiteral("since")) || parser.isSet(QStringLiteral("until")))
            return command.usageError(QStringLiteral("give --day, or --since and --until, not both"));
        const QDate day = QDate::fromString(parser.value(QStringLiteral("day")), Qt::ISODate);
        if (!day.isValid())
            return command.usageError(QStringLiteral("--day needs a date as YYYY-MM-DD"));
        filter.sinceMs = day.startOfDay().toMSecsSinceEpoch();
        filter.untilMs = day.addDays(1).startOfDay().toMSecsSinceEpoch();
    }
    if (filter.sinceMs > 0 && filter.untilMs > 0 && filter.untilMs <= filter.sinceMs)
        return command.usageError(QStringLiteral("--until must be later than --since"));
    if (parser.isSet(QStringLiteral("most-sends")))
        filter.order = EventFilter::Order::MostSends;
    const auto store = command.openStore(Command::Access::ReadOnly);
    if (!store)
        return Failure;
    filter.userId = parser.value(QStringLiteral("user"));
    filter.text = parser.value(QStringLiteral("search"));
    filter.limit = int(*limit);
    QString error;
    const auto rows = store->inspector().events(filter, &error);
    if (!rows)
        return failure(error);
    if (parser.isSet(QStringLiteral("json")))
        printJsonArray(*rows);
    else
        for (const auto &row : *rows)
            printLine(describe(row));
    // On stderr, so that --json stays one document.
    if (rows->isEmpty() && EventSearch::parse(filter.text).kind != EventSearch::Kind::None)
        if (const QString hint = deadLetterHint(*store, filter.text); !hint.isEmpty())
            std::fprintf(stderr, "once: no events match%s\n", qPrintable(hint));
    return Ok;
}

int runDeadLetters(const QStringList &arguments)
{
    Command command(QStringLiteral("dlq"), QStringLiteral("Lists dead letters without consuming them."), {});
    auto &parser = command.parser();
    parser.addOption({QStringLiteral("error-class"), QStringLiteral("Only this error class."), QStringLiteral("C")});
    parser.addOption({QStringLiteral("search"),
                      QStringLiteral("Letters with this message id, send key or event id, or this user id, "
                                     "reminder id or destination in their message (\"prefix*\" for a start, "
                                     "\"body:text\" for text in the message), or this text in their error."),
                      QStringLiteral("T")});
    parser.addOption(
        {QStringLiteral("http-status"),
         QStringLiteral("Only letters the partner last answered with this HTTP status (401 apart "
                        "from 400)."),
         QStringLiteral("N")});
    parser.addOption({QStringLiteral("json"), QStringLiteral("Print JSON.")});
    command.addQueueOption();
    if (const int exit = command.parse(arguments); exit >= 0)
        return exit;
    DeadLetterFilter filter;
    filter.errorClass = parser.value(QStringLiteral("error-class"));
    filter.text = parser.value(QStringLiteral("search"));
    if (parser.isSet(QStringLiteral("http-status"))) {
        const auto status = command.integer(QStringLiteral("http-status"), 100, 599);
        if (!status)
            return Usage;
        filter.httpStatus = int(*status);
    }
    QString error;
    std::optional<QList<DeadLetter>> letters;
    if (command.queueUrl().isEmpty()) {
        const auto store = command.openStore(Command::Access::ReadOnly);
        if (!store)
            return Failure;
        letters = store->inspector().deadLetters(filter, &error);
    } else {
        const auto broker = command.openBrokerQueue();
        if (!broker)
            return Failure;
        letters = brokerDeadLetters(*broker, filter, &error);
        // The broker keeps the message; the store knows what became of its key and when
        // it expires. Without a store to ask, the broker's letters are still listed.
        QString storeError;
        const auto store = Store::open(command.storeUrl(), &storeError, Database::Access::ReadOnly);
        if (letters && store && !store->inspector().noteKeyStates(&*letters, &error))
            letters.reset();
    }
    if (!letters)
        return failure(error);
    if (parser.isSet(QStringLiteral("json"))) {
        printJsonArray(*letters);
        return Ok;
    }
    const qint64 now = nowMs();
    for (const auto &letter : *letters) {
        const QString expiry = deadLetterExpiryText(letter, now);
        printLine(QStringLiteral("%1  %2  %3  attempts=%4 redrives=%5  %6%7")
                      .arg(letter.id, or_(QString::fromLatin1(letter.sendKey), QStringLiteral("(no key)")),
                           letter.errorClass, QString::number(letter.attempts), QString::number(letter.redriveCount),
                           letter.lastError, expiry.isEmpty() ? QString() : QStringLiteral("  ") + expiry));
    }
    return Ok;
}

int runRedrive(const QStringList &arguments)
{
    Command command(QStringLiteral("redrive"),
                    QStringLiteral("Puts dead letters back on the queue, keeping their send key and event id. "
                                   "Audited."),
                    {});
    auto &parser = command.parser();
    parser.addOption({QStringLiteral("all"), QStringLiteral("Every dead letter.")});
    parser.addOption({QStringLiteral("key"), QStringLiteral("This send key (repeatable)."), QStringLiteral("K")});
    parser.addOption({QStringLiteral("error-class"), QStringLiteral("Dead letters of this class."), QStringLiteral("C")});
    parser.addOption({QStringLiteral("since"), QStringLiteral("Dead letters that died at or after T (RFC 3339)."),
                      QStringLiteral("T")});
    parser.addOption({QStringLiteral("until"), QStringLiteral("Dead letters that died at or before T (RFC 3339)."),
                      QStringLiteral("T")});
    parser.addOption({QStringLiteral("rate"),
                      QStringLiteral("At most N messages per second (0: no ceiling). Slower while the workers' "
                                     "partner throttles them; held while their breaker is open."),
                      QStringLiteral("N"), QStringLiteral("0")});
    parser.addOption({QStringLiteral("canary"),
                      QStringLiteral("Put N back first and wait until they are applied or failed; then the rest "
                                     "(none applied: stop)."),
                      QStringLiteral("N"), QStringLiteral("0")});
    parser.addOption({QStringLiteral("stop-after-failures"),
                      QStringLiteral("Stop once the redriven letters' sends failed N times (0: never)."),
                      QStringLiteral("N"), QStringLiteral("0")});
    parser.addOption({QStringLiteral("include-expired"),
                      QStringLiteral("Put back letters whose reminder has expired too (workers settle them "
                                     "expired, unsent); skipped otherwise.")});
    parser.addOption({QStringLiteral("dry-run"),
                      QStringLiteral("Say what would be sent, what is already applied and what has expired; move "
                                     "nothing.")});
    addReasonOption(parser);
    command.addQueueOption();
    if (const int exit = command.parse(arguments); exit >= 0)
        return exit;
    const auto rate = command.integer(QStringLiteral("rate"), 0, 1000000);
    if (!rate)
        return Usage;
    const auto canary = command.integer(QStringLiteral("canary"), 0, 1000000);
    if (!canary)
        return Usage;
    const auto stopAfterFailures = command.integer(QStringLiteral("stop-after-failures"), 0, 1000000);
    if (!stopAfterFailures)
        return Usage;
    DeadLetterFilter filter;
    const bool all = parser.isSet(QStringLiteral("all"));
    for (const auto &key : parser.values(QStringLiteral("key")))
        filter.sendKeys.append(key.toLatin1());
    filter.errorClass = parser.value(QStringLiteral("error-class"));
    if (parser.isSet(QStringLiteral("since"))) {
        const auto since = parseRfc3339(parser.value(QStringLiteral("since")));
        if (!since)
            return command.usageError(QStringLiteral("--since needs an RFC 3339 time with an offset"));
        filter.sinceMs = since->utc.toMSecsSinceEpoch();
    }
    if (parser.isSet(QStringLiteral("until"))) {
        const auto until = parseRfc3339(parser.value(QStringLiteral("until")));
        if (!until)
            return command.usageError(QStringLiteral("--until needs an RFC 3339 time with an offset"));
        filter.untilMs = until->utc.toMSecsSinceEpoch();
    }
    if (filter.sinceMs && filter.untilMs && filter.untilMs < filter.sinceMs)
        return command.usageError(QStringLiteral("--until is before --since"));
    const auto reason = reasonOption(command);
    if (!reason)
        return Usage;
    if (!all && filter.sendKeys.isEmpty() && filter.errorClass.isEmpty() && !filter.sinceMs && !filter.untilMs)
        return command.usageError(
            QStringLiteral("choose what to redrive: --all, --key, --error-class, --since or --until"));
    const bool dryRun = parser.isSet(QStringLiteral("dry-run"));
    const auto store = command.openStore(dryRun ? Command::Access::ReadOnly : Command::Access::ReadWrite);
    if (!store)
        return Failure;
    std::unique_ptr<BrokerQueue> broker;
    if (!command.queueUrl().isEmpty()) {
        broker = command.openBrokerQueue();
        if (!broker)
            return Failure;
    }
    RedriveOptions options;
    options.matching = filter;
    options.ceilingPerSecond = int(*rate);
    options.canary = int(*canary);
    options.stopAfterFailures = int(*stopAfterFailures);
    options.includeExpired = parser.isSet(QStringLiteral("include-expired"));
    options.reason = *reason;
    QString error;
    const auto preview = RedriveRun::preview(*store, broker.get(), nullptr, options, true, &error);
    if (!preview)
        return failure(error);
    if (dryRun) {
        const qint64 now = nowMs();
        for (const auto &letter : preview->letters) {
            const QString what = letter.hasExpired(now)                        ? QStringLiteral("expired       ")
                                 : letter.keyState == LedgerState::Applied ? QStringLiteral("applied       ")
                                                                               : QStringLiteral("would redrive ");
            const QString expiry = letter.hasExpired(now)
                                       ? QStringLiteral("  (expired %1; would be %2 late)")
                                             .arg(formatTime(letter.expiresAtMs),
                                                  formatDuration(redriveLateness(letter.sendKey, now)))
                                       : QString();
            printLine(what + QStringLiteral("%1  %2  %3%4%5")
                                 .arg(letter.id, or_(QString::fromLatin1(letter.sendKey), QStringLiteral("(no key)")),
                                      letter.errorClass,
                                      letter.redriveCount
                                          ? QStringLiteral("  (redriven %1 times before)").arg(letter.redriveCount)
                                          : QString(),
                                      expiry));
        }
        printLine(QStringLiteral("dry run: ") + redrivePreviewLine(*preview, options.includeExpired));
        return Ok;
    }
    if (preview->expired > 0)
        printLine(redrivePreviewLine(*preview, options.includeExpired));
    // The keys when they were named, else the filter; the queue too, as the audit log
    // outlives the queue's URL. The same words as the console's.
    options.detail = describeRedrive(filter, preview->letters);
    if (broker)
        options.detail += QStringLiteral(" queue=") + broker->location().displayName();
    RedriveRun run(*store, broker.get(), nullptr, store->operations().actor(), options);
    QEventLoop loop;
    RedriveResult result;
    RedriveProgress::Phase shown = RedriveProgress::Phase::Moving;
    QObject::connect(&run, &RedriveRun::progressed, &loop, [&shown](const RedriveProgress &progress) {
        // A line when the run changes what it does: held, throttled, waiting for its canary.
        if (progress.phase == shown || progress.phase == RedriveProgress::Phase::Finished)
            return;
        shown = progress.phase;
        printLine(QStringLiteral("%1: %2 of %3 moved%4")
                      .arg(RedriveProgress::phaseName(progress.phase))
                      .arg(progress.moved)
                      .arg(progress.total)
                      .arg(progress.why.isEmpty() ? QString() : QStringLiteral("; ") + progress.why));
    });
    QObject::connect(&run, &RedriveRun::finished, &loop, [&](const RedriveResult &finished) {
        result = finished;
        loop.quit();
    });
    if (!run.start(&error))
        return failure(error);
    loop.exec();
    if (!result.ok())
        return failure(QStringLiteral("redrive stopped after %1 messages: %2").arg(result.moved).arg(result.error));
    printLine(result.summary());
    return result.stoppedBecause.isEmpty() ? Ok : Failure;
}

int runInDoubt(const QStringList &arguments)
{
    Command command(QStringLiteral("in-doubt"),
                    QStringLiteral("Lists events whose send outcome is unknown and that wait for an operator."), {});
    command.parser().addOption({QStringLiteral("json"), QStringLiteral("Print JSON.")});
    if (const int exit = command.parse(arguments); exit >= 0)
        return exit;
    const auto store = command.openStore(Command::Access::ReadOnly);
    if (!store)
        return Failure;
    QString error;
    const auto rows = store->inspector().inDoubt(&error);
    if (!rows)
        return failure(error);
    if (command.parser().isSet(QStringLiteral("json"))) {
        printJsonArray(*rows);
        return Ok;
    }
    for (const auto &row : *rows)
        printLine(QStringLiteral("%1  since %2  event=%3  %4; the partner: %5")
                      .arg(QString::fromLatin1(row.sendKey), formatTime(row.updatedAtMs), or_(row.eventId, QStringLiteral("-")),
                           row.whatIsKnown(), row.reconciliation));
    return Ok;
}

int runResolve(const QStringList &arguments)
{
    Command command(QStringLiteral("resolve"),
                    QStringLiteral("Decides an in-doubt event: resend with the same Idempotency-Key, or mark it "
                                   "delivered. Audited."),
                    QStringLiteral("KEY"));
    auto &parser = command.parser();
    parser.addOption({QStringLiteral("resend"), QStringLiteral("Queue it again under the same send key.")});
    parser.addOption({QStringLiteral("mark-delivered"), QStringLiteral("Record that the partner did deliver it.")});
    addReasonOption(parser);
    command.addQueueOption();
    if (const int exit = command.parse(arguments); exit >= 0)
        return exit;
    const auto reason = reasonOption(command);
    if (!reason)
        return Usage;
    if (parser.positionalArguments().size() != 1)
        return command.usageError(QStringLiteral("give one send key"));
    const bool resend = parser.isSet(QStringLiteral("resend"));
    if (resend == parser.isSet(QStringLiteral("mark-delivered")))
        return command.usageError(QStringLiteral("choose one of --resend and --mark-delivered"));
    const auto store = command.openStore();
    if (!store)
        return Failure;
    std::unique_ptr<BrokerQueue> broker;
    if (resend && !command.queueUrl().isEmpty()) {
        broker = command.openBrokerQueue();
        if (!broker)
            return Failure;
    }
    const QByteArray key = parser.positionalArguments().constFirst().toLatin1();
    QString error;
    const bool done = !resend ? store->operations().markDelivered(key, *reason, &error)
                      : broker ? store->operations().resend(*broker, key, *reason, &error)
                               : store->operations().resend(key, *reason, &error);
    if (!done)
        return failure(error);
    printLine(resend ? QStringLiteral("%1 queued again under the same key").arg(QString::fromLatin1(key))
                     : QStringLiteral("%1 marked delivered").arg(QString::fromLatin1(key)));
    return Ok;
}

int runPartners(const QStringList &arguments)
{
    Command command(QStringLiteral("partners"),
                    QStringLiteral("Lists the partners workers send to (a --partner URL, or a name from a partners "
                                   "file), their profile, their state as the workers last saw it (or paused), and "
                                   "whether each honours its idempotency key; with PARTNER and --honours-key, records "
                                   "it (audited). Every verdict on the store (console, `once history`) reads several "
                                   "calls with one key by it, and workers hold what is in doubt for a partner recorded "
                                   "as not. With PARTNER and --pause, every worker on the store stops sending to it "
                                   "within a second and keeps its reminders, unspent, until --resume (audited)."),
                    QStringLiteral("[PARTNER]"));
    auto &parser = command.parser();
    parser.addOption({QStringLiteral("honours-key"),
                      QStringLiteral("Record whether URL applies a repeated Idempotency-Key once: yes, no or unknown."),
                      QStringLiteral("ANSWER")});
    parser.addOption({QStringLiteral("pause"),
                      QStringLiteral("Pause PARTNER for every worker on the store: what is being sent finishes, nothing "
                                     "more goes until --resume, and its reminders wait without spending their tries.")});
    parser.addOption({QStringLiteral("resume"), QStringLiteral("Resume a paused PARTNER: its reminders go at its own pace.")});
    addReasonOption(parser);
    parser.addOption({QStringLiteral("json"), QStringLiteral("Print JSON.")});
    if (const int exit = command.parse(arguments); exit >= 0)
        return exit;
    const auto reason = reasonOption(command);
    if (!reason)
        return Usage;
    const QStringList positional = parser.positionalArguments();
    if (positional.size() > 1)
        return command.usageError(QStringLiteral("give at most one partner"));
    const bool setting = parser.isSet(QStringLiteral("honours-key"));
    const bool pausing = parser.isSet(QStringLiteral("pause"));
    const bool resuming = parser.isSet(QStringLiteral("resume"));
    if (int(setting) + int(pausing) + int(resuming) > 1)
        return command.usageError(QStringLiteral("choose one of --honours-key, --pause and --resume"));
    const bool changing = setting || pausing || resuming;
    if (changing != (positional.size() == 1))
        return command.usageError(
            QStringLiteral("give a partner with --honours-key, --pause or --resume, or neither to list"));
    if (!reason->isEmpty() && !pausing && !resuming)
        return command.usageError(QStringLiteral("--reason goes with --pause or --resume"));
    std::optional<KeyHonouring> honours;
    QString partner;
    if (setting) {
        honours = keyHonouringFromName(parser.value(QStringLiteral("honours-key")));
        if (!honours)
            return command.usageError(QStringLiteral("--honours-key must be yes, no or unknown"));
    }
    if (changing) {
        // A partners file's name ("texts"), or the URL a --partner worker names its partner by.
        const QString given = positional.constFirst();
        if (given.contains(QLatin1String("://")) || given.contains(QLatin1Char('/'))) {
            const QUrl url = QUrl::fromUserInput(given);
            if (!url.isValid() || url.host().isEmpty())
                return command.usageError(QStringLiteral("\"%1\" is not a partner URL").arg(given));
            if (!url.password().isEmpty() || !url.userName().isEmpty())
                return command.usageError(QStringLiteral("give the partner URL without credentials"));
            partner = partnerName(url);
        } else if (given.trimmed().isEmpty() || given.size() > 64 || given != given.trimmed()) {
            return command.usageError(QStringLiteral("a partner's name is 1 to 64 characters without leading or trailing spaces"));
        } else {
            partner = given;
        }
    }
    const auto store = command.openStore(changing ? Command::Access::ReadWrite : Command::Access::ReadOnly);
    if (!store)
        return Failure;
    QString error;
    if (setting) {
        if (!store->operations().setPartnerPolicy(partner, *honours, &error))
            return failure(error);
        printLine(QStringLiteral("%1 honours Idempotency-Key: %2").arg(partner, keyHonouringName(*honours)));
        return Ok;
    }
    if (pausing || resuming) {
        if (!store->operations().setPartnerPaused(partner, pausing, *reason, &error))
            return failure(error);
        const auto paused = store->inspector().pausedPartners(&error);
        if (!paused)
            return failure(error);
        const auto pause = std::find_if(paused->cbegin(), paused->cend(),
                                        [&](const PartnerPause &each) { return each.partner == partner; });
        printLine(pause != paused->cend()
                      ? QStringLiteral("%1 %2: workers send it nothing until `once partners %1 --resume`")
                            .arg(partner, pause->describe())
                      : QStringLiteral("%1 resumed: workers send its reminders at its own pace").arg(partner));
        return Ok;
    }
    const auto partners = store->inspector().partners(&error);
    if (!partners)
        return failure(error);
    if (parser.isSet(QStringLiteral("json"))) {
        printJsonArray(*partners);
        return Ok;
    }
    if (partners->isEmpty())
        printLine(QStringLiteral("no partner on record: no worker has run on this store"));
    for (const PartnerPolicy &policy : *partners) {
        QString line = QStringLiteral("%1  honours-key=%2").arg(policy.partner, keyHonouringName(policy.honoursKey));
        if (!policy.profile.isEmpty())
            line += QStringLiteral("  profile=%1").arg(policy.profile);
        if (!policy.state.isEmpty())
            line += QStringLiteral("  state=%1").arg(policy.state);
        if (!policy.setBy.isEmpty())
            line += QStringLiteral("  set by %1 at %2").arg(policy.setBy, formatTime(policy.setAtMs));
        if (policy.lastSeenMs > 0)
            line += QStringLiteral("  last worker heartbeat %1").arg(formatTime(policy.lastSeenMs));
        printLine(line);
    }
    return Ok;
}

} // namespace once::cli
