// A store someone may read and not write: a backup on a read-only mount, another user's
// store in a folder of theirs. Every command of `once` that only looks, run as the user
// nobody (runuser), and the console, with its effective user switched to nobody, open a
// store in a root-owned folder (755, the file 644) with no -wal or -shm beside it, show
// what was written, and leave the file's bytes and time and the folder as they were. The
// store is made by the real CLI as root: init, enqueue, and workers against an in-process
// partner simulator that accepts, fails for good or drops the connection after accepting.
// Root may write any file (CAP_DAC_OVERRIDE), so only another user shows what support staff
// meet: the suite needs root to become nobody, and is skipped without it.
#include "mainwindow.h"
#include "pages/deadletterspage.h"
#include "pages/indoubtpage.h"
#include "session/storesession.h"

#include "deliveryharness.h"
#include "sim/partnersimulator.h"
#include "teststores.h"

#include <QCryptographicHash>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLoggingCategory>
#include <QSet>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>

using namespace once;
using namespace once::ui;
using namespace oncetest;

namespace {

constexpr int Applied = 6;
constexpr int Dead = 3;
constexpr int InDoubt = 2;

// What a reader could have changed in a store's folder: each file's name, size, time to the
// nanosecond and a hash of its bytes, and the folder's own time (a file made and removed
// again changes it).
QStringList folderState(const QString &folder)
{
    QStringList state;
    struct stat folderStat = {};
    if (::stat(QFile::encodeName(folder).constData(), &folderStat) == 0)
        state << QStringLiteral(". mtime=%1.%2").arg(folderStat.st_mtim.tv_sec).arg(folderStat.st_mtim.tv_nsec);
    const QDir dir(folder);
    for (const QString &name : dir.entryList(QDir::Files | QDir::Hidden | QDir::System, QDir::Name)) {
        const QString path = dir.filePath(name);
        struct stat fileStat = {};
        ::stat(QFile::encodeName(path).constData(), &fileStat);
        QFile file(path);
        const QByteArray hash = file.open(QIODevice::ReadOnly)
                                    ? QCryptographicHash::hash(file.readAll(), QCryptographicHash::Sha256).toHex()
                                    : QByteArray("unreadable");
        state << QStringLiteral("%1 size=%2 mtime=%3.%4 sha256=%5")
                     .arg(name)
                     .arg(fileStat.st_size)
                     .arg(fileStat.st_mtim.tv_sec)
                     .arg(fileStat.st_mtim.tv_nsec)
                     .arg(QString::fromLatin1(hash));
    }
    return state;
}

// The process's effective user and group become nobody's until this goes, for every
// thread (glibc sets them process-wide): a console opened meanwhile meets the store's
// files as nobody would, capabilities and all (a non-zero effective user has none).
class EffectiveUser final
{
    Q_DISABLE_COPY_MOVE(EffectiveUser)

public:
    EffectiveUser(uid_t uid, gid_t gid) : m_ok(::setegid(gid) == 0 && ::seteuid(uid) == 0) {}
    ~EffectiveUser()
    {
        if (::seteuid(0) != 0 || ::setegid(0) != 0)
            qFatal("cannot become root again");
    }
    bool ok() const { return m_ok; }

private:
    bool m_ok = false;
};

} // namespace

class TestReadOnlyStore : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void cleanupTestCase();

    void readingCommandsWorkAsAnotherUser_data();
    void readingCommandsWorkAsAnotherUser();
    void consoleOpensItReadOnlyAsAnotherUser_data();
    void consoleOpensItReadOnlyAsAnotherUser();
    void aLogWithoutItsIndexIsExplained();

private:
    void fillStore();
    // A root-owned folder (755) with a copy of the store (644) in it, and its URL; with
    // journalMode, the copy switched to it.
    QString copyStore(const QString &name, const QString &journalMode);
    void addLayouts();
    QStringList asNobody() const
    {
        return {QStringLiteral("runuser"), QStringLiteral("-u"), QString::fromLocal8Bit(m_nobody.pw_name),
                QStringLiteral("--")};
    }
    QString partnerUrl() const { return QStringLiteral("http://127.0.0.1:%1/reminders").arg(m_partner->port()); }

    TestStores m_stores;
    QTemporaryDir m_dir;
    QString m_url;
    std::unique_ptr<PartnerSimulator> m_partner;
    QList<QByteArray> m_appliedKeys;
    QList<QByteArray> m_deadKeys;
    QList<QByteArray> m_heldKeys;
    QMap<QString, QString> m_layouts; // data row name -> store URL
    passwd m_nobody = {};
};

