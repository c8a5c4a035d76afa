// once grant-readonly: the SQL that makes a PostgreSQL role one that may only look.
#include "cli.h"

#include "store/readonlyrole.h"
#include "store/store.h"
#include "store/storelocation.h"

#include <QSqlQuery>

namespace once::cli {

int runGrantReadOnly(const QStringList &arguments)
{
    Command command(QStringLiteral("grant-readonly"),
                    QStringLiteral("Prints the SQL that lets ROLE read a PostgreSQL store and change nothing (for "
                                   "support staff: the console opens the store read-only for such a role). With "
                                   "--apply, runs it on the store instead, as the store's owner (the role once init "
                                   "ran as). ROLE must exist already: CREATE ROLE name LOGIN PASSWORD '…'."),
                    QStringLiteral("ROLE"));
    auto &parser = command.parser();
    parser.addOption({QStringLiteral("apply"), QStringLiteral("Run the SQL on the store instead of printing it.")});
    if (const int exit = command.parse(arguments); exit >= 0)
        return exit;
    const QStringList roles = parser.positionalArguments();
    if (roles.size() != 1 || roles.constFirst().isEmpty())
        return command.usageError(QStringLiteral("give the ROLE to grant reading to"));
    const QString role = roles.constFirst();
    QString error;
    const auto location = StoreLocation::parse(command.storeUrl(), &error);
    if (!location)
        return command.usageError(error);
    switch (location->kind) {
    case StoreLocation::Kind::Sqlite:
        return command.usageError(QStringLiteral("grant-readonly is for PostgreSQL stores (--store postgres://…); "
                                                 "a SQLite store is read-only for whoever may not write its file "
                                                 "(chmod a-w), and the console opens it so"));
    case StoreLocation::Kind::Postgres:
        break;
    }

    if (!parser.isSet(QStringLiteral("apply"))) {
        printLine(QStringLiteral("-- Lets the role %1 read the once store %2 and change nothing.")
                      .arg(role, location->displayName()));
        printLine(QStringLiteral("-- Run as the role that owns the store's tables (the one once init ran as)."));
        for (const QString &statement : readOnlyGrantStatements(role, location->database))
            printLine(statement + QLatin1Char(';'));
        return Ok;
    }
    const auto store = command.openStore();
    if (!store)
        return Failure;
    Database &database = store->database();
    QSqlQuery schema(database.connection());
    if (!schema.exec(QStringLiteral("SELECT current_schema()")) || !schema.next())
        return failure(QStringLiteral("cannot find the store's schema in %1").arg(location->displayName()));
    const QString schemaName = schema.value(0).toString();
    schema.finish();
    Transaction transaction(database);
    if (!transaction.begin(&error))
        return failure(error);
    for (const QString &statement : readOnlyGrantStatements(role, location->database, schemaName)) {
        if (!database.exec(statement, &error))
            return failure(QStringLiteral("cannot grant reading to %1 on %2: %3")
                               .arg(role, location->displayName(), error));
    }
    if (!transaction.commit(&error))
        return failure(error);
    printLine(QStringLiteral("role %1 may now read %2 and change nothing").arg(role, location->displayName()));
    return Ok;
}

} // namespace once::cli
