// The store failing under real `once` processes: a file deleted or replaced under a
// running worker, a full disk, a corrupt file, a read-only disk or database, a store held
// locked, two processes creating one store together, and the signals that stop a worker
// meanwhile. Effects are counted at the in-process partner simulator: whatever the store
// does, no reminder is lost or applied twice, every stop is one clear line, and the counts a
// store keeps (ledger_totals) agree with its rows afterwards.
//
// Runs on SQLite and on PostgreSQL (STORES in tests/CMakeLists.txt); the disk tests need
// root to mount a small tmpfs of their own, and skip without it.
#include "deliveryharness.h"
#include "sim/partnersimulator.h"
#include "teststores.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonObject>
#include <QLoggingCategory>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QSqlError>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QTest>

#include <csignal>
#include <unistd.h>

using namespace once;
using namespace oncetest;

class FailingStoreTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void storeFileGoneStopsTheWorker_data();
    void storeFileGoneStopsTheWorker();
    void fullDiskStopsTheWorkerAndLosesNothing();
    void corruptStoreIsNeverReady();
    void fileThatIsNotAStoreIsSaidInWords();
    void readingCommandsWorkOnAReadOnlyDisk();
    void readOnlyDatabaseStopsTheWorker();
    void readingCommandsNeedOnlyReadAccess();
    void sigtermEndsWithinTheGraceWhileTheStoreIsLocked();
    void aTurnThatOutlastsTheBreakersWaitStillProbes();
    void racingInitsNeverFail();
    void serveIsNotReadyWhileTheStoreTakesNoWrites();

private:
    QString partnerUrl() const { return QStringLiteral("http://127.0.0.1:%1/reminders").arg(m_partner->port()); }
    QStringList workerArgs(const QStringList &extra = {}) const;
    // Writes reminders to a file and enqueues them at storeUrl (this test's store when
    // empty); returns their keys, empty after a warning when the enqueue failed.
    QList<QByteArray> enqueue(int count, const QString &prefix, const QString &storeUrl = {});
    // A tmpfs of `size` at a folder of this test's own, unmounted at cleanup; false (and a
    // skip reason) without the privilege.
    bool mountScratch(const QString &size, QString *path, QString *why);
    bool remountReadOnly(const QString &path);
    QString sqlitePath() const { return m_storeUrl.mid(int(qstrlen("sqlite:"))); }

    TestStores m_stores;
    QString m_onceBin;
    QString m_storeUrl;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<PartnerSimulator> m_partner;
    std::unique_ptr<OnceRunner> m_once;
    QStringList m_mounts;
};

void FailingStoreTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFile::exists(m_onceBin), "ONCE_BIN must name the built once binary (ctest sets it)");
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.partnersim.debug=false"));
}

void FailingStoreTest::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_storeUrl = m_stores.newUrl();
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_storeUrl);
    m_partner = std::make_unique<PartnerSimulator>();
    QString error;
    QVERIFY2(m_partner->listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
}

void FailingStoreTest::cleanup()
{
    m_once.reset();
    m_partner.reset();
    for (const auto &mount : std::as_const(m_mounts))
        QProcess::execute(QStringLiteral("umount"), {QStringLiteral("-l"), mount});
    m_mounts.clear();
    m_dir.reset();
}

QStringList FailingStoreTest::workerArgs(const QStringList &extra) const
{
    return QStringList{QStringLiteral("worker"), QStringLiteral("--partner"), partnerUrl(),
                       QStringLiteral("--lease"), QStringLiteral("3"), QStringLiteral("--timeout"), QStringLiteral("1"),
                       QStringLiteral("--backoff-base-ms"), QStringLiteral("50")}
           + extra;
}

QList<QByteArray> FailingStoreTest::enqueue(int count, const QString &prefix, const QString &storeUrl)
{
    return m_once->enqueueReminders(m_dir->path(), count, prefix,
                                    storeUrl.isEmpty() ? QStringList() : QStringList{QStringLiteral("--store"), storeUrl});
}

