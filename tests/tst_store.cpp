// The store against a real database: schema, queue leases and settlements, the claim
// ledger, operator operations and the inspector. One suite for every kind of store:
// SQLite by default, PostgreSQL as tst_store_postgres (see teststores.h).
#include "delivery/enginestore.h"
#include "operator/metrics.h"
#include "store/migrations.h"
#include "store/sqlledger.h"
#include "store/store.h"
#include "teststores.h"

#include <QDate>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QHash>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLoggingCategory>
#include <QSet>
#include <QSqlDriver>
#include <QSqlError>
#include <QSqlQuery>
#include <QStandardPaths>
#include <QTest>
#include <QThread>
#include <QUrl>

#include <sqlite3.h>

#include <latch>
#include <limits>
#include <memory>
#include <optional>

using namespace once;

Q_DECLARE_METATYPE(once::InDoubtPolicy)
Q_DECLARE_METATYPE(once::ClaimResult::Outcome)

namespace {

const QString Worker = QStringLiteral("worker-1");
constexpr qint64 LongLease = 60000;

QByteArray reminderLine(const QString &user, const QString &reminderId,
                        const QString &scheduledAt = QStringLiteral("2026-12-01T09:00:00Z"),
                        const QString &eventId = QString(), const QString &destination = QStringLiteral("+15550100"))
{
    QJsonObject object{
        {QStringLiteral("user_id"), user},
        {QStringLiteral("reminder_id"), reminderId},
        {QStringLiteral("scheduled_at"), scheduledAt},
        {QStringLiteral("destination"), destination},
        {QStringLiteral("body"), QStringLiteral("Reminder %1 for %2").arg(reminderId, user)},
    };
    if (!eventId.isEmpty())
        object.insert(QStringLiteral("event_id"), eventId);
    return QJsonDocument(object).toJson(QJsonDocument::Compact);
}

Reminder makeReminder(const QString &user, const QString &reminderId,
                      const QString &scheduledAt = QStringLiteral("2026-12-01T09:00:00Z"),
                      const QString &eventId = QString(), const QString &destination = QStringLiteral("+15550100"))
{
    const auto parsed = parseReminder(reminderLine(user, reminderId, scheduledAt, eventId, destination));
    if (!parsed.reminder)
        qFatal("test reminder does not parse: %s", qPrintable(parsed.error));
    return *parsed.reminder;
}

ClaimRequest claimRequest(const Reminder &reminder, const QString &messageId, int delivery = 1,
                          qint64 leaseUntilMs = nowMs() + LongLease)
{
    return ClaimRequest{reminder, messageId, delivery, leaseUntilMs};
}

OutgoingMessage outgoing(const Reminder &reminder, qint64 delayMs = 0)
{
    return OutgoingMessage{reminder.payload, reminder.sendKey, reminder.eventId, delayMs, 0};
}

// A value the ledger never reports, so a failed call shows up as a comparison failure.
constexpr auto ClaimFailed = ClaimResult::Outcome(-1);

// Sets (or, given no value, unsets) an environment variable until the end of the scope,
// so a failing QVERIFY's early return does not leak it into the next test.
class EnvironmentGuard final
{
    Q_DISABLE_COPY_MOVE(EnvironmentGuard)

public:
    EnvironmentGuard(const char *name, const std::optional<QByteArray> &value)
        : m_name(name), m_wasSet(qEnvironmentVariableIsSet(name)), m_old(qgetenv(name))
    {
        if (value)
            qputenv(name, *value);
        else
            qunsetenv(name);
    }
    ~EnvironmentGuard()
    {
        if (m_wasSet)
            qputenv(m_name, m_old);
        else
            qunsetenv(m_name);
    }

private:
    const char *m_name;
    bool m_wasSet;
    QByteArray m_old;
};

} // namespace

class TestStore : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    // Schema
    void schemaVersionIsSet();
    void secondOpenOfSameFileWorks();
    void reopenKeepsDataAndVersion();
    void newerSchemaIsRefused();
    void storeUrlIsValidated();
    void passwordFromEnvironment();
    void tlsVerifyFullChecksTheServer();
    void storeUrlQueryCannotRedirectTheConnection_data();
    void storeUrlQueryCannotRedirectTheConnection();
    void libpqOptionsQuoteEveryValue_data();
    void libpqOptionsQuoteEveryValue();
    void multiHostUrls_data();
    void multiHostUrls();
    void urlMayTuneTheDeadConnectionSettings();
    void queryValuesReachLibpqAsTheyAre();

    // Queue
    void enqueueThenLeaseGivesFirstDelivery();
    void leaseHonoursBatchSizeAndOrder();
    void leasedMessageIsHiddenUntilLeaseExpires();
    void staleAckIsIgnored();
    void retryDelaysMessageThenMakesItReady();
    void deadLetterKeepsItsInfo();
    void deadLettersPageByKeysetWithoutPayloads();
    void sendsPerBucketReadTheIndexAlone();
    void turnsOnAGrownLedgerFindTheirKeysByIndex();
    void historyIsFiledUnderTheTimeItsKeysRowWasMade();
    void historyWrittenWithoutItsKeysTimeIsStillFound();
    void upgradeKeepsTheHistoryAlreadyThereFound();
    void aTurnsClaimsWaitForTheDiskItsOutcomesNeedNot();
    void commitAndBeginLeavesNothingHalfDone();
    void aRarePrefixIsSearchedThroughTheIndexes();
    void aPrefixSearchCanUseTheIndexesWhateverTheDatabasesCollation();
    void valuesBoundByTheStoreAreStoredAsQtBindsThem();
    void deadLetterPagesWalkTheIndexOfTheirOrder();
    void countsReflectQueueState();
    void concurrentLeasesNeverShareAMessage();

    // Ledger
    void firstClaimWins();
    void duplicateDeliveryIsSuppressed();
    void expiredClaimIsInDoubt_data();
    void expiredClaimIsInDoubt();
    void heldKeyWaitsForOperator();
    void sameMessageWithLiveClaimIsBusy();
    void appliedKeyIsDuplicate();
    void retryingKeyBelongsToItsMessage();
    void deadKeyIsDuplicate();
    void expiredKeyIsFinalAndKeepsItsExpiry();
    void claimBatchDecidesEachRequest();
    void firstOfTwoRequestsForAKeyWinsInALargeBatch();
    void takenKeysInOneBatchSeeEachOthersDecisions();
    void twoStoresInterleavedClaimEachKeyOnce();
    void twoThreadsClaimEachKeyOnce();
    void lateRecordFromExpiredClaimCannotOverwriteApplied();
    void lateAnswerOnlyAddsKnowledge_data();
    void lateAnswerOnlyAddsKnowledge();
    void lateAnswerAndHoldersAnswerInOneTurn();

    // Operations
    void redriveRequeuesDeadLetterAndReopensKey();
    void redriveSkipsLettersAlreadyGone();
    void discardRemovesDeadLetter();
    void resendInDoubtQueuesPayloadAgain();
    void markDeliveredAppliesInDoubtKey();
    void resolveRefusesKeyNotInDoubt();
    void auditRowsHaveActorActionCount();

    // Inspector and retention
    void statsCountEachKeyOnce();
    void upgradeCountsTheLedgerAlreadyThere();
    void eventsFilterAndPage();
    void purgeFinishedRemovesOldAppliedKeysOnly();
    void purgeFoldsTheCounterShardsOfEndedConnections();

private:
    std::unique_ptr<Store> openStore(QString *error) const;
    ClaimResult claim(Store &store, const ClaimRequest &request, InDoubtPolicy policy = InDoubtPolicy::Resend);
    // Records an outcome as the key's current claim holder, or as the given one.
    bool record(Store &store, const QByteArray &key, QLatin1String state, bool countsAsSend = true,
                int httpStatus = 0, const QString &errorClass = QString(), qint64 sentAtMs = nowMs(),
                const QString &holderMessage = QString(), int holderDelivery = 0);
    QString stateOf(const QByteArray &key);
    QVariant scalar(const QString &sql, const QVariantList &values = {});
    QList<Attempt> attemptsOf(const QByteArray &key);
    // The store's plan of a query, one line per step; its values go in as literals, as
    // EXPLAIN cannot be prepared on PostgreSQL. "EXPLAIN failed: ..." when it fails.
    QString planOf(QString sql, const QVariantList &values = {});
    // What takes attempts back to before schema 15 (their rows filed by key alone).
    static QStringList undoHistoryByKeysTime();
    // What takes the workers and attempts tables back to before schema 17 (no store loss,
    // in-doubt policy or partner's status in heartbeats, no partner named by a send).
    static QStringList undoSinceSchema17();
    // Leases the one ready message, settles it as dead with the given info.
    bool buryOne(const DeadLetterInfo &info, QueueMessage *buried);

    // The file of the store under test (SQLite only).
    QString sqlitePath() const { return m_url.mid(int(qstrlen("sqlite:"))); }

    TestStores m_stores;
    QString m_url;
    std::unique_ptr<Store> m_store;
};

void TestStore::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    // Every test opens a fresh store; its "upgraded to schema version" line is noise here.
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.database.info=false"));
    qInfo("store under test: %s", m_stores.isPostgres() ? "PostgreSQL" : "SQLite");
}

void TestStore::init()
{
    m_url = m_stores.newUrl();
    QString error;
    m_store = openStore(&error);
    QVERIFY2(m_store, qPrintable(error));
}

void TestStore::cleanup()
{
    // Whatever wrote the ledger in the test (claims, outcomes, takeovers, operators'
    // actions, retention, a test's own SQL), the counts the store keeps must still agree
    // with the rows.
    if (m_store && !QTest::currentTestFailed()) {
        const QString differences = TestStores::totalsDisagreeWithLedger(m_store->database().connection());
        QVERIFY2(differences.isEmpty(), qPrintable(differences));
    }
    m_store.reset();
}

std::unique_ptr<Store> TestStore::openStore(QString *error) const
{
    return Store::open(m_url, error);
}

ClaimResult TestStore::claim(Store &store, const ClaimRequest &request, InDoubtPolicy policy)
{
    QString error;
    const QList<ClaimResult> results = store.ledger().claim({request}, Worker, policy, &error);
    if (results.size() != 1) {
        qWarning("claim failed: %s", qPrintable(error));
        ClaimResult failed;
        failed.outcome = ClaimFailed;
        return failed;
    }
    return results.constFirst();
}

bool TestStore::record(Store &store, const QByteArray &key, QLatin1String state, bool countsAsSend, int httpStatus,
                       const QString &errorClass, qint64 sentAtMs, const QString &holderMessage, int holderDelivery)
{
    QString error;
    const QString keyText = QString::fromLatin1(key);
    const QString message = holderMessage.isEmpty()
                                ? scalar(QStringLiteral("SELECT owner_message FROM ledger WHERE send_key = ?"), {keyText}).toString()
                                : holderMessage;
    const int delivery = holderDelivery ? holderDelivery
                                        : scalar(QStringLiteral("SELECT owner_delivery FROM ledger WHERE send_key = ?"), {keyText}).toInt();
    const LedgerUpdate update{key, message, delivery, state, countsAsSend, countsAsSend ? sentAtMs : 0, httpStatus, errorClass,
                              errorClass.isEmpty() ? QString() : QStringLiteral("failed: ") + errorClass,
                              QStringLiteral("req-") + QString::fromLatin1(key.left(8))};
    const Attempt attempt{key, {}, QStringLiteral("m"), 1, Worker, sentAtMs, QStringLiteral("send"),
                          state == LedgerState::Applied ? QStringLiteral("applied") : QStringLiteral("transient"),
                          httpStatus, 12, errorClass, {}, {}};
    if (!store.ledger().record({update}, countsAsSend ? QList<Attempt>{attempt} : QList<Attempt>{}, &error)) {
        qWarning("record failed: %s", qPrintable(error));
        return false;
    }
    return true;
}

QString TestStore::stateOf(const QByteArray &key)
{
    QString error;
    const auto row = m_store->inspector().event(QString::fromLatin1(key), &error);
    return row ? row->state : QStringLiteral("<%1>").arg(error);
}

QStringList TestStore::undoHistoryByKeysTime()
{
    return {QStringLiteral("DROP INDEX attempts_key_created"),
            QStringLiteral("ALTER TABLE attempts DROP COLUMN key_created_at"),
            QStringLiteral("CREATE INDEX attempts_key ON attempts(send_key, id)")};
}

QStringList TestStore::undoSinceSchema17()
{
    return {QStringLiteral("ALTER TABLE ledger DROP COLUMN expires_at"),
            QStringLiteral("ALTER TABLE partners DROP COLUMN pause_reason"),
            QStringLiteral("ALTER TABLE partners DROP COLUMN paused_by"),
            QStringLiteral("ALTER TABLE partners DROP COLUMN paused_at"),
            QStringLiteral("DROP INDEX ledger_provider_request"),
            QStringLiteral("DROP TABLE partner_events"),
            QStringLiteral("ALTER TABLE workers DROP COLUMN partners"),
            QStringLiteral("ALTER TABLE workers DROP COLUMN failing_partner"),
            QStringLiteral("ALTER TABLE attempts DROP COLUMN partner_profile"),
            QStringLiteral("ALTER TABLE attempts DROP COLUMN partner"),
            QStringLiteral("ALTER TABLE workers DROP COLUMN in_doubt_configured"),
            QStringLiteral("ALTER TABLE workers DROP COLUMN in_doubt_policy"),
            QStringLiteral("ALTER TABLE workers DROP COLUMN last_http_status"),
            QStringLiteral("ALTER TABLE workers DROP COLUMN store_lost_at"),
            QStringLiteral("ALTER TABLE workers DROP COLUMN store_back_at")};
}

QString TestStore::planOf(QString sql, const QVariantList &values)
{
    for (const QVariant &value : values) {
        const QString literal = value.typeId() == QMetaType::QString
                                    ? QLatin1Char('\'') + value.toString().replace(QLatin1Char('\''), QLatin1String("''"))
                                          + QLatin1Char('\'')
                                    : QString::number(value.toLongLong());
        sql.replace(sql.indexOf(QLatin1Char('?')), 1, literal);
    }
    QSqlQuery explain(m_store->database().connection());
    const bool ok = explain.exec((m_stores.isPostgres() ? QStringLiteral("EXPLAIN ") : QStringLiteral("EXPLAIN QUERY PLAN "))
                                 + sql);
    QStringList plan;
    while (ok && explain.next())
        plan << explain.value(m_stores.isPostgres() ? 0 : 3).toString();
    return ok ? plan.join(QLatin1Char('\n')) : QStringLiteral("EXPLAIN failed: ") + explain.lastError().text();
}

QVariant TestStore::scalar(const QString &sql, const QVariantList &values)
{
    QSqlQuery query(m_store->database().connection());
    if (!query.prepare(sql))
        return QStringLiteral("<prepare failed: %1>").arg(query.lastError().text());
    for (const auto &value : values)
        query.addBindValue(value);
    if (!query.exec())
        return QStringLiteral("<exec failed: %1>").arg(query.lastError().text());
    if (!query.next())
        return QStringLiteral("<no row>");
    return query.value(0);
}

QList<Attempt> TestStore::attemptsOf(const QByteArray &key)
{
    QString error;
    const auto attempts = m_store->inspector().attempts(key, &error);
    if (!attempts)
        qWarning("attempts failed: %s", qPrintable(error));
    return attempts.value_or(QList<Attempt>());
}

bool TestStore::buryOne(const DeadLetterInfo &info, QueueMessage *buried)
{
    QString error;
    const auto leased = m_store->queue().lease(1, LongLease, Worker, &error);
    if (leased.size() != 1)
        return false;
    *buried = leased.constFirst();
    Settlement settlement{Settlement::Kind::DeadLetter, buried->id, buried->delivery, 0, info};
    return m_store->queue().settle({settlement}, &error);
}

// --- Schema ----------------------------------------------------------------------

void TestStore::schemaVersionIsSet()
{
    QVERIFY(m_store->database().schemaVersion() >= 1);
    QCOMPARE(m_store->database().isPostgres(), m_stores.isPostgres());
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM schema_version")).toInt(), 1);
    QCOMPARE(scalar(QStringLiteral("SELECT version FROM schema_version")).toInt(), m_store->database().schemaVersion());
    // Each kind lists its tables in its own catalogue.
    const QString tableCount =
        m_stores.isPostgres()
            ? QStringLiteral("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() "
                             "AND table_name = ?")
            : QStringLiteral("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?");
    for (const char *table : {"queue", "ledger", "attempts", "dead_letters", "audit_log"}) {
        QCOMPARE(scalar(tableCount, {QString::fromLatin1(table)}).toInt(), 1);
        // And unqualified names reach them, as the store's own statements use them.
        if (m_stores.isPostgres())
            QVERIFY(scalar(QStringLiteral("SELECT to_regclass(?) IS NOT NULL"), {QString::fromLatin1(table)}).toBool());
    }

    const StoreLocation &location = m_store->database().location();
    if (m_stores.isPostgres()) {
        const QUrl url(m_url);
        QCOMPARE(location.kind, StoreLocation::Kind::Postgres);
        QCOMPARE(location.servers, (QList<StoreLocation::Server>{{QStringLiteral("127.0.0.1"), url.port()}}));
        QCOMPARE(location.user, QStringLiteral("once"));
        QCOMPARE(location.password, m_stores.password());
        QCOMPARE(location.database, url.path().mid(1));
        // What a person may see names server and database, never the password.
        QCOMPARE(location.displayName(),
                 QStringLiteral("postgres://once@127.0.0.1:%1/%2").arg(url.port()).arg(location.database));
        QVERIFY(!location.displayName().contains(m_stores.password()));
    } else {
        // SQLite only: PostgreSQL has no journal mode to choose (it always logs ahead).
        QCOMPARE(scalar(QStringLiteral("PRAGMA journal_mode")).toString(), QStringLiteral("wal"));
        QCOMPARE(location.kind, StoreLocation::Kind::Sqlite);
        QCOMPARE(location.path, QFileInfo(sqlitePath()).absoluteFilePath());
        QCOMPARE(location.displayName(), QStringLiteral("sqlite:") + QFileInfo(sqlitePath()).absoluteFilePath());
    }
}

void TestStore::secondOpenOfSameFileWorks()
{
    QString error;
    auto second = openStore(&error);
    QVERIFY2(second, qPrintable(error));
    QCOMPARE(second->database().schemaVersion(), m_store->database().schemaVersion());
    // Each sees the other's writes: they are two connections to one store.
    const Reminder reminder = makeReminder(QStringLiteral("u"), QStringLiteral("r"));
    QVERIFY2(m_store->queue().enqueue({outgoing(reminder)}, &error), qPrintable(error));
    const auto counts = second->queue().counts(&error);
    QVERIFY2(counts, qPrintable(error));
    QCOMPARE(counts->ready, qint64(1));
    const auto leased = second->queue().lease(5, LongLease, QStringLiteral("worker-2"), &error);
    QCOMPARE(leased.size(), 1);
    QCOMPARE(leased.constFirst().payload, reminder.payload);
    QCOMPARE(m_store->queue().counts(&error)->inFlight, qint64(1));
}

void TestStore::reopenKeepsDataAndVersion()
{
    QString error;
    const Reminder reminder = makeReminder(QStringLiteral("u"), QStringLiteral("r"));
    QVERIFY2(m_store->queue().enqueue({outgoing(reminder)}, &error), qPrintable(error));
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("1"))).outcome, ClaimResult::Outcome::Claimed);
    const int version = m_store->database().schemaVersion();
    m_store.reset();
    if (m_stores.isPostgres()) {
        // PostgreSQL only (a SQLite file has no server to hold connections): a closed
        // store leaves no session behind, or workers that open and close stores would
        // use up the server's connections.
        const QString database = QUrl(m_url).path().mid(1);
        const auto sessions = [&] {
            QSqlQuery query(m_stores.admin());
            query.prepare(QStringLiteral("SELECT COUNT(*) FROM pg_stat_activity WHERE datname = ?"));
            query.addBindValue(database);
            return query.exec() && query.next() ? query.value(0).toInt() : -1;
        };
        QTRY_COMPARE(sessions(), 0);
    }

    m_store = openStore(&error);
    QVERIFY2(m_store, qPrintable(error));
    QCOMPARE(m_store->database().schemaVersion(), version);
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM schema_version")).toInt(), 1);
    QCOMPARE(m_store->queue().counts(&error)->ready, qint64(1));
    QCOMPARE(stateOf(reminder.sendKey), QString(LedgerState::Claimed));
}

void TestStore::newerSchemaIsRefused()
{
    {
        QSqlQuery query(m_store->database().connection());
        QVERIFY2(query.exec(QStringLiteral("UPDATE schema_version SET version = 99")), qPrintable(query.lastError().text()));
    }
    m_store.reset();

    QString error;
    auto refused = openStore(&error);
    QVERIFY(!refused);
    QVERIFY2(error.contains(QLatin1String("schema version 99")), qPrintable(error));
    QVERIFY2(error.contains(QLatin1String("newer than this program knows")), qPrintable(error));
    // It names the store: the file, or the database (and never its password).
    if (m_stores.isPostgres()) {
        QVERIFY2(error.contains(QUrl(m_url).path().mid(1)), qPrintable(error));
        QVERIFY2(!error.contains(m_stores.password()), qPrintable(error));
    } else {
        QVERIFY2(error.contains(QFileInfo(sqlitePath()).absoluteFilePath()), qPrintable(error));
    }
    QVERIFY2(error.contains(QLatin1String("upgrade once")), qPrintable(error));

    // The refused open left the store alone: the version is still 99 (read through a
    // connection of its own, not through once's code).
    {
        QSqlDatabase raw = m_stores.openRaw(m_url, QStringLiteral("raw-check"));
        QVERIFY2(raw.isOpen(), qPrintable(raw.lastError().text()));
        QSqlQuery query(raw);
        QVERIFY(query.exec(QStringLiteral("SELECT version FROM schema_version")));
        QVERIFY(query.next());
        QCOMPARE(query.value(0).toInt(), 99);
        QVERIFY(!query.next());
    }
    QSqlDatabase::removeDatabase(QStringLiteral("raw-check"));
    // init() gets a fresh store for the next test; cleanup() copes with no store.
}