void TestReadOnlyStore::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.database.info=false\nonce.core.partnersim.debug=false"));
    if (m_stores.isPostgres())
        QSKIP("a store file and its folder are SQLite's (tst_uireadonly covers a PostgreSQL role that may only read)");
    if (::geteuid() != 0)
        QSKIP("becoming the user nobody needs root: run this suite as root (root itself may write any file, so "
              "it cannot stand in for a user who may not)");
    const passwd *nobody = ::getpwnam("nobody");
    if (!nobody || nobody->pw_uid == 0)
        QSKIP("there is no user nobody here");
    m_nobody = *nobody;
    if (QStandardPaths::findExecutable(QStringLiteral("runuser")).isEmpty())
        QSKIP("runuser (util-linux) is not installed");
    QVERIFY2(QFile::exists(qEnvironmentVariable("ONCE_BIN")), "ONCE_BIN names the once binary (set by ctest)");
    QVERIFY2(m_dir.isValid(), qPrintable(m_dir.errorString()));
    // QTemporaryDir makes its folder 700: nobody must reach the stores' folders inside it.
    QVERIFY(QFile::setPermissions(m_dir.path(), QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner
                                                    | QFileDevice::ReadGroup | QFileDevice::ExeGroup
                                                    | QFileDevice::ReadOther | QFileDevice::ExeOther));
    m_partner = std::make_unique<PartnerSimulator>();
    QString error;
    QVERIFY2(m_partner->listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    fillStore();
    if (QTest::currentTestFailed())
        return;
    m_layouts.insert(QStringLiteral("write-ahead log, as once leaves it"), copyStore(QStringLiteral("wal"), {}));
    m_layouts.insert(QStringLiteral("rollback journal (a copy switched to DELETE)"),
                     copyStore(QStringLiteral("journal"), QStringLiteral("DELETE")));
}

void TestReadOnlyStore::cleanupTestCase()
{
    m_partner.reset();
}

// As root: the ledger a few workers leave, every one of them stopped and the store closed.
void TestReadOnlyStore::fillStore()
{
    m_url = QStringLiteral("sqlite:") + m_dir.filePath(QStringLiteral("made/store.sqlite"));
    OnceRunner owner(qEnvironmentVariable("ONCE_BIN"), m_url);
    QVERIFY(owner.run({QStringLiteral("init")}).exitedWith(0));
    const auto deliver = [&](const QString &prefix, int count, const PartnerFaults &profile, const QStringList &options) {
        const auto keys = owner.enqueueReminders(m_dir.path(), count, prefix);
        m_partner->setProfile(profile);
        const auto worker = owner.run(QStringList{QStringLiteral("worker"), QStringLiteral("--partner"), partnerUrl(),
                                                  QStringLiteral("--worker-id"), prefix + QStringLiteral("-worker"),
                                                  QStringLiteral("--until-idle")}
                                          + options,
                                      {}, WorkerTimeoutMs);
        if (!worker.exitedWith(0))
            qWarning("%s", worker.describe().constData());
        return keys.size() == count && worker.exitedWith(0) ? keys : QList<QByteArray>();
    };
    m_appliedKeys = deliver(QStringLiteral("applied"), Applied, PartnerFaults(), {});
    QCOMPARE(m_appliedKeys.size(), Applied);
    PartnerFaults failing;
    failing.failRate = 1.0;
    m_deadKeys = deliver(QStringLiteral("dead"), Dead, failing, {QStringLiteral("--max-attempts"), QStringLiteral("1")});
    QCOMPARE(m_deadKeys.size(), Dead);
    PartnerFaults dropping;
    dropping.dropAfterAcceptRate = 1.0;
    m_heldKeys = deliver(QStringLiteral("held"), InDoubt, dropping, {QStringLiteral("--in-doubt"), QStringLiteral("hold")});
    QCOMPARE(m_heldKeys.size(), InDoubt);
    QCOMPARE(m_partner->stats().effects, qint64(Applied + InDoubt));
}