bool FailingStoreTest::mountScratch(const QString &size, QString *path, QString *why)
{
    if (::geteuid() != 0) {
        *why = QStringLiteral("mounting a small tmpfs needs root");
        return false;
    }
    *path = m_dir->filePath(QStringLiteral("disk-%1").arg(m_mounts.size()));
    QDir().mkpath(*path);
    QProcess mount;
    mount.start(QStringLiteral("mount"),
                {QStringLiteral("-t"), QStringLiteral("tmpfs"), QStringLiteral("-o"), QStringLiteral("size=") + size,
                 QStringLiteral("tmpfs"), *path});
    if (!mount.waitForFinished(10000) || mount.exitCode() != 0) {
        *why = QStringLiteral("cannot mount a tmpfs here: ") + QString::fromLocal8Bit(mount.readAllStandardError());
        return false;
    }
    m_mounts.append(*path);
    return true;
}

bool FailingStoreTest::remountReadOnly(const QString &path)
{
    return QProcess::execute(QStringLiteral("mount"), {QStringLiteral("-o"), QStringLiteral("remount,ro"), path}) == 0;
}

void FailingStoreTest::storeFileGoneStopsTheWorker_data()
{
    QTest::addColumn<bool>("replaced");
    QTest::newRow("deleted") << false;
    QTest::newRow("replaced by a new store") << true;
}

// A worker that kept its handle on a deleted (or replaced) file would go on writing where
// nobody looks, while producers enqueue into the file now at the path, unseen.
void FailingStoreTest::storeFileGoneStopsTheWorker()
{
    if (m_stores.isPostgres())
        QSKIP("a store file is SQLite's");
    QFETCH(bool, replaced);
    QVERIFY(m_once->run({QStringLiteral("init")}).exitedWith(0));
    const auto before = enqueue(5, QStringLiteral("before"));
    QCOMPARE(before.size(), 5);
    QProcess *worker = m_once->start(workerArgs());
    QVERIFY(pumpUntil([&] { return m_partner->stats().effects == 5; }, WorkerTimeoutMs));

    const QString path = sqlitePath();
    if (replaced) {
        // As a careless restore would: the old file moved away, a new store in its place.
        for (const auto suffix : {"", "-wal", "-shm"})
            QFile::rename(path + QLatin1String(suffix), path + QLatin1String(".old") + QLatin1String(suffix));
        QVERIFY(m_once->run({QStringLiteral("init")}).exitedWith(0));
    } else {
        for (const auto suffix : {"", "-wal", "-shm"})
            QFile::remove(path + QLatin1String(suffix));
    }
    const auto after = replaced ? enqueue(5, QStringLiteral("after")) : QList<QByteArray>();
    QElapsedTimer clock;
    clock.start();
    const auto stopped = m_once->waitFor(worker, WorkerTimeoutMs);
    QVERIFY2(stopped.exitedWith(1), stopped.describe().constData());
    QVERIFY2(stopped.err.contains(replaced ? "was replaced by another file while in use" : "was deleted while in use"),
             stopped.err.constData());
    QVERIFY2(clock.elapsed() < 30000, "the worker took too long to notice");
    if (!replaced)
        return;
    // What was enqueued into the new store is delivered by a worker on it, once.
    const auto rest = m_once->run(workerArgs({QStringLiteral("--until-idle")}), {}, WorkerTimeoutMs);
    QVERIFY2(rest.exitedWith(0), rest.describe().constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_partner, before + after));
    // The counts each store keeps agree with its rows: the new one's, and the old file's,
    // which the worker wrote until it noticed.
    VERIFY_NO_PROBLEMS(m_stores.totalsDisagreeWithLedger(m_storeUrl));
    VERIFY_NO_PROBLEMS(m_stores.totalsDisagreeWithLedger(m_storeUrl + QStringLiteral(".old")));
}