void TestStore::storeUrlIsValidated()
{
    QString error;
    // PostgreSQL URLs are only read here, so the hosts need not exist.
    const auto postgres = StoreLocation::parse(QStringLiteral("postgres://user:secret@db:5432/once"), &error);
    QVERIFY2(postgres, qPrintable(error));
    QCOMPARE(postgres->kind, StoreLocation::Kind::Postgres);
    QCOMPARE(postgres->servers, (QList<StoreLocation::Server>{{QStringLiteral("db"), 5432}}));
    QCOMPARE(postgres->user, QStringLiteral("user"));
    QCOMPARE(postgres->password, QStringLiteral("secret"));
    QCOMPARE(postgres->database, QStringLiteral("once"));
    QVERIFY2(!postgres->displayName().contains(QLatin1String("secret")), qPrintable(postgres->displayName()));
    QCOMPARE(postgres->displayName(), QStringLiteral("postgres://user@db:5432/once"));
    const auto otherPort = StoreLocation::parse(QStringLiteral("postgres://user@db:6543/once"), &error);
    QVERIFY2(otherPort, qPrintable(error));
    QCOMPARE(otherPort->servers.constFirst().port, 6543);
    QVERIFY(otherPort->password.isEmpty()); // left to PGPASSWORD
    const auto defaultPort = StoreLocation::parse(QStringLiteral("postgres://user:secret@db/once"), &error);
    QVERIFY2(defaultPort, qPrintable(error));
    QCOMPARE(defaultPort->servers.constFirst().port, 5432);

    // A URL that cannot name a database is refused up front, saying what is missing,
    // without repeating the password.
    const std::pair<const char *, const char *> incomplete[] = {
        {"postgres://user:secret@/once", "host"},
        {"postgres://user:secret@db:5432/", "database"},
        {"postgres://user:secret@db:5432", "database"},
    };
    for (const auto &[url, missing] : incomplete) {
        error.clear();
        QVERIFY2(!StoreLocation::parse(QString::fromLatin1(url), &error), url);
        QVERIFY2(error.contains(QLatin1String(missing)), qPrintable(QStringLiteral("%1: %2").arg(QLatin1String(url), error)));
        QVERIFY2(!error.contains(QLatin1String("secret")), qPrintable(error));
    }

    QVERIFY(!StoreLocation::parse(QStringLiteral("sqlite:"), &error));
    QVERIFY(error.contains(QLatin1String("empty")));
    QVERIFY(!StoreLocation::parse(QStringLiteral("mysql://db/once"), &error));
    QVERIFY2(error.contains(QLatin1String("unknown store URL scheme")), qPrintable(error));
    // SQLite paths, whatever the kind under test.
    const QString path = m_stores.filePath(QStringLiteral("parsed.sqlite"));
    const auto plain = StoreLocation::parse(path, &error);
    QVERIFY(plain);
    QCOMPARE(plain->kind, StoreLocation::Kind::Sqlite);
    QCOMPARE(plain->path, QFileInfo(path).absoluteFilePath());
    const auto prefixed = StoreLocation::parse(QStringLiteral("sqlite:") + path, &error);
    QVERIFY(prefixed);
    QCOMPARE(prefixed->path, plain->path);
    // What is shown reads back as the same store, spaces and all.
    const auto spaced = StoreLocation::parse(QStringLiteral("postgres://us%20er:secret@db/my%20db"), &error);
    QVERIFY2(spaced, qPrintable(error));
    const auto shownBack = StoreLocation::parse(spaced->displayName(), &error);
    QVERIFY2(shownBack, qPrintable(spaced->displayName() + QStringLiteral(": ") + error));
    QCOMPARE(shownBack->user, QStringLiteral("us er"));
    QCOMPARE(shownBack->database, QStringLiteral("my db"));
    // A relative path is a file in the current folder, even one that Qt would read as a
    // resource (":name") or SQLite as its in-memory database (":memory:").
    for (const QString &relative : {QStringLiteral(":memory:"), QStringLiteral(":us;he@o"), QStringLiteral("a/b.sqlite")}) {
        const auto location = StoreLocation::parse(relative, &error);
        QVERIFY2(location, qPrintable(error));
        QCOMPARE(location->path, QDir::currentPath() + QLatin1Char('/') + relative);
    }
}

void TestStore::passwordFromEnvironment()
{
    // PostgreSQL only: PGPASSWORD is libpq's way to keep a password out of the URL (and
    // so out of process listings and shell history); a SQLite file has no password.
    if (!m_stores.isPostgres())
        QSKIP("PostgreSQL only: a SQLite store has no password");
    // Only what this test sets may answer for the server, not a ~/.pgpass of the machine.
    const EnvironmentGuard noPassFile("PGPASSFILE", QFile::encodeName(m_stores.filePath(QStringLiteral("no-pgpass"))));
    const EnvironmentGuard noPassword("PGPASSWORD", std::nullopt);
    const QString bare = TestStores::withoutPassword(m_url);
    QVERIFY2(!bare.contains(m_stores.password()), qPrintable(bare));

    QString error;
    QVERIFY(!Store::open(bare, &error));
    QVERIFY2(error.contains(QLatin1String("authentication"), Qt::CaseInsensitive), qPrintable(error));
    QVERIFY2(!error.contains(m_stores.password()), qPrintable(error));

    {
        // A wrong password is refused the same way, and not repeated back.
        const QByteArray wrong = QByteArrayLiteral("not-the-password-4711");
        const EnvironmentGuard wrongPassword("PGPASSWORD", wrong);
        error.clear();
        QVERIFY(!Store::open(bare, &error));
        QVERIFY2(error.contains(QLatin1String("authentication"), Qt::CaseInsensitive), qPrintable(error));
        QVERIFY2(!error.contains(QLatin1String(wrong)), qPrintable(error));
    }

    const EnvironmentGuard password("PGPASSWORD", m_stores.password().toUtf8());
    error.clear();
    auto store = Store::open(bare, &error);
    QVERIFY2(store, qPrintable(error));
    QVERIFY(store->database().isPostgres());
    QVERIFY(!store->database().location().displayName().contains(m_stores.password()));
    // It is the same store as the fixture's: each sees the other's writes.
    QVERIFY2(m_store->queue().enqueue({outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("r")))}, &error),
             qPrintable(error));
    const auto counts = store->queue().counts(&error);
    QVERIFY2(counts, qPrintable(error));
    QCOMPARE(counts->ready, qint64(1));
}

void TestStore::tlsVerifyFullChecksTheServer()
{
    if (!m_stores.isPostgres())
        QSKIP("PostgreSQL only: a SQLite store is a local file");
    const QString trusted = TestStores::clusterFile(QStringLiteral("ca.crt"));
    const QString stranger = TestStores::clusterFile(QStringLiteral("other-ca.crt"));
    QVERIFY2(QFile::exists(trusted) && QFile::exists(stranger), qPrintable(trusted));
    // hostName: the name the certificate must carry; the connection still goes to the
    // test server's address, which libpq then takes from PGHOSTADDR (the URL's query may
    // not say hostaddr: it would connect elsewhere than the host shown).
    std::optional<EnvironmentGuard> hostAddress;
    const auto verifyFull = [this, &hostAddress](const QString &ca, const QString &hostName = QString()) {
        QUrl url(m_url, QUrl::StrictMode);
        hostAddress.reset();
        if (!hostName.isEmpty()) {
            hostAddress.emplace("PGHOSTADDR", url.host().toLatin1());
            url.setHost(hostName);
        }
        url.setQuery(QStringLiteral("sslmode=verify-full&sslrootcert=") + ca);
        return url.toString(QUrl::FullyEncoded);
    };

    // The server's certificate names 127.0.0.1 and is signed by the CA the URL trusts.
    QString error;
    auto store = Store::open(verifyFull(trusted), &error);
    QVERIFY2(store, qPrintable(error));
    QSqlQuery session(store->database().connection());
    QVERIFY2(session.exec(QStringLiteral("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")) && session.next(),
             qPrintable(session.lastError().text()));
    QVERIFY2(session.value(0).toBool(), "the session is not encrypted");
    session.finish();
    store.reset();

    // Trusting another CA, the same server is refused: a clear line, no password in it.
    error.clear();
    QVERIFY(!Store::open(verifyFull(stranger), &error));
    QVERIFY2(error.contains(QLatin1String("certificate verify failed")), qPrintable(error));
    QVERIFY2(!error.contains(QLatin1Char('\n')), qPrintable(error));
    QVERIFY2(!error.contains(m_stores.password()), qPrintable(error));

    // And so is a server whose certificate names other hosts than the one asked for.
    error.clear();
    QVERIFY2(Store::open(verifyFull(trusted, QStringLiteral("localhost")), &error), qPrintable(error));
    QVERIFY(!Store::open(verifyFull(trusted, QStringLiteral("wrong.example")), &error));
    QVERIFY2(error.contains(QLatin1String("does not match host name \"wrong.example\"")), qPrintable(error));
    QVERIFY2(!error.contains(m_stores.password()), qPrintable(error));
}

// libpq lets a later keyword win, and the query options come after host, dbname, user and
// password: an option naming any of those, or a value that libpq would read as more
// keywords, would connect somewhere other than the store shown. Each is refused in one
// line that repeats no secret.
void TestStore::storeUrlQueryCannotRedirectTheConnection_data()
{
    QTest::addColumn<QString>("url");
    QTest::addColumn<QString>("errorMentions");
    const QString base = QStringLiteral("postgres://user:hunter2@db:5432/once");
    for (const char *name : {"host", "hostaddr", "port", "dbname", "user", "service"})
        QTest::addRow("%s", name) << base + QStringLiteral("?%1=/tmp").arg(QLatin1String(name))
                                  << QStringLiteral("cannot set \"%1\"").arg(QLatin1String(name));
    QTest::newRow("host among others") << base + QStringLiteral("?sslmode=require&host=/tmp") << QStringLiteral("cannot set \"host\"");
    QTest::newRow("password") << base + QStringLiteral("?password=hunter2") << QStringLiteral("cannot hold a password");
    QTest::newRow("sslpassword") << base + QStringLiteral("?sslpassword=hunter2") << QStringLiteral("\"sslpassword\"");
    QTest::newRow("options") << base + QStringLiteral("?options=-csearch_path%3Dhunter2") << QStringLiteral("\"options\"");
    QTest::newRow("upper-case name") << base + QStringLiteral("?HOST=/tmp") << QStringLiteral("lower-case letters");
    QTest::newRow("name with a space") << base + QStringLiteral("?ssl%20mode=require") << QStringLiteral("lower-case letters");
    QTest::newRow("a hunter2 without a name") << base + QStringLiteral("?hunter2%21") << QStringLiteral("lower-case letters");
    QTest::newRow("empty name") << base + QStringLiteral("?=hunter2") << QStringLiteral("lower-case letters");
    QTest::newRow("twice") << base + QStringLiteral("?sslmode=require&sslmode=disable") << QStringLiteral("\"sslmode\" twice");
    // Qt's driver turns every ';' of the options into a space: "x;password=hunter2" would
    // reach libpq as two keywords.
    QTest::newRow("semicolon in a value") << base + QStringLiteral("?application_name=x%3Bpassword%3Dhunter2")
                                          << QStringLiteral("\"application_name\" contains ';'");
    QTest::newRow("NUL in a value") << base + QStringLiteral("?application_name=x%00hunter2") << QStringLiteral("U+0000");
    QTest::newRow("NUL in the database") << QStringLiteral("postgres://user:hunter2@db/once%00hunter2") << QStringLiteral("database contains U+0000");
    QTest::newRow("NUL in the user") << QStringLiteral("postgres://us%00er:hunter2@db/once") << QStringLiteral("user contains U+0000");
    // SQLite opens a C string: the file would be the path cut at the NUL.
    QTest::newRow("NUL in a SQLite path") << QStringLiteral("sqlite:/tmp/a") + QChar(0) + QStringLiteral("b") << QStringLiteral("contains U+0000");
    QTest::newRow("scheme with a newline") << QStringLiteral("my\nsql://db/once") << QStringLiteral("unknown store URL scheme in \"my\\nsql\"");
    QTest::newRow("NUL in a plain path") << QStringLiteral("/tmp/a") + QChar(0) << QStringLiteral("contains U+0000");
}

void TestStore::storeUrlQueryCannotRedirectTheConnection()
{
    QFETCH(QString, url);
    QFETCH(QString, errorMentions);
    QString error;
    QVERIFY2(!StoreLocation::parse(url, &error), qPrintable(url));
    QVERIFY2(error.contains(errorMentions), qPrintable(error));
    QVERIFY2(!error.contains(QLatin1Char('\n')), qPrintable(error));
    QVERIFY2(!error.contains(QLatin1String("hunter2")), qPrintable(error));
}

void TestStore::libpqOptionsQuoteEveryValue_data()
{
    QTest::addColumn<QString>("query");
    QTest::addColumn<QString>("options");
    // Every option below ends with the dead-connection settings (see StoreLocation).
    QTest::newRow("none") << QString() << QStringLiteral("connect_timeout='10';application_name='once'");
    QTest::newRow("keywords inside a value") << QStringLiteral("application_name=x%20password%3Dy%20host%3D/tmp")
                                             << QStringLiteral("application_name='x password=y host=/tmp';connect_timeout='10'");
    QTest::newRow("quote and backslash") << QStringLiteral("sslrootcert=/a%20b/c'd%5Ce")
                                         << QStringLiteral("sslrootcert='/a b/c\\'d\\\\e';connect_timeout='10';application_name='once'");
    QTest::newRow("own timeout") << QStringLiteral("connect_timeout=5&sslmode=verify-full")
                                 << QStringLiteral("connect_timeout='5';sslmode='verify-full';application_name='once'");
    QTest::newRow("empty value") << QStringLiteral("sslmode=") << QStringLiteral("sslmode='';connect_timeout='10';application_name='once'");
}

void TestStore::libpqOptionsQuoteEveryValue()
{
    QFETCH(QString, query);
    QFETCH(QString, options);
    QString error;
    const auto location = StoreLocation::parse(
        QStringLiteral("postgres://user@db/once") + (query.isEmpty() ? QString() : QLatin1Char('?') + query), &error);
    QVERIFY2(location, qPrintable(error));
    QCOMPARE(location->libpqOptions(), options + QStringLiteral(";keepalives='1';keepalives_idle='5';keepalives_interval='1';keepalives_count='3';tcp_user_timeout='5000'"));
}

// Several hosts, as libpq takes them for high availability (Patroni and the like): it
// tries each in turn and keeps the first that suits target_session_attrs. servers: the
// hosts and ports parsed, "HOST:PORT" joined by spaces; empty when the URL is refused, and
// then errorMentions is in its one-line error, which repeats no password.
void TestStore::multiHostUrls_data()
{
    QTest::addColumn<QString>("url");
    QTest::addColumn<QString>("servers");
    QTest::addColumn<QString>("shown");
    QTest::addColumn<QString>("errorMentions");
    QTest::newRow("two with ports") << QStringLiteral("postgres://once:hunter2@h1:5432,h2:5433/db?target_session_attrs=read-write")
                                    << QStringLiteral("h1:5432 h2:5433") << QStringLiteral("postgres://once@h1:5432,h2:5433/db")
                                    << QString();
    QTest::newRow("default ports") << QStringLiteral("postgresql://once@h1,h2,h3/db") << QStringLiteral("h1:5432 h2:5432 h3:5432")
                                   << QStringLiteral("postgres://once@h1:5432,h2:5432,h3:5432/db") << QString();
    QTest::newRow("one port given") << QStringLiteral("postgres://once@h1,h2:6000/db") << QStringLiteral("h1:5432 h2:6000")
                                    << QStringLiteral("postgres://once@h1:5432,h2:6000/db") << QString();
    QTest::newRow("IPv6 and IPv4") << QStringLiteral("postgres://once@[::1]:5432,127.0.0.1:5433/db")
                                   << QStringLiteral("::1:5432 127.0.0.1:5433")
                                   << QStringLiteral("postgres://once@[::1]:5432,127.0.0.1:5433/db") << QString();
    QTest::newRow("no user") << QStringLiteral("postgres://h1,h2/db") << QStringLiteral("h1:5432 h2:5432")
                             << QStringLiteral("postgres://h1:5432,h2:5432/db") << QString();
    QTest::newRow("password with a comma") << QStringLiteral("postgres://once:hunter2,x@h1,h2/db")
                                           << QStringLiteral("h1:5432 h2:5432") << QStringLiteral("postgres://once@h1:5432,h2:5432/db")
                                           << QString();
    QTest::newRow("empty entry") << QStringLiteral("postgres://once:hunter2@h1,,h2/db") << QString() << QString()
                                 << QStringLiteral("an empty entry");
    QTest::newRow("trailing comma") << QStringLiteral("postgres://once:hunter2@h1:5432,/db") << QString() << QString()
                                    << QStringLiteral("an empty entry");
    QTest::newRow("port not a number") << QStringLiteral("postgres://once:hunter2@h1,h2:x/db") << QString() << QString()
                                       << QStringLiteral("\"h2:x\", which is not HOST[:PORT]");
    QTest::newRow("port out of range") << QStringLiteral("postgres://once:hunter2@h1,h2:70000/db") << QString() << QString()
                                       << QStringLiteral("\"h2:70000\"");
    QTest::newRow("port only") << QStringLiteral("postgres://once:hunter2@h1,:5433/db") << QString() << QString()
                               << QStringLiteral("\":5433\"");
    QTest::newRow("no database") << QStringLiteral("postgres://once:hunter2@h1,h2/") << QString() << QString()
                                 << QStringLiteral("names no database");
    QTest::newRow("hosts in the query too") << QStringLiteral("postgres://once:hunter2@h1,h2/db?host=h3") << QString()
                                            << QString() << QStringLiteral("cannot set \"host\"");
}

void TestStore::multiHostUrls()
{
    QFETCH(QString, url);
    QFETCH(QString, servers);
    QFETCH(QString, shown);
    QFETCH(QString, errorMentions);
    QString error;
    const auto location = StoreLocation::parse(url, &error);
    if (servers.isEmpty()) {
        QVERIFY2(!location, qPrintable(url));
        QVERIFY2(error.contains(errorMentions), qPrintable(error));
        QVERIFY2(!error.contains(QLatin1Char('\n')) && !error.contains(QLatin1String("hunter2")), qPrintable(error));
        return;
    }
    QVERIFY2(location, qPrintable(error));
    QStringList parsed;
    QStringList hosts;
    QStringList ports;
    for (const auto &server : location->servers) {
        parsed << QStringLiteral("%1:%2").arg(server.host).arg(server.port);
        hosts << server.host;
        ports << QString::number(server.port);
    }
    QCOMPARE(parsed.join(QLatin1Char(' ')), servers);
    QCOMPARE(location->database, QStringLiteral("db"));
    QCOMPARE(location->displayName(), shown);
    // What is shown reads back as the same store.
    const auto again = StoreLocation::parse(shown, &error);
    QVERIFY2(again, qPrintable(error));
    QCOMPARE(again->servers, location->servers);
    QCOMPARE(again->user, location->user);
    // libpq gets the hosts as its host list and their ports as its port list, in order.
    QCOMPARE(location->libpqHosts(), hosts.join(QLatin1Char(',')));
    QCOMPARE(location->qpsqlPort(), -1);
    QVERIFY2(location->libpqOptions().startsWith(QStringLiteral("port='%1';").arg(ports.join(QLatin1Char(',')))),
             qPrintable(location->libpqOptions()));
}

// The URL's own keepalive or TCP timeout settings win over once's defaults.
void TestStore::urlMayTuneTheDeadConnectionSettings()
{
    QString error;
    const auto location =
        StoreLocation::parse(QStringLiteral("postgres://once@db/once?tcp_user_timeout=20000&keepalives=0"), &error);
    QVERIFY2(location, qPrintable(error));
    QCOMPARE(location->libpqOptions(),
             QStringLiteral("tcp_user_timeout='20000';keepalives='0';connect_timeout='10';application_name='once';"
                            "keepalives_idle='5';keepalives_interval='1';keepalives_count='3'"));
}

