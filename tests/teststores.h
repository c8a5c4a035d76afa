// Fresh, empty stores for tests, of the kind the environment asks for, so one suite runs
// on SQLite (the default) and on PostgreSQL (ONCE_TEST_STORE=postgres, set with
// ONCE_TEST_POSTGRES_URL_FILE by the NAME_postgres tests in tests/CMakeLists.txt, whose
// fixture runs the private server of scripts/postgres-cluster).
#pragma once

#include "store/ledger.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QString>
#include <QStringList>
#include <QTemporaryDir>
#include <QUrl>
#include <QVariant>

class TestStores final
{
    Q_DISABLE_COPY_MOVE(TestStores)

public:
    // Create it after the QCoreApplication (a test object's member is): Qt finds its SQL
    // drivers through the application.
    TestStores()
    {
        if (!m_dir.isValid())
            qFatal("TestStores: no temporary folder: %s", qPrintable(m_dir.errorString()));
        const QString kind = qEnvironmentVariable("ONCE_TEST_STORE");
        if (kind.isEmpty() || kind == QLatin1String("sqlite"))
            return;
        if (kind != QLatin1String("postgres"))
            qFatal("TestStores: ONCE_TEST_STORE=%s is neither sqlite nor postgres", qPrintable(kind));
        m_postgres = true;
        connectAdmin();
    }

    ~TestStores()
    {
        if (!m_postgres)
            return;
        {
            QSqlQuery query(m_admin);
            // FORCE: a store a failed test left open must not keep its database alive.
            for (const QString &name : std::as_const(m_databases)) {
                if (!query.exec(QStringLiteral("DROP DATABASE IF EXISTS %1 WITH (FORCE)").arg(name)))
                    qWarning("TestStores: cannot drop %s: %s", qPrintable(name), qPrintable(query.lastError().text()));
            }
        }
        m_admin.close();
        m_admin = QSqlDatabase();
        QSqlDatabase::removeDatabase(AdminConnection);
    }

    bool isPostgres() const { return m_postgres; }

    // A store nobody has used: sqlite:/tmp/…/store-N.sqlite, or
    // postgres://once:PASSWORD@127.0.0.1:PORT/once_test_PID_N.
    // On PostgreSQL, databaseOptions go to CREATE DATABASE (a collation, a template).
    QString newUrl(const QString &databaseOptions = {})
    {
        ++m_count;
        if (!m_postgres)
            return QStringLiteral("sqlite:") + filePath(QStringLiteral("store-%1.sqlite").arg(m_count));
        const QString name = QStringLiteral("once_test_%1_%2").arg(QCoreApplication::applicationPid()).arg(m_count);
        QSqlQuery query(m_admin);
        if (!query.exec(QStringLiteral("CREATE DATABASE %1 %2").arg(name, databaseOptions)))
            qFatal("TestStores: cannot create the database %s: %s", qPrintable(name), qPrintable(query.lastError().text()));
        m_databases.append(name);
        QUrl url = m_adminUrl;
        url.setPath(QLatin1Char('/') + name);
        return url.toString(QUrl::FullyEncoded);
    }

    // The same URL without its password, for what libpq finds elsewhere (PGPASSWORD).
    static QString withoutPassword(const QString &storeUrl)
    {
        if (!storeUrl.startsWith(QLatin1String("postgres://")))
            return storeUrl;
        QUrl url(storeUrl, QUrl::StrictMode);
        url.setPassword(QString());
        return url.toString(QUrl::FullyEncoded);
    }

    // The server's password for user once (PostgreSQL only).
    QString password() const { return m_adminUrl.password(); }

    // A file scripts/postgres-cluster wrote next to the URL, such as the CA certificate
    // that signed the server's (ca.crt), or one that did not (other-ca.crt).
    static QString clusterFile(const QString &name)
    {
        return QFileInfo(qEnvironmentVariable("ONCE_TEST_POSTGRES_URL_FILE")).dir().filePath(name);
    }

    // A connection to the server's maintenance database, as the user who owns every test
    // database, for checks that must not go through the code under test (PostgreSQL only).
    QSqlDatabase admin() const { return m_admin; }

