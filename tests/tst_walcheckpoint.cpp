// Who copies an SQLite store's write-ahead log back into its file. A worker's turn must not:
// its sends wait for its commit, and a checkpoint inside the commit (SQLite's automatic one,
// once the log holds 1,000 pages) copied the log and synced the file first.
//
// The store's file is watched through an SQLite VFS that wraps the real one and notes which
// thread writes the database file itself: in WAL mode only a checkpoint does.

#include "store/database.h"
#include "store/storelocation.h"
#include "store/walcheckpointer.h"

#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>
#include <QTest>

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

using namespace once;

namespace {

// The threads that wrote a main database file, since the last clear().
struct FileWriters
{
    std::mutex mutex;
    std::set<std::thread::id> threads;
    std::atomic<bool> watching = false;

    void note()
    {
        if (!watching)
            return;
        const std::lock_guard lock(mutex);
        threads.insert(std::this_thread::get_id());
    }
    std::set<std::thread::id> seen()
    {
        const std::lock_guard lock(mutex);
        return threads;
    }
    void clear()
    {
        const std::lock_guard lock(mutex);
        threads.clear();
    }
};

FileWriters writers;
sqlite3_vfs *realVfs = nullptr;

// A file of the watching VFS: its own methods first, the real file right behind.
struct WatchedFile
{
    sqlite3_file base;
    bool mainDatabase;
    sqlite3_file *real() { return reinterpret_cast<sqlite3_file *>(this + 1); }
};

WatchedFile *watched(sqlite3_file *file)
{
    return reinterpret_cast<WatchedFile *>(file);
}

// A method of the watching file that calls the real file's, whatever its parameters.
template <auto Method, typename Result, typename... Arguments>
Result forwarded(sqlite3_file *file, Arguments... arguments)
{
    sqlite3_file *real = watched(file)->real();
    return (real->pMethods->*Method)(real, arguments...);
}

int watchedWrite(sqlite3_file *file, const void *data, int amount, sqlite3_int64 offset)
{
    if (watched(file)->mainDatabase)
        writers.note();
    return forwarded<&sqlite3_io_methods::xWrite, int>(file, data, amount, offset);
}

sqlite3_io_methods watchedMethods(const sqlite3_io_methods *real)
{
    sqlite3_io_methods methods = *real;
    methods.xClose = [](sqlite3_file *file) {
        sqlite3_file *inner = watched(file)->real();
        return inner->pMethods ? inner->pMethods->xClose(inner) : SQLITE_OK;
    };
    methods.xRead = forwarded<&sqlite3_io_methods::xRead>;
    methods.xWrite = watchedWrite;
    methods.xTruncate = forwarded<&sqlite3_io_methods::xTruncate>;
    methods.xSync = forwarded<&sqlite3_io_methods::xSync>;
    methods.xFileSize = forwarded<&sqlite3_io_methods::xFileSize>;
    methods.xLock = forwarded<&sqlite3_io_methods::xLock>;
    methods.xUnlock = forwarded<&sqlite3_io_methods::xUnlock>;
    methods.xCheckReservedLock = forwarded<&sqlite3_io_methods::xCheckReservedLock>;
    methods.xFileControl = forwarded<&sqlite3_io_methods::xFileControl>;
    methods.xSectorSize = forwarded<&sqlite3_io_methods::xSectorSize>;
    methods.xDeviceCharacteristics = forwarded<&sqlite3_io_methods::xDeviceCharacteristics>;
    methods.xShmMap = forwarded<&sqlite3_io_methods::xShmMap>;
    methods.xShmLock = forwarded<&sqlite3_io_methods::xShmLock>;
    methods.xShmBarrier = forwarded<&sqlite3_io_methods::xShmBarrier>;
    methods.xShmUnmap = forwarded<&sqlite3_io_methods::xShmUnmap>;
    // Memory-mapped reads stay off (the store never turns them on): no xFetch to forward.
    methods.iVersion = std::min(real->iVersion, 2);
    methods.xFetch = nullptr;
    methods.xUnfetch = nullptr;
    return methods;
}

int watchedOpen(sqlite3_vfs *, sqlite3_filename name, sqlite3_file *file, int flags, int *outFlags)
{
    auto *watchedFile = watched(file);
    watchedFile->base.pMethods = nullptr;
    watchedFile->mainDatabase = (flags & SQLITE_OPEN_MAIN_DB) != 0;
    const int rc = realVfs->xOpen(realVfs, name, watchedFile->real(), flags, outFlags);
    if (rc != SQLITE_OK || !watchedFile->real()->pMethods)
        return rc;
    // One table of methods per kind of real file (they are all the unix VFS's here).
    static std::mutex mutex;
    static std::map<const sqlite3_io_methods *, sqlite3_io_methods> tables;
    const std::lock_guard lock(mutex);
    const sqlite3_io_methods *real = watchedFile->real()->pMethods;
    auto table = tables.find(real);
    if (table == tables.end())
        table = tables.emplace(real, watchedMethods(real)).first;
    watchedFile->base.pMethods = &table->second;
    return SQLITE_OK;
}

void installWatchingVfs()
{
    static sqlite3_vfs vfs;
    realVfs = sqlite3_vfs_find(nullptr);
    vfs = *realVfs;
    vfs.zName = "once-test-watching";
    vfs.szOsFile = int(sizeof(WatchedFile)) + realVfs->szOsFile;
    vfs.xOpen = watchedOpen;
    sqlite3_vfs_register(&vfs, 1);
}

} // namespace