void FailingStoreTest::fullDiskStopsTheWorkerAndLosesNothing()
{
    if (m_stores.isPostgres())
        QSKIP("the disk tests run on SQLite");
    QString disk, why;
    if (!mountScratch(QStringLiteral("8M"), &disk, &why))
        QSKIP(qPrintable(why));
    const QString store = QStringLiteral("sqlite:") + disk + QStringLiteral("/store.sqlite");
    QVERIFY(m_once->run({QStringLiteral("init"), QStringLiteral("--store"), store}).exitedWith(0));
    constexpr int Count = 600;
    const auto keys = enqueue(Count, QStringLiteral("full"), store);
    QCOMPARE(keys.size(), Count);
    PartnerFaults slow;
    slow.latencyMs = 20;
    m_partner->setProfile(slow);
    QProcess *worker = m_once->start(workerArgs({QStringLiteral("--store"), store, QStringLiteral("--concurrency"),
                                                 QStringLiteral("4")}));
    QVERIFY(pumpUntil([&] { return m_partner->stats().effects >= 20; }, WorkerTimeoutMs));
    // Fill what is left of the disk while the worker runs.
    QFile filler(disk + QStringLiteral("/filler"));
    QVERIFY(filler.open(QIODevice::WriteOnly));
    const QByteArray block(16 * 1024, 'x');
    while (filler.write(block) == block.size() && filler.flush()) {
    }
    filler.close();

    QElapsedTimer clock;
    clock.start();
    const auto stopped = m_once->waitFor(worker, WorkerTimeoutMs);
    QVERIFY2(m_partner->stats().effects < Count, "the worker delivered everything: the disk never filled");
    QVERIFY2(stopped.exitedWith(1), stopped.describe().constData());
    QVERIFY2(stopped.err.contains("stopping: the store") && stopped.err.contains("disk is full"), stopped.err.constData());
    QVERIFY2(clock.elapsed() < 40000, "the worker took too long to give up");

    // Space again: a new worker finishes the job; nothing lost, nothing applied twice (the
    // partner dedupes what the first worker sent without recording).
    QVERIFY(QFile::remove(disk + QStringLiteral("/filler")));
    const auto rest = m_once->run(workerArgs({QStringLiteral("--store"), store, QStringLiteral("--until-idle")}), {},
                                  WorkerTimeoutMs);
    QVERIFY2(rest.exitedWith(0), rest.describe().constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_partner, keys));
    const auto stats = QJsonDocument::fromJson(
                           m_once->run({QStringLiteral("stats"), QStringLiteral("--json"), QStringLiteral("--store"), store}).out)
                           .object();
    VERIFY_NO_PROBLEMS(statsProblems(stats, {{QStringLiteral("acked"), Count},
                                             {QStringLiteral("ready"), 0},
                                             {QStringLiteral("in_flight"), 0},
                                             {QStringLiteral("claimed"), 0}}));
    // Transactions cut short by the full disk rolled their counts back with their rows.
    VERIFY_NO_PROBLEMS(m_stores.totalsDisagreeWithLedger(store));
}

void FailingStoreTest::corruptStoreIsNeverReady()
{
    if (m_stores.isPostgres())
        QSKIP("a corrupt file is SQLite's");
    QVERIFY(m_once->run({QStringLiteral("init")}).exitedWith(0));
    QCOMPARE(enqueue(200, QStringLiteral("corrupt")).size(), 200);
    {
        QFile file(sqlitePath());
        QVERIFY(file.open(QIODevice::ReadWrite));
        QVERIFY(file.size() > 5 * 4096);
        file.seek(3 * 4096);
        file.write(QByteArray(8192, char(0xde)));
    }
    const auto init = m_once->run({QStringLiteral("init")});
    QVERIFY2(init.exitedWith(1), init.describe().constData());
    QVERIFY2(!init.out.contains("ready"), init.out.constData());
    QVERIFY2(init.err.startsWith("once: the store sqlite:") && init.err.contains(" is corrupt: ")
                 && init.err.count('\n') == 1,
             init.err.constData());

    QElapsedTimer clock;
    clock.start();
    const auto worker = m_once->run(workerArgs({QStringLiteral("--until-idle")}), {}, WorkerTimeoutMs);
    QVERIFY2(worker.exitedWith(1), worker.describe().constData());
    QVERIFY2(worker.err.contains("malformed"), worker.err.constData());
    QVERIFY2(clock.elapsed() < 40000, "the worker took too long to give up");
    // Warned once, not four times a second.
    QVERIFY2(worker.err.count("store write failed") <= 3, worker.err.constData());
}