// What a query value says reaches libpq as that one option's value, however it is
// spelled: on a real server, the session's application_name is the literal text, and the
// session is in the URL's database, as the URL's user.
void TestStore::queryValuesReachLibpqAsTheyAre()
{
    if (!m_stores.isPostgres())
        QSKIP("PostgreSQL only: a SQLite store has no connection options");
    // Each would have been read as more keywords: another database, a wrong password.
    const QString literal = QStringLiteral("x dbname=postgres password=wrong it's a \\' quote\\");
    QUrl url(m_url, QUrl::StrictMode);
    url.setQuery(QStringLiteral("application_name=") + QString::fromLatin1(QUrl::toPercentEncoding(literal)),
                 QUrl::StrictMode);
    QString error;
    auto store = Store::open(url.toString(QUrl::FullyEncoded), &error);
    QVERIFY2(store, qPrintable(error));
    QSqlQuery session(store->database().connection());
    QVERIFY2(session.exec(QStringLiteral("SELECT current_setting('application_name'), current_database(), current_user"))
                 && session.next(),
             qPrintable(session.lastError().text()));
    QCOMPARE(session.value(0).toString(), literal);
    QCOMPARE(session.value(1).toString(), QUrl(m_url).path().mid(1));
    QCOMPARE(session.value(2).toString(), QUrl(m_url).userName());
    session.finish();
    store.reset();

    // Without one of its own, the session is named once, for a DBA's pg_stat_activity.
    store = Store::open(m_url, &error);
    QVERIFY2(store, qPrintable(error));
    QSqlQuery named(store->database().connection());
    QVERIFY(named.exec(QStringLiteral("SELECT current_setting('application_name')")) && named.next());
    QCOMPARE(named.value(0).toString(), QStringLiteral("once"));
    named.finish();
    store.reset();

    // And a query that would connect elsewhere is refused before any connection.
    url.setQuery(QStringLiteral("host=/tmp"));
    QVERIFY(!Store::open(url.toString(QUrl::FullyEncoded), &error));
    QVERIFY2(error.contains(QLatin1String("cannot set \"host\"")), qPrintable(error));
    QVERIFY2(!error.contains(m_stores.password()), qPrintable(error));
}

// --- Queue -----------------------------------------------------------------------

void TestStore::enqueueThenLeaseGivesFirstDelivery()
{
    QString error;
    const Reminder reminder = makeReminder(QStringLiteral("u"), QStringLiteral("r"), QStringLiteral("2026-12-01T09:00:00Z"),
                                           QStringLiteral("evt-1"));
    const qint64 before = nowMs();
    QVERIFY2(m_store->queue().enqueue({outgoing(reminder)}, &error), qPrintable(error));
    const auto leased = m_store->queue().lease(10, 30000, Worker, &error);
    const qint64 after = nowMs();
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QCOMPARE(leased.size(), 1);
    const QueueMessage &message = leased.constFirst();
    QVERIFY(!message.id.isEmpty());
    QCOMPARE(message.payload, reminder.payload);
    QCOMPARE(message.delivery, 1);
    QCOMPARE(message.redriveCount, 0);
    QVERIFY(message.enqueuedAtMs >= before && message.enqueuedAtMs <= after);
    QVERIFY(message.leaseUntilMs >= before + 30000 && message.leaseUntilMs <= after + 30000);
    // The searchable copies of key and event id sit beside the payload.
    QCOMPARE(scalar(QStringLiteral("SELECT send_key FROM queue WHERE id = ?"), {message.id}).toString(),
             QString::fromLatin1(reminder.sendKey));
    QCOMPARE(scalar(QStringLiteral("SELECT event_id FROM queue WHERE id = ?"), {message.id}).toString(),
             QStringLiteral("evt-1"));
    QCOMPARE(scalar(QStringLiteral("SELECT lease_owner FROM queue WHERE id = ?"), {message.id}).toString(), Worker);
}

void TestStore::leaseHonoursBatchSizeAndOrder()
{
    QString error;
    QList<OutgoingMessage> messages;
    for (int i = 0; i < 5; ++i)
        messages.append(outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("r%1").arg(i))));
    // One more, delayed: it must not be leased at all.
    messages.append(outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("later")), 60000));
    QVERIFY2(m_store->queue().enqueue(messages, &error), qPrintable(error));
    const auto first = m_store->queue().lease(2, LongLease, Worker, &error);
    QCOMPARE(first.size(), 2);
    const auto rest = m_store->queue().lease(10, LongLease, Worker, &error);
    QCOMPARE(rest.size(), 3);
    QSet<QString> ids;
    for (const auto &message : first + rest) {
        ids.insert(message.id);
        QCOMPARE(message.delivery, 1);
        QVERIFY(!message.payload.contains("later"));
    }
    QCOMPARE(ids.size(), 5);
    QVERIFY(m_store->queue().lease(10, LongLease, Worker, &error).isEmpty());
    const auto counts = m_store->queue().counts(&error);
    QCOMPARE(counts->inFlight, qint64(5));
    QCOMPARE(counts->delayed, qint64(1));
    QCOMPARE(counts->ready, qint64(0));
}

void TestStore::leasedMessageIsHiddenUntilLeaseExpires()
{
    QString error;
    const Reminder reminder = makeReminder(QStringLiteral("u"), QStringLiteral("r"));
    QVERIFY2(m_store->queue().enqueue({outgoing(reminder)}, &error), qPrintable(error));
    QElapsedTimer clock;
    clock.start();
    // Short, but long enough that the next call (after a durable commit) is surely within it.
    constexpr qint64 ShortLease = 200;
    const auto first = m_store->queue().lease(10, ShortLease, Worker, &error);
    QCOMPARE(first.size(), 1);
    QCOMPARE(first.constFirst().delivery, 1);

    // Not leased again while the lease runs.
    QVERIFY(m_store->queue().lease(10, ShortLease, QStringLiteral("worker-2"), &error).isEmpty());
    QCOMPARE(m_store->queue().counts(&error)->inFlight, qint64(1));

    // After it runs out, it comes back as delivery 2 of the same message.
    // (QTRY_* evaluates its expression more than once, so it watches the side-effect-free
    // counts and the lease happens once, after.)
    QTRY_COMPARE_WITH_TIMEOUT(m_store->queue().counts(&error)->ready, qint64(1), 2000);
    QCOMPARE(m_store->queue().counts(&error)->inFlight, qint64(0));
    const auto again = m_store->queue().lease(10, LongLease, QStringLiteral("worker-2"), &error);
    QVERIFY2(clock.elapsed() >= ShortLease - 5, qPrintable(QString::number(clock.elapsed())));
    QCOMPARE(again.size(), 1);
    QCOMPARE(again.constFirst().id, first.constFirst().id);
    QCOMPARE(again.constFirst().delivery, 2);
    QCOMPARE(again.constFirst().payload, reminder.payload);
    QCOMPARE(again.constFirst().enqueuedAtMs, first.constFirst().enqueuedAtMs);
    QCOMPARE(scalar(QStringLiteral("SELECT lease_owner FROM queue WHERE id = ?"), {again.constFirst().id}).toString(),
             QStringLiteral("worker-2"));
}

void TestStore::staleAckIsIgnored()
{
    QString error;
    QVERIFY2(m_store->queue().enqueue({outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("r")))}, &error),
             qPrintable(error));
    const auto first = m_store->queue().lease(1, 50, Worker, &error);
    QCOMPARE(first.size(), 1);
    QTRY_COMPARE_WITH_TIMEOUT(m_store->queue().counts(&error)->ready, qint64(1), 2000);
    const auto second = m_store->queue().lease(1, LongLease, Worker, &error);
    QCOMPARE(second.size(), 1);
    QCOMPARE(second.constFirst().delivery, 2);
    const QString id = first.constFirst().id;

    // The first worker's late ack (and a late retry or dead-letter) changes nothing.
    QVERIFY2(m_store->queue().settle({{Settlement::Kind::Ack, id, 1, 0, {}}}, &error), qPrintable(error));
    QVERIFY2(m_store->queue().settle({{Settlement::Kind::Retry, id, 1, 0, {}}}, &error), qPrintable(error));
    QVERIFY2(m_store->queue().settle({{Settlement::Kind::DeadLetter, id, 1, 0, {QStringLiteral("rejected"), {}, 1, 0, 0, {}, {}}}},
                                     &error),
             qPrintable(error));
    auto counts = m_store->queue().counts(&error);
    QCOMPARE(counts->inFlight, qint64(1));
    QCOMPARE(counts->dead, qint64(0));
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM queue")).toInt(), 1);

    // The current holder's ack removes it.
    QVERIFY2(m_store->queue().settle({{Settlement::Kind::Ack, id, 2, 0, {}}}, &error), qPrintable(error));
    counts = m_store->queue().counts(&error);
    QCOMPARE(counts->ready + counts->inFlight + counts->delayed + counts->dead, qint64(0));
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM queue")).toInt(), 0);
    // Settling nothing is fine.
    QVERIFY(m_store->queue().settle({}, &error));
}

void TestStore::retryDelaysMessageThenMakesItReady()
{
    QString error;
    QVERIFY2(m_store->queue().enqueue({outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("r")))}, &error),
             qPrintable(error));
    const auto leased = m_store->queue().lease(1, LongLease, Worker, &error);
    QCOMPARE(leased.size(), 1);
    const QueueMessage &message = leased.constFirst();
    QVERIFY2(m_store->queue().settle({{Settlement::Kind::Retry, message.id, message.delivery, 300, {}}}, &error),
             qPrintable(error));

    auto counts = m_store->queue().counts(&error);
    QCOMPARE(counts->delayed, qint64(1));
    QCOMPARE(counts->ready, qint64(0));
    QCOMPARE(counts->inFlight, qint64(0));
    QVERIFY(counts->nextVisibleInMs);
    QVERIFY(*counts->nextVisibleInMs > 0 && *counts->nextVisibleInMs <= 300);
    QVERIFY(m_store->queue().lease(1, LongLease, Worker, &error).isEmpty());
    QVERIFY(scalar(QStringLiteral("SELECT lease_owner FROM queue")).isNull());

    QTRY_COMPARE_WITH_TIMEOUT(m_store->queue().counts(&error)->ready, qint64(1), 2000);
    QCOMPARE(m_store->queue().counts(&error)->delayed, qint64(0));
    const auto again = m_store->queue().lease(1, LongLease, Worker, &error);
    QCOMPARE(again.size(), 1);
    QCOMPARE(again.constFirst().id, message.id);
    QCOMPARE(again.constFirst().delivery, 2);
}

void TestStore::deadLetterKeepsItsInfo()
{
    QString error;
    const Reminder reminder = makeReminder(QStringLiteral("u"), QStringLiteral("r"), QStringLiteral("2026-12-01T09:00:00Z"),
                                           QStringLiteral("evt-dead"));
    QVERIFY2(m_store->queue().enqueue({outgoing(reminder)}, &error), qPrintable(error));
    const DeadLetterInfo info{QStringLiteral("rejected"), QStringLiteral("HTTP 400: bad destination"), 3,
                              1700000000000, 1700000005000, reminder.sendKey, reminder.eventId};
    QueueMessage buried;
    QVERIFY(buryOne(info, &buried));

    const auto counts = m_store->queue().counts(&error);
    QCOMPARE(counts->dead, qint64(1));
    QCOMPARE(counts->ready + counts->inFlight + counts->delayed, qint64(0));
    const auto letters = m_store->inspector().deadLetters({}, &error);
    QVERIFY2(letters, qPrintable(error));
    QCOMPARE(letters->size(), 1);
    const DeadLetter &letter = letters->constFirst();
    QCOMPARE(letter.id, buried.id);
    QCOMPARE(letter.payload, reminder.payload);
    QCOMPARE(letter.sendKey, reminder.sendKey);
    QCOMPARE(letter.eventId, QStringLiteral("evt-dead"));
    QCOMPARE(letter.errorClass, QStringLiteral("rejected"));
    QCOMPARE(letter.lastError, QStringLiteral("HTTP 400: bad destination"));
    QCOMPARE(letter.attempts, 3);
    QCOMPARE(letter.firstAttemptAtMs, qint64(1700000000000));
    QCOMPARE(letter.lastAttemptAtMs, qint64(1700000005000));
    QCOMPARE(letter.receiveCount, 1);
    QCOMPARE(letter.enqueuedAtMs, buried.enqueuedAtMs);
    QVERIFY(letter.deadAtMs >= buried.enqueuedAtMs && letter.deadAtMs <= nowMs());

    // Filters.
    DeadLetterFilter byClass;
    byClass.errorClass = QStringLiteral("http-5xx");
    QCOMPARE(m_store->inspector().deadLetters(byClass, &error)->size(), 0);
    byClass.errorClass = QStringLiteral("rejected");
    QCOMPARE(m_store->inspector().deadLetters(byClass, &error)->size(), 1);
    DeadLetterFilter byKey;
    byKey.sendKeys = {reminder.sendKey};
    QCOMPARE(m_store->inspector().deadLetters(byKey, &error)->size(), 1);
    byKey.sendKeys = {QByteArrayLiteral("other")};
    QCOMPARE(m_store->inspector().deadLetters(byKey, &error)->size(), 0);
    DeadLetterFilter since;
    since.sinceMs = nowMs() + 60000;
    QCOMPARE(m_store->inspector().deadLetters(since, &error)->size(), 0);
}

// A list of dead letters pages by keyset in (dead_at, id) order, either way: pages of two
// neither repeat nor miss a letter, also among letters that died in the same millisecond.
// Lists leave payloads out; the one letter loaded by id has it. The counts by class come
// from the store, whatever a page holds.
void TestStore::deadLettersPageByKeysetWithoutPayloads()
{
    QString error;
    const QList<qint64> deadAt{1000, 1000, 1000, 2000, 2000, 3000, 4000};
    QStringList buriedIds;
    for (int i = 0; i < deadAt.size(); ++i) {
        const Reminder reminder = makeReminder(QStringLiteral("u%1").arg(i), QStringLiteral("r"));
        QVERIFY2(m_store->queue().enqueue({outgoing(reminder)}, &error), qPrintable(error));
        const DeadLetterInfo info{i % 3 == 0 ? QStringLiteral("rejected") : QStringLiteral("http-5xx"),
                                  QStringLiteral("error %1").arg(i), 2, i < 2 ? qint64(500) : qint64(5000), 6000,
                                  reminder.sendKey, reminder.eventId};
        QueueMessage buried;
        QVERIFY(buryOne(info, &buried));
        buriedIds << buried.id;
        QSqlQuery update(m_store->database().connection());
        QVERIFY(update.prepare(QStringLiteral("UPDATE dead_letters SET dead_at = ?, redrive_count = ? WHERE id = ?")));
        update.addBindValue(deadAt.at(i));
        update.addBindValue(i == 4 ? 1 : 0);
        update.addBindValue(buried.id);
        QVERIFY2(update.exec(), qPrintable(update.lastError().text()));
    }

    for (const bool newestFirst : {false, true}) {
        DeadLetterFilter all;
        all.newestFirst = newestFirst;
        const auto whole = m_store->inspector().deadLetters(all, &error);
        QVERIFY2(whole && whole->size() == deadAt.size(), qPrintable(error));
        for (int i = 1; i < whole->size(); ++i)
            QVERIFY(all.listsBefore(whole->at(i - 1), whole->at(i)));

        DeadLetterFilter page;
        page.newestFirst = newestFirst;
        page.limit = 2;
        page.withPayload = false;
        QStringList paged;
        for (int round = 0; round < 10; ++round) {
            const auto letters = m_store->inspector().deadLetters(page, &error);
            QVERIFY2(letters, qPrintable(error));
            for (const DeadLetter &letter : *letters) {
                paged << letter.id;
                QVERIFY(letter.payload.isEmpty());
                QVERIFY(!letter.sendKey.isEmpty());
            }
            if (letters->size() < page.limit)
                break;
            page.continueAfter(letters->constLast());
        }
        QStringList expected;
        for (const DeadLetter &letter : *whole)
            expected << letter.id;
        QCOMPARE(paged, expected);
        // The same page cut from the letters in memory (a broker's), in any order.
        QList<DeadLetter> shuffled = *whole;
        std::reverse(shuffled.begin(), shuffled.end());
        DeadLetterFilter second = page;
        second.afterId.clear();
        second.continueAfter(whole->at(1));
        QStringList inMemory;
        for (const DeadLetter &letter : deadLetterPage(shuffled, second))
            inMemory << letter.id;
        QCOMPARE(inMemory, expected.mid(2, 2));
    }

    // One letter, payload and all; a letter that is gone is an error that says so.
    const auto one = m_store->inspector().deadLetter(buriedIds.at(3), &error);
    QVERIFY2(one, qPrintable(error));
    QCOMPARE(one->payload, makeReminder(QStringLiteral("u3"), QStringLiteral("r")).payload);
    QCOMPARE(one->lastError, QStringLiteral("error 3"));
    QVERIFY(!m_store->inspector().deadLetter(QStringLiteral("no-such-id"), &error));
    QVERIFY2(error.contains(QLatin1String("no-such-id")), qPrintable(error));

    // Counts by class: of the time filter, a class apart, the redriven and those first sent
    // before a moment.
    DeadLetterFilter since;
    since.sinceMs = 2000;
    const auto counts = m_store->inspector().countDeadLetters(since, 1000, &error);
    QVERIFY2(counts, qPrintable(error));
    QCOMPARE(counts->byClass.keys(), (QList<QString>{QStringLiteral("http-5xx"), QStringLiteral("rejected")}));
    QCOMPARE(counts->tally().letters, qint64(4));
    QCOMPARE(counts->tally(QStringLiteral("rejected")).letters, qint64(2));  // letters 3 and 6
    QCOMPARE(counts->tally(QStringLiteral("http-5xx")).letters, qint64(2));  // letters 4 and 5
    QCOMPARE(counts->tally(QStringLiteral("http-5xx")).redrivenBefore, qint64(1));
    QCOMPARE(counts->tally().firstSentBefore, qint64(0));
    const auto everything = m_store->inspector().countDeadLetters({}, 1000, &error);
    QVERIFY2(everything, qPrintable(error));
    QCOMPARE(everything->tally().letters, qint64(deadAt.size()));
    QCOMPARE(everything->tally().firstSentBefore, qint64(2));
    // In memory, the same numbers.
    const auto listed = m_store->inspector().deadLetters({}, &error);
    const DeadLetterCounts fromList = countDeadLetters(*listed, since, 1000);
    QCOMPARE(fromList.tally(QStringLiteral("rejected")).letters, qint64(2));
    QCOMPARE(fromList.tally().redrivenBefore, qint64(1));
}

// The Overview's sends per bucket count a window of attempts by step and outcome: at ten
// million events a day holds hundreds of thousands, and a look-up of each row for those two
// columns made a day's chart 273 ms. The index of the window's times holds them too.
// A worker's statements are prepared once on its connection. PostgreSQL planned them
// generically once they had run a few times, on a ledger that was then nearly empty: as
// the ledger grew, each turn's outcomes kept being joined to the whole ledger by a scan
// (four workers' turns read 14.5 million rows to deliver 20,000 reminders). Each is
// planned for the ledger as it is now.
// A prefix few events have is found through the columns' indexes. SQLite's own plan reads
// the ledger newest first until a page is full: for a prefix no event has, the whole
// ledger (0.5 s at a million events). What a query read is counted in SQLite's virtual
// machine steps, the same on any machine.
// A worker's turn on PostgreSQL commits its outcomes, then its claims: the claims'
// commit waits for the disk (a send follows it), the outcomes' need not, as the claims'
// commit flushes the server's log up to itself. What each ledger row was written under
// is noted by a trigger of the test's own.
void TestStore::aTurnsClaimsWaitForTheDiskItsOutcomesNeedNot()
{
    if (!m_stores.isPostgres())
        QSKIP("SQLite commits a whole turn at once");
    QSqlQuery setup(m_store->database().connection());
    // The test server does not wait for its disk at all; this database's connections do.
    for (const char *sql : {"DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET synchronous_commit = on', "
                            "current_database()); END $$",
                            "CREATE TABLE commit_modes (operation TEXT, mode TEXT)",
                            "CREATE FUNCTION note_commit_mode() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                            "INSERT INTO commit_modes VALUES (TG_OP, current_setting('synchronous_commit')); "
                            "RETURN NULL; END $$",
                            "CREATE TRIGGER note_commit_mode AFTER INSERT OR UPDATE ON ledger "
                            "FOR EACH ROW EXECUTE FUNCTION note_commit_mode()"}) {
        QVERIFY2(setup.exec(QString::fromLatin1(sql)), qPrintable(setup.lastError().text()));
    }
    QString error;
    for (const char *user : {"u-1", "u-2"})
        QVERIFY2(m_store->queue().enqueue(
                     {outgoing(makeReminder(QString::fromLatin1(user), QStringLiteral("r")))}, &error),
                 qPrintable(error));

    EngineStore side(m_url, QString(), Worker, 1);
    QVERIFY2(side.open(&error, EngineStore::Notifications::Ignore), qPrintable(error));
    TurnRequest first;
    first.room = 1;
    first.leaseMs = 60000;
    first.workerId = Worker;
    const TurnResult claimed = side.runTurn(first);
    QVERIFY2(claimed.ok, qPrintable(claimed.error));
    QCOMPARE(claimed.claims.size(), 1);

    // The next turn records that reminder's outcome, acks it, and claims the other one.
    const ClaimRequest &done = claimed.claims.constFirst();
    TurnRequest next = first;
    next.updates = {LedgerUpdate{done.reminder.sendKey,
                                 done.messageId,
                                 done.delivery,
                                 LedgerState::Applied,
                                 true,
                                 nowMs(),
                                 200,
                                 {},
                                 {},
                                 {}}};
    next.settlements = {Settlement{Settlement::Kind::Ack, done.messageId, done.delivery, 0, {}}};
    const TurnResult recorded = side.runTurn(next);
    QVERIFY2(recorded.ok, qPrintable(recorded.error));
    QVERIFY(recorded.writesCommitted);
    QCOMPARE(recorded.claims.size(), 1);
    QCOMPARE(stateOf(done.reminder.sendKey), QStringLiteral("applied"));

    QSqlQuery modes(m_store->database().connection());
    QVERIFY2(modes.exec(QStringLiteral("SELECT operation || ' ' || mode FROM commit_modes ORDER BY ctid")),
             qPrintable(modes.lastError().text()));
    QStringList written;
    while (modes.next())
        written << modes.value(0).toString();
    // Two claims, each waiting for the disk; the outcome between them did not.
    QCOMPARE(written, (QStringList{QStringLiteral("INSERT on"), QStringLiteral("UPDATE off"),
                                   QStringLiteral("INSERT on")}));
    // And nothing of it stays with the connection.
    QSqlQuery after(side.store().database().connection());
    QVERIFY(after.exec(QStringLiteral("SHOW synchronous_commit")) && after.next());
    QCOMPARE(after.value(0).toString(), QStringLiteral("on"));
}

