#include "cli.h"
#include "partneroptions.h"

#include "operator/inspector.h"
#include "operator/operations.h"
#include "partners/partnerlookups.h"
#include "store/store.h"

#include <QCoreApplication>
#include <QEventLoop>
#include <QJsonArray>
#include <QJsonObject>

namespace once::cli {

namespace {
QString lookupResultName(LookupResult::Kind kind)
{
    switch (kind) {
    case LookupResult::Kind::Found:
        return QStringLiteral("found");
    case LookupResult::Kind::NotFound:
        return QStringLiteral("not-found");
    case LookupResult::Kind::Failed:
        break;
    }
    return QStringLiteral("failed");
}
} // namespace

// Asks each partner with a lookup whether it has the reminders left in doubt with it,
// now, whatever their grace period: found is settled applied (the provider's message id
// kept), not found and unanswered stay in doubt, and the history says what was asked
// and answered.
int runReconcile(const QStringList &arguments)
{
    Command command(QStringLiteral("reconcile"),
                    QStringLiteral("Asks the partners that have a lookup (a webhook's \"lookup\", Postmark, "
                                   "SendGrid's Email Activity) whether they have the events left in doubt with them. "
                                   "Found: settled applied, with the provider's message id. Not found or no answer: "
                                   "left in doubt, with what was asked in its history. Audited."),
                    {});
    auto &parser = command.parser();
    parser.addOptions({
        {QStringLiteral("dry-run"), QStringLiteral("Ask, and say what would be settled, without writing anything.")},
        {QStringLiteral("json"), QStringLiteral("Print JSON.")},
    });
    addPartnerOptions(command, QStringLiteral("With --partners: only this partner of the file. Without: the one partner's URL, as `once worker --partner` takes it."));
    if (const int exit = command.parse(arguments); exit >= 0)
        return exit;
    const auto choice = choosePartners(command, PartnerWithFile::NamesOne);
    if (!choice)
        return Usage;
    const PartnersConfig &partners = choice->partners;
    const QString &only = choice->onlyNamed;
    const bool dryRun = parser.isSet(QStringLiteral("dry-run"));
    const auto store = command.openStore(dryRun ? Command::Access::ReadOnly : Command::Access::ReadWrite);
    if (!store)
        return Failure;
    QString error;
    const auto inDoubt = store->inspector().inDoubt(&error);
    if (!inDoubt)
        return failure(error);

    QList<QByteArray> keys;
    for (const EventRow &row : *inDoubt)
        keys.append(row.sendKey);
    const auto states = store->inspector().reconciliation(keys, &error);
    if (!states)
        return failure(error);

    QObject context;
    PartnerLookups lookups(partners);
    QJsonArray report;
    int found = 0;
    int asked = 0;
    for (qsizetype i = 0; i < inDoubt->size(); ++i) {
        const EventRow &row = inDoubt->at(i);
        const QString partner = lookups.partnerOf(row, states->at(i));
        if (!only.isEmpty() && partner != only)
            continue;
        QString why;
        PartnerSender *sender = lookups.lookupFor(partner, &why);
        if (!sender)
            continue;
        const PartnerSettings *settings = partners.find(partner);
        ++asked;
        LookupResult answer;
        QEventLoop wait;
        sender->lookUp(row.sendKey, &context, [&](const LookupResult &result) {
            answer = result;
            wait.quit();
        });
        wait.exec();
        if (answer.kind == LookupResult::Kind::Found)
            ++found;
        if (!dryRun && !store->operations().recordLookup(row.sendKey, settings->name, settings->profile, answer, &error))
            return failure(error);
        const QString result = lookupResultName(answer.kind);
        report.append(QJsonObject{{QStringLiteral("key"), QString::fromLatin1(row.sendKey)},
                                  {QStringLiteral("partner"), settings->name},
                                  {QStringLiteral("result"), result},
                                  {QStringLiteral("provider_message_id"), answer.providerMessageId},
                                  {QStringLiteral("error"), answer.error},
                                  {QStringLiteral("settled"), !dryRun && answer.kind == LookupResult::Kind::Found}});
        if (!parser.isSet(QStringLiteral("json")))
            printLine(QStringLiteral("%1  %2  %3%4").arg(QString::fromLatin1(row.sendKey), settings->name, result,
                                                         answer.kind == LookupResult::Kind::Found && !answer.providerMessageId.isEmpty()
                                                             ? QStringLiteral(" as ") + answer.providerMessageId
                                                         : answer.kind == LookupResult::Kind::Failed ? QStringLiteral(": ") + answer.error
                                                                                                     : QString()));
    }
    if (parser.isSet(QStringLiteral("json"))) {
        printJson(QJsonDocument(report));
        return Ok;
    }
    printLine(QStringLiteral("%1 in doubt, %2 asked, %3 found%4")
                  .arg(inDoubt->size())
                  .arg(asked)
                  .arg(found)
                  .arg(dryRun ? QStringLiteral(" (dry run: nothing settled)") : QString()));
    return Ok;
}

} // namespace once::cli
