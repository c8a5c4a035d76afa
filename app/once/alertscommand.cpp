#include "cli.h"

#include "alerting/alertsettings.h"
#include "alerting/alerttext.h"
#include "operator/operations.h"
#include "store/store.h"
#include "store/workerregistry.h"
#include "text/jsonvalues.h"

#include <QJsonArray>
#include <QJsonObject>

namespace once::cli {

namespace {

QJsonObject ruleJson(const AlertRuleInfo &info, const AlertThresholds &thresholds)
{
    QJsonArray partners;
    for (const AlertThresholds::Row &row : thresholds.rows)
        if (row.rule == info.rule && !row.partner.isEmpty())
            partners.append(QJsonObject{{QStringLiteral("partner"), row.partner},
                                        {QStringLiteral("value"), row.value},
                                        {QStringLiteral("text"), formatAlertThreshold(info.rule, row.value)},
                                        {QStringLiteral("set_by"), row.setBy},
                                        {QStringLiteral("set_at"), formatTime(row.setAtMs)}});
    const auto own = thresholds.rowFor(info.rule, QString());
    return QJsonObject{
        {QStringLiteral("rule"), QString::fromLatin1(info.name)},
        {QStringLiteral("meaning"), QString::fromLatin1(info.meaning)},
        {QStringLiteral("unit"), info.isDuration ? QStringLiteral("ms") : QStringLiteral("count")},
        {QStringLiteral("value"), thresholds.value(info.rule)},
        {QStringLiteral("text"), formatAlertThreshold(info.rule, thresholds.value(info.rule))},
        {QStringLiteral("default"), info.defaultValue},
        {QStringLiteral("set_by"), own ? QJsonValue(own->setBy) : QJsonValue()},
        {QStringLiteral("set_at"), own ? timeOrNull(own->setAtMs) : QJsonValue()},
        {QStringLiteral("partners"), partners},
    };
}

// `once alerts set RULE VALUE [--partner NAME]` and `once alerts unset RULE [--partner NAME]`.
int changeThreshold(Command &command, const QStringList &positional, const QString &partner)
{
    const bool setting = positional.constFirst() == QLatin1String("set");
    if (positional.size() != (setting ? 3 : 2))
        return command.usageError(setting ? QStringLiteral("usage: once alerts set RULE VALUE [--partner NAME]")
                                          : QStringLiteral("usage: once alerts unset RULE [--partner NAME]"));
    const auto rule = alertRuleNamed(positional.at(1));
    if (!rule) {
        QStringList names;
        for (const AlertRuleInfo &info : alertRules())
            names << QString::fromLatin1(info.name);
        return command.usageError(QStringLiteral("no alert rule \"%1\"; the rules: %2")
                                      .arg(positional.at(1).left(40), names.join(QStringLiteral(", "))));
    }
    if (!partner.isEmpty() && !alertRuleInfo(*rule).perPartner)
        return command.usageError(
            QStringLiteral("%1 is set for the whole store, not per partner").arg(alertRuleName(*rule)));
    std::optional<qint64> value;
    QString error;
    if (setting) {
        value = parseAlertThreshold(*rule, positional.at(2), &error);
        if (!value)
            return command.usageError(error);
    }
    const auto store = command.openStore(Command::Access::ReadWrite);
    if (!store)
        return Failure;
    if (!store->operations().setAlertThreshold(*rule, partner, value, &error))
        return failure(error);
    const QString scope = partner.isEmpty() ? QString() : QStringLiteral(" for %1").arg(partner);
    printLine(value ? QStringLiteral("%1%2 set to %3 for every console and watcher on the store")
                          .arg(alertRuleName(*rule), scope, formatAlertThreshold(*rule, *value))
                    : QStringLiteral("%1%2 back to its default (%3)")
                          .arg(alertRuleName(*rule), scope,
                               formatAlertThreshold(*rule, alertRuleInfo(*rule).defaultValue)));
    return Ok;
}

} // namespace

int runAlerts(const QStringList &arguments)
{
    Command command(QStringLiteral("alerts"),
                    QStringLiteral("Lists the alert rules with the thresholds the store holds (every console and "
                                   "once watch on it judge by them) and what fires now, in the words the console's "
                                   "banner and the notifications use. `set RULE VALUE` changes a threshold (a "
                                   "duration as 90s, 5m, 2h; a count as a number), `unset RULE` puts its default "
                                   "back; both audited. --partner NAME sets partner-down for one partner."),
                    QStringLiteral("[set RULE VALUE | unset RULE]"));
    auto &parser = command.parser();
    parser.addOption({QStringLiteral("partner"), QStringLiteral("The partner a threshold is for (partner-down)."),
                      QStringLiteral("NAME")});
    parser.addOption({QStringLiteral("json"), QStringLiteral("Print JSON.")});
    if (const int exit = command.parse(arguments); exit >= 0)
        return exit;
    const QStringList positional = parser.positionalArguments();
    const QString partner = parser.value(QStringLiteral("partner")).trimmed();
    if (!positional.isEmpty()) {
        if (positional.constFirst() != QLatin1String("set") && positional.constFirst() != QLatin1String("unset"))
            return command.usageError(QStringLiteral("\"%1\" is not set or unset").arg(positional.constFirst().left(40)));
        return changeThreshold(command, positional, partner);
    }
    if (!partner.isEmpty())
        return command.usageError(QStringLiteral("--partner goes with set or unset"));

    const auto store = command.openStore(Command::Access::ReadOnly);
    if (!store)
        return Failure;
    QString error;
    const auto thresholds = readAlertThresholds(store->database(), &error);
    if (!thresholds)
        return failure(error);
    AlertInputs inputs;
    inputs.stats = store->inspector().stats(&error);
    if (!inputs.stats)
        return failure(error);
    const auto workers = store->workers().list(&error);
    if (!workers)
        return failure(error);
    inputs.workers = *workers;
    const qint64 now = nowMs();
    const QList<Alert> firing = evaluateAlerts(inputs, *thresholds, now);

    if (parser.isSet(QStringLiteral("json"))) {
        QJsonArray rules;
        for (const AlertRuleInfo &info : alertRules())
            rules.append(ruleJson(info, *thresholds));
        QJsonArray alerts;
        for (const Alert &alert : firing) {
            QJsonObject object = alert.toJson();
            object.insert(QStringLiteral("title"), alertTitle(alert));
            object.insert(QStringLiteral("summary"), alertText(alert, now));
            alerts.append(object);
        }
        printJson(QJsonDocument(QJsonObject{{QStringLiteral("rules"), rules}, {QStringLiteral("firing"), alerts}}));
        return Ok;
    }
    printLine(QStringLiteral("Rules (the store's thresholds):"));
    for (const AlertRuleInfo &info : alertRules()) {
        const auto own = thresholds->rowFor(info.rule, QString());
        QString line = QStringLiteral("  %1 %2  %3")
                           .arg(QString::fromLatin1(info.name), -22)
                           .arg(formatAlertThreshold(info.rule, thresholds->value(info.rule)), -6)
                           .arg(QString::fromLatin1(info.meaning));
        line += own ? QStringLiteral(" (set by %1)").arg(own->setBy) : QStringLiteral(" (default)");
        printLine(line);
        for (const AlertThresholds::Row &row : thresholds->rows)
            if (row.rule == info.rule && !row.partner.isEmpty())
                printLine(QStringLiteral("    for %1: %2 (set by %3)")
                              .arg(row.partner, formatAlertThreshold(info.rule, row.value), row.setBy));
    }
    if (firing.isEmpty()) {
        printLine(QStringLiteral("Firing now: nothing."));
        return Ok;
    }
    printLine(QStringLiteral("Firing now:"));
    for (const Alert &alert : firing)
        printLine(QStringLiteral("  [%1] %2: %3").arg(alertSeverityName(alert.severity), alertTitle(alert), alertText(alert, now)));
    return Ok;
}

} // namespace once::cli