// A turn on PostgreSQL commits its outcomes and begins its claims in one round trip.
// Whatever fails, no transaction is left open and nothing of the failed one is kept.
void TestStore::commitAndBeginLeavesNothingHalfDone()
{
    Database &db = m_store->database();
    QString error;
    std::unique_ptr<Store> other = openStore(&error);
    QVERIFY2(other, qPrintable(error));
    const auto rowsSeenElsewhere = [&other] {
        QSqlQuery query(other->database().connection());
        return query.exec(QStringLiteral("SELECT COUNT(*) FROM audit_log WHERE actor = 'commit-and-begin'"))
                       && query.next()
                   ? query.value(0).toInt()
                   : -1;
    };
    const auto note = [&db](const char *detail) {
        QString error;
        const bool written = db.exec(QStringLiteral("INSERT INTO audit_log (at, actor, action, detail) "
                                                    "VALUES (1, 'commit-and-begin', 'test', '%1')")
                                         .arg(QLatin1String(detail)),
                                     &error);
        if (!written)
            qWarning().noquote() << error;
        return written;
    };

    {
        Transaction transaction(db);
        QVERIFY2(transaction.begin(&error, Database::CommitWait::Unflushed), qPrintable(error));
        QVERIFY(note("first"));
        QVERIFY2(transaction.commitAndBegin(&error), qPrintable(error));
        QCOMPARE(rowsSeenElsewhere(), 1);
        QVERIFY(note("second, rolled back"));
    } // rolled back here
    QCOMPARE(rowsSeenElsewhere(), 1);

    // An inner step that failed dooms the outer transaction: nothing commits, nothing begins.
    {
        Transaction transaction(db);
        QVERIFY2(transaction.begin(&error), qPrintable(error));
        QVERIFY(note("doomed"));
        {
            Transaction inner(db);
            QVERIFY2(inner.begin(&error), qPrintable(error));
        } // rolled back
        QVERIFY(!transaction.commitAndBegin(&error));
        QVERIFY2(!error.isEmpty(), "no reason given");
    }
    QCOMPARE(rowsSeenElsewhere(), 1);

    if (m_stores.isPostgres()) {
        // A COMMIT the server refuses (a constraint checked at commit): the BEGIN after it
        // in the same string never runs, and the connection is not left in a transaction.
        QVERIFY2(db.exec(QStringLiteral("CREATE TEMP TABLE checked_at_commit (n INTEGER "
                                        "UNIQUE DEFERRABLE INITIALLY DEFERRED)"),
                         &error),
                 qPrintable(error));
        Transaction transaction(db);
        QVERIFY2(transaction.begin(&error), qPrintable(error));
        QVERIFY(note("refused at commit"));
        QVERIFY2(db.exec(QStringLiteral("INSERT INTO checked_at_commit VALUES (1), (1)"), &error), qPrintable(error));
        error.clear();
        QVERIFY(!transaction.commitAndBegin(&error));
        QVERIFY2(error.contains(QLatin1String("checked_at_commit")) || error.contains(QLatin1String("duplicate")),
                 qPrintable(error));
        QCOMPARE(rowsSeenElsewhere(), 1);
        QSqlQuery state(db.connection());
        QVERIFY(state.exec(QStringLiteral("SELECT now() = statement_timestamp()")) && state.next());
        QVERIFY2(state.value(0).toBool(), "a transaction was left open");
    }

    // The connection goes on as before: a transaction begun now is one of its own, which
    // rolls back whole, or commits.
    {
        Transaction after(db);
        QVERIFY2(after.begin(&error), qPrintable(error));
        QVERIFY(note("after, rolled back"));
    }
    QCOMPARE(rowsSeenElsewhere(), 1);
    Transaction after(db);
    QVERIFY2(after.begin(&error), qPrintable(error));
    QVERIFY(note("after"));
    QVERIFY2(after.commit(&error), qPrintable(error));
    QCOMPARE(rowsSeenElsewhere(), 2);
}

void TestStore::aRarePrefixIsSearchedThroughTheIndexes()
{
    if (m_stores.isPostgres())
        QSKIP("SQLite's plan; PostgreSQL chooses between the two by its statistics");
    constexpr int Events = 20000;
    QVERIFY(TestStores::exec(m_store->database().connection(), QStringLiteral(R"sql(
WITH RECURSIVE seq(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM seq WHERE n < ?)
INSERT INTO ledger (send_key, event_id, user_id, reminder_id, scheduled_at, destination, channel, payload, state,
                    sends, duplicates, created_at, updated_at)
SELECT printf('u-%05d:r-%d', n / 10, n % 10), printf('evt-%06d', n), printf('u-%05d', n / 10), printf('r-%d', n % 10),
       1796115600000, printf('+1555%07d', n), 'sms', '{}', 'applied', 1, 0, 1767225600000 + n, 1767225600000 + n
FROM seq
)sql"),
                             {Events - 1}));
    const QVariant handle = m_store->database().connection().driver()->handle();
    QCOMPARE(handle.typeName(), "sqlite3*");
    sqlite3 *connection = *static_cast<sqlite3 *const *>(handle.constData());
    qint64 thousandSteps = 0;
    sqlite3_progress_handler(
        connection, 1000, [](void *count) { return int(++*static_cast<qint64 *>(count) < 0); },
        &thousandSteps);
    const auto search = [&](const QString &text, qint64 *steps) -> std::pair<qsizetype, qint64> {
        EventFilter filter;
        filter.text = text;
        thousandSteps = 0;
        QString error;
        const auto rows = m_store->inspector().events(filter, &error);
        const auto count = m_store->inspector().countEvents(filter, &error);
        *steps = thousandSteps;
        if (!rows || !count)
            qWarning("%s", qPrintable(error));
        return {rows ? rows->size() : -1, count ? *count : -1};
    };
    qint64 steps = 0;
    // A reading of the whole ledger (20,000 rows, five columns each) is about 800,000 steps.
    QCOMPARE(search(QStringLiteral("u-01234*"), &steps), std::make_pair(qsizetype(10), qint64(10)));
    QVERIFY2(steps < 40, qPrintable(QStringLiteral("%1 thousand steps").arg(steps)));
    QCOMPARE(search(QStringLiteral("nobody*"), &steps), std::make_pair(qsizetype(0), qint64(0)));
    QVERIFY2(steps < 40, qPrintable(QStringLiteral("%1 thousand steps").arg(steps)));
    QCOMPARE(search(QStringLiteral("+1555000123*"), &steps), std::make_pair(qsizetype(10), qint64(10)));
    QVERIFY2(steps < 40, qPrintable(QStringLiteral("%1 thousand steps").arg(steps)));
    // A prefix every event has: the newest page, read newest first.
    QCOMPARE(search(QStringLiteral("u-*"), &steps), std::make_pair(qsizetype(100), qint64(Events)));
    EventFilter everyone;
    everyone.text = QStringLiteral("u-*");
    const auto newest = m_store->inspector().events(everyone, nullptr);
    QVERIFY(newest && !newest->isEmpty());
    QCOMPARE(newest->constFirst().eventId, QStringLiteral("evt-%1").arg(Events - 1, 6, 10, QLatin1Char('0')));
    sqlite3_progress_handler(connection, 0, nullptr, nullptr);
}

// PostgreSQL serves LIKE 'prefix%' from a column's index only when the column compares
// byte by byte. A database created with another collation (here C.UTF-8; en_US.UTF-8 on
// most servers) read the whole ledger for every prefix search until schema 14.
void TestStore::aPrefixSearchCanUseTheIndexesWhateverTheDatabasesCollation()
{
    if (!m_stores.isPostgres())
        QSKIP("SQLite's columns compare by their bytes already");
    const QString url = m_stores.newUrl(
        QStringLiteral("TEMPLATE template0 LC_COLLATE 'C.UTF-8' LC_CTYPE 'C.UTF-8' ENCODING 'UTF8'"));
    QString error;
    auto store = Store::open(url, &error);
    QVERIFY2(store, qPrintable(error));
    QSqlDatabase connection = store->database().connection();
    QSqlQuery collation(connection);
    QVERIFY(collation.exec(
                QStringLiteral("SELECT datcollate FROM pg_database WHERE datname = current_database()")) &&
            collation.next());
    QCOMPARE(collation.value(0).toString(), QStringLiteral("C.UTF-8"));
    QSqlQuery settings(connection);
    QVERIFY(settings.exec(QStringLiteral("SET enable_seqscan = off")));
    for (const QString &column :
         {QStringLiteral("user_id"), QStringLiteral("destination"), QStringLiteral("reminder_id"),
          QStringLiteral("send_key"), QStringLiteral("event_id")}) {
        QSqlQuery explain(connection);
        QVERIFY(explain.exec(
            QStringLiteral("EXPLAIN SELECT send_key FROM ledger WHERE %1 LIKE 'u-0123%' ESCAPE '\\'")
                .arg(column)));
        QStringList plan;
        while (explain.next())
            plan << explain.value(0).toString();
        QVERIFY2(!plan.join(QLatin1Char('\n')).contains(QLatin1String("Seq Scan")),
                 qPrintable(plan.join(QLatin1Char('\n'))));
    }
    // A search on that store finds what it should.
    QVERIFY(settings.exec(QStringLiteral("RESET enable_seqscan")));
    QVERIFY(TestStores::exec(connection, QStringLiteral(R"sql(
INSERT INTO ledger (send_key, event_id, user_id, reminder_id, scheduled_at, destination, channel, payload, state,
                    sends, duplicates, created_at, updated_at)
SELECT 'u-' || n || ':r', 'evt-' || n, 'u-' || n, 'r', 0, '+1555' || n, 'sms', '{}', 'applied', 1, 0, n, n
FROM generate_series(1, 300) n
)sql")));
    EventFilter filter;
    filter.text = QStringLiteral("u-1*");
    const auto rows = store->inspector().events(filter, &error);
    QVERIFY2(rows, qPrintable(error));
    QCOMPARE(rows->size(), 100);
    QCOMPARE(store->inspector().countEvents(filter, &error), std::optional<qint64>(111)); // 1, 10-19, 100-199
    filter.text = QStringLiteral("U-1*");
    QCOMPARE(store->inspector().countEvents(filter, &error), std::optional<qint64>(0));
}

void TestStore::turnsOnAGrownLedgerFindTheirKeysByIndex()
{
    if (!m_stores.isPostgres())
        QSKIP("SQLite plans each statement when it is prepared, from the indexes alone");
    // A worker's first turns, on an empty ledger: claims and outcomes in batches.
    const auto turn = [&](int first, int count) {
        QList<ClaimRequest> requests;
        for (int i = first; i < first + count; ++i)
            requests << claimRequest(makeReminder(QStringLiteral("u-%1").arg(i), QStringLiteral("r")),
                                     QStringLiteral("m-%1").arg(i));
        QString error;
        if (m_store->ledger().claim(requests, Worker, InDoubtPolicy::Resend, &error).size() != count) {
            qWarning("claim failed: %s", qPrintable(error));
            return false;
        }
        QList<LedgerUpdate> updates;
        QList<Attempt> attempts;
        for (const auto &request : std::as_const(requests)) {
            const QByteArray &key = request.reminder.sendKey;
            updates << LedgerUpdate{key, request.messageId, 1, LedgerState::Applied, true, nowMs(), 200, {}, {}, {}};
            attempts << Attempt{key, {}, request.messageId, 1, Worker, nowMs(), QStringLiteral("send"),
                                QStringLiteral("applied"), 200, 12, {}, {}, {}};
        }
        if (!m_store->ledger().record(updates, attempts, &error)) {
            qWarning("record failed: %s", qPrintable(error));
            return false;
        }
        return true;
    };
    for (int i = 0; i < 20; ++i)
        QVERIFY(turn(i * 10, 10));

    // The ledger grows (other workers, the months after).
    QSqlQuery grow(m_store->database().connection());
    QVERIFY2(grow.exec(QStringLiteral(
                 "INSERT INTO ledger (send_key, event_id, user_id, reminder_id, scheduled_at, destination, channel, "
                 "payload, state, sends, duplicates, created_at, updated_at) "
                 "SELECT 'grown-' || n, 'evt-' || n, 'user-' || n, 'r', 0, '+1555', 'sms', '\\x7b7d', 'applied', 1, 0, 0, 0 "
                 "FROM generate_series(1, 30000) AS n")),
             qPrintable(grow.lastError().text()));

    // Rows of the ledger read by scanning it, as the store's own connection counted them.
    const auto scannedRows = [&] {
        QSqlQuery query(m_store->database().connection());
        if (!query.exec(QStringLiteral("SELECT pg_stat_force_next_flush()")) || !query.exec(QStringLiteral("SELECT 1"))
            || !query.exec(QStringLiteral("SELECT seq_tup_read FROM pg_stat_user_tables WHERE relname = 'ledger'"))
            || !query.next()) {
            qWarning("cannot read the ledger's statistics: %s", qPrintable(query.lastError().text()));
            return qint64(-1);
        }
        return query.value(0).toLongLong();
    };
    const qint64 before = scannedRows();
    QVERIFY(before >= 0);
    QVERIFY(turn(1000, 10));
    const qint64 scanned = scannedRows() - before;
    QVERIFY2(scanned < 1000, qPrintable(QStringLiteral("one turn of 10 read %1 ledger rows by scanning").arg(scanned)));
}

// Every outcome recorded used to put a history row's entry at its key's random place in
// attempts(send_key, id); at 10,000 reminders a second those scattered index pages were a
// third of what each commit wrote. Rows are filed under the time their key's ledger row
// was made instead (a turn's keys were claimed moments ago: the index's end), and a key's
// history is looked up there, on either store.
void TestStore::historyIsFiledUnderTheTimeItsKeysRowWasMade()
{
    const Reminder first = makeReminder(QStringLiteral("u-1"), QStringLiteral("r"));
    const Reminder second = makeReminder(QStringLiteral("u-2"), QStringLiteral("r"));
    QCOMPARE(claim(*m_store, claimRequest(first, QStringLiteral("m-1"))).outcome,
             ClaimResult::Outcome::Claimed);
    QTest::qWait(5); // the two rows made at different milliseconds
    QCOMPARE(claim(*m_store, claimRequest(second, QStringLiteral("m-2"))).outcome,
             ClaimResult::Outcome::Claimed);
    QVERIFY(record(*m_store, first.sendKey, LedgerState::Applied, true, 200));
    QVERIFY(record(*m_store, second.sendKey, LedgerState::Retrying, true, 503, QStringLiteral("http-5xx")));
    QCOMPARE(claim(*m_store, claimRequest(first, QStringLiteral("m-copy"))).outcome,
             ClaimResult::Outcome::Duplicate);

    // Two sends and the copy's claim (a first claim writes no history row).
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM attempts WHERE send_key IS NOT NULL")).toInt(), 3);
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM attempts a JOIN ledger l ON l.send_key = a.send_key "
                                   "WHERE a.key_created_at = l.created_at AND l.created_at > 0"))
                 .toInt(),
             3);
    QVERIFY(scalar(QStringLiteral("SELECT created_at FROM ledger WHERE send_key = ?"),
                   {QString::fromLatin1(first.sendKey)}) !=
            scalar(QStringLiteral("SELECT created_at FROM ledger WHERE send_key = ?"),
                   {QString::fromLatin1(second.sendKey)}));
    // Each key's story, and only its own.
    QStringList steps;
    for (const Attempt &attempt : attemptsOf(first.sendKey)) {
        QCOMPARE(attempt.sendKey, first.sendKey);
        steps << attempt.step + QLatin1Char('/') + attempt.outcome;
    }
    QCOMPARE(steps, (QStringList{QStringLiteral("send/applied"), QStringLiteral("claim/duplicate")}));
    QCOMPARE(attemptsOf(second.sendKey).size(), 1);

    QString error;
    Database &db = m_store->database();
    if (m_stores.isPostgres()) {
        // A table this small is planned as a scan whatever its indexes: cost that out.
        QVERIFY2(db.exec(QStringLiteral("SET enable_seqscan = off"), &error), qPrintable(error));
        QVERIFY2(db.exec(QStringLiteral("SET enable_bitmapscan = off"), &error), qPrintable(error));
    }
    const QString key = QString::fromLatin1(first.sendKey);
    const QString shown =
        planOf(QStringLiteral("SELECT step FROM attempts WHERE ") + SqlLedger::attemptsOfKey({}), {key, key});
    if (m_stores.isPostgres()) {
        QVERIFY2(db.exec(QStringLiteral("RESET enable_seqscan"), &error), qPrintable(error));
        QVERIFY2(db.exec(QStringLiteral("RESET enable_bitmapscan"), &error), qPrintable(error));
    }
    QVERIFY2(shown.contains(
                 m_stores.isPostgres()
                     ? QLatin1String("Index Scan using attempts_key_created")
                     : QLatin1String("USING INDEX attempts_key_created (key_created_at=? AND send_key=?)")),
             qPrintable(shown));
}

// A history row written where its key had no ledger row, or by hand without the column,
// is filed under 0: the key's history still shows it, and an operator's resend still
// finds the partner's 2xx in it and refuses to send twice.
void TestStore::historyWrittenWithoutItsKeysTimeIsStillFound()
{
    const Reminder reminder = makeReminder(QStringLiteral("u"), QStringLiteral("r"));
    QCOMPARE(
        claim(*m_store, claimRequest(reminder, QStringLiteral("m1"), 1, nowMs() - 1), InDoubtPolicy::Hold)
            .outcome,
        ClaimResult::Outcome::Claimed);
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m1"), 2), InDoubtPolicy::Hold).outcome,
             ClaimResult::Outcome::Held);
    QSqlQuery insert(m_store->database().connection());
    QVERIFY(insert.prepare(
        QStringLiteral("INSERT INTO attempts (send_key, message_id, delivery, worker_id, at, step, "
                       "outcome, http_status) VALUES (?, 'm1', 1, 'w', ?, 'send', 'applied', 200)")));
    insert.addBindValue(QString::fromLatin1(reminder.sendKey));
    insert.addBindValue(nowMs());
    QVERIFY2(insert.exec(), qPrintable(insert.lastError().text()));
    QCOMPARE(
        scalar(QStringLiteral("SELECT key_created_at FROM attempts WHERE http_status = 200")).toLongLong(),
        qint64(0));

    const auto attempts = attemptsOf(reminder.sendKey);
    QVERIFY(std::any_of(attempts.cbegin(), attempts.cend(), [](const Attempt &attempt) {
        return attempt.step == QLatin1String("send") && attempt.httpStatus == 200;
    }));
    QString error;
    QVERIFY(!m_store->operations().resend(reminder.sendKey, {}, &error));
    QVERIFY2(error.contains(QLatin1String("the partner answered HTTP 200 to a send at")), qPrintable(error));
    QCOMPARE(stateOf(reminder.sendKey), QString(LedgerState::InDoubt));
}

// A store made before schema 15 keeps the history it holds as it is, filed under 0 (a
// new column with a default rewrites nothing), and finds it there; what is written after
// the upgrade is filed under its key's row, and a key's story has both.
void TestStore::upgradeKeepsTheHistoryAlreadyThereFound()
{
    const Reminder applied = makeReminder(QStringLiteral("u-a"), QStringLiteral("r"));
    const Reminder retrying = makeReminder(QStringLiteral("u-b"), QStringLiteral("r"));
    QCOMPARE(claim(*m_store, claimRequest(applied, QStringLiteral("m-a"))).outcome,
             ClaimResult::Outcome::Claimed);
    QCOMPARE(claim(*m_store, claimRequest(retrying, QStringLiteral("m-b"))).outcome,
             ClaimResult::Outcome::Claimed);
    QVERIFY(record(*m_store, applied.sendKey, LedgerState::Applied, true, 200));
    QVERIFY(record(*m_store, retrying.sendKey, LedgerState::Retrying, true, 503, QStringLiteral("http-5xx")));
    QString error;
    Database &db = m_store->database();
    // A message that did not parse has no key; one row names a key with no ledger row.
    QVERIFY2(db.exec(QStringLiteral("INSERT INTO attempts (event_id, at, step, outcome) VALUES ('evt-bad', "
                                    "1, 'claim', 'invalid')"),
                     &error),
             qPrintable(error));
    QVERIFY2(db.exec(QStringLiteral("INSERT INTO attempts (send_key, at, step, outcome) VALUES ('no-row', 1, "
                                    "'claim', 'claimed')"),
                     &error),
             qPrintable(error));
    for (const QString &statement : undoSinceSchema17() + undoHistoryByKeysTime())
        QVERIFY2(db.exec(statement, &error), qPrintable(error));
    QVERIFY2(db.exec(QStringLiteral("UPDATE schema_version SET version = 14"), &error), qPrintable(error));
    m_store.reset();

    m_store = openStore(&error);
    QVERIFY2(m_store, qPrintable(error));
    QCOMPARE(m_store->database().schemaVersion(), latestSchemaVersion());
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM attempts WHERE key_created_at = 0")).toInt(), 4);
    QCOMPARE(attemptsOf(applied.sendKey).size(), 1);
    QCOMPARE(attemptsOf(retrying.sendKey).size(), 1);
    QCOMPARE(attemptsOf("no-row").size(), 1);
    // The retry's next send, after the upgrade: filed under its key's row, told with the
    // one before it.
    QVERIFY(record(*m_store, retrying.sendKey, LedgerState::Applied, true, 200));
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM attempts a JOIN ledger l ON l.send_key = a.send_key "
                                   "WHERE a.key_created_at = l.created_at AND l.created_at > 0"))
                 .toInt(),
             1);
    QStringList statuses;
    for (const Attempt &attempt : attemptsOf(retrying.sendKey))
        statuses << QString::number(attempt.httpStatus);
    QCOMPARE(statuses, (QStringList{QStringLiteral("503"), QStringLiteral("200")}));
    const QString oldIndex =
        m_stores.isPostgres()
            ? QStringLiteral("SELECT COUNT(*) FROM pg_indexes WHERE indexname = 'attempts_key'")
            : QStringLiteral("SELECT COUNT(*) FROM sqlite_master WHERE name = 'attempts_key'");
    QCOMPARE(scalar(oldIndex).toInt(), 0);
}

