// The console for support staff, who may look and must not change anything: opened
// read-only (--read-only, File > Open Read-Only), or read-only by itself on a store file
// the user may not write or for a PostgreSQL role without write grants (`once
// grant-readonly`). Every action is disabled and says why, the reader refuses them when
// asked directly, and the store's rows (and on SQLite its file's bytes) stay as they were;
// an older store is not upgraded. Stores are made by the real CLI (init, enqueue) and the
// core API (dead letters, in-doubt events), on SQLite and on PostgreSQL.
#include "mainwindow.h"
#include "pages/deadletterspage.h"
#include "pages/indoubtpage.h"
#include "pages/workerpage.h"
#include "session/storesession.h"

#include "deliveryharness.h"
#include "store/migrations.h"
#include "store/store.h"
#include "teststores.h"

#include <QAbstractButton>
#include <QAction>
#include <QApplication>
#include <QCryptographicHash>
#include <QLabel>
#include <QLoggingCategory>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <memory>

using namespace once;
using namespace once::ui;
using namespace oncetest;

namespace {

const QString Worker = QStringLiteral("test-worker");

// Root may write any file whatever its mode bits, through CAP_DAC_OVERRIDE. Without that
// capability in the effective set, root meets a file's mode as any user does; threads
// started afterwards (the console's reader) inherit the set of the thread that starts them.
bool setDacOverride(bool on)
{
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    if (::syscall(SYS_capget, &header, data) != 0)
        return false;
    const quint32 bit = 1u << (CAP_DAC_OVERRIDE % 32);
    if (on)
        data[CAP_DAC_OVERRIDE / 32].effective |= bit;
    else
        data[CAP_DAC_OVERRIDE / 32].effective &= ~bit;
    return ::syscall(SYS_capset, &header, data) == 0;
}

} // namespace

class TestUiReadOnly : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void readOnlyConsoleCannotChangeTheStore();
    void readOnlyStoreRefusesWritesBelowTheConsole();
    void unwritableStoreOpensReadOnlyByItself_data();
    void unwritableStoreOpensReadOnlyByItself();
    void olderStoreIsNotUpgradedReadOnly();
    void readOnlyCommandLine();
    void grantReadOnlyPrintsTheSql();

private:
    // 12 reminders enqueued by `once enqueue`, 3 of them dead letters, 2 in doubt.
    void fillStore();
    // Every row of every table, sorted: what "nothing changed" is compared with.
    QStringList everyRow(const QString &url);
    QByteArray fileBytes() const;
    QString sqlitePath() const { return m_url.mid(int(qstrlen("sqlite:"))); }
    // A store at the schema version before this build's, made by the older steps.
    void makeOlderStore();
    int schemaVersion();
    // A window over the store, opened; nullptr (after a failed check) when it did not open.
    std::unique_ptr<MainWindow> openWindow(const QString &url, bool readOnly, bool expectOpen = true);
    // Asserts everything that writes is disabled and says why, and that asking the reader
    // directly changes nothing either.
    void checkNothingCanWrite(MainWindow &window, const QString &reasonPart);
    // A PostgreSQL role that may log in and nothing else; its URL for the store.
    QString createRole(const QString &role);

    TestStores m_stores;
    QTemporaryDir m_dir;
    QString m_url;
    std::unique_ptr<OnceRunner> m_once;
    QList<QByteArray> m_keys;
    QStringList m_roles;
    bool m_dacDropped = false;
    QString m_immutable; // a file made immutable, for cleanup
};

void TestUiReadOnly::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.database.info=false"));
    QVERIFY2(m_dir.isValid(), qPrintable(m_dir.errorString()));
    QVERIFY2(!qEnvironmentVariable("ONCE_BIN").isEmpty(), "ONCE_BIN names the once binary (set by ctest)");
}

void TestUiReadOnly::init()
{
    m_url = m_stores.newUrl();
    m_once = std::make_unique<OnceRunner>(qEnvironmentVariable("ONCE_BIN"), m_url);
    m_keys.clear();
}

