#pragma once

#include <QString>
#include <QStringList>

namespace once {

// The SQL that lets a PostgreSQL role read a store and change nothing (support staff, a
// reporting job): `once grant-readonly ROLE` prints it or runs it, and the console opens
// the store read-only by itself for such a role (Database::Access::AsPermitted). Names are
// quoted as identifiers, so a role or database name is only ever a name.
//
// Run by the role that owns the store's tables (the one `once init` runs as): the
// default privileges it sets cover the tables later schema upgrades create.
QStringList readOnlyGrantStatements(const QString &role, const QString &database,
                                    const QString &schema = QStringLiteral("public"));

// "name" with every " doubled: PostgreSQL's quoted identifier.
QString quotedIdentifier(const QString &name);

} // namespace once