// Database::execWith binds values with SQLite's own calls instead of Qt's: what it stores
// must be what Qt's driver stored, value by value (a null string is NULL, an empty one is
// not; bytes are a blob; text that is not valid UTF-16 goes in as Qt put it).
void TestStore::valuesBoundByTheStoreAreStoredAsQtBindsThem()
{
    const QVariantList values{QVariant(),
                              QVariant(QString()),
                              QVariant(QStringLiteral("")),
                              QVariant(QStringLiteral("plain")),
                              QVariant(QString(QChar(0xD800)) + QStringLiteral("lone surrogate")),
                              QVariant(QStringLiteral("é€😀")),
                              QVariant(QByteArray()),
                              QVariant(QByteArray("")),
                              QVariant(QByteArray("\x00\xff\x80", 3)),
                              QVariant(0),
                              QVariant(-7),
                              QVariant(true),
                              QVariant(qint64(1) << 53),
                              QVariant(std::numeric_limits<qint64>::min()),
                              QVariant(2.5),
                              QVariant(QDate(2026, 12, 1))};
    Database &db = m_store->database();
    QString error;
    QVERIFY2(db.exec(QStringLiteral("CREATE TABLE bound (how TEXT, n INTEGER, v %1)")
                         .arg(m_stores.isPostgres() ? QStringLiteral("TEXT") : QString()),
                     &error),
             qPrintable(error));
    for (int n = 0; n < values.size(); ++n) {
        if (m_stores.isPostgres() && (values.at(n).typeId() == QMetaType::QByteArray || n == 4))
            continue; // a TEXT column takes neither bytes nor broken text there; SQLite stores any value
        auto &byQt = db.prepared(QStringLiteral("INSERT INTO bound VALUES ('qt', ?, ?)"));
        byQt.addBindValue(n);
        byQt.addBindValue(values.at(n));
        QVERIFY2(db.exec(byQt, &error), qPrintable(error));
        auto &byStore = db.prepared(QStringLiteral("INSERT INTO bound VALUES ('store', ?, ?)"));
        QVERIFY2(db.execWith(byStore, {n, values.at(n)}, &error), qPrintable(error));
    }
    const QString stored = m_stores.isPostgres()
                               ? QStringLiteral("SELECT n, how, v IS NULL, encode(convert_to(v, 'UTF8'), 'hex') FROM bound")
                               : QStringLiteral("SELECT n, how, typeof(v), hex(v) FROM bound");
    QSqlQuery query(db.connection());
    QVERIFY2(query.exec(stored + QStringLiteral(" ORDER BY n, how")), qPrintable(query.lastError().text()));
    QHash<QString, QStringList> byWay;
    int rows = 0;
    while (query.next()) {
        byWay[query.value(1).toString()]
            << QStringLiteral("%1: %2 %3").arg(query.value(0).toString(), query.value(2).toString(), query.value(3).toString());
        ++rows;
    }
    QVERIFY(rows >= 2 * 12);
    QCOMPARE(byWay.value(QStringLiteral("store")), byWay.value(QStringLiteral("qt")));
    // And what each is, so that both cannot be wrong the same way unseen.
    if (!m_stores.isPostgres()) {
        const QStringList &qt = byWay.value(QStringLiteral("qt"));
        QCOMPARE(qt.at(0), QStringLiteral("0: null "));
        QCOMPARE(qt.at(1), QStringLiteral("1: null "));
        QCOMPARE(qt.at(2), QStringLiteral("2: text "));
        QCOMPARE(qt.at(6), QStringLiteral("6: null "));
        QCOMPARE(qt.at(7), QStringLiteral("7: blob "));
        QCOMPARE(qt.at(8), QStringLiteral("8: blob 00FF80"));
        QCOMPARE(qt.at(11), QStringLiteral("11: integer 31"));
    }
}

void TestStore::sendsPerBucketReadTheIndexAlone()
{
    QString error;
    Database &db = m_store->database();
    if (m_stores.isPostgres()) {
        // A table this small is planned as a scan whatever its indexes: cost that out.
        QVERIFY2(db.exec(QStringLiteral("SET enable_seqscan = off"), &error), qPrintable(error));
        QVERIFY2(db.exec(QStringLiteral("SET enable_bitmapscan = off"), &error), qPrintable(error));
    }
    const QString shown = planOf(Metrics::sendsPerBucketSql(), {qint64(60000), qint64(1000), qint64(90000000)});
    if (m_stores.isPostgres()) {
        QVERIFY2(db.exec(QStringLiteral("RESET enable_seqscan"), &error), qPrintable(error));
        QVERIFY2(db.exec(QStringLiteral("RESET enable_bitmapscan"), &error), qPrintable(error));
    }
    QVERIFY2(!shown.startsWith(QLatin1String("EXPLAIN failed")), qPrintable(shown));
    // PostgreSQL reads the heap too until a vacuum has marked its pages all-visible; the
    // index it walks is the one that holds step and outcome.
    QVERIFY2(shown.contains(m_stores.isPostgres() ? QLatin1String("attempts_at_step_outcome")
                                                  : QLatin1String("COVERING INDEX attempts_at_step_outcome")),
             qPrintable(shown));
}

// A page of dead letters reads its rows in order from the index of (dead_at, id), or of
// (error_class, dead_at, id) for one class, either way and from wherever its cursor is:
// no sort of every letter in the span first, so that a page among a hundred thousand costs
// what the first does. The plan of the query Inspector::deadLetters runs, on either store.
void TestStore::deadLetterPagesWalkTheIndexOfTheirOrder()
{
    QString error;
    Database &db = m_store->database();
    for (int i = 0; i < 300; ++i) {
        QSqlQuery insert(db.connection());
        QVERIFY(insert.prepare(QStringLiteral("INSERT INTO dead_letters (id, payload, error_class, dead_at) VALUES (?, ?, ?, ?)")));
        insert.addBindValue(QStringLiteral("m-%1").arg(i, 4, 10, QLatin1Char('0')));
        insert.addBindValue(QByteArray("{}"));
        insert.addBindValue(i % 3 == 0 ? QStringLiteral("rejected") : QStringLiteral("http-5xx"));
        insert.addBindValue(qint64(1000 + i / 4));
        QVERIFY2(insert.exec(), qPrintable(insert.lastError().text()));
    }
    // PostgreSQL plans a table this small as a scan and a sort, whatever its indexes: with
    // both costed out of reach, the plan shows whether an index gives the order at all.
    const QStringList postgresSettings{QStringLiteral("enable_seqscan"), QStringLiteral("enable_sort"),
                                       QStringLiteral("enable_incremental_sort"), QStringLiteral("enable_bitmapscan")};
    if (m_stores.isPostgres()) {
        QVERIFY2(db.exec(QStringLiteral("ANALYZE dead_letters"), &error), qPrintable(error));
        for (const QString &setting : postgresSettings)
            QVERIFY2(db.exec(QStringLiteral("SET ") + setting + QStringLiteral(" = off"), &error), qPrintable(error));
    }
    const auto pagePlan = [&](const DeadLetterFilter &filter) {
        QVariantList values;
        const QString sql = deadLetterPageSql(filter, m_stores.isPostgres(), &values);
        return planOf(sql, values);
    };
    for (const bool newestFirst : {false, true}) {
        for (const QString &errorClass : {QString(), QStringLiteral("rejected")}) {
            for (const bool cursor : {false, true}) {
                for (const bool window : {false, true}) {
                    DeadLetterFilter filter;
                    filter.newestFirst = newestFirst;
                    filter.errorClass = errorClass;
                    filter.withPayload = false;
                    filter.limit = 20;
                    if (cursor) {
                        filter.afterDeadAtMs = 1030;
                        filter.afterId = QStringLiteral("m-0121");
                    }
                    if (window) {
                        filter.sinceMs = 1010;
                        filter.untilMs = 1060;
                    }
                    const QString plan = pagePlan(filter);
                    const QString what = QStringLiteral("newest first %1, class '%2', cursor %3, window %4:\n")
                                             .arg(QVariant(newestFirst).toString(), errorClass, QVariant(cursor).toString(),
                                                  QVariant(window).toString())
                                         + plan;
                    // SQLite takes the class's own index for a class; PostgreSQL may find
                    // the other as cheap on so few rows. Either gives the order.
                    const bool classIndex = plan.contains(QLatin1String("dead_letters_class_dead_at_id"));
                    const bool timeIndex = plan.contains(QLatin1String("dead_letters_dead_at_id"));
                    QVERIFY2(m_stores.isPostgres() ? classIndex || timeIndex
                                                   : (errorClass.isEmpty() ? timeIndex : classIndex),
                             qPrintable(what));
                    QVERIFY2(!plan.contains(QLatin1String("TEMP B-TREE")) && !plan.contains(QLatin1String("Sort")),
                             qPrintable(what));
                }
            }
        }
    }
    if (m_stores.isPostgres()) {
        for (const QString &setting : postgresSettings)
            QVERIFY2(db.exec(QStringLiteral("RESET ") + setting, &error), qPrintable(error));
    }
}

void TestStore::countsReflectQueueState()
{
    QString error;
    auto counts = m_store->queue().counts(&error);
    QVERIFY2(counts, qPrintable(error));
    QCOMPARE(counts->ready, qint64(0));
    QCOMPARE(counts->inFlight, qint64(0));
    QCOMPARE(counts->delayed, qint64(0));
    QCOMPARE(counts->dead, qint64(0));
    QVERIFY(!counts->oldestReadyAgeMs);
    QVERIFY(!counts->nextVisibleInMs);

    QList<OutgoingMessage> messages;
    for (int i = 0; i < 5; ++i)
        messages.append(outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("r%1").arg(i))));
    messages.append(outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("delayed")), 60000));
    QVERIFY2(m_store->queue().enqueue(messages, &error), qPrintable(error));
    QCOMPARE(m_store->queue().lease(2, LongLease, Worker, &error).size(), 2);
    QueueMessage buried;
    QVERIFY(buryOne({QStringLiteral("invalid-message"), QStringLiteral("bad"), 0, 0, 0, {}, {}}, &buried));

    counts = m_store->queue().counts(&error);
    QCOMPARE(counts->ready, qint64(2));
    QCOMPARE(counts->inFlight, qint64(2));
    QCOMPARE(counts->delayed, qint64(1));
    QCOMPARE(counts->dead, qint64(1));
    QVERIFY(counts->oldestReadyAgeMs);
    QVERIFY(*counts->oldestReadyAgeMs >= 0);
    QVERIFY(counts->nextVisibleInMs);
    QVERIFY(*counts->nextVisibleInMs > 0 && *counts->nextVisibleInMs <= 60000);
    // The oldest ready message ages with the clock.
    QTRY_VERIFY_WITH_TIMEOUT(m_store->queue().counts(&error)->oldestReadyAgeMs.value_or(0) >= 30, 2000);
}

void TestStore::concurrentLeasesNeverShareAMessage()
{
    // Workers, each with a connection of its own, race to lease one queue dry. SQLite's
    // write lock takes them one at a time; on PostgreSQL several leases run at once, and
    // only the lease's own locking keeps one message from going to two workers.
    constexpr int Messages = 400;
    constexpr int Threads = 4;
    constexpr int Batch = 8;
    QString error;
    QList<OutgoingMessage> messages;
    for (int i = 0; i < Messages; ++i)
        messages.append(outgoing(makeReminder(QStringLiteral("user-%1").arg(i % 7), QStringLiteral("q-%1").arg(i))));
    QVERIFY2(m_store->queue().enqueue(messages, &error), qPrintable(error));

    struct Side
    {
        QString error;
        QList<QueueMessage> leased;
    };
    Side sides[Threads];
    std::latch ready(Threads);
    const QString url = m_url;
    const auto run = [&](int side) {
        QString error;
        auto store = Store::open(url, &error); // opened, used and closed in this thread
        ready.arrive_and_wait();
        if (!store) {
            sides[side].error = error;
            return;
        }
        const QString worker = QStringLiteral("worker-%1").arg(side);
        for (;;) {
            error.clear();
            const QList<QueueMessage> batch = store->queue().lease(Batch, LongLease, worker, &error);
            if (!error.isEmpty()) {
                sides[side].error = error;
                return;
            }
            if (batch.isEmpty())
                return;
            if (batch.size() > Batch) {
                sides[side].error = QStringLiteral("asked for %1 messages, got %2").arg(Batch).arg(batch.size());
                return;
            }
            sides[side].leased += batch;
        }
    };
    std::unique_ptr<QThread> threads[Threads];
    for (int i = 0; i < Threads; ++i)
        threads[i].reset(QThread::create(run, i));
    for (auto &thread : threads)
        thread->start();
    for (auto &thread : threads)
        QVERIFY(thread->wait(120000));

    QHash<QString, QString> leasedBy;
    int total = 0;
    for (int side = 0; side < Threads; ++side) {
        QVERIFY2(sides[side].error.isEmpty(), qPrintable(sides[side].error));
        const QString worker = QStringLiteral("worker-%1").arg(side);
        for (const QueueMessage &message : std::as_const(sides[side].leased)) {
            ++total;
            if (leasedBy.contains(message.id)) {
                QFAIL(qPrintable(
                    QStringLiteral("message %1 went to %2 and to %3").arg(message.id, leasedBy.value(message.id), worker)));
            }
            leasedBy.insert(message.id, worker);
            QCOMPARE(message.delivery, 1);
        }
    }
    QCOMPARE(total, Messages);
    QCOMPARE(leasedBy.size(), Messages);

    // The store agrees: every message is in flight, held by the worker that got it.
    const auto counts = m_store->queue().counts(&error);
    QVERIFY2(counts, qPrintable(error));
    QCOMPARE(counts->inFlight, qint64(Messages));
    QCOMPARE(counts->ready, qint64(0));
    QSqlQuery owners(m_store->database().connection());
    QVERIFY2(owners.exec(QStringLiteral("SELECT id, lease_owner FROM queue")), qPrintable(owners.lastError().text()));
    int rows = 0;
    while (owners.next()) {
        ++rows;
        const QString id = owners.value(0).toString();
        QCOMPARE(owners.value(1).toString(), leasedBy.value(id, QStringLiteral("<not leased>")));
    }
    QCOMPARE(rows, Messages);
}

// --- Ledger ----------------------------------------------------------------------

void TestStore::firstClaimWins()
{
    const Reminder reminder = makeReminder(QStringLiteral("u"), QStringLiteral("r"), QStringLiteral("2026-12-01T09:00:00Z"),
                                           QStringLiteral("evt-1"));
    const ClaimResult result = claim(*m_store, claimRequest(reminder, QStringLiteral("m1")));
    QCOMPARE(result.outcome, ClaimResult::Outcome::Claimed);
    QCOMPARE(result.sendsThisRound, 0);
    QCOMPARE(result.firstSentAtMs, qint64(0));

    QString error;
    const auto row = m_store->inspector().event(QString::fromLatin1(reminder.sendKey), &error);
    QVERIFY2(row, qPrintable(error));
    QCOMPARE(row->state, QString(LedgerState::Claimed));
    QCOMPARE(row->userId, QStringLiteral("u"));
    QCOMPARE(row->reminderId, QStringLiteral("r"));
    QCOMPARE(row->eventId, QStringLiteral("evt-1"));
    QCOMPARE(row->payload, reminder.payload);
    QCOMPARE(row->scheduledAtMs, reminder.scheduledAt.toMSecsSinceEpoch());
    QCOMPARE(row->sends, 0);
    QCOMPARE(row->duplicates, 0);
    // The event can be found by its event id too.
    QCOMPARE(m_store->inspector().event(QStringLiteral("evt-1"), &error)->sendKey, reminder.sendKey);
    QVERIFY(!m_store->inspector().event(QStringLiteral("nope"), &error));
    QVERIFY(error.contains(QLatin1String("no event")));

    // A plain claim is told by the ledger row (who holds it); the history gets its row
    // with the send that follows.
    QVERIFY(attemptsOf(reminder.sendKey).isEmpty());
    QCOMPARE(scalar(QStringLiteral("SELECT owner_message FROM ledger")).toString(), QStringLiteral("m1"));
    QCOMPARE(scalar(QStringLiteral("SELECT owner_delivery FROM ledger")).toInt(), 1);
    QCOMPARE(scalar(QStringLiteral("SELECT owner_worker FROM ledger")).toString(), Worker);
}

void TestStore::duplicateDeliveryIsSuppressed()
{
    const Reminder reminder = makeReminder(QStringLiteral("u"), QStringLiteral("r"));
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m1"))).outcome, ClaimResult::Outcome::Claimed);
    // The producer published it twice: another message, same key, while the first is live.
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m2"))).outcome, ClaimResult::Outcome::Duplicate);
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m3"))).outcome, ClaimResult::Outcome::Duplicate);

    QString error;
    const auto row = m_store->inspector().event(QString::fromLatin1(reminder.sendKey), &error);
    QCOMPARE(row->duplicates, 2);
    QCOMPARE(row->state, QString(LedgerState::Claimed));
    // Still owned by the first message.
    QCOMPARE(scalar(QStringLiteral("SELECT owner_message FROM ledger")).toString(), QStringLiteral("m1"));
    const auto attempts = attemptsOf(reminder.sendKey);
    QCOMPARE(attempts.size(), 2);
    QCOMPARE(attempts.at(0).outcome, QStringLiteral("duplicate"));
    QCOMPARE(attempts.at(0).error, QStringLiteral("another message holds a live claim"));
    QCOMPARE(attempts.at(0).messageId, QStringLiteral("m2"));
    QCOMPARE(attempts.at(1).messageId, QStringLiteral("m3"));
}

void TestStore::expiredClaimIsInDoubt_data()
{
    QTest::addColumn<InDoubtPolicy>("policy");
    QTest::addColumn<QString>("nextMessage");
    QTest::addColumn<ClaimResult::Outcome>("outcome");
    QTest::addColumn<QString>("state");
    QTest::newRow("resend, redelivery of the same message")
        << InDoubtPolicy::Resend << QStringLiteral("m1") << ClaimResult::Outcome::Resend << QString(LedgerState::Claimed);
    QTest::newRow("resend, another message") << InDoubtPolicy::Resend << QStringLiteral("m2")
                                             << ClaimResult::Outcome::Resend << QString(LedgerState::Claimed);
    QTest::newRow("hold, redelivery of the same message")
        << InDoubtPolicy::Hold << QStringLiteral("m1") << ClaimResult::Outcome::Held << QString(LedgerState::InDoubt);
    QTest::newRow("hold, another message") << InDoubtPolicy::Hold << QStringLiteral("m2") << ClaimResult::Outcome::Held
                                           << QString(LedgerState::InDoubt);
}

void TestStore::expiredClaimIsInDoubt()
{
    QFETCH(InDoubtPolicy, policy);
    QFETCH(QString, nextMessage);
    QFETCH(ClaimResult::Outcome, outcome);
    QFETCH(QString, state);
    const Reminder reminder = makeReminder(QStringLiteral("u"), QStringLiteral("r"));
    // The holder's claim ran out (it died between claim and record).
    const qint64 firstClaimAt = nowMs();
    const qint64 expired = firstClaimAt - 1;
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m1"), 1, expired), policy).outcome,
             ClaimResult::Outcome::Claimed);
    QVERIFY(scalar(QStringLiteral("SELECT claimed_at FROM ledger")).toLongLong() >= firstClaimAt);
    const qint64 firstClaimedAt = scalar(QStringLiteral("SELECT claimed_at FROM ledger")).toLongLong();
    const qint64 newLease = nowMs() + LongLease;
    QCOMPARE(claim(*m_store, claimRequest(reminder, nextMessage, 2, newLease), policy).outcome, outcome);
    QCOMPARE(stateOf(reminder.sendKey), state);
    if (policy == InDoubtPolicy::Hold) {
        // Held, the row keeps the claim that ran out: who held it, since when, until when.
        QCOMPARE(scalar(QStringLiteral("SELECT owner_message FROM ledger")).toString(), QStringLiteral("m1"));
        QCOMPARE(scalar(QStringLiteral("SELECT claim_expires_at FROM ledger")).toLongLong(), expired);
        QCOMPARE(scalar(QStringLiteral("SELECT claimed_at FROM ledger")).toLongLong(), firstClaimedAt);
    } else {
        QCOMPARE(scalar(QStringLiteral("SELECT owner_message FROM ledger")).toString(), nextMessage);
        QCOMPARE(scalar(QStringLiteral("SELECT claim_expires_at FROM ledger")).toLongLong(), newLease);
        QVERIFY(scalar(QStringLiteral("SELECT claimed_at FROM ledger")).toLongLong() >= firstClaimedAt);
    }
    // Not a duplicate: nothing was suppressed.
    QCOMPARE(scalar(QStringLiteral("SELECT duplicates FROM ledger")).toInt(), 0);
    const auto attempts = attemptsOf(reminder.sendKey);
    QCOMPARE(attempts.size(), 1);
    QCOMPARE(attempts.at(0).outcome, policy == InDoubtPolicy::Hold ? QStringLiteral("held") : QStringLiteral("resend"));
    QCOMPARE(attempts.at(0).errorClass, QStringLiteral("in-doubt"));
    QCOMPARE(attempts.at(0).delivery, 2);
    // The row names the vanished holder, so support staff can see which delivery died.
    QVERIFY2(attempts.at(0).error.contains(QLatin1String("message m1 delivery 1")), qPrintable(attempts.at(0).error));
}

