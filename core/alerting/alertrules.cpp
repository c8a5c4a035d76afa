#include "alerting/alertrules.h"

#include "alerting/workertally.h"
#include "text/jsonvalues.h"
#include "text/quantities.h"

#include <QDateTime>
#include <QJsonArray>

#include <algorithm>

namespace once {

namespace {

constexpr qint64 Second = 1000;
constexpr qint64 Minute = 60 * Second;

// A live worker's spell with one partner, read from its heartbeat.
struct PartnerSpell
{
    QString partner;
    QString breaker;
    int consecutiveFailures = 0;
    qint64 failingSinceMs = 0;
    qint64 lastFailureAtMs = 0;
    QString lastErrorClass;
    int lastHttpStatus = 0;
    bool paused = false;
};

qint64 timeOf(const QJsonValue &value)
{
    if (!value.isString())
        return 0;
    const QDateTime at = QDateTime::fromString(value.toString(), Qt::ISODateWithMs);
    return at.isValid() ? at.toMSecsSinceEpoch() : 0;
}

// Each partner a worker sends to (schema 19's list), or its one spell as older workers and
// the one-partner shorthand report it.
QList<PartnerSpell> spellsOf(const WorkerRecord &worker)
{
    QList<PartnerSpell> spells;
    for (const QJsonValue &value : worker.partners) {
        const QJsonObject object = value.toObject();
        PartnerSpell spell;
        spell.partner = object.value(QLatin1String("name")).toString();
        spell.breaker = object.value(QLatin1String("breaker")).toString(QStringLiteral("closed"));
        spell.consecutiveFailures = object.value(QLatin1String("consecutive_failures")).toInt();
        spell.failingSinceMs = timeOf(object.value(QLatin1String("failing_since")));
        spell.lastFailureAtMs = timeOf(object.value(QLatin1String("last_failure_at")));
        spell.lastErrorClass = object.value(QLatin1String("last_error_class")).toString();
        spell.lastHttpStatus = object.value(QLatin1String("last_http_status")).toInt();
        spell.paused = object.value(QLatin1String("paused")).toBool();
        spells.append(spell);
    }
    if (spells.isEmpty()) {
        PartnerSpell spell;
        spell.partner = worker.failingPartner;
        spell.breaker = worker.breaker;
        spell.consecutiveFailures = worker.consecutiveFailures;
        spell.failingSinceMs = worker.failingSinceMs;
        spell.lastFailureAtMs = worker.lastFailureAtMs;
        spell.lastErrorClass = worker.lastErrorClass;
        spell.lastHttpStatus = worker.lastHttpStatus;
        spells.append(spell);
    }
    return spells;
}

// A spell that is no blip: the breaker holds the worker back, or it failed several times
// in a row (a worker may run with a high breaker threshold).
constexpr int FailuresInARowForASpell = 3;

bool isFailing(const PartnerSpell &spell)
{
    return !spell.paused && spell.failingSinceMs > 0 &&
           (spell.breaker != QLatin1String("closed") || spell.consecutiveFailures >= FailuresInARowForASpell);
}

bool refusesEveryone(const PartnerSpell &spell)
{
    return spell.lastErrorClass == QLatin1String("credentials-refused") ||
           spell.lastErrorClass == QLatin1String("partner-refusing");
}

// historyRefusesAll: the history shows failed sends and nothing applied for five minutes,
// so a spell shorter than the threshold is no blip either.
QList<Alert> partnerAlerts(const QList<WorkerRecord> &workers, const WorkerTally &tally,
                           const AlertThresholds &thresholds, bool historyRefusesAll, qint64 nowMs)
{
    QMap<QString, Alert> byPartner;
    for (const WorkerRecord &worker : workers) {
        if (!worker.isLive(nowMs))
            continue;
        for (const PartnerSpell &spell : spellsOf(worker)) {
            if (!isFailing(spell))
                continue;
            auto it = byPartner.find(spell.partner);
            if (it == byPartner.end()) {
                Alert alert;
                alert.rule = AlertRule::PartnerDown;
                alert.partner = spell.partner;
                alert.sinceMs = spell.failingSinceMs;
                alert.liveWorkers = tally.live();
                it = byPartner.insert(spell.partner, alert);
            }
            Alert &alert = *it;
            alert.sinceMs = std::min(alert.sinceMs, spell.failingSinceMs);
            alert.failedInARow += spell.consecutiveFailures;
            ++alert.failingWorkers;
            if (spell.breaker != QLatin1String("closed"))
                ++alert.holdingWorkers;
            if (spell.lastFailureAtMs >= alert.lastFailureAtMs) {
                alert.lastFailureAtMs = spell.lastFailureAtMs;
                alert.lastErrorClass = spell.lastErrorClass;
                alert.lastHttpStatus = spell.lastHttpStatus;
            }
            if (refusesEveryone(spell)) {
                alert.refusesEveryone = true;
                alert.lastErrorClass = spell.lastErrorClass;
                alert.lastHttpStatus = spell.lastHttpStatus;
            }
        }
    }
    QList<Alert> alerts;
    for (Alert alert : std::as_const(byPartner)) {
        alert.threshold = thresholds.value(AlertRule::PartnerDown, alert.partner);
        alert.value = std::max<qint64>(0, nowMs - alert.sinceMs);
        // Refused alike whatever the reminder: no blip to wait out, so critical at once.
        alert.severity = alert.refusesEveryone || historyRefusesAll || alert.value >= alert.threshold
                             ? AlertSeverity::Critical
                             : AlertSeverity::Warning;
        alerts.append(alert);
    }
    return alerts;
}

} // namespace

const QList<AlertRuleInfo> &alertRules()
{
    static const QList<AlertRuleInfo> rules{
        {AlertRule::PartnerDown, "partner-down", true, Minute, true,
         "a partner failing every send for this long is down (a warning before)"},
        {AlertRule::PartnerFailingSends, "partner-failing-sends", false, 3, false,
         "failed sends in 5 minutes with none applied, when no worker reports a spell"},
        {AlertRule::NoWorker, "no-worker", true, 15 * Second, false,
         "no worker running while messages wait, for this long"},
        {AlertRule::OldestReady, "oldest-ready", true, 5 * Minute, false,
         "the oldest ready message has waited longer than this"},
        {AlertRule::LatenessP95, "lateness-p95", true, 10 * Minute, false,
         "95 % of the last hour's reminders were accepted within this of their scheduled time"},
        {AlertRule::InDoubt, "in-doubt", true, 10 * Minute, false,
         "a key held in doubt (sent, outcome unknown) for longer than this"},
        {AlertRule::DeadLetters, "dead-letters", false, 5, false,
         "reminders dead-lettered in the last 15 minutes, at least"},
        {AlertRule::StoreFailing, "store-failing", true, 30 * Second, false,
         "the store has not answered for this long"},
        {AlertRule::RemindEvery, "remind-every", true, 60 * Minute, false,
         "an open incident nobody acknowledged is notified again this often"},
    };
    return rules;
}

const AlertRuleInfo &alertRuleInfo(AlertRule rule)
{
    const auto &rules = alertRules();
    return *std::find_if(rules.cbegin(), rules.cend(), [rule](const AlertRuleInfo &info) { return info.rule == rule; });
}

QString alertRuleName(AlertRule rule)
{
    return QString::fromLatin1(alertRuleInfo(rule).name);
}

std::optional<AlertRule> alertRuleNamed(const QString &name)
{
    for (const AlertRuleInfo &info : alertRules())
        if (name == QLatin1String(info.name))
            return info.rule;
    return std::nullopt;
}

QString alertSeverityName(AlertSeverity severity)
{
    return severity == AlertSeverity::Critical ? QStringLiteral("critical") : QStringLiteral("warning");
}

std::optional<qint64> parseAlertThreshold(AlertRule rule, const QString &text, QString *error)
{
    const AlertRuleInfo &info = alertRuleInfo(rule);
    const QString typed = text.trimmed();
    if (!info.isDuration) {
        bool ok = false;
        const qint64 count = typed.toLongLong(&ok);
        if (!ok || count < 1 || count > 1000000) {
            *error = QStringLiteral("%1 takes a whole number from 1 to 1000000, not \"%2\"")
                         .arg(QLatin1String(info.name), typed.left(32));
            return std::nullopt;
        }
        return count;
    }
    const qint64 value = parseDurationSetting(typed).value_or(-1);
    // Zero makes sense for no rule but the ones that alert at once; a week is beyond any.
    if (value < 0 || value > 7 * 24 * 60 * Minute || (value == 0 && rule == AlertRule::RemindEvery)) {
        *error = QStringLiteral("%1 takes a duration such as 90s, 5m or 2h (at most 7d), not \"%2\"")
                     .arg(QLatin1String(info.name), typed.left(32));
        return std::nullopt;
    }
    return value;
}

QString formatAlertThreshold(AlertRule rule, qint64 value)
{
    if (!alertRuleInfo(rule).isDuration)
        return QString::number(value);
    for (const auto &[unit, suffix] : {std::pair{24 * 60 * Minute, 'd'}, {60 * Minute, 'h'}, {Minute, 'm'}})
        if (value >= unit && value % unit == 0)
            return QString::number(value / unit) + QLatin1Char(suffix);
    return QString::number(value / Second) + QLatin1Char('s');
}

qint64 AlertThresholds::value(AlertRule rule, const QString &partner) const
{
    if (!partner.isEmpty())
        if (const auto own = rowFor(rule, partner))
            return own->value;
    if (const auto store = rowFor(rule, QString()))
        return store->value;
    return alertRuleInfo(rule).defaultValue;
}

std::optional<AlertThresholds::Row> AlertThresholds::rowFor(AlertRule rule, const QString &partner) const
{
    for (const Row &row : rows)
        if (row.rule == rule && row.partner == partner)
            return row;
    return std::nullopt;
}

QString alertKey(AlertRule rule, const QString &partner)
{
    return partner.isEmpty() ? alertRuleName(rule) : alertRuleName(rule) + QLatin1Char('/') + partner;
}

QString Alert::key() const
{
    return alertKey(rule, partner);
}

QJsonObject Alert::toJson() const
{
    QJsonObject object{
        {QStringLiteral("rule"), alertRuleName(rule)},
        {QStringLiteral("severity"), alertSeverityName(severity)},
        {QStringLiteral("partner"), textOrNull(partner)},
        {QStringLiteral("since"), timeOrNull(sinceMs)},
        {QStringLiteral("value"), value},
        {QStringLiteral("threshold"), threshold},
    };
    const bool isDuration = alertRuleInfo(rule).isDuration;
    object.insert(QStringLiteral("unit"), isDuration ? QStringLiteral("ms") : QStringLiteral("count"));
    if (rule == AlertRule::PartnerDown || rule == AlertRule::PartnerFailingSends) {
        object.insert(QStringLiteral("failed_in_a_row"), failedInARow);
        object.insert(QStringLiteral("last_error_class"), textOrNull(lastErrorClass));
        object.insert(QStringLiteral("last_http_status"), lastHttpStatus ? QJsonValue(lastHttpStatus) : QJsonValue());
        object.insert(QStringLiteral("failing_workers"), failingWorkers);
        object.insert(QStringLiteral("holding_back_workers"), holdingWorkers);
        object.insert(QStringLiteral("live_workers"), liveWorkers);
        object.insert(QStringLiteral("refuses_everyone"), refusesEveryone);
    }
    if (waiting)
        object.insert(QStringLiteral("waiting"), waiting);
    if (!lastWorkerId.isEmpty()) {
        object.insert(QStringLiteral("last_worker"), lastWorkerId);
        object.insert(QStringLiteral("last_heartbeat_at"), timeOrNull(lastHeartbeatAtMs));
    }
    if (cause != Cause::None)
        object.insert(QStringLiteral("cause"), cause == Cause::NoWorker      ? QStringLiteral("no-worker")
                                               : cause == Cause::HoldingBack ? QStringLiteral("holding-back")
                                                                             : QStringLiteral("not-keeping-up"));
    if (!storeError.isEmpty())
        object.insert(QStringLiteral("store_error"), storeError);
    return object;
}

QList<Alert> evaluateAlerts(const AlertInputs &inputs, const AlertThresholds &thresholds, qint64 nowMs)
{
    QList<Alert> alerts;
    if (!inputs.storeError.isEmpty()) {
        Alert alert;
        alert.rule = AlertRule::StoreFailing;
        alert.severity = AlertSeverity::Critical;
        alert.sinceMs = inputs.storeFailingSinceMs ? inputs.storeFailingSinceMs : nowMs;
        alert.value = std::max<qint64>(0, nowMs - alert.sinceMs);
        alert.threshold = thresholds.value(AlertRule::StoreFailing);
        alert.storeError = inputs.storeError;
        if (alert.value >= alert.threshold)
            alerts.append(alert);
    }

    const WorkerTally tally = WorkerTally::of(inputs.workers, nowMs);
    const qint64 failingSends = thresholds.value(AlertRule::PartnerFailingSends);
    const bool historyRefusesAll =
        inputs.stats && inputs.stats->failedSendsLast5Min >= failingSends && inputs.stats->appliedLast5Min == 0;
    const QList<Alert> partners = partnerAlerts(inputs.workers, tally, thresholds, historyRefusesAll, nowMs);
    alerts += partners;

    if (const auto &stats = inputs.stats) {
        const qint64 waiting = stats->queue.ready + stats->queue.delayed + stats->queue.inFlight;
        // The history tells the partner's story when no worker reports one (workers that
        // are gone, or of a version before heartbeats carried it).
        if (partners.isEmpty() && historyRefusesAll) {
            Alert alert;
            alert.rule = AlertRule::PartnerFailingSends;
            alert.severity = AlertSeverity::Critical;
            alert.sinceMs = stats->failingSinceMs ? stats->failingSinceMs : nowMs;
            alert.value = stats->failedSendsLast5Min;
            alert.threshold = failingSends;
            alert.failedInARow = int(stats->failedInARowLast5Min);
            alert.liveWorkers = tally.live();
            alert.fromHistory = true;
            alerts.append(alert);
        }
        // Nothing delivers until a worker starts: measured from the last heartbeat, or,
        // on a store no worker ever ran on, from the oldest waiting message.
        if (tally.live() == 0 && waiting > 0) {
            Alert alert;
            alert.rule = AlertRule::NoWorker;
            alert.severity = AlertSeverity::Critical;
            alert.waiting = waiting;
            alert.lastWorkerId = tally.lastWorkerId;
            alert.lastHeartbeatAtMs = tally.lastHeartbeatAtMs;
            alert.sinceMs = tally.lastHeartbeatAtMs ? tally.lastHeartbeatAtMs
                                                    : nowMs - stats->queue.oldestReadyAgeMs.value_or(0);
            alert.value = std::max<qint64>(0, nowMs - alert.sinceMs);
            alert.threshold = thresholds.value(AlertRule::NoWorker);
            if (alert.value >= alert.threshold && (tally.lastHeartbeatAtMs || stats->queue.oldestReadyAgeMs))
                alerts.append(alert);
        }
        const qint64 oldestLimit = thresholds.value(AlertRule::OldestReady);
        if (const auto age = stats->queue.oldestReadyAgeMs; age && *age > oldestLimit) {
            Alert alert;
            alert.rule = AlertRule::OldestReady;
            alert.severity = AlertSeverity::Critical;
            alert.sinceMs = nowMs - *age + oldestLimit;
            alert.value = *age;
            alert.threshold = oldestLimit;
            alert.waiting = waiting;
            alert.cause = tally.live() == 0                                     ? Alert::Cause::NoWorker
                          : tally.holdingBack > 0 || !partners.isEmpty()        ? Alert::Cause::HoldingBack
                                                                                : Alert::Cause::NotKeepingUp;
            alerts.append(alert);
        }
        const qint64 latenessLimit = thresholds.value(AlertRule::LatenessP95);
        if (stats->latenessP95Ms && *stats->latenessP95Ms > latenessLimit) {
            Alert alert;
            alert.rule = AlertRule::LatenessP95;
            alert.severity = AlertSeverity::Warning;
            alert.sinceMs = nowMs;
            alert.value = *stats->latenessP95Ms;
            alert.threshold = latenessLimit;
            alerts.append(alert);
        }
        const qint64 inDoubtLimit = thresholds.value(AlertRule::InDoubt);
        if (stats->inDoubt > 0 && stats->oldestInDoubtSinceMs > 0 &&
            nowMs - stats->oldestInDoubtSinceMs >= inDoubtLimit) {
            Alert alert;
            alert.rule = AlertRule::InDoubt;
            alert.severity = AlertSeverity::Warning;
            alert.sinceMs = stats->oldestInDoubtSinceMs + inDoubtLimit;
            alert.value = nowMs - stats->oldestInDoubtSinceMs;
            alert.threshold = inDoubtLimit;
            alert.waiting = stats->inDoubt;
            alerts.append(alert);
        }
        const qint64 deadLimit = thresholds.value(AlertRule::DeadLetters);
        if (stats->deadLetteredLast15Min >= deadLimit) {
            Alert alert;
            alert.rule = AlertRule::DeadLetters;
            alert.severity = AlertSeverity::Warning;
            alert.sinceMs = nowMs;
            alert.value = stats->deadLetteredLast15Min;
            alert.threshold = deadLimit;
            alert.waiting = stats->queue.dead;
            alerts.append(alert);
        }
    }
    std::stable_sort(alerts.begin(), alerts.end(),
                     [](const Alert &a, const Alert &b) { return int(a.severity) > int(b.severity); });
    return alerts;
}

} // namespace once
