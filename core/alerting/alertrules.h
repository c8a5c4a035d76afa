#pragma once

#include "operator/inspector.h"
#include "store/workerregistry.h"

#include <QJsonObject>
#include <QList>
#include <QMap>
#include <QString>

#include <optional>

namespace once {

// What the console's banner, `once alerts`, `once watch` and the store's metrics alert on,
// as facts: which rule, about which partner, since when, the number measured and the
// threshold it crossed. The words for people are alerttext.h's; the thresholds live in the
// store (AlertSettings), so every console and watcher on a store agrees.
enum class AlertRule
{
    PartnerDown,         // a partner failing every send (per partner)
    PartnerFailingSends, // failed sends in 5 minutes, none applied, when no worker reports a spell
    NoWorker,            // no worker running while messages wait
    OldestReady,         // the oldest ready message has waited too long
    LatenessP95,         // the last hour's accepted sends, 95th percentile of their lateness
    InDoubt,             // a key held in doubt for too long
    DeadLetters,         // reminders dead-lettered in the last 15 minutes
    StoreFailing,        // the store does not answer
    RemindEvery,         // not a rule: how often an open, unacknowledged incident is notified again
};

enum class AlertSeverity
{
    Warning,
    Critical,
};

struct AlertRuleInfo
{
    AlertRule rule;
    const char *name;     // "partner-down": the store's, the command line's and the notifications' word
    bool isDuration;      // the value is milliseconds (typed as 90s, 5m, 2h); else a count
    qint64 defaultValue;  // ms or a count
    bool perPartner;      // may be set for one partner (once alerts set RULE VALUE --partner NAME)
    const char *meaning;  // one line for `once alerts` and the console's Settings
};

const QList<AlertRuleInfo> &alertRules();
const AlertRuleInfo &alertRuleInfo(AlertRule rule);
QString alertRuleName(AlertRule rule);
std::optional<AlertRule> alertRuleNamed(const QString &name);
// The topic of an alert and of its incident: "partner-down/acme", "oldest-ready".
QString alertKey(AlertRule rule, const QString &partner);
QString alertSeverityName(AlertSeverity severity); // warning | critical
// A threshold as typed: "300", "300s", "5m", "2h", "1d" for a duration (seconds without a
// unit), a whole number for a count; nullopt and a one-line error for anything else.
std::optional<qint64> parseAlertThreshold(AlertRule rule, const QString &text, QString *error);
// As parseAlertThreshold reads it back: "5m", "90s", "3".
QString formatAlertThreshold(AlertRule rule, qint64 value);

// The thresholds in force: the store's rows over the defaults, a partner's own over the
// store's.
struct AlertThresholds
{
    struct Row
    {
        AlertRule rule = AlertRule::PartnerDown;
        QString partner; // empty: the store's
        qint64 value = 0;
        QString setBy;
        qint64 setAtMs = 0;
    };
    QList<Row> rows;

    qint64 value(AlertRule rule, const QString &partner = {}) const;
    std::optional<Row> rowFor(AlertRule rule, const QString &partner) const;
};

// One thing that needs attention now, as facts. Its rule and partner name the topic
// (key()): the outage growing from a warning to critical is the same incident.
struct Alert
{
    AlertRule rule = AlertRule::PartnerDown;
    AlertSeverity severity = AlertSeverity::Warning;
    QString partner;   // the partner it is about; empty when not one
    qint64 sinceMs = 0; // when the condition began, as far as the store tells
    qint64 value = 0;   // what was measured: ms for durations, else a count
    qint64 threshold = 0;

    // Partner rules: the spell as the workers report it.
    int failedInARow = 0;
    QString lastErrorClass;
    int lastHttpStatus = 0;
    qint64 lastFailureAtMs = 0;
    int failingWorkers = 0;  // workers in a failed spell with this partner
    int holdingWorkers = 0;  // of those, held back by their breaker
    int liveWorkers = 0;
    bool refusesEveryone = false; // a refused credential, or the same refusal of every reminder
    bool fromHistory = false;     // no worker reports it: the history's failed sends tell it

    // Queue rules.
    qint64 waiting = 0;
    QString lastWorkerId;
    qint64 lastHeartbeatAtMs = 0;
    enum class Cause
    {
        None,
        NoWorker,
        HoldingBack,
        NotKeepingUp
    };
    Cause cause = Cause::None;

    QString storeError; // StoreFailing: what the store answered

    QString key() const; // "partner-down/acme", "oldest-ready"
    QJsonObject toJson() const;
};

// What the rules look at: a store's numbers (nullopt when the store did not answer), the
// workers on it, and when the store last failed to answer.
struct AlertInputs
{
    std::optional<DeliveryStats> stats;
    QList<WorkerRecord> workers;
    QString storeError;           // empty: the store answered
    qint64 storeFailingSinceMs = 0; // since when it has not answered
};

// The alerts at nowMs, most severe first. Pure: every face shares it, and the tests.
QList<Alert> evaluateAlerts(const AlertInputs &inputs, const AlertThresholds &thresholds, qint64 nowMs);

} // namespace once