void TestStore::heldKeyWaitsForOperator()
{
    const Reminder reminder = makeReminder(QStringLiteral("u"), QStringLiteral("r"));
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m1"), 1, nowMs() - 1), InDoubtPolicy::Hold).outcome,
             ClaimResult::Outcome::Claimed);
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m1"), 2, nowMs() - 1), InDoubtPolicy::Hold).outcome,
             ClaimResult::Outcome::Held);
    // Every later delivery, under either policy, leaves it to the operator.
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m1"), 3), InDoubtPolicy::Hold).outcome,
             ClaimResult::Outcome::Duplicate);
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m2"), 1), InDoubtPolicy::Resend).outcome,
             ClaimResult::Outcome::Duplicate);
    QCOMPARE(stateOf(reminder.sendKey), QString(LedgerState::InDoubt));
    QCOMPARE(attemptsOf(reminder.sendKey).constLast().error, QStringLiteral("held in doubt for an operator"));

    QString error;
    const auto inDoubt = m_store->inspector().inDoubt(&error);
    QVERIFY2(inDoubt, qPrintable(error));
    QCOMPARE(inDoubt->size(), 1);
    QCOMPARE(inDoubt->constFirst().sendKey, reminder.sendKey);
}

void TestStore::sameMessageWithLiveClaimIsBusy()
{
    const Reminder reminder = makeReminder(QStringLiteral("u"), QStringLiteral("r"));
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m1"), 1)).outcome, ClaimResult::Outcome::Claimed);
    // The same message again (its lease was cut short elsewhere) while its claim still runs.
    const ClaimResult busy = claim(*m_store, claimRequest(reminder, QStringLiteral("m1"), 2));
    QCOMPARE(busy.outcome, ClaimResult::Outcome::Busy);
    QVERIFY2(busy.busyForMs > 0 && busy.busyForMs <= LongLease, qPrintable(QString::number(busy.busyForMs)));
    QCOMPARE(stateOf(reminder.sendKey), QString(LedgerState::Claimed));
    QCOMPARE(scalar(QStringLiteral("SELECT duplicates FROM ledger")).toInt(), 0);
    QCOMPARE(attemptsOf(reminder.sendKey).constLast().outcome, QStringLiteral("busy"));
}

void TestStore::appliedKeyIsDuplicate()
{
    const Reminder reminder = makeReminder(QStringLiteral("u"), QStringLiteral("r"));
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m1"))).outcome, ClaimResult::Outcome::Claimed);
    const qint64 sentAt = nowMs();
    QVERIFY(record(*m_store, reminder.sendKey, LedgerState::Applied, true, 201, QString(), sentAt));

    QString error;
    const auto row = m_store->inspector().event(QString::fromLatin1(reminder.sendKey), &error);
    QCOMPARE(row->state, QString(LedgerState::Applied));
    QCOMPARE(row->sends, 1);
    QCOMPARE(row->firstSentAtMs, sentAt);
    QVERIFY(row->appliedAtMs >= sentAt);
    QCOMPARE(row->lastHttpStatus, 201);
    QCOMPARE(row->providerRequestId, QStringLiteral("req-") + QString::fromLatin1(reminder.sendKey.left(8)));
    QVERIFY(scalar(QStringLiteral("SELECT claim_expires_at FROM ledger")).isNull());

    // Another message, and a redelivery of the same one, are both duplicates now.
    for (const auto &message : {QStringLiteral("m2"), QStringLiteral("m1")}) {
        QCOMPARE(claim(*m_store, claimRequest(reminder, message, 2)).outcome, ClaimResult::Outcome::Duplicate);
        QCOMPARE(attemptsOf(reminder.sendKey).constLast().error, QStringLiteral("already applied"));
    }
    QCOMPARE(m_store->inspector().event(QString::fromLatin1(reminder.sendKey), &error)->duplicates, 2);
    QCOMPARE(stateOf(reminder.sendKey), QString(LedgerState::Applied));
}

void TestStore::retryingKeyBelongsToItsMessage()
{
    const Reminder reminder = makeReminder(QStringLiteral("u"), QStringLiteral("r"));
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m1"))).outcome, ClaimResult::Outcome::Claimed);
    const qint64 sentAt = nowMs() - 1000;
    QVERIFY(record(*m_store, reminder.sendKey, LedgerState::Retrying, true, 503, QStringLiteral("http-5xx"), sentAt));
    QCOMPARE(stateOf(reminder.sendKey), QString(LedgerState::Retrying));

    // Another message carrying the key is a duplicate; the failed message reclaims it.
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m2"))).outcome, ClaimResult::Outcome::Duplicate);
    QCOMPARE(attemptsOf(reminder.sendKey).constLast().error, QStringLiteral("another message carries this key"));
    const ClaimResult again = claim(*m_store, claimRequest(reminder, QStringLiteral("m1"), 2));
    QCOMPARE(again.outcome, ClaimResult::Outcome::Claimed);
    QCOMPARE(again.sendsThisRound, 1);
    QCOMPARE(again.firstSentAtMs, sentAt);
    QCOMPARE(stateOf(reminder.sendKey), QString(LedgerState::Claimed));

    // A second failure counts a second send in the round.
    QVERIFY(record(*m_store, reminder.sendKey, LedgerState::Retrying, true, 503, QStringLiteral("http-5xx")));
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m1"), 3)).sendsThisRound, 2);
    QString error;
    const auto row = m_store->inspector().event(QString::fromLatin1(reminder.sendKey), &error);
    QCOMPARE(row->sends, 2);
    QCOMPARE(row->firstSentAtMs, sentAt);
    QCOMPARE(row->lastErrorClass, QStringLiteral("http-5xx"));
    QCOMPARE(row->lastHttpStatus, 503);
}

void TestStore::deadKeyIsDuplicate()
{
    const Reminder reminder = makeReminder(QStringLiteral("u"), QStringLiteral("r"));
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m1"))).outcome, ClaimResult::Outcome::Claimed);
    QVERIFY(record(*m_store, reminder.sendKey, LedgerState::Dead, true, 400, QStringLiteral("rejected")));
    for (const auto &message : {QStringLiteral("m1"), QStringLiteral("m2")}) {
        QCOMPARE(claim(*m_store, claimRequest(reminder, message, 2)).outcome, ClaimResult::Outcome::Duplicate);
        QCOMPARE(attemptsOf(reminder.sendKey).constLast().error,
                 QStringLiteral("dead-lettered; an operator may redrive it"));
    }
    QCOMPARE(stateOf(reminder.sendKey), QString(LedgerState::Dead));

    // Within one millisecond the history still reads claim, send, then the duplicates the
    // send's outcome caused: a duplicate is never placed before the send it answers to.
    QCOMPARE(scalar(QStringLiteral("UPDATE attempts SET at = ? WHERE send_key = ? RETURNING 1"),
                    {nowMs(), QString::fromLatin1(reminder.sendKey)}),
             QVariant(1));
    QStringList order;
    for (const Attempt &attempt : attemptsOf(reminder.sendKey))
        order.append(attempt.step + QLatin1Char('/') + attempt.outcome);
    QCOMPARE(order, (QStringList{QStringLiteral("send/transient"), QStringLiteral("claim/duplicate"),
                                 QStringLiteral("claim/duplicate")}));
}

// The claim writes the expiry it was given (the ledger's expires_at); an expired key is
// final: any delivery after it, of the same message or another, is a duplicate, told as
// not applied; the store counts it as expired, not dead.
void TestStore::expiredKeyIsFinalAndKeepsItsExpiry()
{
    const Reminder reminder = makeReminder(QStringLiteral("u"), QStringLiteral("r"));
    const Reminder never = makeReminder(QStringLiteral("u"), QStringLiteral("never"));
    ClaimRequest request = claimRequest(reminder, QStringLiteral("m1"));
    request.expiresAtMs = reminder.scheduledAt.toMSecsSinceEpoch() + 3600 * 1000;
    QCOMPARE(claim(*m_store, request).outcome, ClaimResult::Outcome::Claimed);
    QCOMPARE(claim(*m_store, claimRequest(never, QStringLiteral("m3"))).outcome, ClaimResult::Outcome::Claimed);
    QCOMPARE(scalar(QStringLiteral("SELECT expires_at FROM ledger WHERE send_key = ?"),
                    {QString::fromLatin1(reminder.sendKey)})
                 .toLongLong(),
             request.expiresAtMs);
    QVERIFY(scalar(QStringLiteral("SELECT expires_at FROM ledger WHERE send_key = ?"), {QString::fromLatin1(never.sendKey)})
                .isNull());
    QVERIFY(record(*m_store, reminder.sendKey, LedgerState::Expired, false, 0, QStringLiteral("expired")));
    QCOMPARE(stateOf(reminder.sendKey), QString(LedgerState::Expired));
    for (const auto &message : {QStringLiteral("m1"), QStringLiteral("m2")}) {
        const ClaimResult again = claim(*m_store, claimRequest(reminder, message, 2));
        QCOMPARE(again.outcome, ClaimResult::Outcome::Duplicate);
        QCOMPARE(again.notApplied, QStringLiteral("not sent: its reminder expired before it could be sent"));
        QCOMPARE(attemptsOf(reminder.sendKey).constLast().error, QStringLiteral("expired before it could be sent"));
    }
    QCOMPARE(stateOf(reminder.sendKey), QString(LedgerState::Expired));
    QString error;
    const auto stats = m_store->inspector().stats(&error);
    QVERIFY2(stats, qPrintable(error));
    QCOMPARE(stats->expired, qint64(1));
    QCOMPARE(stats->deadKeys, qint64(0));
    QCOMPARE(stats->duplicateDeliveries, qint64(2));
}

void TestStore::claimBatchDecidesEachRequest()
{
    const Reminder a = makeReminder(QStringLiteral("u"), QStringLiteral("a"));
    const Reminder b = makeReminder(QStringLiteral("u"), QStringLiteral("b"));
    QString error;
    const auto results = m_store->ledger().claim(
        {claimRequest(a, QStringLiteral("m1")), claimRequest(a, QStringLiteral("m2")), claimRequest(b, QStringLiteral("m3"))},
        Worker, InDoubtPolicy::Resend, &error);
    QVERIFY2(results.size() == 3, qPrintable(error));
    QCOMPARE(results.at(0).outcome, ClaimResult::Outcome::Claimed);
    QCOMPARE(results.at(1).outcome, ClaimResult::Outcome::Duplicate);
    QCOMPARE(results.at(2).outcome, ClaimResult::Outcome::Claimed);
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM ledger")).toInt(), 2);
    // Only the duplicate needs a history row of its own.
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM attempts WHERE step = 'claim'")).toInt(), 1);
    // An empty batch claims nothing and fails nothing.
    QVERIFY(m_store->ledger().claim({}, Worker, InDoubtPolicy::Resend, &error).isEmpty());
}

void TestStore::firstOfTwoRequestsForAKeyWinsInALargeBatch()
{
    // The ledger sorts a batch by key before inserting (one lock order for every worker);
    // of two requests for one key, the first in the batch must still own it. A batch this
    // size is where an unstable sort reorders equal keys.
    constexpr int Keys = 60;
    QList<ClaimRequest> requests;
    for (int i = 0; i < Keys; ++i) {
        const Reminder reminder = makeReminder(QStringLiteral("u%1").arg(Keys - i), QStringLiteral("r"));
        requests.append(claimRequest(reminder, QStringLiteral("first-%1").arg(i)));
        requests.append(claimRequest(reminder, QStringLiteral("second-%1").arg(i)));
    }
    QString error;
    const auto results = m_store->ledger().claim(requests, Worker, InDoubtPolicy::Resend, &error);
    QVERIFY2(results.size() == requests.size(), qPrintable(error));
    for (int i = 0; i < Keys; ++i) {
        QCOMPARE(results.at(2 * i).outcome, ClaimResult::Outcome::Claimed);
        QCOMPARE(results.at(2 * i + 1).outcome, ClaimResult::Outcome::Duplicate);
        QCOMPARE(scalar(QStringLiteral("SELECT owner_message FROM ledger WHERE send_key = ?"),
                        {QString::fromLatin1(requests.at(2 * i).reminder.sendKey)})
                     .toString(),
                 QStringLiteral("first-%1").arg(i));
    }
}

void TestStore::takenKeysInOneBatchSeeEachOthersDecisions()
{
    // Keys already in the ledger are read in one go and decided in batch order: a later
    // request must see what an earlier one of the same batch did to the key.
    const Reminder expired = makeReminder(QStringLiteral("u"), QStringLiteral("expired"));
    const Reminder applied = makeReminder(QStringLiteral("u"), QStringLiteral("applied"));
    const Reminder retrying = makeReminder(QStringLiteral("u"), QStringLiteral("retrying"));
    QString error;
    QCOMPARE(claim(*m_store, claimRequest(expired, QStringLiteral("m1"), 1, nowMs() - 1)).outcome,
             ClaimResult::Outcome::Claimed);
    QCOMPARE(claim(*m_store, claimRequest(applied, QStringLiteral("m2"))).outcome, ClaimResult::Outcome::Claimed);
    QCOMPARE(claim(*m_store, claimRequest(retrying, QStringLiteral("m3"))).outcome, ClaimResult::Outcome::Claimed);
    QVERIFY2(m_store->ledger().record({LedgerUpdate{applied.sendKey, QStringLiteral("m2"), 1, LedgerState::Applied, true,
                                                    nowMs(), 200, {}, {}, {}},
                                       LedgerUpdate{retrying.sendKey, QStringLiteral("m3"), 1, LedgerState::Retrying,
                                                    true, nowMs(), 503, QStringLiteral("http-5xx"), {}, {}}},
                                      {}, &error),
             qPrintable(error));

    const qint64 lease = nowMs() + LongLease;
    const auto results = m_store->ledger().claim(
        {claimRequest(expired, QStringLiteral("m4"), 1, lease), claimRequest(applied, QStringLiteral("m5"), 1, lease),
         claimRequest(expired, QStringLiteral("m6"), 1, lease), claimRequest(retrying, QStringLiteral("m3"), 2, lease),
         claimRequest(applied, QStringLiteral("m7"), 1, lease), claimRequest(retrying, QStringLiteral("m3"), 3, lease)},
        Worker, InDoubtPolicy::Resend, &error);
    QVERIFY2(results.size() == 6, qPrintable(error));
    // The first takes the expired claim over; the second then meets its live claim.
    QCOMPARE(results.at(0).outcome, ClaimResult::Outcome::Resend);
    QCOMPARE(results.at(2).outcome, ClaimResult::Outcome::Duplicate);
    QCOMPARE(results.at(1).outcome, ClaimResult::Outcome::Duplicate);
    QCOMPARE(results.at(4).outcome, ClaimResult::Outcome::Duplicate);
    // The retrying key's own message claims it again, and a second delivery of that
    // message in the same batch finds it busy.
    QCOMPARE(results.at(3).outcome, ClaimResult::Outcome::Claimed);
    QCOMPARE(results.at(3).sendsThisRound, 1);
    QCOMPARE(results.at(5).outcome, ClaimResult::Outcome::Busy);

    const auto column = [this](const char *name, const Reminder &reminder) {
        return scalar(QStringLiteral("SELECT %1 FROM ledger WHERE send_key = ?").arg(QLatin1String(name)),
                      {QString::fromLatin1(reminder.sendKey)});
    };
    QCOMPARE(column("owner_message", expired).toString(), QStringLiteral("m4"));
    QCOMPARE(column("state", expired).toString(), QString(LedgerState::Claimed));
    QCOMPARE(column("claim_expires_at", expired).toLongLong(), lease);
    QCOMPARE(column("duplicates", expired).toInt(), 1);
    QCOMPARE(column("duplicates", applied).toInt(), 2);
    QCOMPARE(column("state", applied).toString(), QString(LedgerState::Applied));
    QCOMPARE(column("state", retrying).toString(), QString(LedgerState::Claimed));
    QCOMPARE(column("owner_delivery", retrying).toInt(), 2);
    QCOMPARE(column("duplicates", retrying).toInt(), 0);
    // Every request on a taken key has its history row, in batch order.
    const auto outcomesOf = [this](const QByteArray &key, const QString &step) {
        QStringList outcomes;
        for (const auto &attempt : attemptsOf(key)) {
            if (attempt.step == step)
                outcomes << attempt.outcome;
        }
        return outcomes;
    };
    QCOMPARE(outcomesOf(expired.sendKey, QStringLiteral("claim")), (QStringList{QStringLiteral("resend"), QStringLiteral("duplicate")}));
    QCOMPARE(outcomesOf(applied.sendKey, QStringLiteral("claim")), (QStringList{QStringLiteral("duplicate"), QStringLiteral("duplicate")}));
    QCOMPARE(outcomesOf(retrying.sendKey, QStringLiteral("claim")), (QStringList{QStringLiteral("claimed"), QStringLiteral("busy")}));
}

void TestStore::twoStoresInterleavedClaimEachKeyOnce()
{
    QString error;
    auto other = openStore(&error);
    QVERIFY2(other, qPrintable(error));
    constexpr int Keys = 200;
    QList<Reminder> reminders;
    for (int i = 0; i < Keys; ++i)
        reminders.append(makeReminder(QStringLiteral("user-%1").arg(i % 7), QStringLiteral("r-%1").arg(i)));

    int claimed = 0;
    int duplicates = 0;
    QHash<QByteArray, int> winners;
    for (int i = 0; i < Keys; ++i) {
        // Alternate which connection asks first, and let them race over the same keys in
        // opposite directions too.
        Store *first = i % 2 ? other.get() : m_store.get();
        Store *second = i % 2 ? m_store.get() : other.get();
        const Reminder &forward = reminders.at(i);
        const Reminder &backward = reminders.at(Keys - 1 - i);
        const QList<std::pair<Store *, ClaimRequest>> asks{
            {first, claimRequest(forward, QStringLiteral("a-%1").arg(i))},
            {second, claimRequest(forward, QStringLiteral("b-%1").arg(i))},
            {second, claimRequest(backward, QStringLiteral("c-%1").arg(i))},
        };
        for (const auto &[store, request] : asks) {
            const auto outcome = claim(*store, request).outcome;
            if (outcome == ClaimResult::Outcome::Claimed) {
                ++claimed;
                ++winners[request.reminder.sendKey];
            } else {
                QCOMPARE(outcome, ClaimResult::Outcome::Duplicate);
                ++duplicates;
            }
        }
    }
    QCOMPARE(claimed, Keys);
    QCOMPARE(duplicates, 2 * Keys);
    QCOMPARE(winners.size(), Keys);
    for (auto it = winners.cbegin(); it != winners.cend(); ++it)
        QCOMPARE(it.value(), 1);
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM ledger")).toInt(), Keys);
    QCOMPARE(scalar(QStringLiteral("SELECT SUM(duplicates) FROM ledger")).toInt(), 2 * Keys);
}

void TestStore::twoThreadsClaimEachKeyOnce()
{
    constexpr int Keys = 200;
    QList<Reminder> reminders;
    for (int i = 0; i < Keys; ++i)
        reminders.append(makeReminder(QStringLiteral("user-%1").arg(i % 7), QStringLiteral("t-%1").arg(i)));
    // The fixture's store stays open too: three connections on one store.
    const QString url = m_url;

    struct Side
    {
        QString error;
        QList<ClaimResult::Outcome> outcomes;
    };
    Side sides[2];
    std::latch ready(2);
    const auto run = [&](int side) {
        QString error;
        auto store = Store::open(url, &error); // opened, used and closed in this thread
        ready.arrive_and_wait();
        if (!store) {
            sides[side].error = error;
            return;
        }
        for (int i = 0; i < Keys; ++i) {
            const QList<ClaimResult> results = store->ledger().claim(
                {claimRequest(reminders.at(i), QStringLiteral("side%1-%2").arg(side).arg(i))},
                QStringLiteral("worker-%1").arg(side), InDoubtPolicy::Resend, &error);
            if (results.size() != 1) {
                sides[side].error = error;
                return;
            }
            sides[side].outcomes.append(results.constFirst().outcome);
        }
    };
    std::unique_ptr<QThread> threads[2] = {std::unique_ptr<QThread>(QThread::create(run, 0)),
                                           std::unique_ptr<QThread>(QThread::create(run, 1))};
    for (auto &thread : threads)
        thread->start();
    for (auto &thread : threads)
        QVERIFY(thread->wait(60000));
    for (const auto &side : sides) {
        QVERIFY2(side.error.isEmpty(), qPrintable(side.error));
        QCOMPARE(side.outcomes.size(), Keys);
    }
    int claimed = 0;
    for (int i = 0; i < Keys; ++i) {
        const auto a = sides[0].outcomes.at(i);
        const auto b = sides[1].outcomes.at(i);
        // Exactly one side won each key; the other saw a duplicate.
        QVERIFY2((a == ClaimResult::Outcome::Claimed) != (b == ClaimResult::Outcome::Claimed),
                 qPrintable(QStringLiteral("key %1: %2 / %3").arg(i).arg(int(a)).arg(int(b))));
        QVERIFY(a == ClaimResult::Outcome::Duplicate || b == ClaimResult::Outcome::Duplicate);
        claimed += (a == ClaimResult::Outcome::Claimed) + (b == ClaimResult::Outcome::Claimed);
    }
    QCOMPARE(claimed, Keys);
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM ledger")).toInt(), Keys);
    QCOMPARE(scalar(QStringLiteral("SELECT SUM(duplicates) FROM ledger")).toInt(), Keys);
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM attempts WHERE outcome = 'duplicate'")).toInt(), Keys);
}