void TestUiReadOnly::cleanup()
{
    if (m_dacDropped) {
        setDacOverride(true);
        m_dacDropped = false;
    }
    if (!m_immutable.isEmpty()) {
        QProcess::execute(QStringLiteral("chattr"), {QStringLiteral("-i"), m_immutable});
        m_immutable.clear();
    }
    if (!m_url.startsWith(QLatin1String("sqlite:")) && !m_roles.isEmpty()) {
        // What the grants left in the store's database, then the roles (cluster-wide).
        const QString database = QUrl(m_url).path().mid(1);
        {
            QSqlDatabase owner = m_stores.openRaw(m_url, QStringLiteral("readonly-cleanup"));
            QSqlQuery query(owner);
            for (const QString &role : std::as_const(m_roles))
                query.exec(QStringLiteral("DROP OWNED BY %1").arg(role));
            owner.close();
        }
        QSqlDatabase::removeDatabase(QStringLiteral("readonly-cleanup"));
        QSqlQuery admin(m_stores.admin());
        for (const QString &role : std::as_const(m_roles)) {
            admin.exec(QStringLiteral("REVOKE ALL ON DATABASE %1 FROM %2").arg(database, role));
            if (!admin.exec(QStringLiteral("DROP ROLE IF EXISTS %1").arg(role)))
                qWarning("cannot drop the role %s: %s", qPrintable(role), qPrintable(admin.lastError().text()));
        }
        m_roles.clear();
    }
    m_once.reset();
}

void TestUiReadOnly::fillStore()
{
    QVERIFY(m_once->run({QStringLiteral("init")}).exitedWith(0));
    m_keys = m_once->enqueueReminders(m_dir.path(), 12, QStringLiteral("look"));
    QCOMPARE(m_keys.size(), 12);
    QString error;
    auto store = Store::open(m_url, &error);
    QVERIFY2(store, qPrintable(error));
    const auto leased = store->queue().lease(5, 60000, Worker, &error);
    QCOMPARE(leased.size(), 5);
    for (int i = 0; i < leased.size(); ++i) {
        const QueueMessage &message = leased.at(i);
        const auto parsed = parseReminder(message.payload);
        QVERIFY2(parsed.reminder, qPrintable(parsed.error));
        const Reminder &reminder = *parsed.reminder;
        if (i < 3) {
            // A dead letter: the partner failed for good.
            const auto claims = store->ledger().claim(
                {ClaimRequest{reminder, message.id, message.delivery, nowMs() + 60000}}, Worker, InDoubtPolicy::Resend,
                &error);
            QVERIFY2(claims.size() == 1, qPrintable(error));
            const LedgerUpdate update{reminder.sendKey, message.id, message.delivery, LedgerState::Dead, true, nowMs(),
                                      422, QStringLiteral("rejected"), QStringLiteral("HTTP 422"), {}};
            QVERIFY2(store->ledger().record({update}, {}, &error), qPrintable(error));
            const DeadLetterInfo info{QStringLiteral("rejected"), QStringLiteral("HTTP 422: Unprocessable"), 1,
                                      nowMs(), nowMs(), reminder.sendKey, reminder.eventId};
            QVERIFY2(store->queue().settle({{Settlement::Kind::DeadLetter, message.id, message.delivery, 0, info}},
                                           &error),
                     qPrintable(error));
        } else {
            // In doubt: a claim whose holder vanished, met again under the hold policy.
            const auto first = store->ledger().claim({ClaimRequest{reminder, message.id, 1, nowMs() - 1}}, Worker,
                                                     InDoubtPolicy::Hold, &error);
            QVERIFY2(first.size() == 1 && first.constFirst().outcome == ClaimResult::Outcome::Claimed, qPrintable(error));
            const auto second = store->ledger().claim({ClaimRequest{reminder, message.id, 2, nowMs() + 60000}}, Worker,
                                                      InDoubtPolicy::Hold, &error);
            QVERIFY2(second.size() == 1 && second.constFirst().outcome == ClaimResult::Outcome::Held, qPrintable(error));
        }
    }
}

