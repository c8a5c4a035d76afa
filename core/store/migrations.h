#pragma once

#include <QStringList>

namespace once {

// The store's schema, one upgrade step per version, in both dialects side by side
// (migrations.cpp): a store of either kind at version N has the same tables and columns.
// Database::open applies the steps a store is missing; shipped steps are never edited.
int latestSchemaVersion();
// The SQL statements that take a store from fromVersion to the next, in order.
QStringList migrationStatements(int fromVersion, bool postgres);

} // namespace once