QString TestReadOnlyStore::copyStore(const QString &name, const QString &journalMode)
{
    const QString source = m_url.mid(int(qstrlen("sqlite:")));
    // The last worker's close put its log back into the file: a store at rest.
    if (QFile::exists(source + QStringLiteral("-wal")) || QFile::exists(source + QStringLiteral("-shm"))) {
        qWarning("the workers left %s-wal or -shm behind", qPrintable(source));
        return {};
    }
    const QString folder = m_dir.filePath(name);
    const QString path = folder + QStringLiteral("/store.sqlite");
    if (!QDir().mkpath(folder) || !QFile::copy(source, path)) {
        qWarning("cannot copy the store to %s", qPrintable(path));
        return {};
    }
    if (!journalMode.isEmpty()) {
        const QString connection = QStringLiteral("journal-") + name;
        {
            QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), connection);
            db.setDatabaseName(path);
            QSqlQuery query(db);
            if (!db.open() || !query.exec(QStringLiteral("PRAGMA journal_mode=%1").arg(journalMode)) || !query.next()
                || query.value(0).toString().compare(journalMode, Qt::CaseInsensitive) != 0)
                qWarning("cannot switch %s to %s: %s", qPrintable(path), qPrintable(journalMode),
                         qPrintable(query.lastError().text()));
            query.finish();
            db.close();
        }
        QSqlDatabase::removeDatabase(connection);
    }
    const auto readable = QFileDevice::ReadOwner | QFileDevice::ReadGroup | QFileDevice::ReadOther;
    const auto exec = QFileDevice::ExeOwner | QFileDevice::ExeGroup | QFileDevice::ExeOther;
    if (!QFile::setPermissions(path, readable | QFileDevice::WriteOwner)
        || !QFile::setPermissions(folder, readable | exec | QFileDevice::WriteOwner)) {
        qWarning("cannot set the modes in %s", qPrintable(folder));
        return {};
    }
    return QStringLiteral("sqlite:") + path;
}

void TestReadOnlyStore::addLayouts()
{
    QTest::addColumn<QString>("url");
    for (auto it = m_layouts.cbegin(); it != m_layouts.cend(); ++it)
        QTest::newRow(qPrintable(it.key())) << it.value();
}

void TestReadOnlyStore::readingCommandsWorkAsAnotherUser_data()
{
    addLayouts();
}