// A path that names some other file (a typo, a CSV export, a config file): every command
// says in words that it is not a store, and nothing writes to it.
void FailingStoreTest::fileThatIsNotAStoreIsSaidInWords()
{
    if (m_stores.isPostgres())
        QSKIP("a store file is SQLite's");
    const QByteArray content = "send_key,state\nu:r:2026-12-01T09:00:00Z,applied\n" + QByteArray(8192, 'x');
    {
        QFile file(sqlitePath());
        QVERIFY(file.open(QIODevice::WriteOnly));
        QCOMPARE(file.write(content), content.size());
    }
    for (const QStringList &command : {QStringList{QStringLiteral("init")}, QStringList{QStringLiteral("stats")},
                                       QStringList{QStringLiteral("events")},
                                       workerArgs({QStringLiteral("--until-idle")})}) {
        const auto run = m_once->run(command, {}, WorkerTimeoutMs);
        QVERIFY2(run.exitedWith(1), run.describe().constData());
        QVERIFY2(run.err.contains(QByteArray("sqlite:" + QFile::encodeName(sqlitePath())
                                             + " is not a once store: the file is not an SQLite database")),
                 run.describe().constData());
        // The worker adds its summary line; the others say one line.
        const bool worker = command.constFirst() == QLatin1String("worker");
        QVERIFY2(worker || (run.err.startsWith("once: sqlite:") && run.err.count('\n') == 1), run.describe().constData());
        QVERIFY2(!run.err.contains("PRAGMA"), run.err.constData());
    }
    QFile file(sqlitePath());
    QVERIFY(file.open(QIODevice::ReadOnly));
    QCOMPARE(file.readAll(), content);
    QVERIFY(!QFile::exists(sqlitePath() + QStringLiteral("-wal")));
}

void FailingStoreTest::readingCommandsWorkOnAReadOnlyDisk()
{
    if (m_stores.isPostgres())
        QSKIP("the disk tests run on SQLite");
    QString disk, why;
    if (!mountScratch(QStringLiteral("16M"), &disk, &why))
        QSKIP(qPrintable(why));
    const QString store = QStringLiteral("sqlite:") + disk + QStringLiteral("/store.sqlite");
    QVERIFY(m_once->run({QStringLiteral("init"), QStringLiteral("--store"), store}).exitedWith(0));
    const auto keys = enqueue(20, QStringLiteral("ro"), store);
    QCOMPARE(keys.size(), 20);
    // Some of it delivered, the rest left by a worker killed mid-run (its -wal and -shm
    // stay behind, as a crash leaves them).
    PartnerFaults slow;
    slow.latencyMs = 200;
    m_partner->setProfile(slow);
    QProcess *worker = m_once->start(workerArgs({QStringLiteral("--store"), store}));
    const auto acked = [&] {
        return QJsonDocument::fromJson(
                   m_once->run({QStringLiteral("stats"), QStringLiteral("--json"), QStringLiteral("--store"), store}).out)
            .object()
            .value(QLatin1String("acked"))
            .toInt();
    };
    QVERIFY(pumpUntil([&] { return acked() >= 5; }, WorkerTimeoutMs));
    worker->kill();
    worker->waitForFinished(5000);
    QVERIFY2(QFile::exists(disk + QStringLiteral("/store.sqlite-wal")), "no write-ahead log was left behind");
    QVERIFY(remountReadOnly(disk));

    for (const QStringList &command :
         {QStringList{QStringLiteral("stats"), QStringLiteral("--json")}, QStringList{QStringLiteral("events")},
          QStringList{QStringLiteral("history"), QString::fromLatin1(keys.first())}, QStringList{QStringLiteral("dlq")},
          QStringList{QStringLiteral("in-doubt")}, QStringList{QStringLiteral("workers")},
          QStringList{QStringLiteral("redrive"), QStringLiteral("--all"), QStringLiteral("--dry-run")}}) {
        const auto result = m_once->run(command + QStringList{QStringLiteral("--store"), store});
        QVERIFY2(result.exitedWith(0), result.describe().constData());
    }
    QVERIFY(acked() >= 5); // read from the write-ahead log the killed worker left
    // The killed worker's last transactions left counts and rows alike.
    VERIFY_NO_PROBLEMS(m_stores.totalsDisagreeWithLedger(store));
    // Writing commands say why they cannot, in one line.
    const auto enqueueing = m_once->run({QStringLiteral("enqueue"), QStringLiteral("--store"), store,
                                         m_dir->filePath(QStringLiteral("ro.jsonl"))});
    QVERIFY2(enqueueing.exitedWith(1), enqueueing.describe().constData());
    QVERIFY2(enqueueing.err.contains("readonly") || enqueueing.err.contains("read-only"), enqueueing.err.constData());
    QVERIFY2(enqueueing.err.count('\n') <= 2, enqueueing.err.constData());
}