class TestWalCheckpoint : public QObject
{
    Q_OBJECT

private:
    QTemporaryDir m_dir;

    std::unique_ptr<Database> openStore(const QString &name)
    {
        QString error;
        const auto location = StoreLocation::parse(m_dir.filePath(name), &error);
        if (!location)
            qWarning() << error;
        auto db = location ? Database::open(*location, &error) : nullptr;
        if (!db)
            qWarning() << error;
        return db;
    }

    // Commits about this many pages of the log, a few hundred at a time, as turns do.
    static bool writePages(Database &db, int pages)
    {
        QString error;
        const QByteArray page(3500, 'x'); // a row a page
        for (int written = 0; written < pages; written += 200) {
            Transaction transaction(db);
            if (!transaction.begin(&error))
                return false;
            QSqlQuery &insert = db.prepared(QStringLiteral("INSERT INTO filler (bytes) VALUES (?)"));
            for (int row = 0; row < 200; ++row) {
                if (!db.execWith(insert, {page}, &error))
                    return false;
            }
            if (!transaction.commit(&error))
                return false;
        }
        return true;
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        installWatchingVfs();
    }

    void aCommitNeverCopiesTheLogBack()
    {
        auto db = openStore(QStringLiteral("turns.sqlite"));
        QVERIFY(db);
        QString error;
        QVERIFY2(db->exec(QStringLiteral("CREATE TABLE filler (id INTEGER PRIMARY KEY, bytes BLOB)"), &error),
                 qPrintable(error));
        const auto checkpointer = WalCheckpointer::forFile(db->location().path);
        const quint64 checkpointsBefore = checkpointer->checkpointsRun();
        writers.clear();
        writers.watching = true;
        // Well past the point where SQLite's own checkpoint ran in the commit, and short
        // of the one where the commit finishes the copy itself.
        QVERIFY(writePages(*db, 2 * WalCheckpointer::CheckpointPages + WalCheckpointer::CheckpointPages / 2));
        QTRY_VERIFY2_WITH_TIMEOUT(!writers.seen().empty(), "nothing copied the log back into the file",
                                  10000);
        writers.watching = false;
        QVERIFY2(!writers.seen().count(std::this_thread::get_id()),
                 "a commit copied the log back into the file itself");
        QVERIFY(checkpointer->checkpointsRun() > checkpointsBefore);
    }