// Every command that only looks, as nobody: each exits 0 with what the workers wrote.
void TestReadOnlyStore::readingCommandsWorkAsAnotherUser()
{
    QFETCH(QString, url);
    QVERIFY(!url.isEmpty());
    const QString path = url.mid(int(qstrlen("sqlite:")));
    const QString folder = QFileInfo(path).absolutePath();
    OnceRunner nobody(qEnvironmentVariable("ONCE_BIN"), url);
    nobody.setWrapper(asNobody());
    // Otherwise the test would prove nothing.
    for (const QString &target : {path, folder}) {
        QProcess probe;
        const QStringList wrapper = asNobody();
        probe.start(wrapper.constFirst(), wrapper.mid(1) + QStringList{QStringLiteral("test"), QStringLiteral("-w"), target});
        QVERIFY(probe.waitForFinished(10000));
        QVERIFY2(probe.exitCode() == 1, qPrintable(target + QStringLiteral(" is writable by nobody")));
    }
    const QStringList before = folderState(folder);
    QCOMPARE(before.size(), 2); // the folder and the store, nothing beside it

    const auto json = [&](const QStringList &args) {
        const auto result = nobody.run(args + QStringList{QStringLiteral("--json")});
        const QJsonDocument document = QJsonDocument::fromJson(result.out);
        if (!result.exitedWith(0) || document.isNull())
            qWarning("%s", result.describe().constData());
        return document;
    };
    const auto keysOf = [](const QJsonArray &rows) {
        QSet<QByteArray> keys;
        for (const QJsonValue row : rows)
            keys.insert(row.toObject().value(QLatin1String("key")).toString().toLatin1());
        return keys;
    };
    const auto set = [](const QList<QByteArray> &keys) { return QSet<QByteArray>(keys.cbegin(), keys.cend()); };

    VERIFY_NO_PROBLEMS(statsProblems(json({QStringLiteral("stats")}).object(),
                                     {{QStringLiteral("ready"), 0},
                                      {QStringLiteral("in_flight"), 0},
                                      {QStringLiteral("dead"), Dead},
                                      {QStringLiteral("acked"), Applied},
                                      {QStringLiteral("in_doubt"), InDoubt},
                                      {QStringLiteral("claimed"), 0},
                                      {QStringLiteral("dead_keys"), Dead}}));
    const auto plainStats = nobody.run({QStringLiteral("stats")});
    QVERIFY2(plainStats.exitedWith(0), plainStats.describe().constData());
    QVERIFY2(plainStats.out.split('\n').contains(QByteArray("acked:                   ") + QByteArray::number(Applied)),
             plainStats.out.constData());

    const QJsonArray events = json({QStringLiteral("events")}).array();
    QCOMPARE(events.size(), Applied + Dead + InDoubt);
    QMap<QString, int> states;
    for (const QJsonValue event : events)
        ++states[event.toObject().value(QLatin1String("state")).toString()];
    QCOMPARE(states, (QMap<QString, int>{{QStringLiteral("applied"), Applied},
                                          {QStringLiteral("dead"), Dead},
                                          {QStringLiteral("in_doubt"), InDoubt}}));
    const auto plainEvents = nobody.run({QStringLiteral("events"), QStringLiteral("--state"), QStringLiteral("dead")});
    QVERIFY2(plainEvents.exitedWith(0), plainEvents.describe().constData());
    QCOMPARE(plainEvents.out.count('\n'), Dead);

    const auto history = nobody.run({QStringLiteral("history"), QString::fromLatin1(m_appliedKeys.constFirst())});
    QVERIFY2(history.exitedWith(0), history.describe().constData());
    QVERIFY2(history.out.startsWith(QByteArray("applied    " + m_appliedKeys.constFirst() + "  user=")), history.out.constData());
    QCOMPARE(json({QStringLiteral("history"), QString::fromLatin1(m_deadKeys.constFirst())})
                 .object()
                 .value(QLatin1String("state"))
                 .toString(),
             QStringLiteral("dead"));

    QCOMPARE(keysOf(json({QStringLiteral("dlq")}).array()), set(m_deadKeys));
    QCOMPARE(keysOf(json({QStringLiteral("in-doubt")}).array()), set(m_heldKeys));
    const auto dryRun = nobody.run({QStringLiteral("redrive"), QStringLiteral("--all"), QStringLiteral("--dry-run")});
    QVERIFY2(dryRun.exitedWith(0), dryRun.describe().constData());
    for (const QByteArray &key : std::as_const(m_deadKeys))
        QVERIFY2(dryRun.out.contains(QByteArray(' ' + key + ' ')), dryRun.out.constData());

    QSet<QString> workers;
    for (const QJsonValue worker : json({QStringLiteral("workers")}).array()) {
        QCOMPARE(worker.toObject().value(QLatin1String("status")).toString(), QStringLiteral("stopped"));
        workers.insert(worker.toObject().value(QLatin1String("id")).toString());
    }
    QCOMPARE(workers, (QSet<QString>{QStringLiteral("applied-worker"), QStringLiteral("dead-worker"),
                                     QStringLiteral("held-worker")}));
    const QJsonArray partners = json({QStringLiteral("partners")}).array();
    QCOMPARE(partners.size(), 1);
    QVERIFY2(partners.first().toObject().value(QLatin1String("partner")).toString().contains(
                 QStringLiteral(":%1").arg(m_partner->port())),
             QJsonDocument(partners).toJson().constData());

    // Looking left no trace: not a byte, not a time, no -wal, -shm or -journal.
    QCOMPARE(folderState(folder), before);
    // And what writes says why it cannot, in a line, rather than half-doing it.
    const auto enqueueing = nobody.run({QStringLiteral("enqueue"), m_dir.filePath(QStringLiteral("applied.jsonl"))});
    QVERIFY2(enqueueing.exitedWith(1) && enqueueing.err.count('\n') == 1, enqueueing.describe().constData());
    QCOMPARE(folderState(folder), before);
}

