#pragma once

#include "alerting/alertrules.h"

#include <optional>

namespace once {

class Database;

// The alert thresholds a store holds (schema 22), over the rules' defaults. Written by
// Operations::setAlertThreshold, which audits each change.
std::optional<AlertThresholds> readAlertThresholds(Database &db, QString *error);

} // namespace once