    // A checkpoint syncs the log and the file, each costing the disk as much as a turn's
    // commit. Past 1,000 pages the log only starts over once everything is copied, so a
    // log between that and the inline bound woke the thread at every commit: at 10,000
    // reminders/s, sixty checkpoints a second of some fifty pages each, a third of the
    // syncs the disk served. One is wanted per CheckpointPages new pages, not per commit.
    void aCheckpointPerThousandNewPagesNotPerCommit()
    {
        auto db = openStore(QStringLiteral("small-turns.sqlite"));
        QVERIFY(db);
        QString error;
        QVERIFY(db->exec(QStringLiteral("CREATE TABLE filler (id INTEGER PRIMARY KEY, bytes BLOB)"), &error));
        const auto checkpointer = WalCheckpointer::forFile(db->location().path);
        // Past the first checkpoint, and copied.
        QVERIFY(writePages(*db, WalCheckpointer::CheckpointPages + 200));
        QTRY_VERIFY_WITH_TIMEOUT(checkpointer->checkpointsRun() >= 1, 10000);
        QTest::qWait(50);
        const quint64 checkpointsBefore = checkpointer->checkpointsRun();
        // Then 1,200 rows of a page in 240 small commits, back to back as a busy worker's
        // turns: the log (about 2,600 pages with the tree's own) stays short of the last
        // stretch before the inline bound, and no commit begins with everything copied,
        // which is when the log would start over.
        QSqlQuery &insert = db->prepared(QStringLiteral("INSERT INTO filler (bytes) VALUES (?)"));
        const QByteArray page(3500, 'x');
        for (int commit = 0; commit < 240; ++commit) {
            Transaction transaction(*db);
            QVERIFY(transaction.begin(&error));
            for (int row = 0; row < 5; ++row)
                QVERIFY2(db->execWith(insert, {page}, &error), qPrintable(error));
            QVERIFY(transaction.commit(&error));
        }
        QTRY_VERIFY_WITH_TIMEOUT(checkpointer->checkpointsRun() > checkpointsBefore, 10000);
        QTest::qWait(50); // for one more, if one was wanted
        const quint64 checkpoints = checkpointer->checkpointsRun() - checkpointsBefore;
        // One for the first 1,000 new pages, one more if the log started over on the way.
        QVERIFY2(
            checkpoints >= 1 && checkpoints <= 2,
            qPrintable(QStringLiteral("%1 checkpoints for 1,200 pages in 240 commits").arg(checkpoints)));
    }

    // The log is copied back and started over while a writer keeps committing: it stays
    // about the size at which the writer finishes the copy itself.
    void theLogStaysSmallUnderSteadyWrites()
    {
        const QString path = m_dir.filePath(QStringLiteral("steady.sqlite"));
        auto db = openStore(QStringLiteral("steady.sqlite"));
        QVERIFY(db);
        QString error;
        QVERIFY(db->exec(QStringLiteral("CREATE TABLE filler (id INTEGER PRIMARY KEY, bytes BLOB)"), &error));
        constexpr qint64 framePlusHeader = 4096 + 24;
        qint64 largest = 0;
        for (int round = 0; round < 100; ++round) {
            QVERIFY(writePages(*db, 400));
            largest = std::max(largest, QFileInfo(path + QStringLiteral("-wal")).size());
            QTest::qWait(2); // the next turn's work, while the checkpointer runs
        }
        // Twice the bound: a commit that finds the thread still copying leaves the rest
        // to the next one, and a busy machine makes that happen a few times in a row.
        QVERIFY2(largest < 2 * WalCheckpointer::InlineCheckpointPages * framePlusHeader,
                 qPrintable(QStringLiteral("the log grew to %1 pages for 40,000 written")
                                .arg(largest / framePlusHeader)));
    }

