#include "store/readonlyrole.h"

namespace once {

QString quotedIdentifier(const QString &name)
{
    QString quoted = name;
    quoted.replace(QLatin1Char('"'), QLatin1String("\"\""));
    return QLatin1Char('"') + quoted + QLatin1Char('"');
}

QStringList readOnlyGrantStatements(const QString &role, const QString &database, const QString &schema)
{
    const QString r = quotedIdentifier(role);
    const QString s = quotedIdentifier(schema);
    return {
        QStringLiteral("GRANT CONNECT ON DATABASE %1 TO %2").arg(quotedIdentifier(database), r),
        QStringLiteral("GRANT USAGE ON SCHEMA %1 TO %2").arg(s, r),
        QStringLiteral("GRANT SELECT ON ALL TABLES IN SCHEMA %1 TO %2").arg(s, r),
        // Read-only means that too: a role that could write before cannot afterwards.
        QStringLiteral("REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA %1 FROM %2").arg(s, r),
        QStringLiteral("ALTER DEFAULT PRIVILEGES IN SCHEMA %1 GRANT SELECT ON TABLES TO %2").arg(s, r),
    };
}

} // namespace once