// A database the server turns read-only (a primary demoted to a standby, a DBA's switch):
// the worker's sessions come back read-only, and it stops instead of retrying for ever.
void FailingStoreTest::readOnlyDatabaseStopsTheWorker()
{
    if (!m_stores.isPostgres())
        QSKIP("a read-only database is PostgreSQL's (the SQLite disk tests cover files)");
    QVERIFY(m_once->run({QStringLiteral("init")}).exitedWith(0));
    QCOMPARE(enqueue(20, QStringLiteral("before")).size(), 20);
    QProcess *worker = m_once->start(workerArgs());
    QVERIFY(pumpUntil([&] { return m_partner->stats().effects == 20; }, WorkerTimeoutMs));

    const QString database = QUrl(m_storeUrl).path().mid(1);
    QSqlQuery admin(m_stores.admin());
    QVERIFY2(admin.exec(QStringLiteral("ALTER DATABASE %1 SET default_transaction_read_only = on").arg(database)),
             qPrintable(admin.lastError().text()));
    // New sessions are read-only; end the worker's, as a failover would.
    QVERIFY2(admin.exec(QStringLiteral("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '%1' "
                                       "AND pid <> pg_backend_pid()")
                            .arg(database)),
             qPrintable(admin.lastError().text()));
    QCOMPARE(enqueue(1, QStringLiteral("after")).size(), 0); // a producer is refused too

    QElapsedTimer clock;
    clock.start();
    const auto stopped = m_once->waitFor(worker, WorkerTimeoutMs);
    admin.exec(QStringLiteral("ALTER DATABASE %1 RESET default_transaction_read_only").arg(database));
    QVERIFY2(stopped.exitedWith(1), stopped.describe().constData());
    QVERIFY2(stopped.err.contains("stopping: the store") && stopped.err.contains("read-only transaction"),
             stopped.err.constData());
    QVERIFY2(clock.elapsed() < 40000, "the worker took too long to give up");
    VERIFY_NO_PROBLEMS(m_stores.totalsDisagreeWithLedger(m_storeUrl));
}

// A role that may only read (support staff, a reporting job) can look at everything.
void FailingStoreTest::readingCommandsNeedOnlyReadAccess()
{
    if (!m_stores.isPostgres())
        QSKIP("roles are PostgreSQL's (readingCommandsWorkOnAReadOnlyDisk covers SQLite)");
    QVERIFY(m_once->run({QStringLiteral("init")}).exitedWith(0));
    const auto keys = enqueue(3, QStringLiteral("look"));
    QCOMPARE(keys.size(), 3);
    QVERIFY(m_once->run(workerArgs({QStringLiteral("--until-idle")}), {}, WorkerTimeoutMs).exitedWith(0));

    const QString database = QUrl(m_storeUrl).path().mid(1);
    const QString role = database + QStringLiteral("_reader");
    QSqlQuery admin(m_stores.admin());
    QVERIFY2(admin.exec(QStringLiteral("CREATE ROLE %1 LOGIN PASSWORD 'reader-pw'").arg(role)),
             qPrintable(admin.lastError().text()));
    {
        QSqlDatabase db = m_stores.openRaw(m_storeUrl, QStringLiteral("failingstore-grant"));
        QSqlQuery grant(db);
        QVERIFY2(grant.exec(QStringLiteral("GRANT SELECT ON ALL TABLES IN SCHEMA public TO %1").arg(role)),
                 qPrintable(grant.lastError().text()));
        db.close();
    }
    QSqlDatabase::removeDatabase(QStringLiteral("failingstore-grant"));
    QUrl url(m_storeUrl);
    url.setUserName(role);
    url.setPassword(QStringLiteral("reader-pw"));
    const QString readerUrl = url.toString(QUrl::FullyEncoded);
    for (const QStringList &command :
         {QStringList{QStringLiteral("stats")}, QStringList{QStringLiteral("events")},
          QStringList{QStringLiteral("history"), QString::fromLatin1(keys.first())}, QStringList{QStringLiteral("dlq")},
          QStringList{QStringLiteral("in-doubt")}, QStringList{QStringLiteral("workers")}}) {
        const auto result = m_once->run(command + QStringList{QStringLiteral("--store"), readerUrl});
        QVERIFY2(result.exitedWith(0), result.describe().constData());
    }
    const auto enqueueing = m_once->run({QStringLiteral("enqueue"), QStringLiteral("--store"), readerUrl,
                                         m_dir->filePath(QStringLiteral("look.jsonl"))});
    QVERIFY2(enqueueing.exitedWith(1), enqueueing.describe().constData());
    QVERIFY2(enqueueing.err.contains("permission denied"), enqueueing.err.constData());
    admin.exec(QStringLiteral("REVOKE ALL ON ALL TABLES IN SCHEMA public FROM %1").arg(role));
}