    // A connection to a store that bypasses once's own code (its Database class), for
    // checking what it left behind. The caller checks isOpen(), and closes the
    // connection and removes connectionName when done.
    QSqlDatabase openRaw(const QString &storeUrl, const QString &connectionName) const
    {
        QSqlDatabase db;
        if (storeUrl.startsWith(QLatin1String("sqlite:"))) {
            db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), connectionName);
            db.setDatabaseName(storeUrl.mid(int(qstrlen("sqlite:"))));
        } else {
            const QUrl url(storeUrl, QUrl::StrictMode);
            db = QSqlDatabase::addDatabase(QStringLiteral("QPSQL"), connectionName);
            db.setHostName(url.host());
            db.setPort(url.port(5432));
            db.setUserName(url.userName());
            db.setPassword(url.password());
            db.setDatabaseName(url.path().mid(1));
        }
        db.open(); // the caller checks isOpen() and lastError()
        return db;
    }

    // Runs a test's own SQL (its values bound in order) on an open connection to a store;
    // false, with the statement and the error as a warning, if it fails.
    static bool exec(const QSqlDatabase &db, const QString &sql, const QVariantList &values = {})
    {
        QSqlQuery query(db);
        query.prepare(sql);
        for (const QVariant &value : values)
            query.addBindValue(value);
        if (!query.exec()) {
            qWarning("%s: %s", qPrintable(sql), qPrintable(query.lastError().text()));
            return false;
        }
        return true;
    }

    // Where the counts a store keeps (ledger_totals, schema 10: kept by triggers as ledger
    // rows change) differ from counting the ledger's rows, in words; empty when they agree.
    // db: any open connection to the store (the store's own, or openRaw()'s). A query that
    // fails is a difference too, so that a store the check cannot read never passes.
    static QString totalsDisagreeWithLedger(const QSqlDatabase &db)
    {
        QStringList differences;
        const auto scalar = [&db, &differences](const QString &sql, const QVariantList &values) -> qint64 {
            QSqlQuery query(db);
            bool ok = query.prepare(sql);
            for (const QVariant &value : values)
                query.addBindValue(value);
            ok = ok && query.exec() && query.next();
            if (!ok)
                differences << QStringLiteral("cannot run %1: %2").arg(sql, query.lastError().text());
            return ok ? query.value(0).toLongLong() : -1;
        };
        const auto compare = [&](const QString &counter, const QString &countSql) {
            const qint64 kept =
                scalar(QStringLiteral("SELECT COALESCE(SUM(n), 0) FROM ledger_totals WHERE counter = ?"), {counter});
            const qint64 counted = scalar(countSql, {});
            if (kept != counted)
                differences << QStringLiteral("%1: kept %2, counted %3")
                                   .arg(counter, QString::number(kept), QString::number(counted));
        };
        for (const QLatin1String state : {once::LedgerState::Claimed, once::LedgerState::Retrying,
                                          once::LedgerState::Applied, once::LedgerState::InDoubt,
                                          once::LedgerState::Dead})
            compare(QStringLiteral("state:") + state,
                    QStringLiteral("SELECT COUNT(*) FROM ledger WHERE state = '%1'").arg(state));
        compare(QStringLiteral("duplicate_keys"), QStringLiteral("SELECT COUNT(*) FROM ledger WHERE duplicates > 0"));
        compare(QStringLiteral("duplicate_deliveries"), QStringLiteral("SELECT COALESCE(SUM(duplicates), 0) FROM ledger"));
        return differences.join(QLatin1String("; "));
    }

    // The same for the store at storeUrl, through a connection of the check's own
    // (openRaw()), closed before it returns.
    QString totalsDisagreeWithLedger(const QString &storeUrl) const
    {
        static const QString Connection = QStringLiteral("teststores-totals");
        QString differences;
        {
            QSqlDatabase db = openRaw(storeUrl, Connection);
            differences = db.isOpen() ? totalsDisagreeWithLedger(db)
                                      : QStringLiteral("cannot open the store to check its counts: ") + db.lastError().text();
            db.close();
        }
        QSqlDatabase::removeDatabase(Connection);
        return differences;
    }

    // A path in this object's private folder, which goes when it does.
    QString filePath(const QString &name) const { return m_dir.filePath(name); }

private:
    static constexpr QLatin1String AdminConnection{"teststores-admin"};

    void connectAdmin()
    {
        const QString urlFile = qEnvironmentVariable("ONCE_TEST_POSTGRES_URL_FILE");
        if (urlFile.isEmpty())
            qFatal("TestStores: ONCE_TEST_STORE=postgres but ONCE_TEST_POSTGRES_URL_FILE is not set "
                   "(run the NAME_postgres tests through ctest, or scripts/postgres-cluster start DIR and point it at DIR/url)");
        QFile file(urlFile);
        if (!file.open(QIODevice::ReadOnly))
            qFatal("TestStores: cannot read the PostgreSQL URL file %s: %s (did the postgres_start fixture run?)",
                   qPrintable(urlFile), qPrintable(file.errorString()));
        m_adminUrl = QUrl(QString::fromUtf8(file.readAll().trimmed()), QUrl::StrictMode);
        if (!m_adminUrl.isValid() || m_adminUrl.scheme() != QLatin1String("postgres") || m_adminUrl.host().isEmpty())
            qFatal("TestStores: %s does not hold a postgres:// URL", qPrintable(urlFile));
        if (!QSqlDatabase::isDriverAvailable(QStringLiteral("QPSQL")))
            qFatal("TestStores: Qt's PostgreSQL driver is missing (Debian package libqt6sql6-psql)");
        m_admin = openRaw(m_adminUrl.toString(QUrl::FullyEncoded), AdminConnection);
        if (!m_admin.isOpen())
            qFatal("TestStores: cannot connect to the test server at %s:%d: %s", qPrintable(m_adminUrl.host()),
                   m_adminUrl.port(5432), qPrintable(m_admin.lastError().text()));
    }

    QTemporaryDir m_dir;
    bool m_postgres = false;
    int m_count = 0;
    QUrl m_adminUrl;
    QSqlDatabase m_admin;
    QStringList m_databases;
};
