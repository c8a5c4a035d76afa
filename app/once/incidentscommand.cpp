// once incidents: the alerts' lives as the store keeps them (once watch records them),
// what operators do about them, and the report of one.
#include "cli.h"

#include "alerting/incidentreport.h"
#include "alerting/incidents.h"
#include "operator/operations.h"
#include "store/store.h"
#include "text/jsonvalues.h"
#include "text/quantities.h"

#include <QDateTime>
#include <QJsonArray>
#include <QSaveFile>

#include <algorithm>

namespace once::cli {

namespace {

const QString ListSynopsis = QStringLiteral("[ack|resolve|note|report ID]");

QString statusOf(const Incident &incident)
{
    return !incident.isOpen()   ? QStringLiteral("resolved")
           : incident.ackedAtMs ? QStringLiteral("acknowledged")
                                : QStringLiteral("open");
}

// "resolved 2026-12-06T18:02:00.000Z (4 min)", "open for 12 min"
QString endOf(const Incident &incident, qint64 nowMs)
{
    if (incident.isOpen())
        return QStringLiteral("open for %1").arg(formatDuration(nowMs - incident.startedAtMs));
    return QStringLiteral("resolved %1 (%2)%3")
        .arg(formatTime(incident.resolvedAtMs), formatDuration(incident.resolvedAtMs - incident.startedAtMs),
             incident.resolvedBy.isEmpty() ? QString() : QStringLiteral(" by %1").arg(incident.resolvedBy));
}

std::optional<qint64> incidentId(Command &command, const QString &text)
{
    bool ok = false;
    const qint64 id = text.toLongLong(&ok);
    if (!ok || id <= 0) {
        command.usageError(
            QStringLiteral("\"%1\" is not an incident id (a whole number, as once incidents lists them)")
                .arg(text.left(40)));
        return std::nullopt;
    }
    return id;
}

// The note, one line of at most MaxReasonLength characters; nullopt after a usage error.
std::optional<QString> noteOption(Command &command)
{
    const QString note = command.parser().value(QStringLiteral("note")).trimmed();
    if (std::any_of(note.cbegin(), note.cend(),
                    [](QChar c) { return c.category() == QChar::Other_Control; })) {
        command.usageError(QStringLiteral("--note must be one line of text, without control characters"));
        return std::nullopt;
    }
    if (note.size() > MaxReasonLength) {
        command.usageError(QStringLiteral("--note is longer than %1 characters").arg(MaxReasonLength));
        return std::nullopt;
    }
    return note;
}

int list(Command &command, Store &store)
{
    const auto limit = command.parser().isSet(QStringLiteral("limit"))
                           ? command.integer(QStringLiteral("limit"), 1, 100000)
                           : std::optional<qint64>(50);
    if (!limit)
        return Usage;
    QString error;
    const auto incidents = Incidents(store.database()).list(int(*limit), &error);
    if (!incidents)
        return failure(error);
    if (command.parser().isSet(QStringLiteral("json"))) {
        printJsonArray(*incidents);
        return Ok;
    }
    if (incidents->isEmpty()) {
        printLine(QStringLiteral("no incident on this store (once watch records them)"));
        return Ok;
    }
    const qint64 now = QDateTime::currentMSecsSinceEpoch();
    printLine(QStringLiteral("%1  %2  %3  %4  %5  %6  %7  %8")
                  .arg(QStringLiteral("ID"), -6)
                  .arg(QStringLiteral("STATUS"), -12)
                  .arg(QStringLiteral("SEVERITY"), -8)
                  .arg(QStringLiteral("RULE"), -21)
                  .arg(QStringLiteral("PARTNER"), -16)
                  .arg(QStringLiteral("STARTED"), -24)
                  .arg(QStringLiteral("RESOLVED/DURATION"), -42)
                  .arg(QStringLiteral("SUMMARY")));
    for (const Incident &incident : *incidents)
        printLine(QStringLiteral("%1  %2  %3  %4  %5  %6  %7  %8")
                      .arg(QString::number(incident.id), -6)
                      .arg(statusOf(incident), -12)
                      .arg(alertSeverityName(incident.severity), -8)
                      .arg(alertRuleName(incident.rule), -21)
                      .arg(incident.partner.isEmpty() ? QStringLiteral("-") : incident.partner, -16)
                      .arg(formatTime(incident.startedAtMs), -24)
                      .arg(endOf(incident, now), -42)
                      .arg(incident.summary));
    return Ok;
}

int report(Command &command, Store &store, qint64 id)
{
    const QString output = command.parser().value(QStringLiteral("output"));
    QString format = command.parser().value(QStringLiteral("format")).toLower();
    if (format.isEmpty())
        format = output.endsWith(QLatin1String(".json"), Qt::CaseInsensitive) ? QStringLiteral("json")
                                                                              : QStringLiteral("markdown");
    if (format == QLatin1String("md"))
        format = QStringLiteral("markdown");
    if (format != QLatin1String("markdown") && format != QLatin1String("json"))
        return command.usageError(QStringLiteral("--format must be markdown or json"));
    QString error;
    const auto built = buildIncidentReport(store.database(), store.inspector(), id,
                                           QDateTime::currentMSecsSinceEpoch(), &error);
    if (!built)
        return failure(error.isEmpty() ? QStringLiteral("no incident %1 on this store").arg(id) : error);
    const QByteArray text = format == QLatin1String("json")
                                ? QJsonDocument(built->toJson()).toJson(QJsonDocument::Indented)
                                : built->toMarkdown().toUtf8();
    if (output.isEmpty()) {
        std::fwrite(text.constData(), 1, size_t(text.size()), stdout);
        return Ok;
    }
    // The file takes its name only once whole: a failed write leaves the old one.
    QSaveFile file(output);
    if (!file.open(QIODevice::WriteOnly) || file.write(text) != text.size() || !file.commit())
        return failure(QStringLiteral("cannot write %1: %2").arg(output, file.errorString()));
    printLine(QStringLiteral("report of incident %1 written to %2").arg(id).arg(output));
    return Ok;
}

} // namespace

int runIncidents(const QStringList &arguments)
{
    Command command(
        QStringLiteral("incidents"),
        QStringLiteral("Lists the incidents once watch recorded, open ones first, then the latest "
                       "resolved. ack, note and resolve ID act on one (audited, with --note); report ID "
                       "writes its report (timeline, what it touched, what operators did) as Markdown "
                       "or JSON."),
        ListSynopsis);
    auto &parser = command.parser();
    parser.addOption({QStringLiteral("json"), QStringLiteral("List as JSON.")});
    parser.addOption({QStringLiteral("limit"), QStringLiteral("List at most N incidents (default 50)."),
                      QStringLiteral("N")});
    parser.addOption(
        {QStringLiteral("note"),
         QStringLiteral("With ack, resolve or note: a few words for the incident and the audit log."),
         QStringLiteral("TEXT")});
    parser.addOption({QStringLiteral("format"), QStringLiteral("With report: markdown (default) or json."),
                      QStringLiteral("FORMAT")});
    parser.addOption(
        {QStringLiteral("output"),
         QStringLiteral("With report: write it to FILE (json for a .json name) instead of printing it."),
         QStringLiteral("FILE")});
    parser.addOption({QStringLiteral("read-only"),
                      QStringLiteral("Open the store read-only: list and report, never change it.")});
    if (const int exit = command.parse(arguments); exit >= 0)
        return exit;
    const QStringList positional = parser.positionalArguments();
    const QString verb = positional.value(0);
    enum class Verb
    {
        List,
        Act,
        Report
    };
    Verb what = Verb::List;
    Incidents::Action action = Incidents::Action::Note;
    if (verb.isEmpty()) {
        what = Verb::List;
    } else if (verb == QLatin1String("ack") || verb == QLatin1String("acknowledge")) {
        what = Verb::Act;
        action = Incidents::Action::Acknowledge;
    } else if (verb == QLatin1String("resolve")) {
        what = Verb::Act;
        action = Incidents::Action::Resolve;
    } else if (verb == QLatin1String("note")) {
        what = Verb::Act;
        action = Incidents::Action::Note;
    } else if (verb == QLatin1String("report")) {
        what = Verb::Report;
    } else {
        return command.usageError(
            QStringLiteral("unknown action \"%1\": ack, resolve, note or report").arg(verb.left(40)));
    }
    if (what == Verb::List && positional.size() > 0)
        return command.usageError(QStringLiteral("give ack, resolve, note or report with an incident id"));
    if (what != Verb::List && positional.size() != 2)
        return command.usageError(QStringLiteral("give one incident id: once incidents %1 ID").arg(verb));
    if (what != Verb::Act && parser.isSet(QStringLiteral("note")))
        return command.usageError(QStringLiteral("--note goes with ack, resolve or note"));
    if (what != Verb::Report &&
        (parser.isSet(QStringLiteral("format")) || parser.isSet(QStringLiteral("output"))))
        return command.usageError(QStringLiteral("--format and --output go with report"));
    if (what != Verb::List && (parser.isSet(QStringLiteral("json")) || parser.isSet(QStringLiteral("limit"))))
        return command.usageError(
            QStringLiteral("--json and --limit go with the list (report ID --format json)"));
    std::optional<qint64> id;
    if (what != Verb::List) {
        id = incidentId(command, positional.at(1));
        if (!id)
            return Usage;
    }
    const auto note = noteOption(command);
    if (!note)
        return Usage;
    if (what == Verb::Act && action == Incidents::Action::Note && note->isEmpty())
        return command.usageError(QStringLiteral("a note needs text: once incidents note ID --note TEXT"));

    if (what != Verb::Act) {
        const auto store = command.openStore(Command::Access::ReadOnly);
        if (!store)
            return Failure;
        return what == Verb::List ? list(command, *store) : report(command, *store, *id);
    }
    const QString refusal =
        QStringLiteral("incidents can be listed and reported here, not acknowledged, noted or resolved");
    if (parser.isSet(QStringLiteral("read-only")))
        return failure(QStringLiteral("the store is open read-only (--read-only): %1").arg(refusal));
    // As permitted: a role or a file this user may only read is said so, in one line,
    // rather than failing at the first write.
    QString error;
    const auto store = Store::open(command.storeUrl(), &error, Database::Access::AsPermitted);
    if (!store)
        return failure(error);
    if (store->database().isReadOnly())
        return failure(QStringLiteral("the store is read-only (%1): %2")
                           .arg(store->database().readOnlyReason(), refusal));
    if (!store->operations().actOnIncident(*id, action, *note, &error))
        return failure(error);
    switch (action) {
    case Incidents::Action::Acknowledge:
        printLine(QStringLiteral("incident %1 acknowledged by %2").arg(*id).arg(store->operations().actor()));
        break;
    case Incidents::Action::Resolve:
        printLine(QStringLiteral("incident %1 resolved by %2").arg(*id).arg(store->operations().actor()));
        break;
    case Incidents::Action::Note:
        printLine(QStringLiteral("note added to incident %1").arg(*id));
        break;
    }
    return Ok;
}

} // namespace once::cli