void TestReadOnlyStore::consoleOpensItReadOnlyAsAnotherUser_data()
{
    addLayouts();
}

// The console, as nobody: read-only by itself, saying why, with the store's letters and
// in-doubt events on its pages; the files stay as they were.
void TestReadOnlyStore::consoleOpensItReadOnlyAsAnotherUser()
{
    QFETCH(QString, url);
    QVERIFY(!url.isEmpty());
    const QString path = url.mid(int(qstrlen("sqlite:")));
    const QString folder = QFileInfo(path).absolutePath();
    const QStringList before = folderState(folder);
    {
        EffectiveUser becomeNobody(m_nobody.pw_uid, m_nobody.pw_gid);
        QVERIFY2(becomeNobody.ok(), "cannot become the user nobody");
        QFile probe(path);
        QVERIFY2(!probe.open(QIODevice::ReadWrite), "nobody may write the store: the test would prove nothing");

        MainWindow window;
        window.resize(1280, 820);
        window.show();
        window.openStore(url);
        StoreSession *session = window.session();
        QSignalSpy opened(session, &StoreSession::opened);
        QSignalSpy failures(session, &StoreSession::failed);
        QVERIFY2(opened.wait(20000), "the console did not answer");
        QVERIFY2(opened.constFirst().at(0).toBool(), qPrintable(opened.constFirst().at(1).toString()));
        QVERIFY(session->isReadOnly());
        QVERIFY2(session->readOnlyReason().contains(QLatin1String("you may not write the file")),
                 qPrintable(session->readOnlyReason()));
        QVERIFY2(window.windowTitle().contains(QLatin1String("[read-only]")), qPrintable(window.windowTitle()));

        auto *deadLetters = window.page<DeadLettersPage>();
        window.showPage(deadLetters);
        auto *letters = deadLetters->findChild<QTableView *>(QStringLiteral("deadLetters"));
        QVERIFY(letters);
        QTRY_COMPARE_WITH_TIMEOUT(letters->model()->rowCount(), Dead, 20000);
        auto *inDoubt = window.page<InDoubtPage>();
        window.showPage(inDoubt);
        auto *held = inDoubt->findChild<QTableView *>(QStringLiteral("inDoubt"));
        QVERIFY(held);
        QTRY_COMPARE_WITH_TIMEOUT(held->model()->rowCount(), InDoubt, 20000);
        QVERIFY2(failures.isEmpty(), qPrintable(failures.isEmpty() ? QString() : failures.constFirst().at(1).toString()));
    }
    QCOMPARE(folderState(folder), before);
}

// A log a writer left (killed, or copied without its index): reading it needs the -shm file
// SQLite cannot make in this folder. Said in a line, naming the files and the folder.
void TestReadOnlyStore::aLogWithoutItsIndexIsExplained()
{
    const QString url = copyStore(QStringLiteral("orphaned-log"), {});
    QVERIFY(!url.isEmpty());
    const QString path = url.mid(int(qstrlen("sqlite:")));
    QFile log(path + QStringLiteral("-wal"));
    QVERIFY(log.open(QIODevice::WriteOnly));
    log.close();
    const QString folder = QFileInfo(path).absolutePath();
    const QStringList before = folderState(folder);
    OnceRunner nobody(qEnvironmentVariable("ONCE_BIN"), url);
    nobody.setWrapper(asNobody());
    const auto stats = nobody.run({QStringLiteral("stats")});
    QVERIFY2(stats.exitedWith(1) && stats.err.count('\n') == 1, stats.describe().constData());
    QVERIFY2(stats.err.contains("its write-ahead log (-wal) is there without its index (-shm)")
                 && stats.err.contains(QFile::encodeName(folder)),
             stats.describe().constData());
    QCOMPARE(folderState(folder), before);
}

QTEST_MAIN(TestReadOnlyStore)
#include "tst_readonlystore.moc"