// A store that does not answer (here: held locked by another session) must not keep a
// stopping worker for ever: within --timeout + 5 s it exits, and what it had in flight
// is left as after a crash.
void FailingStoreTest::sigtermEndsWithinTheGraceWhileTheStoreIsLocked()
{
    QVERIFY(m_once->run({QStringLiteral("init")}).exitedWith(0));
    const auto keys = enqueue(40, QStringLiteral("locked"));
    QCOMPARE(keys.size(), 40);
    PartnerFaults slow;
    slow.latencyMs = 300;
    m_partner->setProfile(slow);
    QProcess *worker = m_once->start(workerArgs({QStringLiteral("--concurrency"), QStringLiteral("4")}));
    QVERIFY(pumpUntil([&] { return m_partner->stats().effects >= 4 && m_partner->stats().held > 0; }, WorkerTimeoutMs));

    {
        QSqlDatabase lock = m_stores.openRaw(m_storeUrl, QStringLiteral("failingstore-lock"));
        QSqlQuery hold(lock);
        QVERIFY2(hold.exec(m_stores.isPostgres() ? QStringLiteral("BEGIN") : QStringLiteral("BEGIN EXCLUSIVE")),
                 qPrintable(hold.lastError().text()));
        if (m_stores.isPostgres())
            QVERIFY2(hold.exec(QStringLiteral("LOCK TABLE ledger, queue, attempts IN ACCESS EXCLUSIVE MODE")),
                     qPrintable(hold.lastError().text()));
        QTest::qWait(1000); // the worker's next turn now waits on the lock
        QElapsedTimer clock;
        clock.start();
        ::kill(pid_t(worker->processId()), SIGTERM);
        const auto stopped = m_once->waitFor(worker, 30000);
        const qint64 took = clock.elapsed();
        hold.exec(QStringLiteral("ROLLBACK"));
        lock.close();
        QVERIFY2(stopped.exitedWith(1), stopped.describe().constData());
        QVERIFY2(stopped.err.contains("not stopped after 6 s; exiting now, deliveries still in flight will show as in doubt"),
                 stopped.err.constData());
        QVERIFY2(took >= 5000 && took < 15000, qPrintable(QStringLiteral("stopped after %1 ms").arg(took)));
    }
    QSqlDatabase::removeDatabase(QStringLiteral("failingstore-lock"));

    // Nothing lost: a new worker finds what was in flight in doubt and resends it with its
    // key; the partner dedupes.
    m_partner->setProfile(PartnerFaults{});
    const auto rest = m_once->run(workerArgs({QStringLiteral("--until-idle")}), {}, WorkerTimeoutMs);
    QVERIFY2(rest.exitedWith(0), rest.describe().constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_partner, keys));
    // The worker cut off mid-transaction and the one after it kept the counts with the rows.
    VERIFY_NO_PROBLEMS(m_stores.totalsDisagreeWithLedger(m_storeUrl));
}