    // What was committed is in the file once the store is closed, and no log is left.
    void closingTheStoreLeavesEverythingInTheFile()
    {
        const QString name = QStringLiteral("closed.sqlite");
        {
            auto db = openStore(name);
            QVERIFY(db);
            QString error;
            QVERIFY(
                db->exec(QStringLiteral("CREATE TABLE filler (id INTEGER PRIMARY KEY, bytes BLOB)"), &error));
            QVERIFY(writePages(*db, 2 * WalCheckpointer::CheckpointPages + 100));
        }
        QVERIFY2(!QFile::exists(m_dir.filePath(name) + QStringLiteral("-wal")),
                 "the log outlived the store's close");
        sqlite3 *raw = nullptr;
        QCOMPARE(sqlite3_open_v2(QFile::encodeName(m_dir.filePath(name)).constData(), &raw,
                                 SQLITE_OPEN_READONLY, nullptr),
                 SQLITE_OK);
        sqlite3_stmt *count = nullptr;
        QCOMPARE(sqlite3_prepare_v2(raw, "SELECT count(*) FROM filler", -1, &count, nullptr), SQLITE_OK);
        QCOMPARE(sqlite3_step(count), SQLITE_ROW);
        QCOMPARE(sqlite3_column_int(count, 0), 2 * WalCheckpointer::CheckpointPages + 200);
        sqlite3_finalize(count);
        sqlite3_close(raw);
    }

    // A store deleted under a running writer (the worker goes on into the unlinked file
    // until it notices): the checkpointer says so once and never makes a new, empty store
    // at the path, where producers would then enqueue unseen.
    void aDeletedStoreIsNotMadeAgain()
    {
        const QString path = m_dir.filePath(QStringLiteral("deleted.sqlite"));
        auto db = openStore(QStringLiteral("deleted.sqlite"));
        QVERIFY(db);
        QString error;
        QVERIFY(db->exec(QStringLiteral("CREATE TABLE filler (id INTEGER PRIMARY KEY, bytes BLOB)"), &error));
        for (const char *suffix : {"", "-wal", "-shm"})
            QVERIFY(QFile::remove(path + QLatin1String(suffix)));
        static QStringList warnings;
        static QtMessageHandler previous = nullptr;
        previous = qInstallMessageHandler(
            [](QtMsgType type, const QMessageLogContext &context, const QString &text) {
                if (type == QtWarningMsg && text.contains(QLatin1String("cannot checkpoint")))
                    warnings << text;
                previous(type, context, text);
            });
        QVERIFY(writePages(*db, 3 * WalCheckpointer::CheckpointPages));
        QTRY_VERIFY_WITH_TIMEOUT(!warnings.isEmpty(), 10000);
        qInstallMessageHandler(previous);
        QVERIFY2(warnings.first().contains(path), qPrintable(warnings.first()));
        QVERIFY(!warnings.first().contains(QLatin1Char('\n')));
        QCOMPARE(warnings.size(), 1); // not once a commit
        QVERIFY2(!QFile::exists(path), "the checkpointer made a new store at the path");
    }

    // Two write connections to one file (a worker's and its producer's in one process)
    // share one checkpointer, whatever the path's spelling.
    void oneCheckpointerAFile()
    {
        auto first = openStore(QStringLiteral("shared.sqlite"));
        auto second = openStore(QStringLiteral("shared.sqlite"));
        QVERIFY(first && second);
        const auto checkpointer = WalCheckpointer::forFile(first->location().path);
        QCOMPARE(WalCheckpointer::forFile(m_dir.filePath(QStringLiteral("./shared.sqlite"))), checkpointer);
        QVERIFY(WalCheckpointer::forFile(m_dir.filePath(QStringLiteral("other.sqlite"))) != checkpointer);
    }
};

QTEST_GUILESS_MAIN(TestWalCheckpoint)
#include "tst_walcheckpoint.moc"