QStringList TestUiReadOnly::everyRow(const QString &url)
{
    const QString tablesSql = url.startsWith(QLatin1String("sqlite:"))
                                  ? QStringLiteral("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
                                  : QStringLiteral("SELECT table_name FROM information_schema.tables WHERE "
                                                   "table_schema = current_schema() ORDER BY table_name");
    const QStringList tables = storeRows(m_stores, url, tablesSql);
    QStringList rows;
    for (const QString &table : tables) {
        QStringList tableRows = storeRows(m_stores, url, QStringLiteral("SELECT * FROM %1").arg(table));
        tableRows.sort();
        for (const QString &row : std::as_const(tableRows))
            rows << table + QLatin1Char(':') + row;
    }
    return rows;
}

QByteArray TestUiReadOnly::fileBytes() const
{
    QFile file(sqlitePath());
    return file.open(QIODevice::ReadOnly) ? QCryptographicHash::hash(file.readAll(), QCryptographicHash::Sha256)
                                          : QByteArray();
}

void TestUiReadOnly::makeOlderStore()
{
    const int older = latestSchemaVersion() - 1;
    QVERIFY(older >= 1);
    const bool postgres = !m_url.startsWith(QLatin1String("sqlite:"));
    {
        QSqlDatabase db = m_stores.openRaw(m_url, QStringLiteral("older-store"));
        QVERIFY2(db.isOpen(), qPrintable(db.lastError().text()));
        QSqlQuery query(db);
        QVERIFY(query.exec(QStringLiteral("CREATE TABLE schema_version (version INTEGER NOT NULL)")));
        for (int version = 0; version < older; ++version) {
            for (const QString &statement : migrationStatements(version, postgres))
                QVERIFY2(query.exec(statement), qPrintable(query.lastError().text() + statement));
        }
        QVERIFY(query.exec(QStringLiteral("INSERT INTO schema_version (version) VALUES (%1)").arg(older)));
        db.close();
    }
    QSqlDatabase::removeDatabase(QStringLiteral("older-store"));
}

int TestUiReadOnly::schemaVersion()
{
    return storeRows(m_stores, m_url, QStringLiteral("SELECT version FROM schema_version")).value(0, QStringLiteral("-1")).toInt();
}

std::unique_ptr<MainWindow> TestUiReadOnly::openWindow(const QString &url, bool readOnly, bool expectOpen)
{
    auto window = std::make_unique<MainWindow>();
    window->resize(1280, 820);
    window->setReadOnly(readOnly);
    window->show();
    window->openStore(url);
    QSignalSpy opened(window->session(), &StoreSession::opened);
    if (!opened.wait(20000)) {
        qWarning("the console did not answer");
        return nullptr;
    }
    if (opened.constFirst().at(0).toBool() != expectOpen) {
        qWarning("the console %s: %s", expectOpen ? "did not open the store" : "opened the store",
                 qPrintable(opened.constFirst().at(1).toString()));
        return nullptr;
    }
    return window;
}

void TestUiReadOnly::checkNothingCanWrite(MainWindow &window, const QString &reasonPart)
{
    StoreSession *session = window.session();
    QVERIFY(session->isReadOnly());
    QVERIFY2(session->readOnlyReason().contains(reasonPart), qPrintable(session->readOnlyReason()));

    // Seen at once: a badge in the status bar and the title.
    auto *badge = window.findChild<QLabel *>(QStringLiteral("readOnlyLabel"));
    QVERIFY(badge);
    QVERIFY(badge->isVisible());
    QCOMPARE(badge->text(), QStringLiteral("Read-only"));
    QVERIFY2(badge->toolTip().contains(reasonPart), qPrintable(badge->toolTip()));
    QVERIFY2(window.windowTitle().contains(QLatin1String("[read-only]")), qPrintable(window.windowTitle()));

    // The pages show the store, with every action that writes disabled, saying why.
    auto *deadLetters = window.page<DeadLettersPage>();
    window.showPage(deadLetters);
    auto *lettersView = deadLetters->findChild<QTableView *>(QStringLiteral("deadLetters"));
    QTRY_COMPARE_WITH_TIMEOUT(lettersView->model()->rowCount(), 3, 20000);
    lettersView->selectAll();
    const auto checkDisabled = [&](QObject *page, const QString &name) {
        auto *action = page->findChild<QAction *>(name);
        QVERIFY2(action, qPrintable(name));
        QVERIFY2(!action->isEnabled(), qPrintable(name + QStringLiteral(" is enabled")));
        QVERIFY2(action->toolTip().startsWith(QLatin1String("Read-only: ")) && action->toolTip().contains(reasonPart),
                 qPrintable(name + QStringLiteral(": ") + action->toolTip()));
        action->trigger(); // a disabled action does nothing
    };
    for (const char *name : {"redriveSelected", "redriveAllMatching", "discard"})
        checkDisabled(deadLetters, QString::fromLatin1(name));
    QVERIFY(!QApplication::activeModalWidget()); // no redrive or discard dialog came up
    // What only reads stays: copying the send keys.
    QVERIFY(deadLetters->findChild<QAction *>(QStringLiteral("openStory")) != nullptr);

    auto *inDoubt = window.page<InDoubtPage>();
    window.showPage(inDoubt);
    auto *inDoubtView = inDoubt->findChild<QTableView *>(QStringLiteral("inDoubt"));
    QTRY_COMPARE_WITH_TIMEOUT(inDoubtView->model()->rowCount(), 2, 20000);
    inDoubtView->selectAll();
    for (const char *name : {"resend", "markDelivered", "checkAtPartner"})
        checkDisabled(inDoubt, QString::fromLatin1(name));
    QVERIFY(!QApplication::activeModalWidget());

    auto *worker = window.page<WorkerPage>();
    window.showPage(worker);
    auto *start = worker->findChild<QPushButton *>(QStringLiteral("startButton"));
    QVERIFY(start);
    QVERIFY(!start->isEnabled());
    QVERIFY2(start->toolTip().contains(reasonPart), qPrintable(start->toolTip()));
    start->click();
    QCOMPARE(window.engine()->state(), EngineController::State::Stopped);
    auto *hint = worker->findChild<QLabel *>(QStringLiteral("workerHint"));
    QVERIFY2(hint && hint->text().contains(QLatin1String("No worker can start here")), qPrintable(hint->text()));

    // Past the disabled controls, straight to the reader: each refuses, in words.
    DeadLetterFilter all;
    QSignalSpy letters(session, &StoreSession::deadLettersLoaded);
    session->loadDeadLetters(all);
    QVERIFY(letters.wait(10000));
    const auto deadLetterList = letters.constLast().at(1).value<QList<DeadLetter>>();
    QCOMPARE(deadLetterList.size(), 3);
    QSignalSpy redriven(session, &StoreSession::redriveFinished);
    RedriveOptions options;
    options.picked = deadLetterList;
    options.detail = QStringLiteral("test");
    session->redrive(options);
    QVERIFY(redriven.wait(10000));
    QCOMPARE(redriven.constFirst().at(1).value<RedriveResult>().moved, 0);
    QVERIFY2(redriven.constFirst().at(1).value<RedriveResult>().error.contains(QLatin1String("read-only")),
             qPrintable(redriven.constFirst().at(1).value<RedriveResult>().error));
    QSignalSpy operations(session, &StoreSession::operationFinished);
    session->discard(deadLetterList, QStringLiteral("test"));
    session->resolve(m_keys.value(3), true);
    session->resolve(m_keys.value(4), false);
    session->setPartnerPolicy(QStringLiteral("https://sms.example/send"), KeyHonouring::Ignored);
    QTRY_COMPARE_WITH_TIMEOUT(operations.size(), 4, 10000);
    for (const auto &finished : std::as_const(operations)) {
        QVERIFY(!finished.at(1).toBool());
        QVERIFY2(finished.at(2).toString().contains(QLatin1String("nothing was changed")),
                 qPrintable(finished.at(2).toString()));
    }
}

QString TestUiReadOnly::createRole(const QString &role)
{
    QSqlQuery admin(m_stores.admin());
    if (!admin.exec(QStringLiteral("CREATE ROLE %1 LOGIN PASSWORD 'support-pw'").arg(role))) {
        qWarning("cannot create the role: %s", qPrintable(admin.lastError().text()));
        return QString();
    }
    m_roles << role;
    QUrl url(m_url);
    url.setUserName(role);
    url.setPassword(QStringLiteral("support-pw"));
    return url.toString(QUrl::FullyEncoded);
}

// --read-only (and File > Open Read-Only, the same session): the whole console looks
// without a way to change anything.
void TestUiReadOnly::readOnlyConsoleCannotChangeTheStore()
{
    fillStore();
    if (QTest::currentTestFailed())
        return;
    const QStringList rowsBefore = everyRow(m_url);
    QVERIFY(rowsBefore.size() > 12);
    const QByteArray bytesBefore = m_stores.isPostgres() ? QByteArray() : fileBytes();
    {
        auto window = openWindow(m_url, true);
        QVERIFY(window);
        QVERIFY(window->isReadOnly());
        auto *newStore = window->findChild<QAction *>(QStringLiteral("newStore"));
        QVERIFY(newStore && !newStore->isEnabled());
        QVERIFY2(newStore->toolTip().contains(QLatin1String("--read-only")), qPrintable(newStore->toolTip()));
        checkNothingCanWrite(*window, QStringLiteral("opened read-only"));
        if (QTest::currentTestFailed())
            return;
    }
    QCOMPARE(everyRow(m_url), rowsBefore);
    if (!m_stores.isPostgres())
        QCOMPARE(fileBytes(), bytesBefore);

    // The same store in a window that may write: no badge, and the actions are there.
    auto writable = openWindow(m_url, false);
    QVERIFY(writable);
    QVERIFY(!writable->session()->isReadOnly());
    QVERIFY(!writable->findChild<QLabel *>(QStringLiteral("readOnlyLabel"))->isVisible());
    auto *deadLetters = writable->page<DeadLettersPage>();
    writable->showPage(deadLetters);
    auto *view = deadLetters->findChild<QTableView *>(QStringLiteral("deadLetters"));
    QTRY_COMPARE_WITH_TIMEOUT(view->model()->rowCount(), 3, 20000);
    view->selectAll();
    QVERIFY(deadLetters->findChild<QAction *>(QStringLiteral("discard"))->isEnabled());
}

// The store's own connection cannot write either, whatever the console would ask of it.
void TestUiReadOnly::readOnlyStoreRefusesWritesBelowTheConsole()
{
    fillStore();
    if (QTest::currentTestFailed())
        return;
    const QStringList rowsBefore = everyRow(m_url);
    {
        QString error;
        auto store = Store::open(m_url, &error, Database::Access::ReadOnly);
        QVERIFY2(store, qPrintable(error));
        QVERIFY(store->database().isReadOnly());
        const auto letters = store->inspector().deadLetters({}, &error);
        QVERIFY2(letters && letters->size() == 3, qPrintable(error));
        QVERIFY(!store->operations().redrive(*letters, 0, &error));
        QVERIFY(!store->operations().discard(*letters, 0, &error));
        QVERIFY(!store->operations().resend(m_keys.value(3), QString(), &error));
        QVERIFY(!store->operations().markDelivered(m_keys.value(4), QString(), &error));
        QVERIFY(!store->operations().setPartnerPolicy(QStringLiteral("https://sms.example/send"), KeyHonouring::Ignored, &error));
        QVERIFY(!store->operations().audit(QStringLiteral("redrive"), QStringLiteral("test"), 1, &error));
        QVERIFY(!store->queue().enqueue({OutgoingMessage{"{}", "k", {}, 0, 0}}, &error));
        QVERIFY2(error.contains(QLatin1String("read"), Qt::CaseInsensitive), qPrintable(error));
    }
    QCOMPARE(everyRow(m_url), rowsBefore);
}

void TestUiReadOnly::unwritableStoreOpensReadOnlyByItself_data()
{
    QTest::addColumn<QString>("how");
    if (m_stores.isPostgres()) {
        QTest::newRow("a role given the SQL once grant-readonly prints") << QStringLiteral("printed");
        QTest::newRow("a role once grant-readonly --apply made") << QStringLiteral("applied");
    } else {
        QTest::newRow("a file of mode 0444") << QStringLiteral("mode");
        QTest::newRow("an immutable file (chattr +i)") << QStringLiteral("immutable");
    }
}

// Opened like any other store, one the user may not write turns read-only by itself,
// instead of failing with "attempt to write a readonly database" at the first write.
void TestUiReadOnly::unwritableStoreOpensReadOnlyByItself()
{
    QFETCH(QString, how);
    fillStore();
    if (QTest::currentTestFailed())
        return;
    QString url = m_url;
    QString reason;
    if (how == QLatin1String("mode")) {
        QVERIFY(QFile::setPermissions(sqlitePath(), QFileDevice::ReadOwner | QFileDevice::ReadGroup | QFileDevice::ReadOther));
        if (::geteuid() == 0) {
            // Root writes a 0444 file anyway: without CAP_DAC_OVERRIDE it is held to the
            // mode bits, as the support engineer's own account is.
            QVERIFY2(setDacOverride(false), "cannot drop CAP_DAC_OVERRIDE");
            m_dacDropped = true;
            QFile probe(sqlitePath());
            QVERIFY2(!probe.open(QIODevice::ReadWrite), "the file is still writable: the test would prove nothing");
        }
        reason = QStringLiteral("you may not write the file");
    } else if (how == QLatin1String("immutable")) {
        if (QProcess::execute(QStringLiteral("chattr"), {QStringLiteral("+i"), sqlitePath()}) != 0)
            QSKIP("chattr +i is not available here (it needs root and a file system that supports it)");
        m_immutable = sqlitePath();
        QFile probe(sqlitePath());
        QVERIFY2(!probe.open(QIODevice::ReadWrite), "the file is still writable: the test would prove nothing");
        reason = QStringLiteral("you may not write the file");
    } else {
        const QString role = QStringLiteral("support_%1").arg(QCoreApplication::applicationPid());
        url = createRole(role);
        QVERIFY(!url.isEmpty());
        if (how == QLatin1String("printed")) {
            const auto printed = m_once->run({QStringLiteral("grant-readonly"), role});
            QVERIFY2(printed.exitedWith(0), printed.describe().constData());
            QSqlDatabase owner = m_stores.openRaw(m_url, QStringLiteral("readonly-owner"));
            QVERIFY2(owner.isOpen(), qPrintable(owner.lastError().text()));
            {
                QSqlQuery query(owner);
                for (const QByteArray &line : printed.out.split('\n')) {
                    if (line.trimmed().isEmpty() || line.startsWith("--"))
                        continue;
                    QVERIFY2(query.exec(QString::fromUtf8(line)), qPrintable(query.lastError().text()));
                }
            }
            owner.close();
            owner = QSqlDatabase();
            QSqlDatabase::removeDatabase(QStringLiteral("readonly-owner"));
        } else {
            const auto applied = m_once->run({QStringLiteral("grant-readonly"), role, QStringLiteral("--apply")});
            QVERIFY2(applied.exitedWith(0), applied.describe().constData());
        }
        // The role may read, and PostgreSQL itself refuses its writes.
        const auto enqueueing = m_once->run({QStringLiteral("enqueue"), QStringLiteral("--store"), url,
                                             m_dir.filePath(QStringLiteral("look.jsonl"))});
        QVERIFY2(enqueueing.exitedWith(1) && enqueueing.err.contains("permission denied"),
                 enqueueing.describe().constData());
        reason = QStringLiteral("may read the store's tables but not write them");
    }
    const QStringList rowsBefore = everyRow(m_url);
    const QByteArray bytesBefore = m_stores.isPostgres() ? QByteArray() : fileBytes();
    {
        auto window = openWindow(url, false);
        QVERIFY(window);
        QVERIFY(!window->session()->readOnlyRequested());
        checkNothingCanWrite(*window, reason);
        if (QTest::currentTestFailed())
            return;
        // Nothing secret in what it says.
        QVERIFY(!window->session()->readOnlyReason().contains(QLatin1String("support-pw")));
    }
    QCOMPARE(everyRow(m_url), rowsBefore);
    if (!m_stores.isPostgres()) {
        QCOMPARE(fileBytes(), bytesBefore);
        // No journal switch and no journal left behind by a session that only read.
        QVERIFY(!QFile::exists(sqlitePath() + QStringLiteral("-wal"))
                || QFileInfo(sqlitePath() + QStringLiteral("-wal")).size() == 0);
    }
}

// Upgrading a store is writing it: a console that only looks says so instead.
void TestUiReadOnly::olderStoreIsNotUpgradedReadOnly()
{
    makeOlderStore();
    if (QTest::currentTestFailed())
        return;
    const int older = latestSchemaVersion() - 1;
    QCOMPARE(schemaVersion(), older);
    {
        auto window = openWindow(m_url, true, false);
        QVERIFY(window);
        QTRY_VERIFY(qobject_cast<QMessageBox *>(QApplication::activeModalWidget()));
        auto *box = qobject_cast<QMessageBox *>(QApplication::activeModalWidget());
        QCOMPARE(box->objectName(), QStringLiteral("openError"));
        QVERIFY2(box->text().contains(QLatin1String("cannot be upgraded while open read-only")), qPrintable(box->text()));
        QVERIFY2(box->text().contains(QStringLiteral("schema version %1").arg(older)), qPrintable(box->text()));
        box->close();
    }
    QCOMPARE(schemaVersion(), older);

    // A console that may write upgrades it, as before.
    auto writable = openWindow(m_url, false);
    QVERIFY(writable);
    QCOMPARE(schemaVersion(), latestSchemaVersion());
}

// The real once-console: --read-only reaches the window, and goes with nothing that writes.
void TestUiReadOnly::readOnlyCommandLine()
{
    if (m_stores.isPostgres())
        QSKIP("the command line is the same for every store (SQLite covers it)");
    const QString console = qEnvironmentVariable("ONCE_CONSOLE_BIN");
    QVERIFY2(!console.isEmpty(), "ONCE_CONSOLE_BIN names the once-console binary (set by ctest)");
    makeOlderStore();
    if (QTest::currentTestFailed())
        return;
    const int older = latestSchemaVersion() - 1;
    const QByteArray bytesBefore = fileBytes();
    QTemporaryDir home;
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
    environment.insert(QStringLiteral("HOME"), home.path());
    environment.insert(QStringLiteral("XDG_CONFIG_HOME"), home.filePath(QStringLiteral("config")));
    environment.insert(QStringLiteral("XDG_DATA_HOME"), home.filePath(QStringLiteral("data")));
    const auto run = [&](const QStringList &arguments) {
        QProcess process;
        process.setProcessEnvironment(environment);
        process.start(console, arguments);
        const bool finished = process.waitForFinished(60000);
        if (!finished)
            process.kill();
        return std::make_tuple(finished, process.exitCode(), QString::fromLocal8Bit(process.readAllStandardError()));
    };
    // The window opens the store read-only, shows it, quits: not upgraded, not written.
    const QString shots = home.filePath(QStringLiteral("shots"));
    const auto [finished, exitCode, err] =
        run({QStringLiteral("--read-only"), QStringLiteral("--store"), m_url, QStringLiteral("--screenshots"), shots,
             QStringLiteral("--screenshot-delay"), QStringLiteral("2")});
    QVERIFY2(finished && exitCode == 0, qPrintable(err));
    QVERIFY(QFile::exists(shots + QStringLiteral("/overview.png")));
    QCOMPARE(schemaVersion(), older);
    QCOMPARE(fileBytes(), bytesBefore);

    // The demo runs a worker: with --read-only it is refused before any window.
    const auto [demoFinished, demoExit, demoErr] = run({QStringLiteral("--read-only"), QStringLiteral("--demo")});
    QVERIFY(demoFinished);
    QCOMPARE(demoExit, 2);
    QVERIFY2(demoErr.contains(QLatin1String("--read-only and --demo")), qPrintable(demoErr));

    // And without --read-only the same console upgrades it: the flag is what kept it.
    const auto [writableFinished, writableExit, writableErr] =
        run({QStringLiteral("--store"), m_url, QStringLiteral("--screenshots"), shots,
             QStringLiteral("--screenshot-delay"), QStringLiteral("2")});
    QVERIFY2(writableFinished && writableExit == 0, qPrintable(writableErr));
    QCOMPARE(schemaVersion(), latestSchemaVersion());
}

// What it prints is quoted so a role's name is only a name, and a SQLite store is told
// where its read-only comes from.
void TestUiReadOnly::grantReadOnlyPrintsTheSql()
{
    if (!m_stores.isPostgres()) {
        const auto refused = m_once->run({QStringLiteral("grant-readonly"), QStringLiteral("support")});
        QVERIFY2(refused.exitedWith(2), refused.describe().constData());
        QVERIFY2(refused.err.contains("PostgreSQL") && refused.err.count('\n') == 1, refused.err.constData());
        return;
    }
    const auto printed = m_once->run({QStringLiteral("grant-readonly"), QStringLiteral("sup\"port; DROP TABLE x")});
    QVERIFY2(printed.exitedWith(0), printed.describe().constData());
    const QString database = QUrl(m_url).path().mid(1);
    QVERIFY2(printed.out.contains(QStringLiteral("GRANT SELECT ON ALL TABLES IN SCHEMA \"public\" TO \"sup\"\"port; DROP "
                                                 "TABLE x\";")
                                      .toUtf8()),
             printed.out.constData());
    QVERIFY2(printed.out.contains(QStringLiteral("GRANT CONNECT ON DATABASE \"%1\"").arg(database).toUtf8()),
             printed.out.constData());
    QVERIFY2(!printed.out.contains(m_stores.password().toUtf8()), "the SQL shows the store's password");
    const auto missing = m_once->run({QStringLiteral("grant-readonly")});
    QVERIFY2(missing.exitedWith(2), missing.describe().constData());
}

QTEST_MAIN(TestUiReadOnly)
#include "tst_uireadonly.moc"