// A store so slow that one turn of the engine outlasts a failing partner's first cooldown
// (each turn waits 1.5 s here; the breaker's first wait is 1 s). Five sends go out
// together and fail together, opening the breaker; the turn that records them begins with
// it open, so it leases nothing, and ends with it half-open: nothing in flight, nothing to
// record, no send to end. The worker used to wait there for ever (three rounds in four);
// it must look again, and finish. Five rounds, so that a worker that misses the look
// cannot pass by luck.
void FailingStoreTest::aTurnThatOutlastsTheBreakersWaitStillProbes()
{
    constexpr int Count = 5;
    constexpr int Rounds = 5;
    QVERIFY(m_once->run({QStringLiteral("init")}).exitedWith(0));
    PartnerFaults down;
    down.failRate = 1.0;
    down.latencyMs = 300;
    m_partner->setProfile(down);
    for (int round = 1; round <= Rounds; ++round) {
        const auto keys = enqueue(Count, QStringLiteral("slow-turn-%1").arg(round));
        QCOMPARE(keys.size(), Count);
        const auto result = m_once->run(
            workerArgs({QStringLiteral("--until-idle"), QStringLiteral("--max-attempts"), QStringLiteral("1"),
                        QStringLiteral("--concurrency"), QString::number(Count)}),
            {{QStringLiteral("ONCE_FAILPOINT"), QStringLiteral("turn-start")},
             {QStringLiteral("ONCE_FAILPOINT_SLEEP_MS"), QStringLiteral("1500")}},
            30000);
        QVERIFY2(result.exitedWith(0), qPrintable(QStringLiteral("round %1: ").arg(round) + QString::fromUtf8(result.describe())));
        // Each reminder sent once (its one try), answered 503, and dead-lettered.
        QCOMPARE(m_partner->stats().requests, qint64(round * Count));
        QCOMPARE(m_partner->stats().effects, qint64(0));
        VERIFY_NO_PROBLEMS(
            statsProblems(m_once->stats(), {{QStringLiteral("dead"), round * Count}, {QStringLiteral("acked"), 0}}));
    }
}

// Two processes opening a new store at once (two `once init`, init and enqueue) both
// switch it to WAL; SQLite answers that "database is locked" without waiting.
void FailingStoreTest::racingInitsNeverFail()
{
    if (m_stores.isPostgres())
        QSKIP("the journal mode is SQLite's (PostgreSQL serialises schema upgrades with a lock)");
    const QString line = QString::fromUtf8(makeReminder(QStringLiteral("race"), 1).line);
    const QString input = m_dir->filePath(QStringLiteral("race.jsonl"));
    {
        QFile file(input);
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write(line.toUtf8() + '\n');
    }
    // Deterministic first: another process is creating the file (holds its write lock)
    // when init switches it to WAL. SQLite answers at once rather than wait, since this
    // connection already reads the file (deadlock avoidance); init must wait it out.
    {
        const QString path = m_dir->filePath(QStringLiteral("held.sqlite"));
        {
            QSqlDatabase other = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), QStringLiteral("failingstore-creator"));
            other.setDatabaseName(path);
            QVERIFY(other.open());
            QSqlQuery hold(other);
            QVERIFY2(hold.exec(QStringLiteral("BEGIN IMMEDIATE")), qPrintable(hold.lastError().text()));
            QProcess *init = m_once->start({QStringLiteral("init"), QStringLiteral("--store"), QStringLiteral("sqlite:") + path});
            QTest::qWait(1500);
            QCOMPARE(init->state(), QProcess::Running); // waiting, not failed
            hold.exec(QStringLiteral("COMMIT"));
            const auto result = m_once->waitFor(init, CommandTimeoutMs);
            QVERIFY2(result.exitedWith(0), result.describe().constData());
            other.close();
        }
        QSqlDatabase::removeDatabase(QStringLiteral("failingstore-creator"));
    }
    // Then the race itself, a few times.
    constexpr int Rounds = 20;
    QStringList failures;
    for (int round = 0; round < Rounds; ++round) {
        const QString store = QStringLiteral("sqlite:") + m_dir->filePath(QStringLiteral("race-%1.sqlite").arg(round));
        const QStringList second = round % 2 ? QStringList{QStringLiteral("enqueue"), QStringLiteral("--store"), store, input}
                                             : QStringList{QStringLiteral("init"), QStringLiteral("--store"), store};
        QProcess *a = m_once->start({QStringLiteral("init"), QStringLiteral("--store"), store});
        QProcess *b = m_once->start(second);
        for (QProcess *process : {a, b}) {
            const auto result = m_once->waitFor(process, CommandTimeoutMs);
            if (!result.exitedWith(0))
                failures << QString::fromUtf8(result.describe());
            m_once->release(process);
        }
    }
    QVERIFY2(failures.isEmpty(), qPrintable(QStringLiteral("%1 of %2 processes failed; the first: %3")
                                               .arg(QString::number(failures.size()), QString::number(2 * Rounds),
                                                    failures.value(0))));
}