void TestStore::lateRecordFromExpiredClaimCannotOverwriteApplied()
{
    // Worker 1 claims and stalls past its lease; delivery 2 finds the claim expired,
    // resends, and records the partner's acceptance. Then worker 1 wakes up and records
    // its own (timed-out) send. The key was applied; a stale holder must not move it back.
    const Reminder reminder = makeReminder(QStringLiteral("u"), QStringLiteral("r"));
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m1"), 1, nowMs() - 1)).outcome,
             ClaimResult::Outcome::Claimed);
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m1"), 2)).outcome, ClaimResult::Outcome::Resend);
    QVERIFY(record(*m_store, reminder.sendKey, LedgerState::Applied, true, 201, QString(), nowMs(),
                   QStringLiteral("m1"), 2));
    QCOMPARE(stateOf(reminder.sendKey), QString(LedgerState::Applied));

    QVERIFY(record(*m_store, reminder.sendKey, LedgerState::InDoubt, true, 0, QStringLiteral("in-doubt"), nowMs(),
                   QStringLiteral("m1"), 1));
    QCOMPARE(stateOf(reminder.sendKey), QString(LedgerState::Applied));
}

// What became of the key after worker 1's claim (m1, delivery 1) ran out, before
// worker 1's answer comes in late.
enum class AfterExpiry { Held, ClaimedAgain, RetryingAgain, Dead, AppliedByNewHolder };
Q_DECLARE_METATYPE(AfterExpiry)

void TestStore::lateAnswerOnlyAddsKnowledge_data()
{
    QTest::addColumn<AfterExpiry>("after");
    QTest::addColumn<QString>("lateState"); // what worker 1 learnt
    QTest::addColumn<int>("lateStatus");
    QTest::addColumn<QString>("expected");
    const QString applied = LedgerState::Applied;
    QTest::newRow("2xx, held in doubt") << AfterExpiry::Held << applied << 200 << applied;
    QTest::newRow("2xx, claimed by a resend") << AfterExpiry::ClaimedAgain << applied << 200 << applied;
    QTest::newRow("2xx, retrying after the resend's 503") << AfterExpiry::RetryingAgain << applied << 200 << applied;
    QTest::newRow("2xx, dead after the resend's 400") << AfterExpiry::Dead << applied << 200 << applied;
    QTest::newRow("2xx, applied by the resend") << AfterExpiry::AppliedByNewHolder << applied << 200 << applied;
    QTest::newRow("503, held in doubt") << AfterExpiry::Held << QString(LedgerState::Retrying) << 503
                                        << QString(LedgerState::InDoubt);
    QTest::newRow("no answer, claimed by a resend") << AfterExpiry::ClaimedAgain << QString(LedgerState::InDoubt) << 0
                                                    << QString(LedgerState::Claimed);
    QTest::newRow("400, retrying") << AfterExpiry::RetryingAgain << QString(LedgerState::Dead) << 400
                                   << QString(LedgerState::Retrying);
}

// A worker whose claim ran out (stopped past its lease) and was taken over may still hear
// from the partner. A 2xx is knowledge nobody else has: the partner acted, so the key is
// applied, whatever became of it meanwhile. Anything else is left to the key's holder.
// Either way the request counts as a send.
void TestStore::lateAnswerOnlyAddsKnowledge()
{
    QFETCH(AfterExpiry, after);
    QFETCH(QString, lateState);
    QFETCH(int, lateStatus);
    QFETCH(QString, expected);
    const Reminder reminder = makeReminder(QStringLiteral("u"), QStringLiteral("r"));
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m1"), 1, nowMs() - 1)).outcome,
             ClaimResult::Outcome::Claimed);
    const InDoubtPolicy policy = after == AfterExpiry::Held ? InDoubtPolicy::Hold : InDoubtPolicy::Resend;
    QVERIFY(claim(*m_store, claimRequest(reminder, QStringLiteral("m1"), 2), policy).outcome != ClaimFailed);
    int sendsBefore = 0;
    switch (after) {
    case AfterExpiry::Held:
    case AfterExpiry::ClaimedAgain:
        break;
    case AfterExpiry::RetryingAgain:
        QVERIFY(record(*m_store, reminder.sendKey, LedgerState::Retrying, true, 503, QStringLiteral("http-5xx"), nowMs(),
                       QStringLiteral("m1"), 2));
        sendsBefore = 1;
        break;
    case AfterExpiry::Dead:
        QVERIFY(record(*m_store, reminder.sendKey, LedgerState::Dead, true, 400, QStringLiteral("rejected"), nowMs(),
                       QStringLiteral("m1"), 2));
        sendsBefore = 1;
        break;
    case AfterExpiry::AppliedByNewHolder:
        QVERIFY(record(*m_store, reminder.sendKey, LedgerState::Applied, true, 201, QString(), nowMs(),
                       QStringLiteral("m1"), 2));
        sendsBefore = 1;
        break;
    }
    const QVariantList before = {scalar(QStringLiteral("SELECT applied_at FROM ledger")),
                                 scalar(QStringLiteral("SELECT last_http_status FROM ledger")),
                                 scalar(QStringLiteral("SELECT claim_expires_at FROM ledger")),
                                 scalar(QStringLiteral("SELECT round_sends FROM ledger"))};
    const QString stateBefore = stateOf(reminder.sendKey);

    const qint64 lateSentAt = nowMs() - 5000;
    QString errorClass;
    if (lateState != LedgerState::Applied)
        errorClass = lateStatus ? QStringLiteral("http-%1").arg(lateStatus) : QStringLiteral("in-doubt");
    QVERIFY(record(*m_store, reminder.sendKey, QLatin1String(lateState.toLatin1().constData()), true, lateStatus,
                   errorClass, lateSentAt, QStringLiteral("m1"), 1));

    QCOMPARE(stateOf(reminder.sendKey), expected);
    QCOMPARE(scalar(QStringLiteral("SELECT sends FROM ledger")).toInt(), sendsBefore + 1);
    // The attempt budget belongs to the key's holder.
    QCOMPARE(scalar(QStringLiteral("SELECT round_sends FROM ledger")), before.at(3));
    const bool learnt = expected == LedgerState::Applied && stateBefore != LedgerState::Applied;
    if (learnt) {
        QVERIFY(scalar(QStringLiteral("SELECT applied_at FROM ledger")).toLongLong() > 0);
        QCOMPARE(scalar(QStringLiteral("SELECT last_http_status FROM ledger")).toInt(), lateStatus);
        QVERIFY(scalar(QStringLiteral("SELECT claim_expires_at FROM ledger")).isNull());
        QCOMPARE(scalar(QStringLiteral("SELECT last_error_class FROM ledger")).toString(), QString());
    } else {
        // Nothing the key's holder recorded is overwritten.
        QCOMPARE(scalar(QStringLiteral("SELECT applied_at FROM ledger")), before.at(0));
        QCOMPARE(scalar(QStringLiteral("SELECT last_http_status FROM ledger")), before.at(1));
        QCOMPARE(scalar(QStringLiteral("SELECT claim_expires_at FROM ledger")), before.at(2));
    }
    // The first send on record is the earliest known.
    QVERIFY(scalar(QStringLiteral("SELECT first_sent_at FROM ledger")).toLongLong() > 0);
}

void TestStore::lateAnswerAndHoldersAnswerInOneTurn()
{
    // The holder's 503 and the late 2xx of the claim before it reach the ledger in the
    // same turn: the 2xx wins, whichever order they come in.
    for (const bool lateFirst : {true, false}) {
        const Reminder reminder = makeReminder(QStringLiteral("u"), lateFirst ? QStringLiteral("first") : QStringLiteral("last"));
        QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m1"), 1, nowMs() - 1)).outcome,
                 ClaimResult::Outcome::Claimed);
        QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m1"), 2)).outcome, ClaimResult::Outcome::Resend);
        const LedgerUpdate late{reminder.sendKey, QStringLiteral("m1"), 1, LedgerState::Applied, true, nowMs(), 200,
                                {}, {}, QStringLiteral("req-late")};
        const LedgerUpdate holder{reminder.sendKey, QStringLiteral("m1"), 2, LedgerState::Retrying, true, nowMs(), 503,
                                  QStringLiteral("http-5xx"), QStringLiteral("HTTP 503"), {}};
        QString error;
        QVERIFY2(m_store->ledger().record(lateFirst ? QList<LedgerUpdate>{late, holder} : QList<LedgerUpdate>{holder, late},
                                          {}, &error),
                 qPrintable(error));
        QCOMPARE(stateOf(reminder.sendKey), QString(LedgerState::Applied));
        QCOMPARE(scalar(QStringLiteral("SELECT sends FROM ledger WHERE send_key = ?"), {QString::fromLatin1(reminder.sendKey)})
                     .toInt(),
                 2);
        QCOMPARE(scalar(QStringLiteral("SELECT provider_request_id FROM ledger WHERE send_key = ?"),
                        {QString::fromLatin1(reminder.sendKey)})
                     .toString(),
                 QStringLiteral("req-late"));
    }
}

// --- Operations ------------------------------------------------------------------

void TestStore::redriveRequeuesDeadLetterAndReopensKey()
{
    QString error;
    const Reminder reminder = makeReminder(QStringLiteral("u"), QStringLiteral("r"), QStringLiteral("2026-12-01T09:00:00Z"),
                                           QStringLiteral("evt-r"));
    QVERIFY2(m_store->queue().enqueue({outgoing(reminder)}, &error), qPrintable(error));
    // The engine's path to a dead letter: claim, send fails for good, record dead, bury.
    const auto leased = m_store->queue().lease(1, LongLease, Worker, &error);
    QCOMPARE(leased.size(), 1);
    QCOMPARE(claim(*m_store, claimRequest(reminder, leased.constFirst().id)).outcome, ClaimResult::Outcome::Claimed);
    QVERIFY(record(*m_store, reminder.sendKey, LedgerState::Dead, true, 400, QStringLiteral("rejected")));
    QVERIFY(m_store->queue().settle({{Settlement::Kind::DeadLetter, leased.constFirst().id, 1, 0,
                                      {QStringLiteral("rejected"), QStringLiteral("HTTP 400"), 1, nowMs(), nowMs(),
                                       reminder.sendKey, reminder.eventId}}},
                                    &error));
    const auto letters = m_store->inspector().deadLetters({}, &error);
    QCOMPARE(letters->size(), 1);

    QCOMPARE(m_store->operations().redrive(*letters, 0, &error), std::optional<int>(1));
    auto counts = m_store->queue().counts(&error);
    QCOMPARE(counts->dead, qint64(0));
    QCOMPARE(counts->ready, qint64(1));
    const auto row = m_store->inspector().event(QString::fromLatin1(reminder.sendKey), &error);
    QCOMPARE(row->state, QString(LedgerState::Retrying));
    QCOMPARE(row->redrives, 1);
    QCOMPARE(scalar(QStringLiteral("SELECT round_sends FROM ledger")).toInt(), 0);
    QVERIFY(scalar(QStringLiteral("SELECT owner_message FROM ledger")).isNull());

    const auto again = m_store->queue().lease(1, LongLease, Worker, &error);
    QCOMPARE(again.size(), 1);
    QVERIFY(again.constFirst().id != leased.constFirst().id);
    QCOMPARE(again.constFirst().payload, reminder.payload);
    QCOMPARE(again.constFirst().redriveCount, 1);
    QCOMPARE(again.constFirst().delivery, 1);
    QCOMPARE(scalar(QStringLiteral("SELECT send_key FROM queue WHERE id = ?"), {again.constFirst().id}).toString(),
             QString::fromLatin1(reminder.sendKey));
    QCOMPARE(scalar(QStringLiteral("SELECT event_id FROM queue WHERE id = ?"), {again.constFirst().id}).toString(),
             QStringLiteral("evt-r"));
    // The redriven message claims the key again with a fresh attempt budget.
    const ClaimResult result = claim(*m_store, claimRequest(reminder, again.constFirst().id));
    QCOMPARE(result.outcome, ClaimResult::Outcome::Claimed);
    QCOMPARE(result.sendsThisRound, 0);
    QCOMPARE(stateOf(reminder.sendKey), QString(LedgerState::Claimed));
}

void TestStore::redriveSkipsLettersAlreadyGone()
{
    QString error;
    QVERIFY(m_store->queue().enqueue({outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("r")))}, &error));
    QueueMessage buried;
    QVERIFY(buryOne({QStringLiteral("rejected"), {}, 1, 0, 0, {}, {}}, &buried));
    const auto letters = m_store->inspector().deadLetters({}, &error);
    QCOMPARE(m_store->operations().redrive(*letters, 0, &error), std::optional<int>(1));
    // A second operator with the same (now stale) list moves nothing.
    QCOMPARE(m_store->operations().redrive(*letters, 0, &error), std::optional<int>(0));
    QCOMPARE(m_store->queue().counts(&error)->ready, qint64(1));
}

void TestStore::discardRemovesDeadLetter()
{
    QString error;
    const Reminder reminder = makeReminder(QStringLiteral("u"), QStringLiteral("r"));
    QVERIFY(m_store->queue().enqueue({outgoing(reminder), outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("s")))},
                                     &error));
    QueueMessage first, second;
    QVERIFY(buryOne({QStringLiteral("rejected"), {}, 1, 0, 0, reminder.sendKey, {}}, &first));
    QVERIFY(buryOne({QStringLiteral("rejected"), {}, 1, 0, 0, {}, {}}, &second));
    auto letters = m_store->inspector().deadLetters({}, &error);
    QCOMPARE(letters->size(), 2);

    QCOMPARE(m_store->operations().discard({letters->constFirst()}, 0, &error), std::optional<int>(1));
    letters = m_store->inspector().deadLetters({}, &error);
    QCOMPARE(letters->size(), 1);
    QCOMPARE(letters->constFirst().id, second.id);
    QCOMPARE(m_store->queue().counts(&error)->dead, qint64(1));
    QCOMPARE(m_store->queue().counts(&error)->ready, qint64(0));
    // Discarding again is harmless.
    QCOMPARE(m_store->operations().discard({letters->constFirst(), letters->constFirst()}, 0, &error), std::optional<int>(1));
    QCOMPARE(m_store->queue().counts(&error)->dead, qint64(0));
}

void TestStore::resendInDoubtQueuesPayloadAgain()
{
    QString error;
    const Reminder reminder = makeReminder(QStringLiteral("u"), QStringLiteral("r"), QStringLiteral("2026-12-01T09:00:00Z"),
                                           QStringLiteral("evt-doubt"));
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m1"), 1, nowMs() - 1), InDoubtPolicy::Hold).outcome,
             ClaimResult::Outcome::Claimed);
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m1"), 2), InDoubtPolicy::Hold).outcome,
             ClaimResult::Outcome::Held);
    QCOMPARE(stateOf(reminder.sendKey), QString(LedgerState::InDoubt));

    QVERIFY2(m_store->operations().resend(reminder.sendKey, {}, &error), qPrintable(error));
    QCOMPARE(stateOf(reminder.sendKey), QString(LedgerState::Retrying));
    const auto leased = m_store->queue().lease(5, LongLease, Worker, &error);
    QCOMPARE(leased.size(), 1);
    QCOMPARE(leased.constFirst().payload, reminder.payload);
    QCOMPARE(scalar(QStringLiteral("SELECT send_key FROM queue")).toString(), QString::fromLatin1(reminder.sendKey));
    QCOMPARE(scalar(QStringLiteral("SELECT event_id FROM queue")).toString(), QStringLiteral("evt-doubt"));

    const auto attempts = attemptsOf(reminder.sendKey);
    QCOMPARE(attempts.constLast().step, QStringLiteral("operator"));
    QCOMPARE(attempts.constLast().outcome, QStringLiteral("resend"));
    // The operator as its "worker", and the audit row it belongs to.
    QCOMPARE(attempts.constLast().workerId, currentUserName());
    const auto audit = m_store->inspector().auditLog(10, &error);
    QVERIFY2(audit, qPrintable(error));
    QCOMPARE(audit->size(), 1);
    QCOMPARE(audit->constFirst().action, QStringLiteral("resolve-resend"));
    QCOMPARE(audit->constFirst().detail, QString::fromLatin1(reminder.sendKey));
    QCOMPARE(audit->constFirst().count, qint64(1));
    QCOMPARE(audit->constFirst().actor, currentUserName());
    QCOMPARE(attempts.constLast().auditId, audit->constFirst().id);

    // The queued copy claims the key and is sent again under the same key.
    QCOMPARE(claim(*m_store, claimRequest(reminder, leased.constFirst().id), InDoubtPolicy::Hold).outcome,
             ClaimResult::Outcome::Claimed);
}

void TestStore::markDeliveredAppliesInDoubtKey()
{
    QString error;
    const Reminder reminder = makeReminder(QStringLiteral("u"), QStringLiteral("r"));
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m1"))).outcome, ClaimResult::Outcome::Claimed);
    QVERIFY(record(*m_store, reminder.sendKey, LedgerState::InDoubt, true, 0, QStringLiteral("in-doubt")));
    const qint64 before = nowMs();
    QVERIFY2(m_store->operations().markDelivered(reminder.sendKey, {}, &error), qPrintable(error));

    const auto row = m_store->inspector().event(QString::fromLatin1(reminder.sendKey), &error);
    QCOMPARE(row->state, QString(LedgerState::Applied));
    QVERIFY(row->appliedAtMs >= before);
    QCOMPARE(attemptsOf(reminder.sendKey).constLast().outcome, QStringLiteral("marked-delivered"));
    const auto audit = m_store->inspector().auditLog(10, &error);
    QCOMPARE(audit->size(), 1);
    QCOMPARE(audit->constFirst().action, QStringLiteral("resolve-mark-delivered"));
    QCOMPARE(audit->constFirst().count, qint64(1));
    // Nothing was queued, and a later copy of the reminder is a duplicate.
    QCOMPARE(m_store->queue().counts(&error)->ready, qint64(0));
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m2"))).outcome, ClaimResult::Outcome::Duplicate);
    QCOMPARE(attemptsOf(reminder.sendKey).constLast().error, QStringLiteral("already applied"));
}

void TestStore::resolveRefusesKeyNotInDoubt()
{
    QString error;
    const Reminder reminder = makeReminder(QStringLiteral("u"), QStringLiteral("r"));
    QCOMPARE(claim(*m_store, claimRequest(reminder, QStringLiteral("m1"))).outcome, ClaimResult::Outcome::Claimed);
    QVERIFY(!m_store->operations().resend(reminder.sendKey, {}, &error));
    QVERIFY2(error.contains(QLatin1String("is claimed, not in doubt")), qPrintable(error));
    error.clear();
    QVERIFY(!m_store->operations().markDelivered(reminder.sendKey, {}, &error));
    QVERIFY2(error.contains(QLatin1String("not in doubt")), qPrintable(error));

    QVERIFY(record(*m_store, reminder.sendKey, LedgerState::Applied, true, 200));
    QVERIFY(!m_store->operations().resend(reminder.sendKey, {}, &error));
    QVERIFY2(error.contains(QLatin1String("is applied, not in doubt")), qPrintable(error));

    QVERIFY(!m_store->operations().resend("nobody:nothing:2026-01-01T00:00:00Z", {}, &error));
    QVERIFY2(error.contains(QLatin1String("no event with send key")), qPrintable(error));

    // Refusals change nothing: no message, no audit line, the state is kept.
    QCOMPARE(m_store->queue().counts(&error)->ready, qint64(0));
    QCOMPARE(m_store->inspector().auditLog(10, &error)->size(), 0);
    QCOMPARE(stateOf(reminder.sendKey), QString(LedgerState::Applied));
    // And the connection is not left inside a transaction: a normal write still commits.
    QVERIFY(m_store->queue().enqueue({outgoing(reminder)}, &error));
    QCOMPARE(m_store->queue().counts(&error)->ready, qint64(1));
}

