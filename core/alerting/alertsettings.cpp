#include "alerting/alertsettings.h"

#include "store/database.h"

#include <QSqlQuery>
#include <QVariant>

namespace once {

std::optional<AlertThresholds> readAlertThresholds(Database &db, QString *error)
{
    auto &query = db.prepared(QStringLiteral("SELECT rule, partner, value, set_by, set_at FROM alert_thresholds "
                                             "ORDER BY rule, partner"));
    if (!db.exec(query, error))
        return std::nullopt;
    AlertThresholds thresholds;
    while (query.next()) {
        // A rule this version does not know (a newer one wrote it) is left to that version.
        const auto rule = alertRuleNamed(query.value(0).toString());
        if (!rule)
            continue;
        thresholds.rows.append({*rule, query.value(1).toString(), query.value(2).toLongLong(),
                                query.value(3).toString(), query.value(4).toLongLong()});
    }
    query.finish();
    return thresholds;
}

} // namespace once