QTEST_GUILESS_MAIN(FailingStoreTest)
// Reported: /readyz said 200 while the disk was full or the store read-only, so a load
// balancer kept sending publishes that could only fail. It asks whether the store takes
// writes (without writing), and says why not.
void FailingStoreTest::serveIsNotReadyWhileTheStoreTakesNoWrites()
{
    QString store = m_storeUrl;
    QString disk, why;
    if (!m_stores.isPostgres()) {
        if (!mountScratch(QStringLiteral("4M"), &disk, &why))
            QSKIP(qPrintable(why));
        store = QStringLiteral("sqlite:") + disk + QStringLiteral("/store.sqlite");
    }
    OnceRunner once(m_onceBin, store);
    QVERIFY(once.run({QStringLiteral("init")}).exitedWith(0));
    QProcess *server = nullptr;
    const quint16 port = once.startServe({}, &server);
    QVERIFY(port != 0);
    QNetworkAccessManager network;
    const auto readiness = [&] {
        QNetworkRequest request(QUrl(QStringLiteral("http://127.0.0.1:%1/readyz").arg(port)));
        request.setTransferTimeout(10000);
        std::unique_ptr<QNetworkReply> reply(network.get(request));
        pumpUntil([&] { return reply->isFinished(); }, 15000);
        return std::pair{reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt(), reply->readAll()};
    };
    QCOMPARE(readiness().first, 200);
    QString database;
    QSqlQuery admin;
    if (m_stores.isPostgres()) {
        // A DBA's switch (or a primary demoted): the server's next session takes no writes.
        database = QUrl(m_storeUrl).path().mid(1);
        admin = QSqlQuery(m_stores.admin());
        QVERIFY2(admin.exec(QStringLiteral("ALTER DATABASE %1 SET default_transaction_read_only = on").arg(database)),
                 qPrintable(admin.lastError().text()));
        QVERIFY(admin.exec(QStringLiteral("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '%1' "
                                          "AND pid <> pg_backend_pid()")
                               .arg(database)));
    } else {
        QFile filler(disk + QStringLiteral("/filler"));
        QVERIFY(filler.open(QIODevice::WriteOnly));
        const QByteArray block(16 * 1024, 'x');
        while (filler.write(block) == block.size() && filler.flush()) {
        }
    }
    // The first look after a terminated session may only find the connection gone.
    std::pair<int, QByteArray> notReady;
    QVERIFY(pumpUntil([&] { return (notReady = readiness()).second.contains("writes") || notReady.second.contains("full"); },
                      20000));
    QCOMPARE(notReady.first, 503);
    QVERIFY2(notReady.second.contains(m_stores.isPostgres() ? "takes no writes" : "disk is full"), notReady.second.constData());
    if (m_stores.isPostgres()) {
        admin.exec(QStringLiteral("ALTER DATABASE %1 RESET default_transaction_read_only").arg(database));
        admin.exec(QStringLiteral("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '%1' "
                                  "AND pid <> pg_backend_pid()")
                       .arg(database));
    } else {
        QVERIFY(QFile::remove(disk + QStringLiteral("/filler")));
    }
    QVERIFY(pumpUntil([&] { return readiness().first == 200; }, 20000));
    server->terminate();
    server->waitForFinished(10000);
    once.release(server);
}

#include "tst_failingstore.moc"