void TestStore::auditRowsHaveActorActionCount()
{
    QString error;
    Operations operations(m_store->database(), m_store->queue(), m_store->ledger(), QStringLiteral("alice"));
    const qint64 before = nowMs();
    QVERIFY2(operations.audit(QStringLiteral("redrive"), QStringLiteral("error-class=http-5xx"), 17, &error),
             qPrintable(error));
    QVERIFY2(operations.audit(QStringLiteral("discard"), QStringLiteral("all"), 2, &error), qPrintable(error));
    const auto entries = m_store->inspector().auditLog(10, &error);
    QVERIFY2(entries, qPrintable(error));
    QCOMPARE(entries->size(), 2);
    // Newest first.
    QCOMPARE(entries->at(0).action, QStringLiteral("discard"));
    QCOMPARE(entries->at(1).action, QStringLiteral("redrive"));
    QCOMPARE(entries->at(1).actor, QStringLiteral("alice"));
    QCOMPARE(entries->at(1).detail, QStringLiteral("error-class=http-5xx"));
    QCOMPARE(entries->at(1).count, qint64(17));
    QVERIFY(entries->at(1).atMs >= before && entries->at(1).atMs <= nowMs());
    QCOMPARE(m_store->inspector().auditLog(1, &error)->size(), 1);
    const QJsonObject json = entries->at(1).toJson();
    QCOMPARE(json.value(QStringLiteral("actor")).toString(), QStringLiteral("alice"));
    QCOMPARE(json.value(QStringLiteral("count")).toInt(), 17);
}

// --- Inspector and retention -----------------------------------------------------

void TestStore::statsCountEachKeyOnce()
{
    QString error;
    const Reminder applied = makeReminder(QStringLiteral("u"), QStringLiteral("applied"));
    const Reminder doubt = makeReminder(QStringLiteral("u"), QStringLiteral("doubt"));
    const Reminder live = makeReminder(QStringLiteral("u"), QStringLiteral("live"));
    const Reminder retrying = makeReminder(QStringLiteral("u"), QStringLiteral("retrying"));
    const Reminder dead = makeReminder(QStringLiteral("u"), QStringLiteral("dead"));
    for (const Reminder *r : {&applied, &doubt, &live, &retrying, &dead})
        QCOMPARE(claim(*m_store, claimRequest(*r, QStringLiteral("m-") + r->reminderId)).outcome,
                 ClaimResult::Outcome::Claimed);
    QVERIFY(record(*m_store, applied.sendKey, LedgerState::Applied, true, 200));
    QVERIFY(record(*m_store, doubt.sendKey, LedgerState::InDoubt, true, 0, QStringLiteral("in-doubt")));
    QVERIFY(record(*m_store, retrying.sendKey, LedgerState::Retrying, true, 503, QStringLiteral("http-5xx")));
    QVERIFY(record(*m_store, dead.sendKey, LedgerState::Dead, true, 400, QStringLiteral("rejected")));
    // The applied reminder is delivered twice more (published again, and redelivered).
    QCOMPARE(claim(*m_store, claimRequest(applied, QStringLiteral("m-copy"))).outcome, ClaimResult::Outcome::Duplicate);
    QCOMPARE(claim(*m_store, claimRequest(applied, QStringLiteral("m-applied"), 2)).outcome,
             ClaimResult::Outcome::Duplicate);
    QVERIFY(m_store->queue().enqueue({outgoing(live), outgoing(retrying, 60000)}, &error));

    const auto stats = m_store->inspector().stats(&error);
    QVERIFY2(stats, qPrintable(error));
    QCOMPARE(stats->acked, qint64(1));
    QCOMPARE(stats->inDoubt, qint64(1));
    QCOMPARE(stats->claimed, qint64(1));
    QCOMPARE(stats->retrying, qint64(1));
    QCOMPARE(stats->deadKeys, qint64(1));
    QCOMPARE(stats->duplicatesSuppressed, qint64(1));
    QCOMPARE(stats->duplicateDeliveries, qint64(2));
    QCOMPARE(stats->appliedLast5Min, qint64(1));
    QCOMPARE(stats->sendsLast5Min, qint64(4));
    QCOMPARE(stats->failedSendsLast5Min, qint64(3));
    QCOMPARE(stats->queue.ready, qint64(1));
    QCOMPARE(stats->queue.delayed, qint64(1));
    QVERIFY(stats->latenessP50Ms);
    QVERIFY(stats->latenessP95Ms);
    // Lateness is when the accepted send finished (its start plus its latency) minus
    // scheduled_at, over the one applied key.
    QList<Attempt> appliedSends;
    for (const Attempt &attempt : attemptsOf(applied.sendKey)) {
        if (attempt.step == QLatin1String("send") && attempt.outcome == QLatin1String("applied"))
            appliedSends.append(attempt);
    }
    QCOMPARE(appliedSends.size(), 1);
    QCOMPARE(*stats->latenessP50Ms, appliedSends.constFirst().atMs + appliedSends.constFirst().latencyMs
                                        - applied.scheduledAt.toMSecsSinceEpoch());
    QCOMPARE(*stats->latenessP95Ms, *stats->latenessP50Ms);

    const QJsonObject json = stats->toJson();
    QCOMPARE(json.value(QStringLiteral("acked")).toInt(), 1);
    QCOMPARE(json.value(QStringLiteral("duplicate_deliveries")).toInt(), 2);
    QCOMPARE(json.value(QStringLiteral("ready")).toInt(), 1);
}

void TestStore::upgradeCountsTheLedgerAlreadyThere()
{
    // A store of schema 9 with events in every state, upgraded: the counts start from its rows.
    const Reminder applied = makeReminder(QStringLiteral("u"), QStringLiteral("applied"));
    const Reminder doubt = makeReminder(QStringLiteral("u"), QStringLiteral("doubt"));
    const Reminder live = makeReminder(QStringLiteral("u"), QStringLiteral("live"));
    for (const Reminder *r : {&applied, &doubt, &live})
        QCOMPARE(claim(*m_store, claimRequest(*r, QStringLiteral("m-") + r->reminderId)).outcome,
                 ClaimResult::Outcome::Claimed);
    QVERIFY(record(*m_store, applied.sendKey, LedgerState::Applied, true, 200));
    QVERIFY(record(*m_store, doubt.sendKey, LedgerState::InDoubt, true, 0, QStringLiteral("in-doubt")));
    QCOMPARE(claim(*m_store, claimRequest(applied, QStringLiteral("m-copy"))).outcome, ClaimResult::Outcome::Duplicate);
    QString error;
    const QStringList downgrade =
        m_stores.isPostgres()
            ? QStringList{QStringLiteral("DROP TABLE ledger_totals"),
                          QStringLiteral("DROP FUNCTION ledger_totals_on_insert() CASCADE"),
                          QStringLiteral("DROP FUNCTION ledger_totals_on_update() CASCADE"),
                          QStringLiteral("DROP FUNCTION ledger_totals_on_delete() CASCADE"),
                          QStringLiteral("DROP FUNCTION IF EXISTS ledger_totals_add(TEXT[], BIGINT[])")}
            : QStringList{QStringLiteral("DROP TRIGGER ledger_totals_insert"),
                          QStringLiteral("DROP TRIGGER ledger_totals_state"),
                          QStringLiteral("DROP TRIGGER ledger_totals_duplicates"),
                          QStringLiteral("DROP TRIGGER ledger_totals_delete"),
                          QStringLiteral("DROP TABLE ledger_totals")};
    for (const QString &statement : undoSinceSchema17() + downgrade + undoHistoryByKeysTime())
        QVERIFY2(m_store->database().exec(statement, &error), qPrintable(error));
    QVERIFY2(m_store->database().exec(QStringLiteral("UPDATE schema_version SET version = 9"), &error), qPrintable(error));
    m_store.reset();

    m_store = openStore(&error);
    QVERIFY2(m_store, qPrintable(error));
    QCOMPARE(m_store->database().schemaVersion(), latestSchemaVersion());
    const auto stats = m_store->inspector().stats(&error);
    QVERIFY2(stats, qPrintable(error));
    QCOMPARE(stats->acked, qint64(1));
    QCOMPARE(stats->inDoubt, qint64(1));
    QCOMPARE(stats->claimed, qint64(1));
    QCOMPARE(stats->duplicatesSuppressed, qint64(1));
    QCOMPARE(stats->duplicateDeliveries, qint64(1));
    // And the triggers are back: a new claim counts.
    QCOMPARE(claim(*m_store, claimRequest(makeReminder(QStringLiteral("u"), QStringLiteral("after")), QStringLiteral("m-after")))
                 .outcome,
             ClaimResult::Outcome::Claimed);
    QCOMPARE(m_store->inspector().stats(&error)->claimed, qint64(2));
}

void TestStore::eventsFilterAndPage()
{
    QString error;
    QList<Reminder> all;
    for (int i = 0; i < 5; ++i)
        all.append(makeReminder(QStringLiteral("alice"), QStringLiteral("a%1").arg(i), QStringLiteral("2026-12-01T09:00:00Z"),
                                QStringLiteral("evt-a%1").arg(i)));
    for (int i = 0; i < 2; ++i)
        all.append(makeReminder(QStringLiteral("bob"), QStringLiteral("b%1").arg(i), QStringLiteral("2026-12-01T09:00:00Z"),
                                QString(), QStringLiteral("+15559999")));
    for (const auto &r : std::as_const(all))
        QCOMPARE(claim(*m_store, claimRequest(r, QStringLiteral("m-") + r.reminderId)).outcome,
                 ClaimResult::Outcome::Claimed);
    QVERIFY(record(*m_store, all.at(0).sendKey, LedgerState::Applied, true, 200));
    QVERIFY(record(*m_store, all.at(1).sendKey, LedgerState::Applied, true, 200));
    QVERIFY(record(*m_store, all.at(5).sendKey, LedgerState::Applied, true, 200));

    const auto keysOf = [](const QList<EventRow> &rows) {
        QSet<QByteArray> keys;
        for (const auto &row : rows)
            keys.insert(row.sendKey);
        return keys;
    };
    const auto check = [&](const EventFilter &filter, int expected) {
        const auto rows = m_store->inspector().events(filter, &error);
        const auto count = m_store->inspector().countEvents(filter, &error);
        return rows && count && rows->size() == std::min<qint64>(expected, filter.limit < 0 ? expected : filter.limit)
            && *count == expected;
    };

    EventFilter filter;
    QVERIFY(check(filter, 7));
    filter.text = QStringLiteral("alice");
    QVERIFY(check(filter, 5));
    filter.text = QStringLiteral("+15559999"); // destination
    QVERIFY(check(filter, 2));
    filter.text = QStringLiteral("a3"); // reminder id
    QVERIFY(check(filter, 1));
    filter.text = QStringLiteral("evt-a4"); // event id
    QVERIFY(check(filter, 1));
    filter.text = QString::fromLatin1(all.at(6).sendKey);
    QVERIFY(check(filter, 1));
    QCOMPARE(m_store->inspector().events(filter, &error)->constFirst().reminderId, QStringLiteral("b1"));
    filter.text = QStringLiteral("ali"); // exact match only
    QVERIFY(check(filter, 0));

    filter = EventFilter();
    filter.userId = QStringLiteral("bob");
    QVERIFY(check(filter, 2));
    filter.state = LedgerState::Applied;
    QVERIFY(check(filter, 1));
    filter = EventFilter();
    filter.state = LedgerState::Applied;
    QVERIFY(check(filter, 3));
    filter.state = LedgerState::Claimed;
    QVERIFY(check(filter, 4));
    filter.text = QStringLiteral("alice");
    QVERIFY(check(filter, 3));

    // Pages of two over alice's five events, each below the last row of the page before
    // (keyset paging): no overlap, nothing missing, count unaffected, newest first.
    filter = EventFilter();
    filter.text = QStringLiteral("alice");
    filter.limit = 2;
    QSet<QByteArray> seen;
    qint64 lastPosition = std::numeric_limits<qint64>::max();
    for (int page = 0; page < 3; ++page) {
        const auto rows = m_store->inspector().events(filter, &error);
        QVERIFY2(rows, qPrintable(error));
        QCOMPARE(rows->size(), page < 2 ? 2 : 1);
        for (const EventRow &row : *rows) {
            QVERIFY2(row.listPosition < lastPosition, "each row sits below the one before");
            lastPosition = row.listPosition;
            QVERIFY(row.payload.isEmpty()); // a list never reads payloads
        }
        const auto keys = keysOf(*rows);
        QVERIFY(!seen.intersects(keys));
        seen.unite(keys);
        QCOMPARE(*m_store->inspector().countEvents(filter, &error), qint64(5));
        filter.below = rows->constLast().listPosition;
    }
    QCOMPARE(seen.size(), 5);
    QVERIFY(m_store->inspector().events(filter, &error)->isEmpty());
    // A row written since sits above every page already read, never below.
    const Reminder later = makeReminder(QStringLiteral("alice"), QStringLiteral("a-later"));
    QCOMPARE(claim(*m_store, claimRequest(later, QStringLiteral("m-later"))).outcome, ClaimResult::Outcome::Claimed);
    QVERIFY(m_store->inspector().events(filter, &error)->isEmpty());
    filter.below = 0;
    QCOMPARE(m_store->inspector().events(filter, &error)->constFirst().sendKey, later.sendKey);

    // A message still waiting in the queue comes first, then the ledger's rows: one at a
    // time, every row once.
    const Reminder waiting = makeReminder(QStringLiteral("alice"), QStringLiteral("a-waiting"));
    QVERIFY2(m_store->queue().enqueue({outgoing(waiting)}, &error), qPrintable(error));
    filter.limit = 1;
    // Every row the filter lists, a page of one at a time; empty if a page failed or held
    // more than one row, or more than seven pages came.
    const auto oneAtATime = [&](EventFilter pages) {
        QList<QByteArray> keys;
        for (pages.below = 0; keys.size() <= 7;) {
            const auto rows = m_store->inspector().events(pages, &error);
            if (!rows || rows->size() > 1)
                return QList<QByteArray>();
            if (rows->isEmpty())
                return keys;
            keys.append(rows->constFirst().sendKey);
            pages.below = rows->constFirst().listPosition;
        }
        return QList<QByteArray>();
    };
    const QList<QByteArray> order = oneAtATime(filter);
    QCOMPARE(order.size(), 7);
    QCOMPARE(order.constFirst(), waiting.sendKey);
    QCOMPARE(order.at(1), later.sendKey);
    QCOMPARE(QSet<QByteArray>(order.cbegin(), order.cend()).size(), 7);

    // Oldest first: the ledger's rows alone, in the other order.
    filter.oldestFirst = true;
    QCOMPARE(oneAtATime(filter), QList<QByteArray>(order.crbegin(), order.crend() - 1));
}

// Every PostgreSQL connection that changed the ledger left a counter shard of its own:
// worker starts and reconnections would pile them up for good. The clean-up folds those
// of ended connections into one, and the counts stay right.
void TestStore::purgeFoldsTheCounterShardsOfEndedConnections()
{
    if (!m_stores.isPostgres())
        QSKIP("SQLite keeps its counters in one shard");
    QString error;
    const auto shards = [&](const QString &which) {
        QSqlQuery query(m_store->database().connection());
        const bool ok =
            query.exec(QStringLiteral("SELECT COUNT(DISTINCT shard) FROM ledger_totals WHERE ") + which) &&
            query.next();
        return ok ? query.value(0).toInt() : -1;
    };
    const QString ended = QStringLiteral(
        "shard <> 0 AND shard NOT IN (SELECT pid FROM pg_stat_activity WHERE pid IS NOT NULL)");
    for (int connection = 0; connection < 3; ++connection) {
        auto other = openStore(&error);
        QVERIFY2(other, qPrintable(error));
        for (int i = 0; i < 4; ++i) {
            const Reminder r =
                makeReminder(QStringLiteral("shard%1").arg(connection), QStringLiteral("r%1").arg(i));
            QCOMPARE(claim(*other, claimRequest(r, QStringLiteral("m-%1-%2").arg(connection).arg(i))).outcome,
                     ClaimResult::Outcome::Claimed);
            if (i % 2 == 0)
                QVERIFY(record(*other, r.sendKey, LedgerState::Applied, true, 200));
        }
    }
    // A backend leaves pg_stat_activity a moment after its client hangs up.
    QTRY_COMPARE_WITH_TIMEOUT(shards(ended), 3, 10000);
    const Reminder live = makeReminder(QStringLiteral("shard-live"), QStringLiteral("r"));
    QCOMPARE(claim(*m_store, claimRequest(live, QStringLiteral("m-live"))).outcome,
             ClaimResult::Outcome::Claimed);

    QVERIFY2(m_store->ledger().purgeFinished(0, &error), qPrintable(error));
    QCOMPARE(shards(ended), 0);
    QCOMPARE(shards(QStringLiteral("shard = pg_backend_pid()")), 1); // a live one stays
    QCOMPARE(shards(QStringLiteral("shard = 0")), 1);
    // cleanup() checks every count against the ledger's rows.
}

void TestStore::purgeFinishedRemovesOldAppliedKeysOnly()
{
    QString error;
    // Enough old keys to take several of the purge's batches.
    constexpr int OldApplied = 1100;
    QList<ClaimRequest> requests;
    QList<LedgerUpdate> updates;
    QList<Attempt> sends;
    for (int i = 0; i < OldApplied; ++i) {
        const Reminder r = makeReminder(QStringLiteral("old"), QStringLiteral("o%1").arg(i));
        requests.append(claimRequest(r, QStringLiteral("m-o%1").arg(i)));
        updates.append(LedgerUpdate{r.sendKey, QStringLiteral("m-o%1").arg(i), 1, LedgerState::Applied, true, nowMs(),
                                    200, {}, {}, {}});
        sends.append(Attempt{r.sendKey, {}, QStringLiteral("m-o%1").arg(i), 1, Worker, nowMs(), QStringLiteral("send"),
                             QStringLiteral("applied"), 200, 3, {}, {}, {}});
    }
    QCOMPARE(m_store->ledger().claim(requests, Worker, InDoubtPolicy::Resend, &error).size(), OldApplied);
    QVERIFY2(m_store->ledger().record(updates, sends, &error), qPrintable(error));
    const Reminder recent = makeReminder(QStringLiteral("new"), QStringLiteral("recent"));
    const Reminder oldRetrying = makeReminder(QStringLiteral("old"), QStringLiteral("retrying"));
    const Reminder oldDead = makeReminder(QStringLiteral("old"), QStringLiteral("dead"));
    for (const Reminder *r : {&recent, &oldRetrying, &oldDead})
        QCOMPARE(claim(*m_store, claimRequest(*r, QStringLiteral("m-") + r->reminderId)).outcome,
                 ClaimResult::Outcome::Claimed);
    QVERIFY(record(*m_store, recent.sendKey, LedgerState::Applied, true, 200));
    QVERIFY(record(*m_store, oldRetrying.sendKey, LedgerState::Retrying, true, 503, QStringLiteral("http-5xx")));
    QVERIFY(record(*m_store, oldDead.sendKey, LedgerState::Dead, true, 400, QStringLiteral("rejected")));

    // Age everything of user "old" by two days.
    const qint64 twoDaysAgo = nowMs() - 2 * 24 * 3600 * 1000LL;
    {
        QSqlQuery age(m_store->database().connection());
        age.prepare(QStringLiteral("UPDATE ledger SET updated_at = ? WHERE user_id = 'old'"));
        age.addBindValue(twoDaysAgo);
        QVERIFY2(age.exec(), qPrintable(age.lastError().text()));
        QCOMPARE(age.numRowsAffected(), OldApplied + 2);
    }
    const int attemptsBefore = scalar(QStringLiteral("SELECT COUNT(*) FROM attempts")).toInt();
    const int oldAppliedAttempts =
        scalar(QStringLiteral("SELECT COUNT(*) FROM attempts WHERE send_key IN "
                              "(SELECT send_key FROM ledger WHERE user_id = 'old' AND state = 'applied')"))
            .toInt();
    QCOMPARE(oldAppliedAttempts, OldApplied); // one send row each

    // Two delivery events seen: one two days ago, one now.
    {
        QSqlQuery seen(m_store->database().connection());
        seen.prepare(QStringLiteral("INSERT INTO partner_events (partner, event_id, send_key, kind, received_at) "
                                    "VALUES ('pm', 'old-event', 'k', 'delivered', ?), ('pm', 'new-event', 'k', 'delivered', ?)"));
        seen.addBindValue(twoDaysAgo);
        seen.addBindValue(nowMs());
        QVERIFY2(seen.exec(), qPrintable(seen.lastError().text()));
    }

    QVERIFY2(m_store->ledger().purgeFinished(nowMs() - 24 * 3600 * 1000LL, &error), qPrintable(error));

    QCOMPARE(scalar(QStringLiteral("SELECT event_id FROM partner_events")).toString(), QStringLiteral("new-event"));
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM partner_events")).toInt(), 1);
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM ledger")).toInt(), 3);
    QCOMPARE(stateOf(recent.sendKey), QString(LedgerState::Applied));
    QCOMPARE(stateOf(oldRetrying.sendKey), QString(LedgerState::Retrying));
    QCOMPARE(stateOf(oldDead.sendKey), QString(LedgerState::Dead));
    QVERIFY(!m_store->inspector().event(QString::fromLatin1(requests.constFirst().reminder.sendKey), &error));
    QVERIFY(attemptsOf(requests.constFirst().reminder.sendKey).isEmpty());
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM attempts")).toInt(), attemptsBefore - oldAppliedAttempts);
    QVERIFY(!attemptsOf(recent.sendKey).isEmpty());
    QVERIFY(!attemptsOf(oldRetrying.sendKey).isEmpty());

    // Purging again finds nothing more to do.
    QVERIFY2(m_store->ledger().purgeFinished(nowMs() - 24 * 3600 * 1000LL, &error), qPrintable(error));
    QCOMPARE(scalar(QStringLiteral("SELECT COUNT(*) FROM ledger")).toInt(), 3);
}

QTEST_GUILESS_MAIN(TestStore)
#include "tst_store.moc"
